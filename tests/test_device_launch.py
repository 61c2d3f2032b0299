"""Dynamic parallelism (CDP2) on the host device: kernels built by nvcc (-rdc=true, PTX
for compute 8.0, as the cuda-samples build) launch kernels; the device runtime's
built-ins queue each launch and the host device runs the children once their parent's
blocks have ended, before the parent's launch completes (src/ptx_cdp.h). Driven
in-process, straight into the executor; skipped without nvcc."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from .cuda_session import Session, ptx_only_session
from .device_runtime import ILLEGAL_ADDRESS, set_limit

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "cuda" / "runtime" / "cdp.cu"
NVCC = shutil.which("nvcc")
PENDING_LAUNCH_COUNT = 4  # CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT
MAX_DEPTH_EXCEEDED, PENDING_COUNT_EXCEEDED = 65, 69  # cudaError_t

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc (the CUDA toolkit) is not on PATH")


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
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
