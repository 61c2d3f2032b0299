"""CuPy programs, unchanged, through gleam on a host-backend peer.

CuPy (``cupy-cuda12x``) carries cudart 12 statically and reaches the driver
both through it and directly; NVRTC comes from the ``nvidia-cuda-nvrtc-cu12``
wheel. The agents are two real processes on loopback: a client without a
device and a server with the host backend (its kernel registry off), whose
PTX interpreter runs every kernel. Each program checks its results against
numpy and prints one JSON verdict.

The programs run with CuPy's defaults: ``gleam-peer run`` sets
``CUPY_COMPILE_WITH_PTX=1`` (NVRTC emits PTX instead of an sm_80 cubin,
docs/cuda-forwarding.md, "CuPy") unless the user set it. Reductions, scans
and sorts run CuPy's default accelerator, CUB (and Thrust), whose prebuilt
kernels' only PTX is
``compute_100``; the reductions run once more with ``CUPY_ACCELERATORS=``
(CuPy's own kernels).
"""

from __future__ import annotations

import sys

import pytest

from .cuda_mesh import host_mesh, run_through

pytestmark = pytest.mark.slow

cupy = pytest.importorskip("cupy", reason="cupy-cuda12x (the test extra) is not installed")

PRELUDE = """
import json
import cupy as cp
import numpy as np
rng = np.random.default_rng(7)
def close(a, b):
    return bool(np.allclose(a, b, rtol=1e-5, atol=1e-6))
"""

ARRAYS = PRELUDE + """
x = rng.standard_normal(4096).astype(np.float32)
dx = cp.asarray(x)
dz = dx.copy()
dz[10:20] = 5
want = x.copy()
want[10:20] = 5
checks = {
    "roundtrip": bool(np.array_equal(cp.asnumpy(dx), x)),
    "zeros": bool(np.array_equal(cp.zeros(100).get(), np.zeros(100))),
    "ones_int32": bool(np.array_equal(cp.ones((3, 4), cp.int32).get(), np.ones((3, 4), np.int32))),
    "arange": bool(np.array_equal(cp.arange(0, 50, 3).get(), np.arange(0, 50, 3))),
    "device_copy_and_slice": bool(np.array_equal(dz.get(), want)),
    "transpose_copy": bool(np.array_equal(
        cp.ascontiguousarray(cp.asarray(x.reshape(64, 64)).T).get(), x.reshape(64, 64).T)),
}
print(json.dumps({"ok": all(checks.values()), "checks": checks}))
"""

ELEMENTWISE = PRELUDE + """
x = rng.standard_normal(4096).astype(np.float32)
y = rng.standard_normal(4096).astype(np.float32)
dx, dy = cp.asarray(x), cp.asarray(y)
axpy = cp.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 z", "z = a * x + y",
                            "gl_axpy")
checks = {
    "ufuncs": close((cp.sin(dx) * dy + 2).get(), np.sin(x) * y + 2),
    "exp_where": close(cp.where(dx > 0, cp.exp(dx), dy).get(), np.where(x > 0, np.exp(x), y)),
    "elementwise_kernel": close(axpy(np.float32(3), dx, dy).get(), 3 * x + y),
    "broadcast": close((cp.asarray(x.reshape(64, 64)) + dy[:64]).get(), x.reshape(64, 64) + y[:64]),
}
print(json.dumps({"ok": all(checks.values()), "checks": checks}))
"""

REDUCTIONS = PRELUDE + """
x = rng.standard_normal(4096).astype(np.float32)
m = rng.standard_normal((64, 48)).astype(np.float32)
dx, dm = cp.asarray(x), cp.asarray(m)
checks = {
    "sum": bool(np.isclose(float(dx.sum()), float(x.sum(dtype=np.float64)), rtol=1e-4)),
    "max_min": float(dx.max()) == float(x.max()) and float(dx.min()) == float(x.min()),
    "sum_axis0": close(dm.sum(axis=0).get(), m.sum(axis=0)),
    "argmax_axis1": bool(np.array_equal(dm.argmax(axis=1).get(), m.argmax(axis=1))),
    "mean_std": bool(np.isclose(float(dx.mean()), x.mean(), rtol=1e-4, atol=1e-6)
                     and np.isclose(float(dx.std()), x.std(), rtol=1e-4)),
}
sumsq = cp.ReductionKernel("float32 x", "float32 y", "x * x", "a + b", "y = a", "0", "gl_sumsq")
want = float((x.astype(np.float64) ** 2).sum())
checks["reduction_kernel"] = bool(np.isclose(float(sumsq(dx)), want, rtol=1e-4))
big = rng.standard_normal(100000).astype(np.float32)  # many blocks, then one
checks["sum_many_blocks"] = bool(np.isclose(float(cp.asarray(big).sum()),
                                            big.sum(dtype=np.float64), rtol=1e-4))
checks["cumsum"] = bool(np.allclose(cp.cumsum(dx).get(), np.cumsum(x.astype(np.float64)),
                                    rtol=1e-3, atol=1e-3))
checks["sort"] = bool(np.array_equal(cp.sort(dx).get(), np.sort(x)))
half = x.astype(np.float16)
checks["f16_max"] = float(cp.asarray(half).max()) == float(half.max())
shorts = rng.integers(-30000, 30000, 5000).astype(np.int16)
checks["int16_min"] = int(cp.asarray(shorts).min()) == int(shorts.min())
import cupy._core._accelerator as accelerator
checks["accelerators"] = [int(a) for a in accelerator.get_reduction_accelerators()]
ok = all(v is True for k, v in checks.items() if k != "accelerators")
print(json.dumps({"ok": ok, "checks": checks}))
"""

SORTS = PRELUDE + """
x = rng.standard_normal(20000).astype(np.float32)
dx = cp.asarray(x)
labels = rng.integers(0, 50, 3000)
checks = {
    "argsort": bool(np.array_equal(cp.argsort(dx).get(), np.argsort(x, kind="stable"))),
    "unique": bool(np.array_equal(cp.unique(cp.asarray(labels)).get(), np.unique(labels))),
    "boolean_mask": bool(np.array_equal(dx[dx > 1].get(), x[x > 1])),
    "nonzero": bool(np.array_equal(cp.nonzero(dx > 2)[0].get(), np.nonzero(x > 2)[0])),
    "median": bool(np.isclose(float(cp.median(dx)), np.median(x))),
    "searchsorted": bool(np.array_equal(cp.searchsorted(cp.sort(dx), dx[:100]).get(),
                                        np.searchsorted(np.sort(x), x[:100]))),
    "bincount": bool(np.array_equal(cp.bincount(cp.asarray(labels)).get(), np.bincount(labels))),
}
print(json.dumps({"ok": all(checks.values()), "checks": checks}))
"""

RAW_KERNEL = PRELUDE + """
x = rng.standard_normal(5000).astype(np.float32)
y = rng.standard_normal(5000).astype(np.float32)
dx, dy = cp.asarray(x), cp.asarray(y)
raw = cp.RawKernel(r'''
extern "C" __global__ void gl_square_add(const float *a, const float *b, float *out, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) out[i] = a[i] * a[i] + b[i];
}''', "gl_square_add")
out = cp.empty_like(dx)
raw(((x.size + 255) // 256,), (256,), (dx, dy, out, np.int32(x.size)))
module = cp.RawModule(code=r'''
extern "C" __global__ void gl_scale(float *a, float k, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) a[i] *= k;
}''')
scaled = dx.copy()
module.get_function("gl_scale")((20,), (256,), (scaled, np.float32(0.5), np.int32(x.size)))
# Dynamic shared memory above the default 48 KiB: CuPy sets the kernel's limit
# (cuFuncSetAttribute) first, as cuBLAS and PyTorch do.
rev = cp.RawKernel(r'''
extern "C" __global__ void gl_rev(const float *a, float *out, int n) {
    extern __shared__ float tile[];
    int t = threadIdx.x;
    tile[t] = a[t];
    __syncthreads();
    out[t] = tile[n - 1 - t];
}''', "gl_rev")
rev.max_dynamic_shared_size_bytes = 64 * 1024
reversed_ = cp.empty(256, cp.float32)
rev((1,), (256,), (dx, reversed_, np.int32(256)), shared_mem=64 * 1024)
checks = {"raw_kernel": close(out.get(), x * x + y), "raw_module": close(scaled.get(), x * 0.5),
          "dynamic_shared": bool(np.array_equal(reversed_.get(), x[:256][::-1])),
          "shared_limit_reads_back": rev.max_dynamic_shared_size_bytes == 64 * 1024}
print(json.dumps({"ok": all(checks.values()), "checks": checks}))
"""

TOO_BIG_BLOCK = PRELUDE + """
raw = cp.RawKernel('extern "C" __global__ void gl_noop(float *a) { if (a) a[0] = 1; }', "gl_noop")
a = cp.zeros(1, cp.float32)
try:
    raw((1,), (4096,), (a,))
    a.get()
    error = None
except cp.cuda.driver.CUDADriverError as exc:
    error = str(exc).split(":")[0]
raw((1,), (32,), (a,))
print(json.dumps({"ok": error is not None and float(a.get()[0]) == 1.0, "error": error}))
"""

# Nothing beyond what gleam-peer run sets (tests/test_run_environment.py).
CUPY_ENV: dict[str, str] = {}


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cupy-cache")


def run_cupy(mesh, cache_dir, tmp_path, source: str, env: dict | None = None) -> dict:
    client, server = mesh
    program = tmp_path / "program.py"
    program.write_text(source)
    done, verdict = run_through(client, sys.executable, "-W", "ignore", program,
                                env={**CUPY_ENV, "CUPY_CACHE_DIR": str(cache_dir), **(env or {})},
                                timeout=300)
    detail = (f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}\nserver:\n"
              f"{server.log_text()[-2000:]}")
    assert done.returncode == 0 and verdict, detail
    assert verdict["ok"], detail
    assert "not forwarded" not in done.stderr, detail
    return verdict


def test_array_creation_and_copies(mesh, cache_dir, tmp_path):
    run_cupy(mesh, cache_dir, tmp_path, ARRAYS)


def test_ufuncs_and_elementwise_kernels(mesh, cache_dir, tmp_path):
    run_cupy(mesh, cache_dir, tmp_path, ELEMENTWISE)


@pytest.mark.parametrize("accelerators", [None, ""])
def test_reductions(mesh, cache_dir, tmp_path, accelerators):
    """With CuPy's default accelerator (CUB: its compute_100 PTX runs on the host
    device, its tile sizes chosen by the PTX_VERSION the interpreter reports) and
    with CuPy's own reduction kernels."""
    env = {} if accelerators is None else {"CUPY_ACCELERATORS": accelerators}
    verdict = run_cupy(mesh, cache_dir, tmp_path, REDUCTIONS, env)
    assert verdict["checks"]["accelerators"] == ([] if accelerators == "" else [1])  # 1: CUB


def test_sorts_and_selections(mesh, cache_dir, tmp_path):
    """Thrust and CUB's radix sort, select and histogram kernels (their pointer
    parameters declare `.ptr .align 1`, their module megabytes of shared memory)."""
    run_cupy(mesh, cache_dir, tmp_path, SORTS)


def test_raw_kernel_and_raw_module(mesh, cache_dir, tmp_path):
    run_cupy(mesh, cache_dir, tmp_path, RAW_KERNEL)


def test_too_many_threads_is_the_driver_error_for_cupy(mesh, cache_dir, tmp_path):
    """CuPy launches through the driver API: a block over the device's limit is
    CUDA_ERROR_INVALID_VALUE, as on a GPU, and the context stays usable."""
    verdict = run_cupy(mesh, cache_dir, tmp_path, TOO_BIG_BLOCK)
    assert verdict["error"] == "CUDA_ERROR_INVALID_VALUE"
