"""What the samples are built with: nvcc, and the NVIDIA libraries a few of them link.

nvcc comes from ``--nvcc``, else ``PATH``, else ``$CUDA_HOME/bin``. The NVRTC and
NVVM that the NVRTC and libNVVM samples link are the toolkit's own when it has
them, else the wheels' (cuda.pathfinder finds them in site-packages, where
``pip install cuda-toolkit[nvrtc,nvvm]`` puts them). Both are compilers that run
in the program's process; neither is a machine-code-only library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class ToolchainError(Exception):
    """Something the builds need is missing; the message says what to install."""


@dataclass(frozen=True)
class Library:
    """A shared library to link: its header directory and the file itself."""

    include: Path
    path: Path

    def link_flags(self) -> list[str]:
        # -l:NAME takes the versioned file (wheels ship libnvrtc.so.13, no libnvrtc.so);
        # the rpath lets the program find it without LD_LIBRARY_PATH.
        return ["-I", str(self.include), "-L", str(self.path.parent), f"-l:{self.path.name}",
                "-Xlinker", f"-rpath={self.path.parent}"]


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    version: str          # nvcc --version's last line: part of every build's cache key
    interposer: Path      # the folder with gleam's libcuda.so.1, which driver-API samples link
    nvrtc: Library | None
    nvvm: Library | None
    cudadevrt: Path | None
    include: Path | None = None   # the toolkit's headers (NVRTC samples read some at run time)
    nvvm_home: Path | None = None  # the toolkit's nvvm folder (libdevice for libNVVM samples)


def find_nvcc(given: str | None) -> Path:
    if given:
        path = Path(given)
        if not os.access(path, os.X_OK):
            raise ToolchainError(f"--nvcc {given}: not an executable")
        return path
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "nvcc"
    if os.access(candidate, os.X_OK):
        return candidate
    raise ToolchainError("nvcc was not found: install the CUDA toolkit (13.x) or pass --nvcc")


def toolkit_root(nvcc: Path) -> Path:
    """The toolkit nvcc belongs to, as nvcc itself reports it (``nvcc`` may be a wrapper)."""
    try:
        done = subprocess.run([str(nvcc), "--dryrun", "-E", "-x", "cu", os.devnull],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return nvcc.resolve().parent.parent
    for line in (done.stdout + done.stderr).splitlines():
        if line.startswith("#$ TOP="):
            return Path(line.split("=", 1)[1].strip()).resolve()
    return nvcc.resolve().parent.parent


def _toolkit_library(toolkit: Path, name: str, header: str) -> Library | None:
    for libdir in (toolkit / "lib64", toolkit / name / "lib64", toolkit / "lib"):
        files = sorted(libdir.glob(f"lib{name}.so*")) if libdir.is_dir() else []
        if not files:
            continue
        for include in (toolkit / "include", toolkit / name / "include"):
            if (include / header).is_file():
                return Library(include, files[0])
    return None


def _wheel_library(name: str, header: str) -> Library | None:
    try:
        from cuda import pathfinder
    except ImportError:
        return None
    try:
        include = pathfinder.find_nvidia_header_directory(name)
        loaded = pathfinder.load_nvidia_dynamic_lib(name)
    except Exception:  # pathfinder raises one kind per missing piece
        return None
    if include is None or not (Path(include) / header).is_file() or not loaded.abs_path:
        return None
    return Library(Path(include), Path(loaded.abs_path))


def find_library(toolkit: Path, name: str, header: str) -> Library | None:
    """``name`` (nvrtc, nvvm) from the toolkit, else from NVIDIA's wheels; None if absent."""
    return _toolkit_library(toolkit, name, header) or _wheel_library(name, header)


def find_toolchain(nvcc_arg: str | None, interposer: Path) -> Toolchain:
    nvcc = find_nvcc(nvcc_arg)
    try:
        done = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"{nvcc} --version failed: {exc}") from None
    if done.returncode != 0:
        raise ToolchainError(f"{nvcc} --version failed: {done.stderr.strip()}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    toolkit = toolkit_root(nvcc)
    devrt = toolkit / "lib64" / "libcudadevrt.a"
    return Toolchain(
        nvcc=nvcc, version=lines[-1] if lines else "unknown", interposer=interposer,
        nvrtc=find_library(toolkit, "nvrtc", "nvrtc.h"),
        nvvm=find_library(toolkit, "nvvm", "nvvm.h"),
        cudadevrt=devrt if devrt.is_file() else None,
        include=toolkit / "include" if (toolkit / "include").is_dir() else None,
        nvvm_home=toolkit / "nvvm" if (toolkit / "nvvm" / "libdevice").is_dir() else None,
    )
