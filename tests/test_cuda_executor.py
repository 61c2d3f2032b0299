"""The session executor and the host backend, through real batches (no network)."""

from __future__ import annotations

import contextlib
import shutil
import struct
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native
from gleam.peer.records import CallRecord, encode_batch

from .cuda_session import CTX, EVENT, FUNC, IDS, KERNEL, LIB, MOD, STREAM, Session, mint, rec
from .stand_in_driver import build_stand_in, needs_gcc

INVALID_VALUE, NOT_FOUND, NOT_READY, INVALID_HANDLE = 1, 500, 600, 400
INVALID_DEVICE, ILLEGAL_ADDRESS, LAUNCH_FAILED = 101, 700, 719




@dataclass(frozen=True)
class HostKernel:  # the fields gleam.peer.cuda.server.kernels.HostKernel has
    name: str
    params: tuple[int, ...]
    run: Any = None
    native: str | None = None


def _saxpy(launch: Any) -> None:
    n, a, x, y = launch.arg(0, "i"), launch.arg(1, "f"), launch.arg(2, "Q"), launch.arg(3, "Q")
    xs = launch.array(x, "float32", n)
    ys = launch.array(y, "float32", n)
    ys[:] = a * xs + ys


def _poke(launch: Any) -> None:
    launch.array(launch.arg(0, "Q"), "uint8", 1)[0] = 1


def _boom(launch: Any) -> None:
    raise RuntimeError("kernel bug")


KERNELS = {
    "saxpy": HostKernel("saxpy", (4, 4, 8, 8), run=_saxpy),
    "poke": HostKernel("poke", (8,), run=_poke),
    "boom": HostKernel("boom", (), run=_boom),
    "gleam_empty": HostKernel("gleam_empty", (), native="gleam_empty"),
}
PTX = b"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry saxpy(.param .u32 n, .param .f32 a, .param .u64 x, .param .u64 y) { ret; }
.visible .entry poke(.param .u64 p) { ret; }
.visible .entry boom() { ret; }
.visible .entry gleam_empty() { ret; }
.visible .entry nohost() { ret; }
\x00"""


@pytest.fixture
def backend():
    be = native.HostBackend(KERNELS, memory_limit=1 << 30)
    yield be
    be.close()


@pytest.fixture
def s(backend):
    sess = Session(backend)
    ctx = mint(CTX)
    assert sess.run(rec("cuDevicePrimaryCtxRetain", ctx, 0), rec("glCtxSetCurrent", ctx)) is None
    assert sess.sync() == (0, 0)
    yield sess
    sess.x.close()


def test_primary_context_retain_and_set_current(backend):
    sess = Session(backend)
    ctx = mint(CTX)
    sess.run(rec("cuDevicePrimaryCtxRetain", ctx, 0), rec("glCtxSetCurrent", ctx))
    assert sess.sync() == (0, 0)
    sess.run(rec("cuDevicePrimaryCtxRetain", mint(CTX), 3))
    assert sess.sync() == (0, INVALID_DEVICE)
    sess.x.close()


def test_memset_then_dtoh(s):
    p = s.alloc(1024)
    s.run(rec("cuMemsetD32", p, 0xDEADBEEF, 16))
    assert s.dtoh(p, 64) == struct.pack("<I", 0xDEADBEEF) * 16
    s.run(rec("cuMemsetD8", p + 3, 7, 2), rec("cuMemsetD16", p + 8, 0x0102, 2))
    data = s.dtoh(p, 12)
    assert data[3:5] == b"\x07\x07" and data[8:12] == b"\x02\x01\x02\x01"


def test_htod_dtoh_roundtrip_and_dtod(s):
    p = s.alloc(4096)
    q = s.alloc(4096, 4096)
    payload = bytes(range(256)) * 8
    s.run(rec("glMemcpyHtoD", p, len(payload), 0, payload=payload))
    assert s.dtoh(p, len(payload)) == payload
    s.run(rec("cuMemcpyDtoD", q, p + 16, 100))
    assert s.dtoh(q, 100) == payload[16:116]
    stats = s.x.stats()
    assert stats["bytes_h2d"] == len(payload) and stats["per_call"]["cuMemcpyDtoD"] == 1


def test_pitched_rows_each_way(s):
    """glMemcpy2D*: packed host rows spread at the device pitch, gathered back
    packed, and copied device to device between two pitches."""
    p = s.alloc(4096)
    q = s.alloc(4096, 4096)
    rows = bytes(range(1, 61))  # 6 rows of 10 bytes
    s.run(rec("cuMemsetD8", p, 0, 4096), rec("cuMemsetD8", q, 0, 4096))
    s.run(rec("glMemcpy2DHtoD", p + 5, 64, 10, 6, 0, payload=rows))
    raw = s.dtoh(p, 6 * 64)
    assert all(raw[5 + y * 64:15 + y * 64] == rows[y * 10:y * 10 + 10] for y in range(6))
    assert raw.count(0) == 6 * 64 - 60
    r = s.run(rec("glMemcpy2DDtoH", p + 5, 64, 10, 6, 0))
    assert r is not None and r[0] == 0 and r[3] == rows
    s.run(rec("glMemcpy2DDtoD", q, 16, p + 5, 64, 10, 6, 0))
    assert s.dtoh(q, 96) == b"".join(rows[y * 10:y * 10 + 10] + bytes(6) for y in range(6))


@pytest.mark.parametrize("args", [
    (1, 4096, 10, 2),              # the second row ends past the allocation
    (0, 2**63, 10, 3),             # a pitch whose span wraps 64 bits
    (0, 2**64 - 1, 2, 2),          # a pitch that wraps to just before the start
    (0, 0, 1, 2**62),              # rows on top of each other: one byte's span, 2^62 rows
    (0, 4, 8, 3),                  # a pitch under the width (rows overlap)
])
def test_pitched_spans_outside_session_memory_are_refused(s, args):
    p = s.alloc(4096)
    off, pitch, width, height = args
    s.run(rec("glMemcpy2DDtoD", p + off, pitch, p, 16, width, height, 0))
    assert s.sync() == (0, INVALID_VALUE)
    r = s.run(rec("glMemcpy2DDtoH", p + off, pitch, width, height, 0))
    assert r is not None and r[0] == INVALID_VALUE
    s.run(rec("glMemcpy2DHtoD", p + off, pitch, width, height, 0,
              payload=bytes(min(width * height, 1 << 16))))
    assert s.sync() == (0, INVALID_VALUE)
    # A payload that is not width * height bytes is refused as well.
    s.run(rec("glMemcpy2DHtoD", p, 16, 10, 2, 0, payload=bytes(19)))
    assert s.sync() == (0, INVALID_VALUE)


def test_empty_pitched_rows_do_no_work_whatever_their_count(s):
    """A zero width spans nothing, so any row count passes the checks: the server
    must not then loop over 2^64 - 1 empty rows."""
    p = s.alloc(256)
    s.run(rec("glMemcpy2DDtoD", p, 16, p, 16, 0, 2**64 - 1, 0),
          rec("glMemcpy2DHtoD", p, 16, 0, 2**64 - 1, 0, payload=b""))
    assert s.sync() == (0, 0)
    r = s.run(rec("glMemcpy2DDtoH", p, 16, 0, 2**64 - 1, 0))
    assert r is not None and r[0] == 0 and r[3] == b""


def test_out_of_range_pointer_is_deferred_then_cleared(s):
    p = s.alloc(256)
    s.run(rec("cuMemsetD8", p + 200, 1, 100))  # runs past the allocation
    s.run(rec("cuMemsetD8", p, 1, 256))  # fine; the first error wins
    assert s.sync() == (0, INVALID_VALUE)
    assert s.sync() == (0, 0)
    r = s.run(rec("glMemcpyDtoH", p - 256, 16, 0))
    assert r is not None and r[0] == INVALID_VALUE and r[3] == b""


def test_alloc_rules(s):
    base = s.x.va_base
    for bad in [(base + 8, 256), (base - 256, 256), (base + s.x.va_size, 256), (base, 0)]:
        s.run(rec("glMemAlloc", *bad))
        assert s.sync() == (0, INVALID_VALUE)
    s.alloc(512)
    s.run(rec("glMemAlloc", base + 256, 256))  # overlaps
    assert s.sync() == (0, INVALID_VALUE)
    s.run(rec("glMemFree", base + 256))  # not the start of an allocation
    assert s.sync() == (0, INVALID_VALUE)


def test_handles_of_the_wrong_kind(s):
    ev = mint(EVENT)
    s.run(rec("cuEventCreate", ev, 0))
    r = s.run(rec("cuStreamSynchronize", ev))
    assert r is not None and r[0] == INVALID_HANDLE
    r = s.run(rec("cuStreamSynchronize", mint(STREAM)))  # never created
    assert r is not None and r[0] == INVALID_HANDLE
    s.run(rec("cuEventCreate", ev, 0))  # minted twice
    assert s.sync() == (0, INVALID_HANDLE)
    s.run(rec("cuEventCreate", 0x1234, 0))  # not a minted handle
    assert s.sync() == (0, INVALID_HANDLE)
    r = s.run(rec("cuStreamSynchronize", 0))  # the default stream passes through
    assert r is not None and r[0] == 0


def test_sessions_cannot_reach_each_other(backend, s):
    other = Session(backend)
    p = other.alloc(4096)
    other.run(rec("glMemcpyHtoD", p, 4, 0, payload=b"abcd"))
    s.alloc(4096)
    r = s.run(rec("glMemcpyDtoH", p, 4, 0))
    assert r is not None and r[0] == INVALID_VALUE
    ev = mint(EVENT)
    other.run(rec("cuEventCreate", ev, 0))
    r = s.run(rec("cuEventQuery", ev))
    assert r is not None and r[0] == INVALID_HANDLE
    other.x.close()


def _load(s: Session, name: str) -> int:
    mod, fn = mint(MOD), mint(FUNC)
    s.run(rec("glModuleLoad", mod, len(PTX), payload=PTX),
          rec("cuModuleGetFunction", fn, mod, payload=name.encode() + b"\0"))
    return fn


def test_python_host_kernel_from_ptx(s):
    import numpy as np

    n = 1000
    x, y = s.alloc(4096), s.alloc(4096, 4096)
    xs = np.arange(n, dtype=np.float32)
    s.run(rec("glMemcpyHtoD", x, 4 * n, 0, payload=xs.tobytes()),
          rec("cuMemsetD32", y, struct.unpack("<I", struct.pack("<f", 1.0))[0], n))
    fn = _load(s, "saxpy")
    params = struct.pack("<ifQQ", n, 2.0, x, y)
    s.run(rec("glLaunch", fn, 4, 1, 1, 256, 1, 1, 0, 0, len(params), payload=params))
    out = np.frombuffer(s.dtoh(y, 4 * n), dtype=np.float32)
    assert np.array_equal(out, 2.0 * xs + 1.0)
    r = s.run(rec("cuFuncGetParamInfo", fn, 3))
    assert r is not None and r[0] == 0 and r[2] == [16, 8]
    r = s.run(rec("cuFuncGetParamInfo", fn, 4))
    assert r is not None and r[0] == INVALID_VALUE
    r = s.run(rec("cuFuncGetAttribute", 0, fn))
    assert r is not None and r[2] == [1024]
    assert s.x.stats()["launches"] == 1


def test_launch_errors(s):
    fn = _load(s, "saxpy")
    s.run(rec("glLaunch", fn, 1, 1, 1, 1, 1, 1, 0, 0, 4, payload=b"\0" * 4))
    assert s.sync() == (0, INVALID_VALUE)  # params size disagrees with the layout
    poke = _load(s, "poke")
    params = struct.pack("<Q", s.x.va_base + 12345)  # no allocation there
    s.run(rec("glLaunch", poke, 1, 1, 1, 1, 1, 1, 0, 0, 8, payload=params))
    assert s.sync() == (0, ILLEGAL_ADDRESS)
    boom = _load(s, "boom")
    s.run(rec("glLaunch", boom, 1, 1, 1, 1, 1, 1, 0, 0, 0, payload=b""))
    assert s.sync() == (0, LAUNCH_FAILED)


def test_gleam_empty_launches(s):
    fn = _load(s, "gleam_empty")
    launch = rec("glLaunch", fn, 1, 1, 1, 1, 1, 1, 0, 0, 0, payload=b"")
    s.run(*[launch] * 100)
    assert s.sync() == (0, 0)
    assert s.x.stats()["launches"] == 100


def test_entry_without_host_kernel_runs_its_ptx_missing_entry_is_not_found(s):
    fn = _load(s, "nohost")  # no host implementation: the interpreter runs its PTX
    s.run(rec("glLaunch", fn, 1, 1, 1, 32, 1, 1, 0, 0, 0, payload=b""))
    assert s.sync() == (0, 0)
    _load(s, "not_in_the_image")
    assert s.sync() == (0, NOT_FOUND)


def test_library_kernel_function(s):
    lib_, k, fn = mint(LIB), mint(KERNEL), mint(FUNC)
    s.run(rec("glLibraryLoad", lib_, len(PTX), payload=PTX),
          rec("cuLibraryGetKernel", k, lib_, payload=b"gleam_empty\0"),
          rec("cuKernelGetFunction", fn, k),
          rec("glLaunch", fn, 1, 1, 1, 1, 1, 1, 0, 0, 0, payload=b""),
          rec("cuLibraryUnload", lib_))
    assert s.sync() == (0, 0)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc makes the cubin and fatbin")
@pytest.mark.parametrize("kind", ["cubin", "fatbin"])
def test_entries_found_in_cubin_and_fatbin(s, tmp_path, kind):
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void gleam_empty() {}\n')
    out = tmp_path / f"k.{kind}"
    subprocess.run(["nvcc", f"--{kind}", "-arch=sm_80", "-o", str(out), str(src)], check=True,
                   capture_output=True)
    image = out.read_bytes()
    mod, fn = mint(MOD), mint(FUNC)
    s.run(rec("glModuleLoad", mod, len(image), payload=image),
          rec("cuModuleGetFunction", fn, mod, payload=b"gleam_empty\0"),
          rec("glLaunch", fn, 1, 1, 1, 1, 1, 1, 0, 0, 0, payload=b""))
    assert s.sync() == (0, 0)


def test_events_and_streams(s):
    a, b, st_ = mint(EVENT), mint(EVENT), mint(STREAM)
    s.run(rec("cuStreamCreate", st_, 0), rec("cuEventCreate", a, 0), rec("cuEventCreate", b, 0))
    r = s.run(rec("cuEventElapsedTime", a, b))
    assert r is not None and r[0] == NOT_READY
    s.run(rec("cuEventRecord", a, st_), rec("cuStreamWaitEvent", st_, a, 0),
          rec("cuEventRecord", b, st_))
    r = s.run(rec("cuEventElapsedTime", a, b))
    assert r is not None and r[0] == 0
    assert struct.unpack("<f", struct.pack("<I", r[2][0]))[0] >= 0.0
    assert s.run(rec("cuStreamQuery", st_))[0] == 0
    s.run(rec("cuStreamDestroy", st_), rec("cuEventDestroy", a))
    assert s.run(rec("cuEventQuery", a))[0] == INVALID_HANDLE


def test_freed_memory_comes_back_zeroed(s):
    size = 3 * 65536 + 512
    p = s.alloc(size)
    s.run(rec("cuMemsetD8", p, 0xAB, size), rec("glMemFree", p))
    s.alloc(size, p - s.x.va_base)  # the same place again
    assert s.dtoh(p, size) == bytes(size)


def test_mem_get_info(s):
    r = s.run(rec("cuMemGetInfo"))
    assert r is not None and r[2] == [1 << 30, 1 << 30]
    s.alloc(1 << 20)
    assert s.run(rec("cuMemGetInfo"))[2] == [(1 << 30) - (1 << 20), 1 << 30]


def test_devices_and_call_ids(backend):
    (dev,) = backend.devices()
    assert dev.name.startswith("gleam host device") and dev.attrs[1] == 1024
    assert dev.total_mem == 1 << 30
    assert sorted(IDS.values()) == list(range(len(IDS)))
    assert native.lib.gl_call_is_waiting(IDS["glMemcpyDtoH"]) == 1


@pytest.mark.parametrize(
    "records",
    [
        [CallRecord(IDS["cuCtxSynchronize"], (), oneway=True)],  # waiting call marked one-way
        [CallRecord(IDS["cuMemsetD8"], (0, 0, 0))],  # one-way call not marked
        [rec("cuCtxSynchronize"), rec("cuCtxSynchronize")],  # waiting call not last
        [CallRecord(999, (), oneway=True)],  # unknown id
    ],
)
def test_malformed_batches_are_rejected(s, records):
    with pytest.raises(native.BatchError):
        s.x.run(encode_batch(records), s.reply)


def test_truncated_and_empty_batches(s):
    batch = encode_batch([rec("cuCtxSynchronize")])
    with pytest.raises(native.BatchError):
        s.x.run(batch[:-8], s.reply)
    with pytest.raises(native.BatchError):
        s.x.run(b"", s.reply)
    assert s.x.run(encode_batch([]), s.reply) == -1
    with pytest.raises(native.BatchError):
        s.x.run(batch, bytearray(16))  # reply buffer too small


def test_malformed_batch_runs_nothing(s):
    p = s.alloc(256)
    bad = [rec("cuMemsetD8", p, 9, 256), rec("cuCtxSynchronize"), rec("cuCtxSynchronize")]
    with pytest.raises(native.BatchError):
        s.x.run(encode_batch(bad), s.reply)
    assert s.dtoh(p, 4) == bytes(4)


@settings(
    max_examples=300, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_fuzzed_batches_never_crash(s, data):
    p = s.x.va_base
    ids = sorted(IDS.values())
    handle = st.sampled_from([0, 1, 2, p, p + 256, mint(CTX), mint(MOD), mint(FUNC),
                              mint(STREAM), mint(EVENT), 2**64 - 1])
    value = st.one_of(handle, st.integers(0, 2**64 - 1), st.integers(0, 4096))
    records = data.draw(st.lists(st.builds(
        lambda cid, args, payload: CallRecord(
            cid, tuple(args), payload, oneway=not native.lib.gl_call_is_waiting(cid)),
        st.sampled_from(ids), st.lists(value, max_size=11),
        st.one_of(st.none(), st.binary(max_size=64))), max_size=8))
    waiting = [r for r in records if not r.oneway]
    records = [r for r in records if r.oneway] + waiting[:1]
    batch = bytearray(encode_batch(records))
    for _ in range(data.draw(st.integers(0, 3))):
        if batch:
            i = data.draw(st.integers(0, len(batch) - 1))
            batch[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(native.BatchError):
        s.x.run(bytes(batch), s.reply)


EDGE = st.one_of(st.sampled_from([0, 1, 2, 15, 16, 17, 255, 256, 4095, 4096, 2**32,
                                   2**62, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_pitched_rows_with_any_extents_are_bounded_and_exact(s, data):
    """Any pitch, width and row count: the copy either matches the bytes it names or
    is refused, and finishes (the span check bounds the rows by the session's
    memory). The session keeps every example's allocation, so an offset that
    wraps below this one's may land in an earlier one: allowed, and not compared."""
    p = s.x.va_base
    dev = s.alloc(4096)
    base = bytes(range(256)) * 16
    s.htod(dev, base)
    off, pitch, width, height = (data.draw(EDGE) for _ in range(4))
    r = s.run(rec("glMemcpy2DDtoH", (dev + off) % 2**64, pitch, width, height, 0))
    assert r is not None and r[0] in (0, INVALID_VALUE)
    if r[0] == 0 and width * height == 0:
        assert r[3] == b""
    elif r[0] == 0 and off < 4096:  # (an offset that wraps lands in an earlier example's)
        assert height <= 4096 and width * height <= 1 << 20
        rows = [base[off + y * pitch:off + y * pitch + width] for y in range(height)]
        assert r[3] == b"".join(rows)
    s.run(rec("glMemcpy2DDtoD", (p + off) % 2**64, pitch, dev, width, width, height, 0))
    assert s.sync()[1] in (0, INVALID_VALUE)


@needs_gcc
def test_cuda_backend_granules_with_a_stand_in_driver(tmp_path):
    so, fake = build_stand_in(tmp_path, "", "int fake_state(int);")
    be = native.CudaBackend(str(so))
    assert be.devices()[0].name == "fake gpu" and be.driver_version == 12080
    s = Session(be)
    b, g = s.x.va_base, 1 << 16
    ctx = mint(CTX)
    s.run(rec("cuDevicePrimaryCtxRetain", ctx, 0), rec("glCtxSetCurrent", ctx),
          rec("glMemAlloc", b, 256), rec("glMemAlloc", b + 256, 256),
          rec("glMemAlloc", b + 512, 2 * g), rec("cuMemsetD32", b + 256, 6, 64),
          rec("cuMemsetD32", b + 512, 7, g // 2))
    assert fake.fake_state(0) == 3  # granules 0, 1, 2 mapped once each
    s.run(rec("glMemFree", b))
    assert s.dtoh(b + 256, 8) == struct.pack("<II", 6, 6)  # granule 0 still in use
    s.run(rec("glMemFree", b + 512))
    assert fake.fake_state(0) == 1
    r = s.run(rec("glMemcpyDtoH", b + 512, 8, 0))
    assert r is not None and r[0] == INVALID_VALUE
    # Pitched copies go through the driver's cuMemcpy2DAsync_v2 (host rows packed).
    rows = bytes(range(1, 25))  # 3 rows of 8 bytes
    s.run(rec("glMemcpy2DHtoD", b + 256, 32, 8, 3, 0, payload=rows),
          rec("glMemcpy2DDtoD", b + 384, 16, b + 256, 32, 8, 3, 0))
    assert s.dtoh(b + 256, 72)[::32] == rows[::8] and s.dtoh(b + 256 + 64, 8) == rows[16:]
    r = s.run(rec("glMemcpy2DDtoH", b + 384, 16, 8, 3, 0))
    assert r is not None and r[0] == 0 and r[3] == rows
    s.run(rec("glModuleLoad", mint(MOD), 4, payload=b"abcd"))  # the stand-in lacks it
    assert s.sync() == (0, 801)
    s.x.close()
    assert (fake.fake_state(0), fake.fake_state(1), fake.fake_state(2)) == (0, 0, 0)
    be.close()


def test_a_memset_of_a_module_global_reaches_it_on_the_host_device():
    """numba's debug kernels clear their error code, a module global, with a memset;
    the host device refused it (INVALID_VALUE, deferred, without a reason)."""
    from .cuda_session import ptx_only_session

    with ptx_only_session() as s:
        mod = s.load(b".version 8.0\n.target sm_80\n.address_size 64\n"
                     b".visible .global .align 4 .u32 g[4] = {1, 2, 3, 4};\n")
        result, p, size = s.global_(mod, "g")
        assert (result, size) == (0, 16)
        s.run(rec("cuMemsetD32", p, 0xABCDEF01, 4))
        assert s.dtoh(p, 16) == bytes.fromhex("01efcdab") * 4
