"""numba-cuda ``@cuda.jit`` programs, unchanged, through gleam on a host-backend peer.

Each program is plain numba-cuda: it compiles its kernel with NVVM in the
application process, links it (cuLink*, answered by the interposer), loads it
(cuLibraryLoadData), launches it (cuLaunchKernelEx with the CUkernel) and
checks the result against numpy, printing one JSON verdict. The agents are two
real processes on loopback: a client without a device and a server with the
host backend, whose PTX interpreter runs the kernels.

numba-cuda links with nvJitLink when that library is installed; its output is
SASS only, which the host device cannot run, so these tests need the driver's
linker path (docs/cuda-forwarding.md, "numba-cuda").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gleam.peer.localmesh import LocalMesh

pytestmark = pytest.mark.slow

PRELUDE = """
import json
import numpy as np
from numba import cuda, float32
"""

ELEMENTWISE = PRELUDE + """
@cuda.jit
def axpb(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * 2.0 + b[i]

n = 1000
a = np.arange(n, dtype=np.float32)
b = np.linspace(-1, 1, n).astype(np.float32)
out = cuda.device_array_like(a)
axpb[(n + 127) // 128, 128](cuda.to_device(a), cuda.to_device(b), out)
got = out.copy_to_host()
print(json.dumps({"ok": bool(np.allclose(got, a * 2 + b)), "n": n}))
"""

REDUCTION = PRELUDE + """
TPB = 128

@cuda.jit
def block_sums(x, partial):
    sm = cuda.shared.array(TPB, dtype=float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sm[0]

n = 5000
x = (np.arange(n) % 7).astype(np.float32)
blocks = (n + TPB - 1) // TPB
partial = cuda.device_array(blocks, dtype=np.float32)
block_sums[blocks, TPB](cuda.to_device(x), partial)
got = partial.copy_to_host()
want = np.array([x[k * TPB:(k + 1) * TPB].sum() for k in range(blocks)], dtype=np.float32)
print(json.dumps({"ok": bool(np.array_equal(got, want)), "total": float(got.sum())}))
"""

ATOMICS = PRELUDE + """
@cuda.jit
def histogram(keys, weights, counts, sums, top):
    i = cuda.grid(1)
    if i < keys.size:
        k = keys[i]
        cuda.atomic.add(counts, k, 1)
        cuda.atomic.add(sums, k, weights[i])
        cuda.atomic.max(top, 0, k)

n, bins = 4096, 16
keys = (np.arange(n) * 7 % bins).astype(np.int32)
weights = (np.arange(n) % 4).astype(np.float32) * 0.25
counts = cuda.to_device(np.zeros(bins, dtype=np.int32))
sums = cuda.to_device(np.zeros(bins, dtype=np.float32))
top = cuda.to_device(np.zeros(1, dtype=np.int32))
histogram[(n + 255) // 256, 256](cuda.to_device(keys), cuda.to_device(weights), counts, sums,
                                 top)
c, s, t = counts.copy_to_host(), sums.copy_to_host(), top.copy_to_host()
ok = (np.array_equal(c, np.bincount(keys, minlength=bins))
      and np.allclose(s, np.bincount(keys, weights=weights, minlength=bins))
      and int(t[0]) == bins - 1)
print(json.dumps({"ok": bool(ok), "counts": c.tolist()}))
"""

OCCUPANCY = PRELUDE + """
from cuda.bindings import driver as cu

@cuda.jit
def bump(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1

a = cuda.to_device(np.zeros(10, np.float32))
bump[1, 32](a)
func = bump.overloads[bump.signatures[0]]._codelibrary.get_cufunc()  # its handle: a CUkernel
ctx = cuda.current_context()
h = cu.CUfunction(int(func.handle))
err, min_grid, block = cu.cuOccupancyMaxPotentialBlockSize(h, 0, 0, 256)
sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
print(json.dumps({
    "ok": bool(a.copy_to_host()[0] == 1) and int(err) == 0,
    "fits": ctx.get_active_blocks_per_multiprocessor(func, 128, 0),
    "too_big": ctx.get_active_blocks_per_multiprocessor(func, 2048, 0),
    "max_threads": func.attrs.maxthreads,
    "block": block, "min_grid_per_sm": min_grid / sms,
}))
"""


GRID_SYNC = PRELUDE + """
from numba.cuda import int32

# numba-cuda's grid sync calls cudaCGGetIntrinsicHandle and cudaCGSynchronize, so it links
# libcudadevrt (a second input to cuLinkComplete) and launches cooperatively.
@cuda.jit("void(int32[:, ::1])")
def rows(m):
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    for row in range(1, m.shape[0]):
        m[row, col] = m[row - 1, m.shape[1] - col - 1] + 1
        g.sync()

overload = rows.overloads[(int32[:, ::1],)]
blocks = min(overload.max_cooperative_grid_blocks(32), 8)
m = np.zeros((20, 32 * blocks), dtype=np.int32)
rows[blocks, 32](m)
want = np.tile(np.arange(m.shape[0]), (m.shape[1], 1)).T
print(json.dumps({"ok": bool(np.array_equal(m, want)), "cooperative": overload.cooperative,
                  "blocks": blocks}))
"""

# numba's calling convention for declare_device: the result through a pointer, a status
# returned (a declaration that disagrees is refused at the link, naming the function).
LINKED_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .func (.param .b32 status) triple(.param .b64 result, .param .b32 x)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [result];
  ld.param.u32 %r1, [x];
  mul.lo.u32 %r2, %r1, 3;
  st.u32 [%rd1], %r2;
  st.param.b32 [status], 0;
  ret;
}
"""

LINK_FILE = PRELUDE + """
import sys
from numba.cuda import int32

triple = cuda.declare_device("triple", "int32(int32)")

@cuda.jit(link=[sys.argv[1]])
def k(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = triple(i) + 1

out = np.zeros(100, dtype=np.int32)
k[1, 128](out)
print(json.dumps({"ok": bool(np.array_equal(out, np.arange(100) * 3 + 1))}))
"""

# numba's max_registers reaches the driver as cuLinkCreate's CU_JIT_MAX_REGISTERS for a
# link of one PTX: NUM_REGS must not report more than the limit (numba-cuda's
# test_linker::test_set_registers_*), and without the limit the kernel reports more.
MAX_REGISTERS = PRELUDE + """
from numba.cuda import void, float64, int64

def many(x, a, b, c, d, e, f):
    a1 = a2 = a3 = a4 = a5 = b1 = b2 = b3 = b4 = b5 = c1 = c2 = c3 = c4 = c5 = 1.0
    d1 = d2 = d3 = d4 = d5 = 10
    for i in range(a):
        a1 += b; a2 += c; a3 += d; a4 += e; a5 += f
        b1 *= b; b2 *= c; b3 *= d; b4 *= e; b5 *= f
        c1 /= b; c2 /= c; c3 /= d; c4 /= e; c5 /= f
        d1 <<= b; d2 <<= c; d3 <<= d; d4 <<= e; d5 <<= f
    x[cuda.grid(1)] = a1 + a2 + a3 + a4 + a5 + b1 + b2 + b3 + b4 + b5
    x[cuda.grid(1)] += c1 + c2 + c3 + c4 + c5 + d1 + d2 + d3 + d4 + d5

sig = void(float64[::1], int64, int64, int64, int64, int64, int64)
limited = cuda.jit(sig, max_registers=24)(many)
free = cuda.jit(sig)(many)
x = cuda.to_device(np.zeros(1))
limited[1, 1](x, 2, 1, 1, 1, 1, 1)
want = x.copy_to_host()[0]
free[1, 1](x, 2, 1, 1, 1, 1, 1)
print(json.dumps({"ok": bool(x.copy_to_host()[0] == want), "limited": limited.get_regs_per_thread(),
                  "free": free.get_regs_per_thread()}))
"""

# A numba launch into cuda.core's GraphBuilder (numba-cuda's
# test_cuda_core_graph_builder_launch_user_facing): completing the graph retains the
# launch's arguments through a user object (cuUserObjectCreate, cuGraphRetainUserObject).
GRAPH_BUILDER = PRELUDE + """
from cuda.core import Device

@cuda.jit
def fill(a):
    i = cuda.grid(1)
    if i < len(a):
        a[i] = i

dev = Device()
dev.set_current()
stream = dev.create_stream()
ary = cuda.to_device(np.zeros(100, np.int64), stream=stream)
stream.sync()
builder = dev.create_graph_builder()
builder.begin_building()
fill[1, 100, builder](ary)
graph = builder.end_building().complete()
graph.launch(stream)
stream.sync()
print(json.dumps({"ok": bool(np.array_equal(ary.copy_to_host(), np.arange(100)))}))
"""


def _numba_ready() -> str | None:
    """Why numba-cuda programs cannot run here, or None when they can."""
    try:
        from numba import cuda
        from numba.cuda.cudadrv import driver
    except ImportError as exc:
        return f"numba-cuda is not installed ({exc})"
    try:
        cuda.compile_ptx(lambda a: None, "(float32[:],)", cc=(8, 0))
    except Exception as exc:  # NVVM or NVRTC missing: numba raises several kinds
        return f"numba-cuda cannot compile: NVVM/NVRTC not found ({type(exc).__name__}: {exc})"
    if driver._have_nvjitlink():
        return ("nvJitLink is installed, so numba-cuda links to SASS, which the host device "
                "cannot run (uninstall nvidia-nvjitlink; docs/cuda-forwarding.md)")
    return None


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    why = _numba_ready()
    if why is not None:
        pytest.skip(why)
    mesh = LocalMesh(tmp_path_factory.mktemp("mesh"))
    try:
        yield mesh.serving_pair()
    finally:
        mesh.close()


def run_numba(client, server, tmp_path: Path, source: str, *args: str) -> dict:
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(source))
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path), "--",
         sys.executable, "-W", "ignore", str(program), *args],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "0"},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    detail = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}\nserver:\n" \
             f"{server.log_text()[-2000:]}"
    assert done.returncode == 0 and lines, detail
    verdict = json.loads(lines[-1])
    assert verdict["ok"], detail
    assert "not forwarded" not in done.stderr, detail
    return verdict


def test_elementwise_kernel(mesh, tmp_path):
    assert run_numba(*mesh, tmp_path, ELEMENTWISE)["n"] == 1000


def test_shared_memory_reduction_with_syncthreads(mesh, tmp_path):
    assert run_numba(*mesh, tmp_path, REDUCTION)["total"] == float(sum(k % 7 for k in range(5000)))


def test_atomics_on_int32_and_float32(mesh, tmp_path):
    assert sum(run_numba(*mesh, tmp_path, ATOMICS)["counts"]) == 4096


def test_kernel_attributes_and_occupancy_through_a_cukernel(mesh, tmp_path):
    verdict = run_numba(*mesh, tmp_path, OCCUPANCY)
    # the host device keeps an 8.0 device's residency per core (its multiprocessors):
    # 2048 threads, so 16 blocks of 128; the largest block of full occupancy is 256
    assert (verdict["fits"], verdict["too_big"]) == (16, 0)
    assert verdict["max_threads"] == 1024
    assert (verdict["block"], verdict["min_grid_per_sm"]) == (256, 8)


def test_grid_sync_links_libcudadevrt_and_runs_a_cooperative_grid(mesh, tmp_path):
    verdict = run_numba(*mesh, tmp_path, GRID_SYNC)
    assert verdict["cooperative"] and verdict["blocks"] == 8


def test_a_kernel_linked_with_a_ptx_file(mesh, tmp_path):
    ptx = tmp_path / "triple.ptx"
    ptx.write_text(LINKED_PTX)
    run_numba(*mesh, tmp_path, LINK_FILE, str(ptx))


def test_max_registers_reaches_the_linker_and_bounds_num_regs(mesh, tmp_path):
    verdict = run_numba(*mesh, tmp_path, MAX_REGISTERS)
    assert verdict["free"] > 24 >= verdict["limited"], verdict


def test_a_launch_into_a_cuda_core_graph_builder(mesh, tmp_path):
    run_numba(*mesh, tmp_path, GRAPH_BUILDER)
