"""gleam's graph structs (cffi_build/include/gl_cuda_graph.h, written from NVIDIA's
documentation) lay out as NVIDIA's cuda.h does: a program's CUDA_KERNEL_NODE_PARAMS,
CUgraphNodeParams, CUDA_MEM_ALLOC_NODE_PARAMS ... are read member by member."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest

from gleam.peer.cuda.examples import ExampleError, cuda_include

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "interposer" / "graph_layout.c"


def layout(tmp_path: Path, name: str, *flags: str) -> list[str]:
    exe = tmp_path / name
    subprocess.run(["gcc", "-std=gnu11", *flags, str(SOURCE), "-o", str(exe)], check=True,
                   capture_output=True, timeout=120)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                          timeout=60).stdout.splitlines()


def headers() -> list[Path]:
    found = [Path("/usr/local/cuda/include")]
    with contextlib.suppress(ExampleError):  # (the wheel's header is optional)
        found.append(cuda_include())
    return [h for h in found if (h / "cuda.h").is_file()]


def test_graph_structs_match_nvidias_header(tmp_path):
    if shutil.which("gcc") is None or not headers():
        pytest.skip("gcc or NVIDIA's cuda.h is not here")
    ours = layout(tmp_path, "gleam", "-DGLEAM", f"-I{ROOT / 'cffi_build' / 'include'}")
    assert len(ours) > 20
    for i, include in enumerate(headers()):
        assert layout(tmp_path, f"nvidia{i}", f"-I{include}") == ours, include
