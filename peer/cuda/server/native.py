"""The server side of CUDA forwarding in Python: backends and executor sessions.

The work happens in the native core (``cffi_build/src/exec/executor.c``, ``hostdev*.c``,
``cudadev.c``); this module opens the backends, feeds batches to a session's
executor (the GIL is released while a batch runs) and implements the two
callbacks through which the host backend resolves and runs Python host kernels.
docs/cuda-forwarding.md describes the session.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cffi

from gleam.peer.cuda.server.host_identity import host_attributes
from gleam.peer.cuda.server.launch import IllegalAddress, Launch, param_layout
from gleam.peer.cuda.wire.calls import call_ids
from gleam.peer.nativelib import cuda_error, ffi, lib

__all__ = [
    "REPLY_CAPACITY",
    "BackendUnavailable",
    "BatchError",
    "CudaBackend",
    "DeviceInfo",
    "ExecSession",
    "HostBackend",
    "open_backend",
]

log = logging.getLogger(__name__)

REPLY_CAPACITY: int = lib.GL_REPLY_HEADER_SIZE + lib.GL_COPY_CHUNK
CUDA_ERROR_ILLEGAL_ADDRESS = cuda_error("CUDA_ERROR_ILLEGAL_ADDRESS")
CUDA_ERROR_LAUNCH_FAILED = cuda_error("CUDA_ERROR_LAUNCH_FAILED")
_GIB = 1 << 30


class BackendUnavailable(Exception):
    """The requested backend cannot run on this machine (no driver, no device)."""


class BatchError(ValueError):
    """A malformed batch: ``code`` is the native GL_E_* / GL_EXEC_E_* code."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


@dataclass
class DeviceInfo:
    name: str
    total_mem: int
    uuid: bytes
    attrs: dict[int, int] = field(default_factory=dict)
    ordinal: int = 0


# ------------------------------------------------------------ host kernels


class _Registry:
    """A host backend's kernels, and the native handles of those it resolved."""

    def __init__(self, kernels: Mapping[str, Any]) -> None:
        self.kernels = dict(kernels)
        self.resolved: dict[str, tuple[Any, Any]] = {}  # name -> (handle, entry)


@ffi.def_extern()
def gl_py_kernel_resolve(user: Any, name: Any, out: Any) -> int:
    try:
        if user == ffi.NULL:
            return 0
        reg: _Registry = ffi.from_handle(user)
        key = ffi.string(name).decode("utf-8", "replace")
        kernel = reg.kernels.get(key)
        if kernel is None or len(kernel.params) > lib.GL_KERNEL_MAX_PARAMS:
            return 0
        offsets, _ = param_layout(tuple(kernel.params))
        out.nparams = len(kernel.params)
        for i, (off, size) in enumerate(zip(offsets, kernel.params, strict=True)):
            out.offsets[i] = off
            out.sizes[i] = size
        if kernel.native is not None:
            out.native = lib.gl_host_builtin(kernel.native.encode())
            return 1 if out.native >= 0 else 0
        if kernel.run is None:
            return 0
        if key not in reg.resolved:
            entry = (kernel.run, offsets, tuple(kernel.params), key)
            reg.resolved[key] = (ffi.new_handle(entry), entry)
        out.native = -1
        out.handle = reg.resolved[key][0]
        return 1
    except BaseException:
        log.exception("gleam host device: resolving a host kernel failed")
        return 0


@ffi.def_extern()
def gl_py_kernel_run(handle: Any, raw: Any) -> int:
    name = "?"
    try:
        run, offsets, sizes, name = ffi.from_handle(handle)
        run(Launch(raw, offsets, sizes))
        return 0
    except IllegalAddress as exc:
        _note(raw, f"host kernel {name}: illegal address: {exc}")
        return CUDA_ERROR_ILLEGAL_ADDRESS
    except BaseException as exc:
        log.exception("gleam host device: host kernel %s failed", name)
        _note(raw, f"host kernel {name} failed: {type(exc).__name__}: {exc}")
        return CUDA_ERROR_LAUNCH_FAILED


def _note(raw: Any, text: str) -> None:
    """Log ``text`` and keep it for the program's next error reply."""
    lib.gl_exec_note_text(raw.x, text.encode("utf-8", "replace")[:lib.GL_NOTES_LINE - 1])


# ----------------------------------------------------------------- backends


class _Backend:
    name = ""
    driver_version = 0

    def __init__(self) -> None:
        self._be: Any = ffi.NULL
        self._sessions = 0
        self._closing = False
        # Sessions open on agent threads and close on their executor threads.
        self._lock = threading.RLock()

    def devices(self) -> list[DeviceInfo]:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        """Frees the backend once its last session has closed."""
        with self._lock:
            self._closing = True
            if self._sessions == 0 and self._be != ffi.NULL:
                lib.gl_backend_free(self._be)
                self._be = ffi.NULL

    def _session_opened(self) -> None:
        with self._lock:
            self._sessions += 1

    def _session_closed(self) -> None:
        with self._lock:
            self._sessions -= 1
            closing = self._closing
        if closing:
            self.close()

    def __del__(self) -> None:
        try:
            if self._sessions == 0:
                self.close()
        except Exception:
            pass


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 16 * _GIB


class HostBackend(_Backend):
    """gleam's software device: memory in host mappings, kernels from a registry."""

    name = "host"
    driver_version = 13000

    def __init__(
        self,
        kernels: Mapping[str, Any],
        memory_limit: int | None = None,
        gflops: float | None = None,
    ) -> None:
        super().__init__()
        if memory_limit is None:
            memory_limit = min(8 * _GIB, _physical_memory() // 2)
        self.memory_limit = memory_limit
        self.gflops = gflops
        self._registry = _Registry(kernels)
        self._user = ffi.new_handle(self._registry)
        self._be = lib.gl_backend_host_new(memory_limit)
        if self._be == ffi.NULL:
            raise MemoryError("cannot create the host backend")
        lib.gl_backend_set_user(self._be, self._user)

    def devices(self) -> list[DeviceInfo]:
        cores = os.cpu_count() or 1
        attrs = host_attributes(cores)
        name = f"gleam host device ({cores}-core {_cpu_model()})"
        uuid = (b"gleam-host-dev" + cores.to_bytes(2, "little"))[:16]
        return [DeviceInfo(name, self.memory_limit, uuid, attrs)]


def _extra_symbols() -> list[str]:
    """The driver calls the cuda backend makes itself besides the forwarded ones: the
    fields of gl_cuda_extra, each named after its symbol (cffi_build/cuda_extra.py is
    the one list). Their argument types are loose: only addresses are handed to C."""
    return [name for name, _ in ffi.typeof("gl_cuda_extra").fields]


_QUERY_CDEF = """
CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int *v);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice d);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice d);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d);
CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice d);
"""


class CudaBackend(_Backend):
    """The real driver, through cffi's ABI mode (no CUDA headers needed to build)."""

    name = "cuda"

    def __init__(self, library: str = "libcuda.so.1", device: int = 0) -> None:
        super().__init__()
        abi = cffi.FFI()
        text = ffi.string(lib.gl_driver_cdef_text()).decode()
        declared = set()
        for line in text.splitlines():
            if line.startswith("CUresult "):
                declared.add(line.split()[1].split("(")[0])
        extras = _extra_symbols()
        extra = "".join(f"CUresult {n}(void);\n" for n in extras if n not in declared)
        abi.cdef(text + _QUERY_CDEF + extra)
        try:
            self._dl = abi.dlopen(library)
        except OSError as exc:
            raise BackendUnavailable(f"cannot load the CUDA driver {library!r}: {exc}") from exc
        self._abi = abi
        self.device = device
        rc = self._dl.cuInit(0)
        if rc != 0:
            raise BackendUnavailable(f"cuInit failed (CUresult {rc})")
        count = abi.new("int *")
        if self._dl.cuDeviceGetCount(count) != 0 or count[0] <= device:
            raise BackendUnavailable(f"no CUDA device {device} (the driver sees {count[0]})")
        version = abi.new("int *")
        self._dl.cuDriverGetVersion(version)
        self.driver_version = version[0]
        self._fns = ffi.new("void *[]", lib.gl_call_count())
        for i in range(lib.gl_call_count()):
            sym = lib.gl_cuda_driver_symbol(i)
            if sym != ffi.NULL:
                self._fns[i] = self._address(ffi.string(sym).decode())
        self._extra = ffi.new("gl_cuda_extra *")
        for n in extras:
            setattr(self._extra, n, self._address(n))
        self._be = lib.gl_backend_cuda_new(self._fns, self._extra, device)
        if self._be == ffi.NULL:
            raise BackendUnavailable("the CUDA driver lacks the virtual memory management API")

    def _address(self, symbol: str) -> Any:
        try:
            fn = getattr(self._dl, symbol)
        except (AttributeError, NotImplementedError):
            return ffi.NULL
        return ffi.cast("void *", int(self._abi.cast("uintptr_t", fn)))

    def devices(self) -> list[DeviceInfo]:
        abi, dl = self._abi, self._dl
        dev = abi.new("CUdevice *")
        dl.cuDeviceGet(dev, self.device)
        name = abi.new("char[256]")
        dl.cuDeviceGetName(name, 256, dev[0])
        total = abi.new("size_t *")
        dl.cuDeviceTotalMem_v2(total, dev[0])
        uuid = abi.new("unsigned char[16]")
        dl.cuDeviceGetUuid(uuid, dev[0])
        attrs = {}
        value = abi.new("int *")
        for attr in range(1, lib.GL_DEVICE_ATTR_SLOTS):
            if dl.cuDeviceGetAttribute(value, attr, dev[0]) == 0:
                attrs[attr] = value[0]
        # VMM allocations through gleam are ordinary memory (src/exec/exec_vmm.c): no
        # compression, whatever the GPU could do.
        attrs[107] = 0
        return [DeviceInfo(abi.string(name).decode(errors="replace"), total[0],
                           bytes(abi.buffer(uuid)), attrs, self.device)]


def open_backend(kind: str, kernels: Mapping[str, Any]) -> HostBackend | CudaBackend:
    """"host", "cuda" (raises BackendUnavailable) or "auto" (cuda when it opens, else host)."""
    if kind == "host":
        return HostBackend(kernels)
    if kind == "cuda":
        return CudaBackend()
    if kind == "auto":
        try:
            return CudaBackend()
        except BackendUnavailable as exc:
            log.info("no CUDA backend (%s); using the host device", exc)
            return HostBackend(kernels)
    raise ValueError(f"unknown backend {kind!r} (host, cuda or auto)")


# ------------------------------------------------------------------ sessions


class ExecSession:
    """One forwarded session's executor state. Not thread-safe: one thread runs it."""

    def __init__(self, backend: HostBackend | CudaBackend, va_size: int | None = None,
                 va_base: int = 0) -> None:
        """``va_base``: the range a session moving here keeps (0: the backend picks);
        a range the backend cannot reserve at that address raises OSError with why."""
        if backend._be == ffi.NULL:
            raise ValueError("the backend is closed")
        err = ffi.new("char[256]")
        self._x = lib.gl_exec_new_at(backend._be, va_base, va_size or 0, err, 256)
        if self._x == ffi.NULL:
            message = ffi.string(err).decode(errors="replace") or "cannot open a session"
            raise (MemoryError if "out of memory" in message else OSError)(message)
        self._backend = backend
        # live_bytes runs on other threads (the inventory's sampler) while the session's
        # own thread may close it: the lock keeps gl_exec_free from freeing the executor
        # under a gl_exec_live_bytes that read the pointer first
        self._closing = threading.Lock()
        backend._session_opened()
        self.va_base: int = lib.gl_exec_va_base(self._x)
        self.va_size: int = lib.gl_exec_va_size(self._x)
        self._reply_len = ffi.new("size_t *")

    @property
    def native(self) -> Any:
        """The ``gl_exec *`` (for the serving agent's native lane, serve.c)."""
        return self._x

    def run(self, batch: bytes | bytearray | memoryview, reply: bytearray | memoryview,
            blobs: list[tuple[bytes, bytes | memoryview]] | None = None) -> int:
        """Runs a batch; the reply body's length, or -1 when the batch asked for none.

        ``blobs``: (digest, bytes) that the batch's blob references may name.
        """
        if self._x == ffi.NULL:
            raise ValueError("the session is closed")
        src = ffi.from_buffer("uint8_t[]", batch)
        dst = ffi.from_buffer("uint8_t[]", reply, require_writable=True)
        slots, keep = ffi.NULL, []
        if blobs:
            slots = ffi.new("gl_blob_slot[]", len(blobs))
            for i, (digest, data) in enumerate(blobs):
                buf = ffi.from_buffer("uint8_t[]", data)
                keep.append(buf)
                ffi.memmove(slots[i].digest, digest, 32)
                slots[i].data = buf
                slots[i].len = len(data)
        rc = lib.gl_exec_run_blobs(self._x, src, len(src), dst, len(dst), self._reply_len,
                                   slots, len(blobs or ()))
        del keep
        if rc < 0:
            raise BatchError(rc, ffi.string(lib.gl_exec_strerror(rc)).decode())
        return self._reply_len[0] if rc == 1 else -1

    def stats(self) -> dict[str, Any]:
        if self._x == ffi.NULL:
            raise ValueError("the session is closed")
        s = ffi.new("gl_exec_stats_t *")
        lib.gl_exec_stats(self._x, s)
        names = call_ids()
        out: dict[str, Any] = {
            k: getattr(s, k)
            for k in ("records", "oneway", "waiting", "launches", "bytes_h2d", "bytes_d2h",
                      "errors", "refs", "bytes_ref")
        }
        out["per_call"] = {n: s.per_call[i] for n, i in names.items() if s.per_call[i]}
        return out

    def live_bytes(self) -> int:
        """Device bytes its live allocations hold (any thread; 0 once closed)."""
        with self._closing:
            return 0 if self._x == ffi.NULL else int(lib.gl_exec_live_bytes(self._x))

    def close(self) -> None:
        with self._closing:   # no live_bytes is reading it once this is NULL
            x, self._x = self._x, ffi.NULL
        if x != ffi.NULL:
            lib.gl_exec_free(x)
            self._backend._session_closed()

    def __enter__(self) -> ExecSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
