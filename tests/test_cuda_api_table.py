"""The declarative CUDA API table and what the build generates from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "cffi_build"))

import cuda_api  # noqa: E402
import gen_cuda  # noqa: E402
from cuda_api import ONEWAY, WAITING, Row, s  # noqa: E402

# Every entry point issue #4 names, by the symbol NVIDIA's headers make programs call.
_REQUIRED_TEXT = """
cuInit cuDriverGetVersion cuGetProcAddress cuGetProcAddress_v2 cuGetErrorName cuGetErrorString
cuDeviceGet cuDeviceGetCount cuDeviceGetName cuDeviceGetAttribute cuDeviceTotalMem_v2
cuDeviceGetUuid cuDeviceGetUuid_v2 cuDeviceComputeCapability
cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxGetState
cuDevicePrimaryCtxSetFlags_v2 cuDevicePrimaryCtxReset_v2
cuCtxCreate_v2 cuCtxCreate_v4 cuCtxDestroy_v2 cuCtxSetCurrent cuCtxGetCurrent cuCtxGetDevice
cuCtxSynchronize cuCtxPushCurrent_v2 cuCtxPopCurrent_v2
cuMemAlloc_v2 cuMemFree_v2 cuMemGetInfo_v2 cuMemGetAddressRange_v2
cuMemAllocHost_v2 cuMemFreeHost cuMemHostAlloc
cuMemcpyHtoD_v2 cuMemcpyDtoH_v2 cuMemcpyDtoD_v2 cuMemcpyHtoDAsync_v2 cuMemcpyDtoHAsync_v2
cuMemcpyDtoDAsync_v2 cuMemcpy cuMemcpyAsync
cuMemsetD8_v2 cuMemsetD16_v2 cuMemsetD32_v2 cuMemsetD8Async cuMemsetD16Async cuMemsetD32Async
cuModuleLoadData cuModuleLoadDataEx cuModuleUnload cuModuleGetFunction cuModuleGetGlobal_v2
cuLibraryLoadData cuLibraryGetKernel cuKernelGetFunction cuFuncGetAttribute cuFuncGetParamInfo
cuLaunchKernel cuStreamCreate cuStreamCreateWithPriority cuStreamDestroy_v2 cuStreamSynchronize
cuStreamQuery cuStreamWaitEvent cuEventCreate cuEventRecord cuEventSynchronize cuEventQuery
cuEventElapsedTime cuEventElapsedTime_v2 cuEventDestroy_v2 cuPointerGetAttribute
cuMemcpyHtoD_v2_ptds cuMemcpyHtoDAsync_v2_ptsz cuLaunchKernel_ptsz cuStreamSynchronize_ptsz
"""
REQUIRED = frozenset(_REQUIRED_TEXT.split())


def exported_symbols() -> set[str]:
    return {name for row in cuda_api.ROWS for name, *_ in gen_cuda.exported(row)}


def test_every_required_entry_point_is_exported():
    missing = sorted(REQUIRED - exported_symbols())
    assert not missing


def test_rows_parse_and_wire_calls_have_ids_in_table_order(tmp_path):
    gen_cuda.generate(tmp_path)
    header = (tmp_path / "gl_calls.h").read_text()
    wire = [r for r in cuda_api.ROWS if r.wire]
    for index, row in enumerate(wire):
        assert f"GL_CALL_{row.name} = {index}," in header
    assert f"GL_CALL_COUNT = {len(wire)}" in header


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (Row("x", "int *p", ONEWAY, (s("x", 1),), {"p": "out"}), "only waiting calls"),
        (Row("x", "CUstream h", ONEWAY, (s("x", 1),), {"h": "h:nonsense"}), "unknown handle"),
        (Row("x", "int a", ONEWAY, (s("x", 1),), {"b": "cstr"}), "missing parameters"),
        (Row("x", "const char *a, const void *b, size_t n", WAITING, (s("x", 1),),
             {"a": "cstr", "b": "hin:n"}), "one payload"),
        (Row("x", "int", ONEWAY, (s("x", 1),)), "cannot parse"),
        (Row("x", "void *d, size_t n", WAITING, (s("x", 1),), {"d": "hsome:n"}),
         "hsome needs an out"),
    ],
)
def test_generator_rejects_rows_it_cannot_honour(row, message):
    with pytest.raises(SystemExit, match=message):
        gen_cuda.parse(row)


def test_generated_sources_compile_cleanly(tmp_path):
    gen_cuda.generate(tmp_path)
    include = ["-I", str(ROOT / "cffi_build" / "include"), "-I", str(ROOT / "cffi_build" / "src"),
               "-I", str(ROOT / "cffi_build" / "interposer"), "-I", str(tmp_path)]
    for source in ("gl_dispatch.c", "gl_stubs.c"):
        done = subprocess.run(
            ["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", *include,
             str(tmp_path / source)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_the_built_interposer_exports_the_table_and_the_drivers_other_names():
    from gleam.peer.cuda.examples import interposer_dir

    lib = interposer_dir() / "libcuda.so.1"
    if not lib.exists():
        pytest.fail(f"the interposer was not built: {lib}")
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                        check=True)
    defined = {line.split()[-1] for line in nm.stdout.splitlines() if " T " in line}
    # The table's symbols, and a stub for each other name of NVIDIA's driver.
    table = exported_symbols()
    stubs = set(gen_cuda.unforwarded_names(table))
    assert not table & stubs
    assert {name for name in defined if name.startswith("cu")} == table | stubs


@pytest.mark.parametrize("expr", ["n + 1", "span(p, n)", "a * b * c", "n * -4"])
def test_size_expressions_outside_the_grammar_are_refused(expr):
    row = Row("x", "CUdeviceptr d, size_t n, size_t p, size_t a, size_t b, size_t c", ONEWAY,
              (s("x", 1),), {"d": f"dptr:{expr}"})
    with pytest.raises(SystemExit, match="size expression"):
        gen_cuda.size_lines(next(p for p in gen_cuda.parse(row) if p.name == "d"))


def test_span_expressions_are_checked_without_wrapping():
    row = next(r for r in cuda_api.ROWS if r.name == "glMemcpy2DDtoD")
    dst = next(p for p in gen_cuda.parse(row) if p.name == "dst")
    assert "gl_span_bytes((uint64_t)dpitch, (uint64_t)width, (uint64_t)height" in \
        gen_cuda.size_lines(dst)


def test_an_hsome_reply_carries_as_many_bytes_as_its_count_says():
    """glMirrorPull's reply is what the call used, checked against its bound."""
    row = next(r for r in cuda_api.ROWS if r.name == "glMirrorPull")
    code = gen_cuda.gen_decoder(row, gen_cuda.parse(row))
    assert "if ((uint64_t)v_used > sz_diff)" in code
    assert "o->len = (size_t)v_used;" in code and "o->len = (size_t)sz_diff" not in code


def test_a_checkpoint_drops_exactly_the_rows_flagged_data():
    from gleam.peer.cuda.client import checkpoint
    from gleam.peer.cuda.wire.calls import call_ids

    ids = call_ids()
    flagged = {r.name for r in cuda_api.ROWS if r.data}
    assert flagged == checkpoint.DATA_CALLS
    assert flagged <= ids.keys()
    # The bitmap handed to gl_journal_compact keeps every other call, by its id.
    for name, i in ids.items():
        kept = bool(checkpoint._KEEP[i // 8] >> (i % 8) & 1)
        assert kept == (name not in flagged), name


def test_only_wire_rows_may_be_dropped_by_a_checkpoint():
    row = Row("x", "int a", cuda_api.LOCAL, (s("x", 1),), data=True)
    with pytest.raises(SystemExit, match="data is for wire rows"):
        gen_cuda.check_rows((row,))


def test_python_takes_cuda_error_numbers_from_the_native_table() -> None:
    from gleam.peer.nativelib import cuda_error, ffi, lib

    # cuda.h's numbers (stable since CUDA 1.0 and 3.0), as the table has them.
    assert cuda_error("CUDA_ERROR_INVALID_HANDLE") == 400
    assert cuda_error("CUDA_ERROR_ILLEGAL_ADDRESS") == 700
    assert cuda_error("CUDA_ERROR_NOT_SUPPORTED") == 801
    for code in (1, 2, 201, 700, 719, 999):  # and the two directions agree
        assert cuda_error(ffi.string(lib.gl_cuda_error_name(code)).decode()) == code
    with pytest.raises(ValueError, match="no error named"):
        cuda_error("CUDA_ERROR_NOT_A_THING")
