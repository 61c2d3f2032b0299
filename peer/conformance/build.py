"""Building the samples with nvcc: once per content, in parallel, niced.

A build's key is a hash of everything that can change its output: the sample's
entry in the table (sources, flags, needs; not its arguments), nvcc's version,
the target architecture, where the libraries it links live, the files of the
sample's folder and of the checkout's ``Common`` folder. The outputs (the
program, any image it loads at run time, the log) live in
``CACHE/builds/NAME-KEY``; a later run with the same key reuses them, a failed
build too (its log is kept), so a rerun after a merge rebuilds only what
changed.

Kernels are compiled to PTX only (``compute_80``): gleam's host device runs PTX
and reports compute capability 8.0, so this is the image cudart picks for it,
and samples that need 8.0 features (bf16, tf32, cp.async) keep their kernels.
No SASS is built, which also saves ptxas time on small machines.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from gleam.peer.conformance.samples import Sample
from gleam.peer.conformance.toolchain import Toolchain

ARCH = "80"
GENCODE = f"-gencode=arch=compute_{ARCH},code=compute_{ARCH}"
COMMON_FLAGS = ("-O2", "-w", "--extended-lambda", GENCODE)
BUILD_TIMEOUT = 900.0   # one nvcc run; the heaviest sample takes a few minutes on 2 cores
SOURCE_SUFFIXES = (".cu", ".cpp", ".c")
# Folders of a sample that hold no build input (images, documentation, editor settings).
NOT_INPUTS = {"data", "doc", ".vscode"}
MAX_INPUT_BYTES = 4 << 20


@dataclass(frozen=True)
class Built:
    """One sample's build: where its outputs are, or why there are none."""

    name: str
    folder: Path
    ok: bool
    seconds: float
    cached: bool
    error: str = ""

    @property
    def program(self) -> Path:
        return self.folder / self.name


def _hash_tree(digest: hashlib._Hash, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in NOT_INPUTS for part in rel.parts) or not path.is_file():
            continue
        if path.stat().st_size > MAX_INPUT_BYTES:
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")


def common_digest(checkout: Path) -> str:
    """The hash of the checkout's Common folder (headers every sample includes)."""
    digest = hashlib.sha256()
    _hash_tree(digest, checkout / "Common")
    return digest.hexdigest()


def build_key(sample: Sample, checkout: Path, toolchain: Toolchain, common: str) -> str:
    recipe = asdict(sample)
    for field in ("args", "expect", "note", "timeout", "headers"):
        recipe.pop(field)
    key: dict[str, object] = {"recipe": recipe, "nvcc": toolchain.version,
                              "flags": COMMON_FLAGS, "common": common}
    # Where the libraries it links live: the program records their folder (an
    # rpath), so a moved or removed toolkit or virtualenv needs a new build.
    try:
        links = _need_flags(sample, toolchain)
    except BuildError as exc:
        links = [str(exc)]
    if links:
        key["links"] = links
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode())
    _hash_tree(digest, checkout / sample.path)
    return digest.hexdigest()[:20]


def _sources(sample: Sample, folder: Path) -> list[str]:
    if sample.sources:
        return [str(folder / s) for s in sample.sources]
    return sorted(str(p) for p in folder.iterdir()
                  if p.suffix in SOURCE_SUFFIXES and p.is_file()
                  and p.name not in {src for src, _ in sample.images})


def _includes(checkout: Path, folder: Path) -> list[str]:
    flags = ["-I", str(checkout / "Common"), "-I", str(folder)]
    if (folder / "inc").is_dir():
        flags += ["-I", str(folder / "inc")]
    return flags


# ptxgen stringifies LIBNVVM_HOME itself (#NVVM_HOME after one expansion), as CMake's
# shell-quoted -DLIBNVVM_HOME="..." reaches it: the macro is the bare path. Quoted here
# (no shell strips them) the path kept its quotes and ptxgen opened
# '"/usr/local/cuda-13.0/nvvm"/libdevice/libdevice.10.bc'. A bare path must stay
# one run of tokens that expand to themselves: no '//' (a comment), no spaces, no
# name the compiler predefines as a macro (linux, unix, __x86_64__ ...).
_PREDEFINED = {"linux", "unix", "i386"}


def libdevice_flags(nvvm_home: Path | None) -> list[str]:
    """ptxgen's flags naming libdevice 1.0 (``libdevice.10.bc``) in ``nvvm_home``."""
    if nvvm_home is None or not (nvvm_home / "libdevice" / "libdevice.10.bc").is_file():
        raise BuildError("needs the toolkit's nvvm/libdevice/libdevice.10.bc")
    text = str(nvvm_home)
    if (not re.fullmatch(r"/[A-Za-z0-9_./+-]*", text) or "//" in text
            or any(word in _PREDEFINED or word.startswith("__")
                   for word in re.split(r"[^A-Za-z0-9_]+", text))):
        raise BuildError(f"ptxgen cannot name libdevice's folder {text} in a macro")
    return [f"-DLIBNVVM_HOME={text}", "-DLIBDEVICE_MAJOR_VERSION=1", "-DLIBDEVICE_MINOR_VERSION=0"]


def _need_flags(sample: Sample, toolchain: Toolchain) -> list[str]:
    flags: list[str] = []
    for need in sample.needs:
        if need == "nvrtc":
            if toolchain.nvrtc is None:
                raise BuildError("needs NVRTC: pip install 'cuda-toolkit[nvrtc]==13.*'")
            flags += toolchain.nvrtc.link_flags()
        elif need == "nvvm":
            if toolchain.nvvm is None:
                raise BuildError("needs libNVVM: pip install 'cuda-toolkit[nvvm]==13.*'")
            flags += toolchain.nvvm.link_flags()
        elif need == "openmp":
            flags += ["-Xcompiler", "-fopenmp"]
        elif need == "cdp":
            if toolchain.cudadevrt is None:
                raise BuildError("needs libcudadevrt.a, which this CUDA toolkit lacks")
            flags += ["-rdc=true", str(toolchain.cudadevrt)]
        elif need == "libdevice":   # ptxgen links libdevice from the toolkit's nvvm folder
            flags += libdevice_flags(toolchain.nvvm_home)
        elif need == "cudadevrt-path":
            if toolchain.cudadevrt is None:
                raise BuildError("needs libcudadevrt.a, which this CUDA toolkit lacks")
            flags += [f'-DLIBCUDADEVRT="{toolchain.cudadevrt}"']
        else:
            raise BuildError(f"unknown need {need!r} in the sample table")
    return flags


class BuildError(Exception):
    pass


def build_commands(sample: Sample, checkout: Path, toolchain: Toolchain,
                   out: Path) -> list[list[str]]:
    """The nvcc commands that build ``sample`` into ``out``: images first, then the program."""
    folder = checkout / sample.path
    nvcc = ["nice", "-n", "10", str(toolchain.nvcc)]
    commands = []
    for source, image in sample.images:
        kind = "-ptx" if image.endswith(".ptx") else "-fatbin"
        commands.append([*nvcc, *COMMON_FLAGS, *_includes(checkout, folder), *sample.flags,
                         kind, "-o", str(out / image), str(folder / source)])
    link = ["-L", str(toolchain.interposer), "-l:libcuda.so.1"]
    commands.append([*nvcc, *COMMON_FLAGS, *_includes(checkout, folder), *sample.flags,
                     "-o", str(out / sample.name), *_sources(sample, folder),
                     *_need_flags(sample, toolchain), *link])
    return commands


def first_error(log: str) -> str:
    """The line of a compiler log that says what went wrong."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower() or "undefined reference" in line:
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def _build_one(sample: Sample, checkout: Path, toolchain: Toolchain, cache: Path,
               common: str) -> Built:
    folder = cache / "builds" / f"{sample.name}-{build_key(sample, checkout, toolchain, common)}"
    status_file = folder / "status.json"
    if status_file.is_file():
        status = json.loads(status_file.read_text())
        return Built(sample.name, folder, status["ok"], status["seconds"], True,
                     status.get("error", ""))
    work = folder.with_name(folder.name + f".tmp{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log: list[str] = []
    ok, error = True, ""
    try:
        for command in build_commands(sample, checkout, toolchain, work):
            log.append("$ " + " ".join(command))
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT, cwd=work)
            log.append(done.stdout + done.stderr)
            if done.returncode < 0:  # nvcc was stopped (Ctrl-C): nothing to remember
                _remove_tree(work)
                raise KeyboardInterrupt
            if done.returncode != 0:
                ok, error = False, first_error(done.stdout + done.stderr)
                break
    except BuildError as exc:   # a missing tool, not the content: nothing to remember
        _remove_tree(work)
        return Built(sample.name, folder, False, 0.0, False, str(exc))
    except subprocess.TimeoutExpired:
        ok, error = False, f"nvcc ran longer than {BUILD_TIMEOUT:.0f} s"
    seconds = time.monotonic() - started
    (work / "build.log").write_text("\n".join(log))
    (work / "status.json").write_text(json.dumps({"ok": ok, "seconds": seconds,
                                                  "error": error}))
    if folder.exists():  # another run built it meanwhile: keep theirs
        _remove_tree(work)
    else:
        work.rename(folder)
    return Built(sample.name, folder, ok, seconds, False, error)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def build_all(samples: Sequence[Sample], checkout: Path, toolchain: Toolchain, cache: Path,
              jobs: int, progress: Callable[[Built], None]) -> dict[str, Built]:
    """Build every sample (``jobs`` nvcc runs at once), reusing cached builds."""
    common = common_digest(checkout)
    results: dict[str, Built] = {}
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(_build_one, s, checkout, toolchain, cache, common)
                   for s in samples]
        for future in as_completed(futures):
            built = future.result()
            results[built.name] = built
            progress(built)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results
