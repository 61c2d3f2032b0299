"""cuGetErrorName and cuGetErrorString know every CUresult of CUDA 13.0's cuda.h.

The interposer's table is generated (cffi_build/cuda_errors.txt, made by
list_cuda_errors.py from cuda.h and the runtime's messages; gen_errors.py turns it
into C). These tests hold the list to the header it came from, and the built
library to the list.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from .test_interposer_units import BUILD, run_against_built_library

sys.path.insert(0, str(BUILD))
from gen_errors import cuda_errors
from list_cuda_errors import header_errors

CUDA_H = Path("/usr/local/cuda/include/cuda.h")


def test_the_list_parses_the_enum_and_its_comments() -> None:
    header = """
    typedef enum cudaError_enum {
        /**
         * The API call returned with no errors. In the case of query calls, this
         * also means that the operation being queried is complete.
         */
        CUDA_SUCCESS = 0,
        /**
         * \\deprecated
         * This indicates that ::cuInit() failed.
         */
        CUDA_ERROR_NOT_INITIALIZED = 3
    } CUresult;
    """
    assert header_errors(header) == [
        (0, "CUDA_SUCCESS", "The API call returned with no errors"),
        (3, "CUDA_ERROR_NOT_INITIALIZED", "This indicates that cuInit() failed")]


@pytest.mark.skipif(not CUDA_H.exists(), reason="the CUDA toolkit's cuda.h is not installed")
def test_the_list_has_every_code_of_cuda_h() -> None:
    header = CUDA_H.read_text(errors="replace")
    if re.search(r"#define CUDA_VERSION 13000\b", header) is None:
        pytest.skip("the installed cuda.h is not CUDA 13.0's")
    listed = [(code, name) for code, name, _ in cuda_errors()]
    assert listed == [(code, name) for code, name, _ in header_errors(header)]
    assert len(listed) == 101


def test_the_library_names_and_describes_every_code() -> None:
    table = cuda_errors()
    proc = run_against_built_library(f"""
s = ctypes.c_char_p()
for code, name, text in {table!r}:
    assert lib.cuGetErrorName(code, ctypes.byref(s)) == 0, code
    assert s.value.decode() == name, (code, s.value)
    assert lib.cuGetErrorString(code, ctypes.byref(s)) == 0, code
    assert s.value.decode() == text, (code, s.value)
assert lib.cuGetErrorName(12345, ctypes.byref(s)) == 1 and s.value is None
print(len({table!r}))
""")
    assert proc.stdout.split() == [str(len(table))]
    messages = dict((code, text) for code, _, text in table)
    assert messages[1] == "invalid argument" and messages[201] == "invalid device context"
