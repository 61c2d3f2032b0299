"""Building the example CUDA programs (examples/cuda) for the demo, benchmarks and tests.

The examples are ordinary driver-API programs. They compile with gcc against
NVIDIA's own ``cuda.h`` from the ``nvidia-cuda-runtime-cu12`` wheel (no CUDA
toolkit needed) and link against gleam's interposer, so the binary that runs
here through ``gleam-peer run`` would run unchanged on a machine with a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
EXAMPLES_DIR = PACKAGE_DIR.parents[1] / "examples" / "cuda"
KERNELS_PTX = PACKAGE_DIR / "ptx" / "kernels.ptx"
KERNELS_FATBIN = PACKAGE_DIR / "ptx" / "kernels.fatbin"


class ExampleError(Exception):
    """An example cannot be built here; the message says what is missing."""


def interposer_dir() -> Path:
    """The directory holding gleam's ``libcuda.so.1`` (what ``gleam-peer lib`` prints)."""
    return PACKAGE_DIR / "lib"


def cuda_include() -> Path:
    """NVIDIA's ``cuda.h`` directory, from the nvidia-cuda-runtime-cu12 wheel."""
    try:
        import nvidia.cuda_runtime as runtime
    except ImportError as exc:
        raise ExampleError(
            "NVIDIA's cuda.h is needed to build the examples: "
            "pip install nvidia-cuda-runtime-cu12 (no GPU or toolkit needed)"
        ) from exc
    include = Path(next(iter(runtime.__path__))) / "include"
    if not (include / "cuda.h").is_file():
        raise ExampleError(f"no cuda.h in {include}")
    return include


def build_example(name: str, out_dir: Path) -> Path:
    """Compile ``examples/cuda/<name>.c`` into ``out_dir/<name>`` and return its path."""
    source = EXAMPLES_DIR / f"{name}.c"
    if not source.is_file():
        raise ExampleError(f"example source {source} not found (run from a gleam checkout)")
    compiler = shutil.which(os.environ.get("CC", "gcc"))
    if compiler is None:
        raise ExampleError("a C compiler (gcc) is needed to build the examples")
    lib = interposer_dir()
    if not (lib / "libcuda.so.1").is_file():
        raise ExampleError(f"the interposer is not built ({lib}/libcuda.so.1 missing)")
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / name
    cmd = [compiler, "-O2", "-std=gnu11", "-Wall", "-Wextra", "-I", str(cuda_include()),
           "-o", str(binary), str(source), "-L", str(lib), "-l:libcuda.so.1", "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ExampleError(f"building {name} failed:\n{done.stderr}")
    return binary
