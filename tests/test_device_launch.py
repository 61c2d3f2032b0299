"""Dynamic parallelism (CDP2) on the host device: kernels built by nvcc (-rdc=true, PTX
for compute 8.0, as the cuda-samples build; those tests skip without nvcc) and one
written out (tests/device_runtime.py) launch kernels; the device runtime's built-ins
queue each launch and the host device runs the children once their parent's blocks
have ended, before the parent's launch completes (src/ptx/ptx_cdp.h). What a kernel hands
the built-ins is fuzzed: an error code or a fault, never a crash. Driven in-process,
straight into the executor."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .cuda_session import Session, ptx_only_session, rec
from .device_runtime import ILLEGAL_ADDRESS, INVALID_PTX, LAUNCHES, set_limit

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "cuda" / "runtime" / "cdp.cu"
NVCC = shutil.which("nvcc")
PENDING_LAUNCH_COUNT = 4  # CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT
MAX_DEPTH_EXCEEDED, PENDING_COUNT_EXCEEDED = 65, 69  # cudaError_t

TAIL, FIRE_AND_FORGET = 3, 4  # cudaStreamTailLaunch, cudaStreamFireAndForget
# what the device runtime may answer a kernel: success, invalid value, out of memory,
# invalid configuration, invalid device function, invalid resource handle
ANSWERS = {0, 1, 2, 9, 98, 400}


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = tmp_path_factory.mktemp("cdp") / "cdp.ptx"
    done = subprocess.run([NVCC, "-rdc=true", "-ptx", "-arch=compute_80", "-o", str(out),
                           str(SOURCE)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"nvcc cdp.cu:\n{done.stderr}")
    return out.read_bytes() + b"\0"


def ints(s: Session, p: int, n: int) -> list[int]:
    return list(struct.unpack(f"<{n}i", s.dtoh(p, 4 * n)))


def zeros(s: Session, n: int) -> int:
    p = s.alloc(4 * n)
    s.htod(p, bytes(4 * n))
    return p


def run(s: Session, ptx: bytes, kernel: str, threads: int, params: bytes,
        blocks: int = 1) -> tuple[int, int]:
    """Launches ``kernel`` of the module and synchronises: (result, deferred error)."""
    s.launch(s.function(s.load(ptx), kernel), (blocks, 1, 1), (threads, 1, 1), params)
    return s.sync()


def test_a_child_sees_what_its_parent_wrote_and_finishes_before_the_launch_does(ptx):
    with ptx_only_session() as s:
        n = 100
        data = zeros(s, n)
        assert run(s, ptx, "fill_then_double", 32, struct.pack("<Qi", data, n), 4) == (0, 0)
        assert ints(s, data, n) == [2 * (i + 1) for i in range(n)]


def test_recursion_runs_every_level_up_to_cudas_24_and_refuses_the_25th(ptx):
    with ptx_only_session() as s:
        seen, errs = zeros(s, 32), zeros(s, 32)
        assert run(s, ptx, "recurse", 1, struct.pack("<QQii", seen, errs, 0, 30)) == (0, 0)
        assert ints(s, seen, 32) == [k + 1 for k in range(24)] + [0] * 8
        # the grid at level 24 (index 23) could not launch: the depth is CUDA's most
        assert ints(s, errs, 32)[:24] == [0] * 23 + [MAX_DEPTH_EXCEEDED]


def test_work_in_one_device_stream_runs_in_order_and_each_thread_has_its_stream(ptx):
    with ptx_only_session() as s:
        t = 8
        first, second, errs = zeros(s, t), zeros(s, t), zeros(s, t)
        params = struct.pack("<QQQ", first, second, errs)
        assert run(s, ptx, "two_in_each_stream", t, params) == (0, 0)
        assert ints(s, errs, t) == [0] * t
        assert ints(s, second, t) == [100 + k for k in range(t)]


def test_a_tail_launch_waits_for_the_rest_of_its_parents_work(ptx):
    with ptx_only_session() as s:
        flag, saw = zeros(s, 1), zeros(s, 1)
        assert run(s, ptx, "tail_first", 1, struct.pack("<QQ", flag, saw)) == (0, 0)
        assert ints(s, saw, 1) == [7]


@pytest.mark.parametrize("limit", [3, 2048])
def test_launches_past_the_pending_limit_get_cudas_error_and_do_not_run(ptx, limit):
    with ptx_only_session() as s:
        if limit != 2048:  # CUDA's default otherwise
            assert set_limit(s, PENDING_LAUNCH_COUNT, limit) == 0
        t = 8
        ran, errs = zeros(s, t), zeros(s, t)
        assert run(s, ptx, "many", t, struct.pack("<QQ", ran, errs)) == (0, 0)
        took = min(limit, t)
        assert ints(s, errs, t) == [0] * took + [PENDING_COUNT_EXCEEDED] * (t - took)
        assert ints(s, ran, t) == [1] * took + [0] * (t - took)


def test_a_pending_limit_of_zero_is_refused(ptx):
    with ptx_only_session() as s:
        assert set_limit(s, PENDING_LAUNCH_COUNT, 0) == 1  # CUDA_ERROR_INVALID_VALUE


def test_passing_a_pointer_to_shared_memory_to_a_child_is_a_fault(ptx):
    with ptx_only_session() as s:
        assert run(s, ptx, "pass_shared", 32, struct.pack("<Q", zeros(s, 1)))[1] == ILLEGAL_ADDRESS
        assert any("shared or local memory" in n for n in s.notes), s.notes


def test_a_childs_fault_is_its_parents_launchs_error(ptx):
    with ptx_only_session() as s:
        assert run(s, ptx, "child_faults", 1, struct.pack("<Q", zeros(s, 1)))[1] == ILLEGAL_ADDRESS
        assert any("child grid copy_one" in n for n in s.notes), s.notes


def test_device_copies_and_sets_run_in_stream_order_with_launches(ptx):
    with ptx_only_session() as s:
        n = 4
        a, b = s.alloc(4 * n), zeros(s, n)
        s.htod(a, struct.pack(f"<{n}i", *range(9, 9 + n)))
        assert run(s, ptx, "copies", 1, struct.pack("<QQi", a, b, n)) == (0, 0)
        assert ints(s, b, n) == [42, 0, 0, 0]


def poke(s: Session, func: int = 0, grid: int = 1, block: int = 32, shared: int = 0,
         stream: int = 0, shift: int = 0) -> tuple[int, list[int]]:
    """LAUNCHES' poke: (sync's deferred error, out[0..35])."""
    out = zeros(s, 35)
    params = struct.pack("<QIIIxxxxQQQ", func, grid, block, shared, stream, shift, out)
    err = run(s, LAUNCHES, "poke", 1, params)[1]
    return err, ints(s, out, 35) if err == 0 else []


@pytest.mark.parametrize("stream", [0, TAIL, FIRE_AND_FORGET])
def test_a_launch_written_in_ptx_runs_in_each_of_cudas_device_streams(stream):
    with ptx_only_session() as s:
        err, out = poke(s, stream=stream)
        assert err == 0 and out == [9] * 32 + [1, 0, 0]


def test_a_call_that_does_not_match_the_runtimes_signature_is_refused_at_load():
    wrong = LAUNCHES.replace(b"(.param .b64 p, .param .b64 s);", b"(.param .b64 p);")
    wrong = wrong.replace(b"st.param.b64 [s], %rd2;\n    call.uni (r), cudaLaunchDeviceV2, (p, s);",
                          b"call.uni (r), cudaLaunchDeviceV2, (p);")
    with ptx_only_session() as s:
        s.load(wrong)
        assert s.sync()[1] == INVALID_PTX
        assert any("does not match the device runtime" in n for n in s.notes), s.notes


@settings(max_examples=60, deadline=None)
@given(func=st.sampled_from([0, 1, 0x7F7C000000000000, 0x7F7C000000000001, 0x7F7C0000FFFFFFFF]),
       grid=st.sampled_from([0, 1, 2, 0x80000000, 0xFFFFFFFF]),
       block=st.sampled_from([0, 1, 32, 1024, 1025]),
       shared=st.sampled_from([0, 48 * 1024, 1 << 20, 0xFFFFFFFF]),
       stream=st.sampled_from([0, 1, 2, TAIL, FIRE_AND_FORGET, 0x6364700000000001, 1 << 63]),
       shift=st.sampled_from([0, 8, 64, -64, 1 << 40]))
def test_whatever_a_kernel_hands_the_launch_built_ins_is_an_error_code_never_a_crash(
        func, grid, block, shared, stream, shift):
    with ptx_only_session() as s:
        err, out = poke(s, func, grid, block, shared, stream, shift & (1 << 64) - 1)
        assert err == 0, s.notes  # every refusal is the kernel's to read
        given_buffer, launched, last = out[32:]
        assert launched in ANSWERS and last == launched
        assert given_buffer or launched != 0, "no buffer, no launch"
        ok = launched == 0
        assert out[:32] == ([9] * min(block, 32) + [0] * (32 - min(block, 32)) if ok else [0] * 32)


def test_a_kernel_that_launches_kernels_needs_what_any_kernel_of_its_module_uses():
    """glFuncDevrt: the interposer makes the heap before a launch whose kernel may use it;
    a parent may launch a child that calls malloc, so the parent's answer says malloc."""
    malloc_bit = 1 << 2  # PTX_BI_MALLOC
    grabber = (b".extern .func (.param .b64 r) malloc (.param .b64 n);\n"
               b".visible .entry grabber(.param .u64 out)\n{\n    .reg .b64 %rd<3>;\n"
               b"    ld.param.u64 %rd1, [out];\n    {\n    .param .b64 n;\n"
               b"    .param .b64 r;\n    st.param.b64 [n], 16;\n"
               b"    call.uni (r), malloc, (n);\n    ld.param.b64 %rd2, [r];\n    }\n"
               b"    st.global.u64 [%rd1], %rd2;\n    ret;\n}\n")
    with ptx_only_session() as s:
        mod = s.load(LAUNCHES + grabber)
        uses = {name: s.run(rec("glFuncDevrt", s.function(mod, name))) for name in
                ("poke", "fill", "grabber")}
        assert all(r is not None and r[0] == 0 for r in uses.values()), uses
        assert uses["poke"][2][0] & malloc_bit  # it may launch grabber
        assert not uses["fill"][2][0] & malloc_bit  # it launches nothing
        assert uses["grabber"][2][0] & malloc_bit
