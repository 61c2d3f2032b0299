"""Unit tests of gleam's interposer (the C libcuda.so.1), without a server.

A C harness (tests/interposer/harness.c) is compiled from the interposer's own
sources, so the tests reach internal parts (PTX parsing, image sizes, the
sub-allocator, cuGetProcAddress, the external-payload batch prefix) directly.
The session test plays the local agent on a real Unix socket: it answers the
attach request with a HELLO, decodes the record batches the interposer sends
with gleam.peer.records and sends replies back.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "cffi_build"
HARNESS_DIR = Path(__file__).resolve().parent / "interposer"

sys.path.insert(0, str(BUILD))
from build_interposer import shared_sources  # noqa: E402
from cuda_api import ROWS  # noqa: E402
from gen_cuda import generate  # noqa: E402

CALL = {name: i for i, name in enumerate(r.name for r in ROWS if r.wire)}
TIMEOUT = 60


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory)


def build_harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/interposer/harness.c linked with the interposer's sources (skips without gcc)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    out = tmp_path_factory.mktemp("interposer")
    generate(out / "gen")
    exe = out / "harness"
    sources = [HARNESS_DIR / "harness.c", *sorted((BUILD / "interposer").glob("*.c")),
               out / "gen" / "gl_stubs.c", *shared_sources()]
    includes = ["include", "interposer", "src"]
    cmd = ["gcc", "-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
           *[f"-I{BUILD / d}" for d in includes], f"-I{out / 'gen'}",
           *map(str, sources), "-lpthread", "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


def run(exe: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def layouts(exe: Path, ptx: Path) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    result = {}
    for line in run(exe, "ptx", str(ptx)).stdout.splitlines():
        name, total, *params = line.split()
        result[name] = (int(total), [tuple(map(int, p.split(":"))) for p in params])
    return result


HAND_PTX = """.version 8.0
.target sm_80
.address_size 64
// a comment that mentions .entry fake( .param .u8 x )
.visible .entry hand(
    .param .u64 .ptr .global .align 16 hand_p0, /* the .align here is the pointee's */
    .param .b16 hand_p1,
    .param .align 4 .b8 hand_p2[12],
    .param .f64 hand_p3,
    .param .s8 hand_p4
)
{
    ret;
}
.entry bare
{
    ret;
}
"""


def test_ptx_layout_hand_written(harness: Path, tmp_path: Path) -> None:
    ptx = tmp_path / "hand.ptx"
    ptx.write_text(HAND_PTX)
    assert layouts(harness, ptx) == {
        "hand": (33, [(0, 8), (8, 2), (12, 12), (24, 8), (32, 1)]),
        "bare": (0, []),
    }


def nvcc(tmp_path: Path, kind: str) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    out = tmp_path / f"kernels.{kind}"
    subprocess.run(["nvcc", f"-{kind}", "-arch=sm_80", str(HARNESS_DIR / "kernels.cu"), "-o",
                    str(out)], check=True, capture_output=True, timeout=300)
    return out


def test_ptx_layout_from_nvcc(harness: Path, tmp_path: Path) -> None:
    found = layouts(harness, nvcc(tmp_path, "ptx"))
    assert found["scale"] == (24, [(0, 8), (8, 8), (16, 4), (20, 4)])
    # char, short, long long, char, struct {double; char[13]} (24 bytes, align 8), pointer
    assert found["mixed"] == (56, [(0, 1), (2, 2), (8, 8), (16, 1), (24, 24), (48, 8)])
    assert found["empty"] == (0, [])


@pytest.mark.parametrize("kind", ["fatbin", "cubin"])
def test_image_size_of_binaries(harness: Path, tmp_path: Path, kind: str) -> None:
    image = nvcc(tmp_path, kind)
    rc, size, is_ptx = run(harness, "image", str(image)).stdout.split()
    assert (int(rc), int(size), int(is_ptx)) == (0, image.stat().st_size, 0)


def test_image_size_of_text(harness: Path, tmp_path: Path) -> None:
    ptx = tmp_path / "hand.ptx"
    ptx.write_text(HAND_PTX)
    assert run(harness, "image", str(ptx)).stdout.split() == ["0", str(len(HAND_PTX) + 1), "1"]
    junk = tmp_path / "junk"
    junk.write_text("not an image at all")
    assert run(harness, "image", str(junk)).stdout.split()[0] == "200"


def test_allocator_and_handles(harness: Path) -> None:
    assert run(harness, "alloc").stdout == "ok\n"


def test_external_prefix_matches_inline_encoding(harness: Path) -> None:
    assert run(harness, "prefix").stdout == "ok\n"


def test_get_proc_address(harness: Path) -> None:
    proc = run(harness, "procaddr")
    assert proc.stdout.splitlines() == [
        "default cuMemcpyHtoD_v2",
        "ptds cuMemcpyHtoD_v2_ptds",
        "ptsz cuMemcpyHtoDAsync_v2_ptsz",
        "old cuEventDestroy",
        "new cuEventDestroy_v2",
        "v2 cuGetProcAddress_v2",
        "too-old 2 null",
        "unsupported 801",
        "unsupported 801",
        "exhausted 500 1",
    ]
    # The trampoline says so once, however often it is called.
    assert proc.stderr.count("gleam: cuArrayGetPlane is not forwarded") == 1


def test_linker_links_one_image_to_itself(harness: Path, tmp_path: Path) -> None:
    ptx = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n"
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    proc = run(harness, "link", str(path), env={"GLEAM_CUDA_SOCKET": str(tmp_path / "none")})
    size = len(ptx) + 1
    assert proc.stdout.splitlines() == [
        "empty 1",  # nothing added: CUDA_ERROR_INVALID_VALUE
        f"one {size} 1",
        "nvvm 801",  # LTO IR needs nvJitLink
        "after 1",  # adding to a completed link: CUDA_ERROR_INVALID_VALUE
        "two 0 1",  # two inputs: a link image holding both
        "nofile 301",
        f"file {size} 1",
        "priority 3",  # accepted; then no session: CUDA_ERROR_NOT_INITIALIZED
        "cooperative 3",  # forwarded now; no session: CUDA_ERROR_NOT_INITIALIZED
    ]
    assert "input kind 5 (k.ltoir) is not supported" in proc.stderr


def test_init_without_agent(harness: Path, tmp_path: Path) -> None:
    path = tmp_path / "nobody.sock"
    proc = run(harness, "init", env={"GLEAM_CUDA_SOCKET": str(path)})
    assert proc.stdout.splitlines() == ["init 100", "again 100", "count 3"]
    assert proc.stderr.splitlines() == [
        f"gleam: no CUDA device: no gleam agent at {path} (start one with gleam-peer up)"]


# ------------------------------------------------------------ a fake agent

VA_BASE = 0x7F00_0000_0000
DEVICE = struct.Struct("<256sQ16s256i")
HELLO = struct.Struct("<IIQQQii64s16s512s")  # gl_session_hello (version 2)


def hello_body() -> bytes:
    attrs = [0] * 256
    attrs[75], attrs[76] = 8, 0
    devices = [DEVICE.pack(b"Gleam Test GPU", 1 << 30, bytes(range(16)), *attrs)]
    devices += [DEVICE.pack(b"", 0, bytes(16), *([0] * 256))] * 7
    head = HELLO.pack(0x4F4C4847, 2, 7, VA_BASE, 1 << 30, 12080, 1, b"server", b"host", b"")
    return head + b"".join(devices)


def envelope(kind: int, body: bytes) -> bytes:
    return struct.pack("<IBBHQ", len(body), kind, 0, 0, 0) + body


def recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        assert chunk, "the interposer closed the connection"
        buf += chunk
    return bytes(buf)


def records_until_wait(conn: socket.socket) -> list:
    from gleam.peer.records import decode_batch

    records = []
    while not records or records[-1].oneway:
        length, kind, _, _, session = struct.unpack("<IBBHQ", recv_exact(conn, 16))
        assert (kind, session) == (1, 0)
        records += decode_batch(recv_exact(conn, length)).records
    return records


def reply(result: int, deferred: int, data: bytes = b"") -> bytes:
    return envelope(2, struct.pack("<iiII8Q", result, deferred, 0, len(data), *[0] * 8) + data)


def start_fake_agent(harness: Path, tmp_path: Path, command: str,
                     text: bool = True) -> tuple[socket.socket, subprocess.Popen]:
    """A listening Unix socket (tmp_path/agent.sock) and the harness's COMMAND started
    against it."""
    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(TIMEOUT)
    proc = subprocess.Popen([str(harness), command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=text,
                            env={**os.environ, "GLEAM_CUDA_SOCKET": str(path)})
    return server, proc


def accept_attach(server: socket.socket) -> tuple[socket.socket, bytes]:
    """The interposer's connection and its attach request (CBOR)."""
    conn, _ = server.accept()
    conn.settimeout(TIMEOUT)
    (length,) = struct.unpack(">I", recv_exact(conn, 4))
    return conn, recv_exact(conn, length)


def test_session_with_a_fake_agent(harness: Path, tmp_path: Path) -> None:
    server, proc = start_fake_agent(harness, tmp_path, "session")
    try:
        conn, attach = accept_attach(server)
        request = cbor2.loads(attach)
        assert request == {"op": "cuda_attach",
                           "args": {"peer": "", "run": "", "pid": proc.pid,
                                    "program": "harness"}}
        conn.sendall(envelope(3, hello_body()))

        records = records_until_wait(conn)
        ctx = records[0].args[0]
        assert [(r.call_id, r.args, r.oneway) for r in records] == [
            (CALL["cuDevicePrimaryCtxRetain"], (ctx, 0), True),
            (CALL["glCtxSetCurrent"], (ctx,), True),
            (CALL["glMemAlloc"], (VA_BASE, 4096), True),
            (CALL["cuMemsetD32"], (VA_BASE, 0xDEADBEEF, 1024), True),
            (CALL["glMemAlloc"], (VA_BASE + 4096, 100001), True),
            (CALL["glMemcpyHtoD"], (VA_BASE + 4096, 100001, 0), True),
            (CALL["cuCtxCreate"], (ctx + 1, 0, 0), True),
            (CALL["cuCtxDestroy"], (ctx + 1,), True),  # by another thread
            (CALL["glCtxSetCurrent"], (ctx,), True),
            (CALL["glMemcpyDtoH"], (VA_BASE, 16, 0), False),
        ]
        assert records[5].payload == bytes(i % 251 for i in range(100001))
        assert ctx >> 56 == 0x67
        conn.sendall(reply(0, 0, bytes(range(0xA0, 0xB0))))

        records = records_until_wait(conn)
        assert [(r.call_id, r.args) for r in records] == [(CALL["cuCtxSynchronize"], ())]
        conn.sendall(reply(0, 700))  # a deferred error of earlier one-way work
        conn.close()
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        server.close()
    assert proc.returncode == 0, out + err
    assert out.splitlines() == [
        "init 0",
        "count 0 1",
        "name 0 Gleam Test GPU",
        "cc 0 8",
        "badattr 1",
        "baddev 101",
        "noctx 201",
        f"ctx {ctx}",
        f"dptr {VA_BASE}",
        "outside 1",
        "outside-big 1",
        "ctxdev 0 0 0 0",  # the second answer came from the thread's cache
        "destroyed 201",  # CUDA_ERROR_INVALID_CONTEXT: not from the cache
        "dtoh 0 " + " ".join(f"{b:02x}" for b in range(0xA0, 0xB0)),
        "sync 700",
        "lost 46",
        "after 46",
    ]
    # One line, whichever way the closed socket showed itself (EOF, or a reset
    # when the last synchronize had already been sent).
    (line,) = err.splitlines()
    assert line.startswith("gleam: lost the CUDA server: ")


def section(kind: int, data: bytes, flags: int = 0) -> bytes:
    return struct.pack("<BBHI", kind, flags, 0, len(data)) + data


NOTES, STDOUT, STDERR, MORE = 1, 2, 3, 1


def output_session(harness: Path, tmp_path: Path,
                   trailers: list[tuple[int, bytes]]) -> tuple[list, str, str]:
    """The harness's `output` program against a fake agent that answers its waiting
    calls in turn with (deferred error, trailer): the call ids it waited on, and its
    stdout and stderr."""
    server, proc = start_fake_agent(harness, tmp_path, "output", text=False)
    waited = []
    try:
        conn, _ = accept_attach(server)
        conn.sendall(envelope(3, hello_body()))
        for deferred, trailer in trailers:
            try:
                waited.append(records_until_wait(conn)[-1].call_id)
            except (AssertionError, OSError):
                break  # the interposer gave up on the session
            body = struct.pack("<iiII8Q", 0, deferred, 0, 0, *[0] * 8) + trailer
            conn.sendall(envelope(2, body))
        out, err = proc.communicate(timeout=TIMEOUT)
        conn.close()
    finally:
        proc.kill()
        server.close()
    assert proc.returncode == 0, (out, err)
    return waited, out.decode(errors="replace"), err.decode(errors="replace")


def test_device_output_goes_to_the_programs_descriptors_in_order(harness: Path,
                                                                 tmp_path: Path) -> None:
    """stdout and stderr sections are written before the waiting call returns; MORE
    makes it take the rest (glOutputTake) first; notes on a reply without an error
    break the format: the session is lost with one line."""
    waited, out, err = output_session(harness, tmp_path, [
        (0, section(STDOUT, b"a1\n") + section(STDERR, b"e1\n") + section(STDOUT, b"a2\n", MORE)),
        (0, section(STDOUT, b"a3\n")),
        (0, b""),
        (0, section(NOTES, b"why\n")),
    ])
    assert waited == [CALL["cuCtxSynchronize"], CALL["glOutputTake"], CALL["cuCtxSynchronize"],
                      CALL["cuCtxSynchronize"]]
    assert out == "a1\na2\na3\nsync 0\nsync 0\nsync 46\n"
    assert err.splitlines() == ["e1", "gleam: lost the CUDA server: malformed reply (a "
                                "section of its trailer)"]
    # With an error, notes are the server's reasons, on stderr, before the output.
    (tmp_path / "2").mkdir()
    waited, out, err = output_session(harness, tmp_path / "2", [
        (719, section(NOTES, b"kernel k: trap\n") + section(STDOUT, b"x\n")),
        (0, b""), (0, b"")])
    assert out == "x\nsync 719\nsync 0\nsync 0\n"
    assert err.splitlines() == ["gleam: server: kernel k: trap"]


def fail_to(harness: Path, tmp_path: Path, command: str, reason: str,
            after_hello: bool) -> subprocess.CompletedProcess:
    """The harness's COMMAND against a fake agent that ends the session with a FAIL
    envelope (the agents' own, envelope.fail_envelope): at the attach, or at the first
    waiting call."""
    from gleam.peer.cuda.wire.envelope import fail_envelope

    server, proc = start_fake_agent(harness, tmp_path, command)
    try:
        conn, _ = accept_attach(server)
        if after_hello:
            conn.sendall(envelope(3, hello_body()))
            records_until_wait(conn)
        conn.sendall(fail_envelope(reason))
        conn.close()
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        server.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_whole_reason_of_a_fail_reaches_stderr(harness: Path, tmp_path: Path) -> None:
    """A FAIL's reason, up to the longest the agents send (GL_FAIL_REASON_MAX, one
    constant for both sides), is shown whole: at the attach and mid-session."""
    from gleam.peer.nativelib import lib

    longest = lib.GL_FAIL_REASON_MAX
    reason = ("the serving agent ended the session: " + "why " * longest)[:longest]
    too_long = reason + " and more than the envelope carries"
    (tmp_path / "attach").mkdir()
    refused = fail_to(harness, tmp_path / "attach", "init", too_long, after_hello=False)
    assert refused.returncode == 0, refused.stdout + refused.stderr
    assert refused.stdout.splitlines() == ["init 100", "again 100", "count 3"]
    assert refused.stderr.splitlines() == [f"gleam: no CUDA device: {reason}"]
    (tmp_path / "session").mkdir()
    lost = fail_to(harness, tmp_path / "session", "output", too_long, after_hello=True)
    assert lost.returncode == 0, lost.stdout + lost.stderr
    assert lost.stdout.splitlines() == ["sync 46", "sync 46", "sync 46"]
    assert lost.stderr.splitlines() == [f"gleam: lost the CUDA server: {reason}"]


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=96))
def test_any_trailer_is_read_or_refused_never_trusted(harness: Path, tmp_path_factory, junk):
    """Whatever follows a reply's bytes: the interposer writes at most that many
    bytes, or loses the session with one line; it never crashes or waits forever."""
    tmp = tmp_path_factory.mktemp("junk")
    _, out, err = output_session(harness, tmp, [(0, junk), (0, b""), (0, b"")])
    lost = "gleam: lost the CUDA server: malformed reply" in err
    assert lost or out.endswith("sync 0\nsync 0\n")
    assert len(out.encode(errors="replace")) <= len(junk) + 3 * len("sync 46\n")


def test_built_library_exports_the_driver_api() -> None:
    from gleam.peer.cuda.examples import interposer_dir

    # where the installed gleam has it
    assert (interposer_dir() / "libcuda.so.1").exists(), "the build did not link the interposer"
    proc = run_against_built_library("""
v = ctypes.c_int()
assert lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value == 13000
s = ctypes.c_char_p()
assert lib.cuGetErrorName(46, ctypes.byref(s)) == 0
print(s.value.decode())
assert lib.cuGetErrorName(12345, ctypes.byref(s)) == 1 and s.value is None
fn = ctypes.c_void_p()
assert lib.cuGetProcAddress_v2(b"cuLaunchKernel", ctypes.byref(fn), 12000, 2, None) == 0
assert fn.value == ctypes.cast(lib.cuLaunchKernel_ptsz, ctypes.c_void_p).value
assert not hasattr(lib, "gl_emit")  # the core stays hidden
""")
    assert proc.stdout == "CUDA_ERROR_DEVICE_UNAVAILABLE\n"


def run_against_built_library(code: str, env: dict[str, str] | None = None
                              ) -> subprocess.CompletedProcess:
    """code run in a child with ``lib`` the built libcuda.so.1 (a libcuda loaded
    into the test process would shadow the real driver for anything else there)."""
    from gleam.peer.cuda.examples import interposer_dir

    lib = interposer_dir() / "libcuda.so.1"
    head = f"import ctypes\nlib = ctypes.CDLL({str(lib)!r})\n"
    proc = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return proc


def test_profiler_control_is_exported_and_needs_a_context() -> None:
    # cudaProfiler.h's two calls are not in cuda.h (driver_symbols.txt): programs that
    # dlsym them (cuda-samples' matrixMulDynlinkJIT) stop when they are missing.
    proc = run_against_built_library("""
for name in (b"cuProfilerStart", b"cuProfilerStop"):
    assert hasattr(lib, name.decode())
    fn = ctypes.c_void_p()
    assert lib.cuGetProcAddress_v2(name, ctypes.byref(fn), 4000, 0, None) == 0
    assert fn.value == ctypes.cast(getattr(lib, name.decode()), ctypes.c_void_p).value
print(lib.cuProfilerStart(), lib.cuProfilerStop())
""")
    assert proc.stdout.split() == ["3", "3"]   # CUDA_ERROR_NOT_INITIALIZED before cuInit
    assert "not forwarded" not in proc.stderr


def test_every_name_of_nvidias_driver_is_exported() -> None:
    names = [n for n in (BUILD / "driver_symbols.txt").read_text().splitlines()
             if n and not n.startswith("#")]
    assert len(names) > 600 and "cuArrayGetPlane" in names and "cuMemcpy_ptds" in names
    proc = run_against_built_library(f"""
missing = [n for n in {names!r} if not hasattr(lib, n)]
assert not missing, missing
create = lib.cuArrayGetPlane
create.argtypes = [ctypes.c_void_p, ctypes.c_uint]
print(create(None, 0), create(None, 0))
fn = ctypes.c_void_p()
assert lib.cuGetProcAddress_v2(b"cuArrayGetPlane", ctypes.byref(fn), 12000, 0, None) == 0
assert fn.value == ctypes.cast(lib.cuArrayGetPlane, ctypes.c_void_p).value
""")
    assert proc.stdout.split() == ["801", "801"]
    # Said once, however often it is called.
    assert proc.stderr.count("gleam: cuArrayGetPlane is not forwarded") == 1


def test_the_symbol_list_comes_from_cuda_h() -> None:
    from list_driver_symbols import driver_symbols

    header = """
    #define __CUDA_API_PTDS(api) api ## _ptds
    #define cuMemAlloc                          cuMemAlloc_v2
    #define cuMemcpy                            __CUDA_API_PTDS(cuMemcpy)
    CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
    CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
    CUresult CUDAAPI cuInit(unsigned int Flags);
    """
    assert driver_symbols(header) == ["cuInit", "cuMemAlloc", "cuMemAlloc_v2", "cuMemcpy",
                                      "cuMemcpy_ptds"]


DRIVER_LOGS = """
import sys
LOGGED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
seen = []
callback = LOGGED(lambda data, level, text, length: seen.append((level, text[:length].decode())))
handle = ctypes.c_void_p()
assert lib.cuLogsRegisterCallback(callback, None, ctypes.byref(handle)) == 0 and handle.value
assert lib.cuLogsRegisterCallback(None, None, None) == 1
start = ctypes.c_uint()
assert lib.cuLogsCurrent(ctypes.byref(start), 0) == 0 and lib.cuLogsCurrent(None, 0) == 1
lib.cuArrayGetPlane(None, 0)     # two messages: each is logged
lib.cuArrayGetSparseProperties(None, None)
assert [level for level, _ in seen] == [0, 0], seen
assert "[gleam][E][cuArrayGetPlane] cuArrayGetPlane is not forwarded" in seen[0][1], seen

it = ctypes.c_uint(start.value)
buf = ctypes.create_string_buffer(4096)
size = ctypes.c_size_t(len(buf))
assert lib.cuLogsDumpToMemory(ctypes.byref(it), buf, ctypes.byref(size), 0) == 0
lines = buf.value.decode().splitlines()
assert size.value == len(buf.value) and len(lines) == 2 and it.value == start.value + 2, lines
assert lines[0] == seen[0][1] and lines[1] == seen[1][1]
size = ctypes.c_size_t(len(buf))   # the iterator advanced: nothing new
assert lib.cuLogsDumpToMemory(ctypes.byref(it), buf, ctypes.byref(size), 0) == 0
assert size.value == 0 and buf.value == b""

it = ctypes.c_uint(start.value)    # room for the note and the newest line only
room = len(seen[1][1]) + 60
size = ctypes.c_size_t(room)
assert lib.cuLogsDumpToMemory(ctypes.byref(it), buf, ctypes.byref(size), 0) == 0
lines = buf.value.decode().splitlines()
assert lines == ["[gleam] 1 earlier log lines are not in this buffer", seen[1][1]], lines
it = ctypes.c_uint(start.value)
size = ctypes.c_size_t(8)          # not even one line
assert lib.cuLogsDumpToMemory(ctypes.byref(it), buf, ctypes.byref(size), 0) == 1
assert size.value == 0
assert lib.cuLogsDumpToMemory(None, None, ctypes.byref(size), 0) == 1

assert lib.cuLogsDumpToFile(None, sys.argv[1].encode(), 0) == 0
assert lib.cuLogsDumpToFile(None, None, 0) == 1
assert lib.cuLogsUnregisterCallback(handle) == 0
assert lib.cuLogsUnregisterCallback(handle) == 1
lib.cuMipmappedArrayGetSparseProperties(None)
assert len(seen) == 2              # no longer called
print("ok")
"""


def test_driver_logs_keep_gleams_messages_for_callbacks_and_dumps(tmp_path: Path) -> None:
    dump, log_file = tmp_path / "dump.txt", tmp_path / "cuda.log"
    code = DRIVER_LOGS.replace("sys.argv[1]", repr(str(dump)))
    proc = run_against_built_library(code, env={"CUDA_LOG_FILE": str(log_file)})
    assert proc.stdout == "ok\n"
    dumped = dump.read_text().splitlines()
    assert len(dumped) == 2 and "cuArrayGetSparseProperties is not forwarded" in dumped[1]
    # CUDA_LOG_FILE gets every line as it is logged, the third one included.
    logged = log_file.read_text().splitlines()
    assert logged[:2] == dumped and "cuMipmappedArrayGetSparseProperties" in logged[2]
    # stderr still has the plain line for each.
    assert proc.stderr.count("gleam: ") == 3


def test_trace_names_the_result_of_a_failing_call() -> None:
    proc = run_against_built_library("""
s = ctypes.c_char_p()
assert lib.cuGetErrorName(12345, ctypes.byref(s)) == 1
assert lib.cuGetErrorName(0, ctypes.byref(s)) == 0
""", env={"GLEAM_TRACE": "1"})
    lines = [line for line in proc.stderr.splitlines() if "cuGetErrorName" in line]
    assert lines == ["gleam: trace: cuGetErrorName",
                     "gleam: trace: cuGetErrorName -> CUDA_ERROR_INVALID_VALUE",
                     "gleam: trace: cuGetErrorName"]


def test_trace_of_errors_names_only_the_failing_calls() -> None:
    proc = run_against_built_library("""
s = ctypes.c_char_p()
assert lib.cuGetErrorName(12345, ctypes.byref(s)) == 1
assert lib.cuGetErrorName(0, ctypes.byref(s)) == 0
""", env={"GLEAM_TRACE": "errors"})
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gleam: trace:")]
    assert lines == ["gleam: trace: cuGetErrorName -> CUDA_ERROR_INVALID_VALUE"]


def test_trace_names_an_unforwarded_call_once_when_called_not_when_resolved() -> None:
    """cudart resolves every name it knows at start-up: resolving says nothing, the
    first call of an unforwarded name says it once, a name that is no driver name at
    all (cudart asks for "") is not found, as NVIDIA's driver answers."""
    proc = run_against_built_library("""
fn = ctypes.c_void_p()
status = ctypes.c_int(-1)
for name in (b"cuDeviceGetP2PAttribute", b"cuDeviceGetByPCIBusId", b"cuNotYetInvented"):
    assert lib.cuGetProcAddress_v2(name, ctypes.byref(fn), 13000, 0, ctypes.byref(status)) == 0
    assert status.value == 0 and fn.value
call = ctypes.CFUNCTYPE(ctypes.c_int)(fn.value)
assert call() == 801 and call() == 801
assert lib.cuGetProcAddress_v2(b"", ctypes.byref(fn), 13000, 0, ctypes.byref(status)) == 500
assert status.value == 1 and not fn.value
""", env={"GLEAM_TRACE": "1"})
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gleam:")]
    assert lines == ["gleam: cuNotYetInvented is not forwarded; returning "
                     "CUDA_ERROR_NOT_SUPPORTED"], proc.stderr


def test_trace_of_errors_leaves_out_what_nvidias_driver_refuses_too() -> None:
    """A refused export table is the driver's own answer to a program's probe:
    GLEAM_TRACE=errors leaves it out, =1 marks it."""
    code = """
table = ctypes.c_void_p()
uuid = bytes.fromhex("da9151d33ae6cc41a5c04f26d533e328")
assert lib.cuGetExportTable(ctypes.byref(table), uuid) == 500
s = ctypes.c_char_p()
assert lib.cuGetErrorName(12345, ctypes.byref(s)) == 1
"""
    quiet = run_against_built_library(code, env={"GLEAM_TRACE": "errors"})
    assert quiet.stderr.splitlines() == ["gleam: trace: cuGetErrorName -> "
                                         "CUDA_ERROR_INVALID_VALUE"]
    full = run_against_built_library(code, env={"GLEAM_TRACE": "1"})
    assert ("gleam: trace: cuGetExportTable -> CUDA_ERROR_NOT_FOUND (as NVIDIA's driver "
            "answers)") in full.stderr.splitlines()


def test_every_code_gleam_returns_has_a_name() -> None:
    proc = run_against_built_library("""
s = ctypes.c_char_p()
for code in (215, 401, 712, 713, 702, 710, 716):
    assert lib.cuGetErrorName(code, ctypes.byref(s)) == 0, code
    print(s.value.decode())
""")
    assert proc.stdout.split() == ["CUDA_ERROR_UNSUPPORTED_LIMIT", "CUDA_ERROR_ILLEGAL_STATE",
                                   "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
                                   "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
                                   "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_ASSERT",
                                   "CUDA_ERROR_MISALIGNED_ADDRESS"]
