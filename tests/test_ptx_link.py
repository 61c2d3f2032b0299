"""Linking several inputs on the host device, and cooperative grids.

A link image (cffi_build/include/gl_linkimage.h) holds the inputs of a link as the interposer
keeps them at cuLinkComplete; the host device links their PTX when the image is loaded
(src/hostdev/hostdev_link.c, src/ptx/ptx_linkage.c: the PTX ISA's linking directives). Each
case goes through the executor in-process (tests/cuda_session.py): real call batches, the
real host device. The inputs are written here by hand, small enough to read; nvcc's own output is
checked where nvcc is installed.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.cuda_session import (
    CUBIN,
    FATBIN,
    LIBRARY,
    PTX,
    Session,
    link_image,
    ptx_only_session,
)

CUDA_ERROR_NO_BINARY_FOR_GPU = 209
CUDA_ERROR_INVALID_PTX = 218
CUDA_ERROR_LAUNCH_FAILED = 719
CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# out[i] = twice(i) + bias + pick(): twice and bias come from another input, pick is
# .weak here (100) and may be overridden.
MAIN = HEAD + """
.extern .func (.param .b32 r) twice(.param .b32 x);
.extern .global .u32 bias;
.weak .func (.param .b32 r) pick() { .reg .b32 %r<2>; mov.u32 %r1, 100; st.param.b32 [r], %r1;
  ret; }
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<9>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r4, %ctaid.x; mov.u32 %r5, %ntid.x; mov.u32 %r6, %tid.x;
  mad.lo.u32 %r7, %r4, %r5, %r6;
  { .param .b32 x; st.param.b32 [x], %r7; .param .b32 rv; call.uni (rv), twice, (x);
    ld.param.b32 %r1, [rv]; }
  ld.global.u32 %r2, [bias];
  add.u32 %r1, %r1, %r2;
  { .param .b32 rv; call.uni (rv), pick, (); ld.param.b32 %r3, [rv]; }
  add.u32 %r1, %r1, %r3;
  mul.wide.u32 %rd3, %r7, 4; add.u64 %rd4, %rd1, %rd3; st.global.u32 [%rd4], %r1;
  ret;
}
"""

# twice and bias; a .func named helper that is this input's own; pick at 1000.
LIB = HEAD + """
.visible .global .align 4 .u32 bias = 7;
.func (.param .b32 r) helper(.param .b32 x) { .reg .b32 %r<3>; ld.param.u32 %r1, [x];
  shl.b32 %r2, %r1, 1; st.param.b32 [r], %r2; ret; }
.visible .func (.param .b32 r) twice(.param .b32 x) { .reg .b32 %r<3>; ld.param.u32 %r1, [x];
  { .param .b32 y; st.param.b32 [y], %r1; .param .b32 rv; call.uni (rv), helper, (y);
    ld.param.b32 %r2, [rv]; }
  st.param.b32 [r], %r2; ret; }
.visible .func (.param .b32 r) pick() { .reg .b32 %r<2>; mov.u32 %r1, 1000; st.param.b32 [r],
  %r1; ret; }
"""

# Another input with its own helper of the same name (input-local) and a variable.
OTHER = HEAD + """
.func (.param .b32 r) helper(.param .b32 x) { .reg .b32 %r<2>; mov.u32 %r1, 99999;
  st.param.b32 [r], %r1; ret; }
.visible .global .align 4 .u32 other = 3;
"""

N = 64


def run_linked(s: Session, inputs: list[tuple[int, bytes, str]], grid: int = 1,
               block: int = N) -> tuple[int, list[int]]:
    """Loads the link image, launches k(out) and reads out back: (result, values)."""
    mod = s.load(link_image(inputs))
    fn = s.function(mod, "k")
    out = s.alloc(4 * grid * block)
    s.launch(fn, (grid, 1, 1), (block, 1, 1), struct.pack("<Q", out))
    result = s.sync()
    if result != (0, 0):
        return max(result), []
    return 0, list(struct.unpack(f"<{grid * block}I", s.dtoh(out, 4 * grid * block)))


def ptx(text: str, name: str) -> tuple[int, bytes, str]:
    return (PTX, text.encode(), name)


@pytest.fixture
def s():
    with ptx_only_session() as session:
        yield session


def test_extern_functions_and_variables_resolve_across_inputs(s):
    for order in ([MAIN, LIB, OTHER], [OTHER, LIB, MAIN]):
        names = {MAIN: "main.ptx", LIB: "lib.ptx", OTHER: "other.ptx"}
        result, values = run_linked(s, [ptx(t, names[t]) for t in order])
        # twice is LIB's (its own helper, not OTHER's), bias 7, LIB's .visible pick stands
        assert result == 0 and values == [2 * i + 7 + 1000 for i in range(N)], order


def test_the_first_weak_definition_stands_and_a_visible_one_wins():
    weak_lib = LIB.replace(".visible .func (.param .b32 r) pick",
                           ".weak .func (.param .b32 r) pick")
    for order, want in (((MAIN, weak_lib), 100), ((weak_lib, MAIN), 1000)):
        with ptx_only_session() as s:
            result, values = run_linked(s, [ptx(t, f"in{k}") for k, t in enumerate(order)])
            assert result == 0 and values[5] == 2 * 5 + 7 + want


def test_a_variable_reads_the_definitions_storage(s):
    mod = s.load(link_image([ptx(MAIN, "main.ptx"), ptx(LIB, "lib.ptx")]))
    r, ptr, size = s.global_(mod, "bias")  # cudaMemcpyToSymbol's lookup: the one definition
    assert (r, size) == (0, 4)
    s.htod(ptr, struct.pack("<I", 50))
    fn = s.function(mod, "k")
    out = s.alloc(4 * N)
    s.launch(fn, (1, 1, 1), (N, 1, 1), struct.pack("<Q", out))
    assert s.sync() == (0, 0)
    assert struct.unpack_from("<I", s.dtoh(out, 4 * N), 4 * 3)[0] == 6 + 50 + 1000


@pytest.mark.parametrize("inputs, words", [
    ([MAIN, LIB, LIB], ["'bias' defined twice", "input 'in2'", "also in 'in1'"]),
    ([MAIN], ["call of a function without a body", "twice"]),
    ([MAIN.replace(".extern .func (.param .b32 r) twice", ".extern .func twice").replace(
        "call.uni (rv), twice, (x);\n    ld.param.b32 %r1, [rv];",
        "call.uni twice, (x);\n    mov.u32 %r1, 0;"), LIB],
     ["'twice' declared with other parameters"]),
    ([MAIN.replace(".extern .func (.param .b32 r) twice(.param .b32 x)",
                   ".extern .func (.param .b32 r) twice(.param .b64 x)"), LIB],
     ["'twice' declared with other parameters"]),
    ([MAIN.replace("twice(.param .b32 x);", "twice(.param .b32 x);\n.visible .global .u32 twice;"),
      LIB], ["twice"]),
    ([MAIN.replace(".extern .global .u32 bias;", ".extern .global .u32 bias[4];"), LIB],
     ["larger than the definition", "bias"]),
])
def test_what_the_linking_rules_refuse_names_the_input(s, inputs, words):
    s.load(link_image([ptx(t, f"in{k}") for k, t in enumerate(inputs)]))
    result = s.sync()  # the load is one-way: its error is the next waiting call's
    assert CUDA_ERROR_INVALID_PTX in result, (result, s.notes)
    note = " ".join(s.notes)
    assert "the module's PTX is refused" in note, note
    for word in words:
        assert word in note, (word, note)


def test_an_undefined_variable_is_refused_when_code_uses_it(s):
    text = HEAD + """
.extern .global .u32 nowhere;
.extern .global .u32 unused;
.visible .entry k(.param .u64 out) { .reg .b32 %r<2>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out]; ld.global.u32 %r1, [nowhere]; st.global.u32 [%rd1], %r1; ret; }
"""
    s.load(link_image([ptx(text, "a.ptx"), ptx(OTHER, "b.ptx")]))
    assert CUDA_ERROR_INVALID_PTX in s.sync()
    assert "undefined reference to variable nowhere" in " ".join(s.notes)


COMMON = HEAD + """
.common .global .align 4 .u32 shared_counter{init};
.visible .entry k{suffix}(.param .u64 out) {{ .reg .b32 %r<2>; .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out]; mov.u64 %rd2, shared_counter; st.global.u64 [%rd1], %rd2; ret; }}
"""


def test_common_variables_are_one_and_one_initialiser_at_most(s):
    a = COMMON.format(init="", suffix="")
    b = COMMON.format(init="[4] = {1, 2, 3, 4}", suffix="2").replace(".u32 shared", ".u32 shared")
    mod = s.load(link_image([ptx(a, "a"), ptx(b, "b")]))
    r, ptr, size = s.global_(mod, "shared_counter")
    assert (r, size) == (0, 16)  # the largest stands, with its initialiser
    assert struct.unpack("<4I", s.dtoh(ptr, 16)) == (1, 2, 3, 4)
    two = COMMON.format(init="[2] = {5, 6}", suffix="3")
    s.load(link_image([ptx(b, "b"), ptx(two, "two")]))
    assert CUDA_ERROR_INVALID_PTX in s.sync()
    assert ".common" in " ".join(s.notes)


def elf_cubin(arch: int = 80) -> bytes:
    """The first bytes of an ELF64 cubin: enough to be told apart, never run."""
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<I", head, 0x30, arch)
    return bytes(head)


def test_a_cubin_input_is_refused_by_name(s):
    s.load(link_image([ptx(MAIN, "main.ptx"), (CUBIN, elf_cubin(), "kernels.cubin")]))
    assert CUDA_ERROR_NO_BINARY_FOR_GPU in s.sync()
    note = " ".join(s.notes)
    assert "kernels.cubin" in note and "cubin" in note and "sm_80" in note, note


def test_a_malformed_link_image_is_refused(s):
    image = bytearray(link_image([ptx(MAIN, "main.ptx"), ptx(LIB, "lib.ptx")]))
    image[-20] ^= 0xFF  # the trailer's count of names
    s.load(bytes(image))
    assert s.sync()[1] != 0


# ---------------------------------------------------------------- cooperative grids

# Like numba-cuda's test_sync_at_matrix_row: row r of M gets, in each column, the value
# of the previous row's opposite column plus one, then the grid syncs. Without a grid
# barrier a block reads a row another block has not written yet.
ROWS = HEAD + """
.extern .func (.param .b64 h) cudaCGGetIntrinsicHandle(.param .b32 scope);
.extern .func (.param .b32 r) cudaCGSynchronize(.param .b64 h, .param .b32 flags);
.visible .entry k(.param .u64 m, .param .u32 steps)
{
  .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [m];
  ld.param.u32 %r1, [steps];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
  mad.lo.u32 %r5, %r2, %r3, %r4;
  mov.u32 %r6, %nctaid.x; mul.lo.u32 %r7, %r6, %r3;
  sub.u32 %r8, %r7, 1; sub.u32 %r8, %r8, %r5;
  { .param .b32 s; st.param.b32 [s], 1; .param .b64 rv;
    call.uni (rv), cudaCGGetIntrinsicHandle, (s); ld.param.b64 %rd2, [rv]; }
  mov.u32 %r9, 1;
LOOP:
  setp.gt.u32 %p1, %r9, %r1;
  @%p1 bra DONE;
  sub.u32 %r10, %r9, 1; mad.lo.u32 %r11, %r10, %r7, %r8;
  mul.wide.u32 %rd3, %r11, 4; add.u64 %rd4, %rd1, %rd3; ld.global.u32 %r12, [%rd4];
  add.u32 %r12, %r12, 1;
  mad.lo.u32 %r13, %r9, %r7, %r5;
  mul.wide.u32 %rd5, %r13, 4; add.u64 %rd6, %rd1, %rd5; st.global.u32 [%rd6], %r12;
  { .param .b64 h; st.param.b64 [h], %rd2; .param .b32 f; st.param.b32 [f], 0;
    .param .b32 rv; call.uni (rv), cudaCGSynchronize, (h, f); ld.param.b32 %r14, [rv]; }
  add.u32 %r9, %r9, 1;
  bra LOOP;
DONE:
  ret;
}
"""

def cudadevrt() -> bytes | None:
    """libcudadevrt.a from the CUDA toolkit or NVIDIA's runtime wheel, as numba-cuda finds it."""
    candidates = [Path("/usr/local/cuda/lib64/libcudadevrt.a")]
    try:
        import nvidia.cuda_runtime  # type: ignore[import-not-found]

        candidates += [Path(p) / "lib" / "libcudadevrt.a" for p in nvidia.cuda_runtime.__path__]
    except ImportError:
        pass
    for path in candidates:
        if path.exists():
            return path.read_bytes()
    return None


def rows_module(s: Session) -> int:
    devrt = cudadevrt()
    if devrt is None:
        pytest.skip("no libcudadevrt.a (CUDA toolkit or nvidia-cuda-runtime wheel)")
    return s.load(link_image([ptx(ROWS, "rows.ptx"), (LIBRARY, devrt, "libcudadevrt.a")]))


def run_rows(s: Session, mod: int, blocks: int, threads: int, steps: int,
             cooperative: bool = True) -> tuple[tuple[int, int], list[int]]:
    fn = s.function(mod, "k")
    cols = blocks * threads
    m = s.alloc(4 * cols * (steps + 1))
    s.htod(m, bytes(4 * cols * (steps + 1)))
    s.launch(fn, (blocks, 1, 1), (threads, 1, 1), struct.pack("<QI", m, steps),
             cooperative=cooperative)
    result = s.sync()
    if result != (0, 0):
        return result, []
    return result, list(struct.unpack(f"<{cols * (steps + 1)}I",
                                      s.dtoh(m, 4 * cols * (steps + 1))))


def test_a_cooperative_grid_syncs_through_libcudadevrts_entry_points(s):
    mod = rows_module(s)
    blocks, threads, steps = 8, 32, 12
    result, values = run_rows(s, mod, blocks, threads, steps)
    assert result == (0, 0), s.notes
    cols = blocks * threads
    for row in range(steps + 1):
        assert values[row * cols:(row + 1) * cols] == [row] * cols, row


FACTS = HEAD + """
.extern .func (.param .b32 r) cudaCGGetSize(.param .b64 n, .param .b64 g, .param .b64 h);
.extern .func (.param .b32 r) cudaCGGetRank(.param .b64 t, .param .b64 g, .param .b64 h);
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<6>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;
  mad.lo.u32 %r4, %r1, %r2, %r3;
  mul.wide.u32 %rd2, %r4, 16; add.u64 %rd3, %rd1, %rd2;
  add.u64 %rd4, %rd3, 4; add.u64 %rd5, %rd3, 8; add.u64 %rd6, %rd3, 12;
  { .param .b64 a; .param .b64 b; .param .b64 h; .param .b32 rv; st.param.b64 [a], %rd3;
    st.param.b64 [b], %rd4; st.param.b64 [h], 0; call.uni (rv), cudaCGGetSize, (a, b, h); }
  { .param .b64 a; .param .b64 b; .param .b64 h; .param .b32 rv; st.param.b64 [a], %rd5;
    st.param.b64 [b], %rd6; st.param.b64 [h], 0; call.uni (rv), cudaCGGetRank, (a, b, h); }
  ret;
}
"""


def test_the_grid_size_and_rank_entry_points(s):
    devrt = cudadevrt()
    if devrt is None:
        pytest.skip("no libcudadevrt.a (CUDA toolkit or nvidia-cuda-runtime wheel)")
    mod = s.load(link_image([ptx(FACTS, "facts.ptx"), (LIBRARY, devrt, "libcudadevrt.a")]))
    fn = s.function(mod, "k")
    blocks, threads = 3, 40
    out = s.alloc(16 * blocks * threads)
    s.launch(fn, (blocks, 1, 1), (threads, 1, 1), struct.pack("<Q", out), cooperative=True)
    assert s.sync() == (0, 0), s.notes
    words = struct.unpack(f"<{4 * blocks * threads}I", s.dtoh(out, 16 * blocks * threads))
    for i in range(blocks * threads):  # threads in the grid, grids, rank, grid rank
        assert words[4 * i:4 * i + 4] == (blocks * threads, 1, i, 0), i


def test_a_grid_sync_outside_a_cooperative_launch_traps(s):
    mod = rows_module(s)
    result, _ = run_rows(s, mod, 4, 32, 3, cooperative=False)
    assert CUDA_ERROR_LAUNCH_FAILED in result
    assert "trap" in " ".join(s.notes)


def test_a_cooperative_grid_larger_than_the_device_holds_is_refused(s):
    import os

    mod = rows_module(s)
    cores = os.cpu_count() or 1
    # 1024-thread blocks: two per multiprocessor (a core), as on an 8.0 device
    result, _ = run_rows(s, mod, 2 * cores + 1, 1024, 1)
    assert CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE in result
    assert "does not fit at once" in " ".join(s.notes)
    with ptx_only_session() as fresh:  # the refusal is the launch's, the session goes on
        result, values = run_rows(fresh, rows_module(fresh), 2 * cores, 1024, 1)
        assert result == (0, 0) and values[-1] == 1


def test_a_link_without_libcudadevrt_does_not_resolve_grid_sync(s):
    s.load(link_image([ptx(ROWS, "rows.ptx"), ptx(OTHER, "other.ptx")]))
    assert CUDA_ERROR_INVALID_PTX in s.sync()
    assert "cudaCGGetIntrinsicHandle" in " ".join(s.notes)


# nvcc inlines cooperative groups' grid barrier: the workspace in %envreg1:2.
GRID_SYNC_CU = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ int twice(int x);
extern "C" __global__ void k(int *a, int n) {
  cg::grid_group g = cg::this_grid();
  int i = g.thread_rank();
  atomicAdd(a, 1);
  g.sync();
  if (i < n) a[1 + i] = twice(a[0]);
}
"""
TWICE_CU = "__device__ int twice(int x) { return 2 * x; }\n"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_separate_compilation_and_inlined_grid_sync(s, tmp_path):
    fatbins = []
    for name, src in (("sync", GRID_SYNC_CU), ("twice", TWICE_CU)):
        (tmp_path / f"{name}.cu").write_text(src)
        subprocess.run(["nvcc", "-rdc=true", "-fatbin", "-arch=sm_80", "-o",
                        str(tmp_path / f"{name}.fatbin"), str(tmp_path / f"{name}.cu")],
                       check=True, capture_output=True)
        fatbins.append((FATBIN, (tmp_path / f"{name}.fatbin").read_bytes(), f"{name}.fatbin"))
    mod = s.load(link_image(fatbins))
    fn = s.function(mod, "k")
    blocks, threads = 4, 64
    n = blocks * threads
    a = s.alloc(4 * (n + 1))
    s.htod(a, bytes(4 * (n + 1)))
    s.launch(fn, (blocks, 1, 1), (threads, 1, 1), struct.pack("<QI", a, n), cooperative=True)
    assert s.sync() == (0, 0), s.notes
    values = struct.unpack(f"<{n + 1}I", s.dtoh(a, 4 * (n + 1)))
    assert values[0] == n and set(values[1:]) == {2 * n}
