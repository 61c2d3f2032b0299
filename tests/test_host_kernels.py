"""The host backend's built-in kernels, and the example programs and images they stand for.

The numpy kernels run here over a small Launch-like object whose "device memory" is one numpy
buffer: these tests check the kernels' math and their grid coverage, not the launch path
(tests of peer/cuda/server/launch.py and the executor do that).
"""

from __future__ import annotations

import logging
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gleam.peer.cuda.server.kernels import BUILTIN_KERNELS, HostKernel, param_layout, registry

ROOT = Path(__file__).resolve().parents[1]
PTX = ROOT / "peer" / "cuda" / "ptx" / "kernels.ptx"
FATBIN = ROOT / "peer" / "cuda" / "ptx" / "kernels.fatbin"
EXAMPLES = ROOT / "examples" / "cuda"
KERNELS = registry(BUILTIN_KERNELS)
FMT = {4: "i", 8: "Q"}


class Memory:
    """A stand-in for a session's device memory: pointers are offsets into one buffer."""

    BASE = 0x7F0000000000

    def __init__(self, size: int = 1 << 22) -> None:
        self.buf = np.zeros(size, dtype=np.uint8)
        self.used = 0

    def put(self, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
        ptr = self.BASE + self.used
        self.view(ptr, np.float32, data.size)[:] = data
        self.used += (data.nbytes + 255) // 256 * 256
        return ptr

    def view(self, ptr: int, dtype: type, count: int) -> np.ndarray:
        itemsize = np.dtype(dtype).itemsize
        off = ptr - self.BASE
        if off < 0 or count < 0 or off + count * itemsize > self.buf.size:
            raise ValueError("outside the session's memory")
        return self.buf[off : off + count * itemsize].view(dtype)


class FakeLaunch:
    """The interface the kernels use: grid, block, params, arg(), threads(), array()."""

    def __init__(
        self, mem: Memory, kernel: HostKernel, grid: tuple, block: tuple, *args: object
    ) -> None:
        self.mem, self.grid, self.block, self.shared = mem, grid, block, 0
        self.offsets, size = kernel.layout()
        packed = bytearray(size)
        for off, psize, value in zip(self.offsets, kernel.params, args, strict=True):
            fmt = "f" if isinstance(value, float) else FMT[psize]
            struct.pack_into("<" + fmt, packed, off, value)
        self.params = bytes(packed)

    def arg(self, i: int, fmt: str) -> object:
        return struct.unpack_from("<" + fmt, self.params, self.offsets[i])[0]

    def threads(self, axis: int = 0) -> int:
        return self.grid[axis] * self.block[axis]

    def array(self, ptr: int, dtype: type, count: int) -> np.ndarray:
        return self.mem.view(ptr, dtype, count)


def launch(mem: Memory, name: str, grid: tuple, block: tuple, *args: object) -> None:
    kernel = KERNELS[name]
    kernel.run(FakeLaunch(mem, kernel, grid, block, *args))


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, shape).astype(np.float32)


# ---------------------------------------------------------------- the kernels' math


@pytest.mark.parametrize("threads", [1000, 1024, 256 * 2])
def test_vector_add_covers_only_the_grid(threads: int) -> None:
    rng, mem, n = np.random.default_rng(1), Memory(), 1000
    a, b = rand(rng, n), rand(rng, n)
    pa, pb, pc = mem.put(a), mem.put(b), mem.put(np.full(n, -7.0))
    launch(mem, "vector_add", (threads // 8, 1, 1), (8, 1, 1), pa, pb, pc, n)
    c = mem.view(pc, np.float32, n)
    done = min(n, threads)
    np.testing.assert_array_equal(c[:done], a[:done] + b[:done])
    assert (c[done:] == -7.0).all()


def test_saxpy_full_and_partial() -> None:
    rng, mem, n = np.random.default_rng(2), Memory(), 777
    x, y = rand(rng, n), rand(rng, n)
    px, py = mem.put(x), mem.put(y)
    launch(mem, "saxpy", (2, 1, 1), (128, 1, 1), 2.5, px, py, n)
    out = mem.view(py, np.float32, n)
    np.testing.assert_allclose(out[:256], np.float32(2.5) * x[:256] + y[:256], rtol=1e-6)
    np.testing.assert_array_equal(out[256:], y[256:])
    launch(mem, "saxpy", (7, 1, 1), (128, 1, 1), -1.0, px, py, n)  # more threads than data
    np.testing.assert_allclose(out[:256], 1.5 * x[:256] + y[:256], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[256:], y[256:] - x[256:], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("grid", "rows", "cols"),
    [((5, 3, 1), 37, 70), ((2, 3, 1), 37, 32), ((5, 1, 1), 16, 70), ((1, 1, 1), 16, 16)],
)
def test_sgemm_matches_numpy_within_the_grid(grid: tuple, rows: int, cols: int) -> None:
    """A 16x16 block: x covers grid[0]*16 columns, y grid[1]*16 rows, clipped to M and N."""
    rng, mem = np.random.default_rng(3), Memory()
    m, n, k = 37, 70, 19
    a, b = rand(rng, m, k), rand(rng, k, n)
    pa, pb, pc = mem.put(a), mem.put(b), mem.put(np.full((m, n), 9.0))
    launch(mem, "sgemm", grid, (16, 16, 1), pa, pb, pc, m, n, k)
    c = mem.view(pc, np.float32, m * n).reshape(m, n)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(c[:rows, :cols], want[:rows, :cols], rtol=1e-5, atol=1e-5)
    assert (c[rows:, :] == 9.0).all() and (c[:, cols:] == 9.0).all()
    assert c.dtype == np.float32


def test_sgemm_with_empty_inner_dimension_writes_zeros() -> None:
    mem = Memory()
    pc = mem.put(np.full((4, 4), 3.0))
    launch(mem, "sgemm", (1, 1, 1), (16, 16, 1), mem.BASE, mem.BASE, pc, 4, 4, 0)
    assert (mem.view(pc, np.float32, 16) == 0.0).all()


def test_bias_relu_whole_and_part_of_a_row() -> None:
    rng, mem = np.random.default_rng(4), Memory()
    rows, cols = 9, 13
    x, bias = rand(rng, rows, cols), rand(rng, cols)
    x[0, 0] = np.nan  # the CUDA kernel's `v > 0 ? v : 0` makes NaN 0
    px, pb = mem.put(x), mem.put(bias)
    covered = 4 * 16  # ends inside row 4
    launch(mem, "bias_relu", (4, 1, 1), (16, 1, 1), px, pb, rows, cols)
    out = mem.view(px, np.float32, rows * cols)
    want = np.maximum(x + bias, 0).reshape(-1)
    want[0] = 0.0
    np.testing.assert_array_equal(out[:covered], want[:covered])
    np.testing.assert_array_equal(out[covered:], x.reshape(-1)[covered:])


def test_softmax_rows_is_stable_and_honours_the_grid() -> None:
    rng, mem = np.random.default_rng(5), Memory()
    rows, cols = 10, 7
    x = rand(rng, rows, cols) * 50 + 1000  # exp(1000) overflows without the max shift
    px, py = mem.put(x), mem.put(np.full((rows, cols), -1.0))
    launch(mem, "softmax_rows", (1, 1, 1), (6, 1, 1), px, py, rows, cols)
    y = mem.view(py, np.float32, rows * cols).reshape(rows, cols)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y[:6], want[:6], rtol=1e-5, atol=1e-7)
    assert (y[6:] == -1.0).all()
    assert np.isfinite(y[:6]).all()


def test_softmax_rows_in_place() -> None:
    mem = Memory()
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    px = mem.put(x)
    launch(mem, "softmax_rows", (1, 1, 1), (32, 1, 1), px, px, 2, 3)
    y = mem.view(px, np.float32, 6).reshape(2, 3)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(y[1], 1 / 3, rtol=1e-6)
    assert y[0].argmax() == 2


def test_mlp_forward_of_the_example_matches_float64() -> None:
    """The chain mlp_infer.c launches (sgemm, bias_relu, twice; softmax_rows)."""
    rng, mem = np.random.default_rng(6), Memory(1 << 23)
    batch, d_in, hidden, d_out = 64, 256, 512, 10
    x, w1, w2 = rand(rng, batch, d_in), rand(rng, d_in, hidden) * 0.1, rand(rng, hidden, d_out)
    b1, b2 = rand(rng, hidden) * 0.1, rand(rng, d_out) * 0.2
    px, pw1, pb1, pw2, pb2 = (mem.put(v) for v in (x, w1, b1, w2 * 0.2, b2))
    ph, po, pp = (mem.put(np.zeros(s)) for s in (batch * hidden, batch * d_out, batch * d_out))

    def blocks(n: int, per: int) -> int:
        return (n + per - 1) // per

    launch(mem, "sgemm", (blocks(hidden, 16), blocks(batch, 16), 1), (16, 16, 1),
           px, pw1, ph, batch, hidden, d_in)  # fmt: skip
    launch(mem, "bias_relu", (blocks(batch * hidden, 256), 1, 1), (256, 1, 1),
           ph, pb1, batch, hidden)  # fmt: skip
    launch(mem, "sgemm", (blocks(d_out, 16), blocks(batch, 16), 1), (16, 16, 1),
           ph, pw2, po, batch, d_out, hidden)  # fmt: skip
    launch(mem, "bias_relu", (blocks(batch * d_out, 256), 1, 1), (256, 1, 1),
           po, pb2, batch, d_out)  # fmt: skip
    launch(mem, "softmax_rows", (1, 1, 1), (64, 1, 1), po, pp, batch, d_out)
    p = mem.view(pp, np.float32, batch * d_out).reshape(batch, d_out)

    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
    o = np.maximum(h @ (w2 * np.float32(0.2)).astype(np.float64) + b2, 0)
    e = np.exp(o - o.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    assert np.abs(p - want).max() < 1e-4


def test_kernels_refuse_memory_outside_the_session() -> None:
    mem = Memory(4096)
    with pytest.raises(ValueError, match="outside"):
        launch(mem, "vector_add", (8, 1, 1), (256, 1, 1), mem.BASE, mem.BASE, mem.BASE, 2048)


# ---------------------------------------------------------------- the registry


def test_builtin_registry_and_layouts() -> None:
    assert set(KERNELS) == {"gleam_empty", "vector_add", "saxpy", "sgemm", "bias_relu",
                            "softmax_rows"}  # fmt: skip
    assert KERNELS["gleam_empty"].native == "gleam_empty"
    assert all(k.run is not None for k in BUILTIN_KERNELS if k.name != "gleam_empty")
    assert KERNELS["saxpy"].layout() == ((0, 8, 16, 24), 28)
    assert param_layout([1, 8, 2, 16, 4]) == ((0, 8, 16, 24, 40), 44)


def test_duplicate_names_are_refused_naming_both() -> None:
    extra = HostKernel("saxpy", (4,), native="my_saxpy")
    with pytest.raises(ValueError, match=r"saxpy.*_saxpy.*native my_saxpy"):
        registry([*BUILTIN_KERNELS, extra])


def test_a_kernel_needs_an_implementation_and_sane_sizes() -> None:
    with pytest.raises(ValueError):
        HostKernel("k", (4,))
    with pytest.raises(ValueError):
        HostKernel("k", (0,), native="k")


def test_plugin_offers_the_builtins_and_degrades_without_numpy(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from gleam.plugins import host_kernels

    assert host_kernels.gleam_host_kernels() == list(BUILTIN_KERNELS)
    monkeypatch.setattr(host_kernels, "_numpy_present", lambda: False)
    monkeypatch.setattr(host_kernels, "_warned", False)
    with caplog.at_level(logging.WARNING, logger=host_kernels.__name__):
        first = host_kernels.gleam_host_kernels()
        second = host_kernels.gleam_host_kernels()
    assert [k.name for k in first] == [k.name for k in second] == ["gleam_empty"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "sgemm" in warnings[0] and "gleam[host]" in warnings[0]


# ---------------------------------------------------------------- the shipped images


def ptx_entries(text: str) -> dict[str, tuple[int, ...]]:
    """Entry name -> parameter byte sizes, from `.entry NAME( .param .TYPE name, ... )`."""
    entries = {}
    for match in re.finditer(r"\.entry\s+(\w+)\s*\(([^)]*)\)", text):
        sizes = []
        for param in re.finditer(r"\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(\d+)", match[2]):
            sizes.append(int(param[2]) // 8)
        entries[match[1]] = tuple(sizes)
    return entries


def test_shipped_ptx_declares_exactly_the_builtin_kernels() -> None:
    entries = ptx_entries(PTX.read_text())
    assert entries == {k.name: k.params for k in BUILTIN_KERNELS}


def test_shipped_fatbin_is_a_fatbin() -> None:
    data = FATBIN.read_bytes()
    assert struct.unpack_from("<I", data)[0] == 0xBA55ED50  # the fatbin container's magic


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_gen_script_reproduces_the_shipped_images(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "gen-example-kernels.sh"), str(tmp_path)],
                   check=True, capture_output=True)  # fmt: skip
    assert (tmp_path / "kernels.ptx").read_text() == PTX.read_text(), "regenerate the PTX"
    assert (tmp_path / "kernels.fatbin").read_bytes() == FATBIN.read_bytes()


# ---------------------------------------------------------------- the example programs


def cuda_include() -> Path:
    runtime = pytest.importorskip("nvidia.cuda_runtime")
    include = Path(next(iter(runtime.__path__))) / "include"
    if not (include / "cuda.h").is_file():
        pytest.skip("the nvidia-cuda-runtime-cu12 wheel has no cuda.h")
    return include


@pytest.mark.parametrize("source", sorted(p.name for p in EXAMPLES.glob("*.c")))
def test_example_compiles_cleanly(source: str, tmp_path: Path) -> None:
    """-Wall -Wextra -Werror against NVIDIA's cuda.h, linked against the interposer."""
    from gleam.peer.cuda.examples import interposer_dir

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed")
    cmd = [gcc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(cuda_include())]
    lib = interposer_dir()
    cmd += ["-o", str(tmp_path / "prog"), str(EXAMPLES / source), "-L", str(lib),
            "-l:libcuda.so.1", "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_all_examples_are_in_the_makefile() -> None:
    makefile = (EXAMPLES / "Makefile").read_text()
    # PROGRAMS and GRAPHS (which also depend on graph_common.h); a list may go on
    # over backslash-continued lines.
    listed: set[str] = set()
    for name in ("PROGRAMS", "GRAPHS"):
        found = re.search(rf"^{name}\s*=\s*((?:.*\\\n)*.*)$", makefile, re.M)
        assert found is not None, name
        listed |= set(found[1].replace("\\\n", " ").split())
    assert listed == {p.stem for p in EXAMPLES.glob("*.c")}


def test_python_example_is_valid_python() -> None:
    source = EXAMPLES / "vector_add_bindings.py"
    compile(source.read_text(), str(source), "exec")
