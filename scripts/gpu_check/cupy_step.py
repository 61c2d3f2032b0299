"""The CuPy step of scripts/gpu-check.sh: arrays, kernels, reductions and a matmul.

Checks each result against numpy and writes ``--out`` as JSON: ``checks``
(name → bool), ``outputs`` (name → list of floats, which compare.py holds
against the run without gleam) and ``wall_s``. The matmul runs cuBLAS's
machine code, which only a real GPU runs (the host device cannot).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="where the JSON result goes")
    p.add_argument("--n", type=int, default=512, help="matmul size (n x n, float32)")
    return p.parse_args(argv)


def run(n: int) -> dict[str, Any]:
    import cupy as cp  # type: ignore[import-untyped]
    import numpy as np

    rng = np.random.default_rng(7)
    x = rng.standard_normal(1 << 16).astype(np.float32)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    start = time.perf_counter()
    dx = cp.asarray(x)
    axpy = cp.ElementwiseKernel("float32 a, float32 x", "float32 z", "z = a * x + 1", "gl_axpy")
    raw = cp.RawKernel(r'''
extern "C" __global__ void gl_square(const float *a, float *out, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) out[i] = a[i] * a[i];
}''', "gl_square")
    sq = cp.empty_like(dx)
    raw(((x.size + 255) // 256,), (256,), (dx, sq, np.int32(x.size)))
    mm = cp.asarray(a) @ cp.asarray(b)
    got = {"elementwise": (axpy(np.float32(2), dx)).get(), "ufunc": cp.sin(dx).get(),
           "raw_kernel": sq.get(), "matmul": mm.get()}
    sums = {"sum": float(dx.sum()), "max": float(dx.max())}
    wall = time.perf_counter() - start
    want_mm = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    checks = {
        "elementwise": bool(np.allclose(got["elementwise"], 2 * x + 1, rtol=1e-5, atol=1e-6)),
        "ufunc": bool(np.allclose(got["ufunc"], np.sin(x), rtol=1e-5, atol=1e-6)),
        "raw_kernel": bool(np.allclose(got["raw_kernel"], x * x, rtol=1e-5, atol=1e-6)),
        "sum": bool(np.isclose(sums["sum"], float(x.astype(np.float64).sum()), rtol=1e-3)),
        "max": sums["max"] == float(x.max()),
        # float32 products of n terms: the error grows with sqrt(n).
        "matmul": bool(np.allclose(got["matmul"], want_mm, rtol=1e-3, atol=1e-3 * n ** 0.5)),
    }
    outputs = {k: [float(v) for v in arr.reshape(-1)[:4096]] for k, arr in got.items()}
    outputs.update({k: [v] for k, v in sums.items()})
    return {"checks": checks, "ok": all(checks.values()), "outputs": outputs, "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args.n)
    with open(args.out, "w") as f:
        json.dump({"step": "cupy", **result}, f)
    print(json.dumps({"ok": result["ok"], "checks": result["checks"], "wall_s": result["wall_s"]}))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
