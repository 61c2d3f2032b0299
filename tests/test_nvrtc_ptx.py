"""NVRTC makes PTX where a program asks for a cubin (libgleam_nvrtc.so, which
``gleam-peer run`` preloads; docs/cuda-forwarding.md, "NVRTC").

The option rewrite is tested against NVIDIA's real NVRTC, with and without the
preloaded library (tests/nvrtc/nvrtc_options.c: NVRTC only, no device): every way of
naming a real architecture gives PTX as the cubin, byte for byte, with the size
nvrtcGetCUBINSize said; everything else, errors and logs included, is NVRTC's own
answer. Then a program that compiles for sm_75 with NVRTC and loads the cubin (and
links two of them as CU_JIT_INPUT_CUBIN) runs through two real agents on the host
device. Skipped without nvcc or NVRTC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gleam.peer.conformance.toolchain import (
    Library,
    ToolchainError,
    find_library,
    find_nvcc,
    toolkit_root,
)
from gleam.peer.run_cmd import NVRTC_PRELOAD, interposer_dir

from .cuda_mesh import host_mesh, run_through

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cuda"


def _nvrtc() -> tuple[Path, Library]:
    try:
        nvcc = find_nvcc(None)
    except ToolchainError:
        pytest.skip("nvcc (the CUDA toolkit) is not installed")
    library = find_library(toolkit_root(nvcc), "nvrtc", "nvrtc.h")
    if library is None:
        pytest.skip("NVRTC is not installed (the toolkit's or cuda-toolkit[nvrtc])")
    return nvcc, library


def _build(source: Path, out: Path, *flags: str) -> Path:
    nvcc, nvrtc = _nvrtc()
    done = subprocess.run([str(nvcc), "-o", str(out), str(source), *nvrtc.link_flags(), *flags],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"nvcc {source.name}:\n{done.stderr}")
    return out


@pytest.fixture(scope="module")
def options_probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(ROOT / "tests" / "nvrtc" / "nvrtc_options.c",
                  tmp_path_factory.mktemp("nvrtc") / "nvrtc_options")


def answer(probe: Path, *options: str, preload: bool = True,
           env: dict[str, str] | None = None) -> dict[str, object]:
    """What NVRTC answered the probe's compile with these options."""
    extra = {"LD_PRELOAD": str(interposer_dir() / NVRTC_PRELOAD)} if preload else {}
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GLEAM_TRACE")}
    done = subprocess.run([str(probe), *options], capture_output=True, text=True, timeout=120,
                          env={**base, **extra, **(env or {})})
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("options", [
    ["--gpu-architecture=sm_75"], ["-arch=sm_75"], ["-arch", "sm_75"],
    ["--gpu-architecture", "sm_75"], ["-default-device", "-arch=sm_75", "-lineinfo"],
])
def test_a_real_architecture_gives_ptx_as_the_cubin(options_probe, options):
    """Without the rewrite the cubin is an ELF file of sm_75 SASS."""
    got = answer(options_probe, *options)
    assert got["compile"] == 0 and got["cubin"] == "ptx" and got["cubin_is_ptx"], got
    assert got["target"] == "sm_75" and got["cubin_size_result"] == got["cubin_result"] == 0
    assert answer(options_probe, *options, preload=False)["cubin"] == "elf"


def test_an_architecture_suffix_is_kept(options_probe):
    """sm_90a's virtual architecture is compute_90a (its PTX targets sm_90a), not compute_90."""
    got = answer(options_probe, "--gpu-architecture=sm_90a")
    assert got["cubin"] == "ptx" and got["target"] == "sm_90a", got


def test_the_last_architecture_wins_as_in_nvrtc(options_probe):
    got = answer(options_probe, "-arch=sm_75", "--gpu-architecture=sm_80")
    own = answer(options_probe, "-arch=sm_75", "--gpu-architecture=sm_80", preload=False)
    assert got["cubin"] == "ptx" and got["target"] == own["target"] == "sm_80"
    assert got["log"] == own["log"] != ""  # NVRTC's warning about the first one, unchanged


@pytest.mark.parametrize("options", [
    [],                                   # NVRTC's default is a virtual architecture
    ["-arch=compute_75"],                 # virtual already
    ["-arch=sm_75", "-dlto"],             # LTO IR, which the architecture shapes
    ["-arch=sm_12"],                      # NVRTC's error, and its log
    ["-arch=native"],
    ["-arch", "sm_75", "--no-such-option"],
    ["-arch"],                            # the name without its value
], ids=["none", "compute", "dlto", "bad-arch", "native", "bad-option", "no-value"])
def test_everything_else_is_nvrtcs_own_answer(options_probe, options):
    assert answer(options_probe, *options) == answer(options_probe, *options, preload=False)


def test_gleam_nvrtc_ptx_0_turns_it_off(options_probe):
    off = answer(options_probe, "-arch=sm_75", env={"GLEAM_NVRTC_PTX": "0"})
    assert off == answer(options_probe, "-arch=sm_75", preload=False)
    assert off["cubin"] == "elf"


# Python's ctypes opens a library RTLD_LOCAL: NVRTC, which that library links, is then not
# in the process's global scope, where dlsym(RTLD_NEXT) looks from the preloaded wrapper.
LOCAL_CALLER = """
import ctypes, sys
probe = ctypes.CDLL(sys.argv[1])
args = [b"nvrtc_probe", *(a.encode() for a in sys.argv[2:])]
sys.exit(probe.nvrtc_probe(len(args), (ctypes.c_char_p * len(args))(*args)))
"""


def test_nvrtc_reached_through_a_library_opened_rtld_local(tmp_path):
    """The wrapper finds the loaded libnvrtc itself (without that: every call was
    NVRTC_ERROR_INTERNAL_ERROR, 'no libnvrtc is loaded in this process')."""
    library = _build(ROOT / "tests" / "nvrtc" / "nvrtc_options.c", tmp_path / "libprobe.so",
                     "-shared", "-Xcompiler", "-fPIC", "-DNVRTC_PROBE_LIBRARY")
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GLEAM_TRACE")}
    runs = {}
    for preload in (True, False):
        extra = {"LD_PRELOAD": str(interposer_dir() / NVRTC_PRELOAD)} if preload else {}
        done = subprocess.run([sys.executable, "-c", LOCAL_CALLER, str(library), "-arch=sm_75"],
                              capture_output=True, text=True, timeout=120, env={**base, **extra})
        assert done.returncode == 0 and done.stderr == "", done.stderr
        runs[preload] = json.loads(done.stdout)
    assert runs[True]["compile"] == 0 and runs[True]["cubin_is_ptx"], runs[True]
    assert runs[False]["cubin"] == "elf"


@pytest.fixture(scope="module")
def nvrtc_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(EXAMPLES / "nvrtc_cubin.c", tmp_path_factory.mktemp("nvrtc") / "nvrtc_cubin",
                  "-I", str(EXAMPLES), "-L", str(interposer_dir()), "-l:libcuda.so.1")


@pytest.fixture(scope="module")
def mesh(nvrtc_program, tmp_path_factory) -> Iterator[tuple[object, object]]:
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


@pytest.mark.parametrize("options", [["--gpu-architecture=sm_75"], ["-arch", "sm_75"], []],
                         ids=["sm_75", "arch-sm_75", "the-device's"])
def test_an_nvrtc_program_runs_on_the_host_device(mesh, nvrtc_program, options):
    """Loaded with cuModuleLoadData (a __constant__ and a __device__ found with
    cuModuleGetGlobal) and linked from two programs added as CU_JIT_INPUT_CUBIN."""
    client, _ = mesh
    done, verdict = run_through(client, nvrtc_program, *options)
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "image": "ptx", "load_mismatches": 0, "launches": 2,
                       "link_mismatches": 0}, done.stderr


def test_turned_off_the_host_device_refuses_the_cubin(mesh, nvrtc_program):
    """An error, never a wrong answer: the host device says the image has no PTX."""
    client, _ = mesh
    done, _ = run_through(client, nvrtc_program, "--gpu-architecture=sm_75",
                          env={"GLEAM_NVRTC_PTX": "0"})
    assert done.returncode != 0
    assert "only a cubin" in done.stderr, done.stderr
