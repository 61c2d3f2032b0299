"""The PTX corpus (tests/ptx_corpus) through the executor and the host backend's interpreter.

Every case of ``ptx_corpus/cases.py`` is loaded three times, as nvcc's PTX, as nvcc's
default fatbin (compressed PTX inside) and as NVRTC's PTX (compiled here from the same
source, as CuPy and cuda.bindings users compile), launched through real call batches with
no host kernel registered, and checked against its numpy reference. The committed images
are rebuilt and compared when nvcc is present.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
from typing import Any

import numpy as np
import pytest

from gleam.peer.cuda.server import native
from gleam.peer.cuda.server.kernels import HostKernel

from .cuda_session import Session
from .ptx_corpus.cases import CASES
from .ptx_corpus.spec import EXACT, Buf, Case, inputs, pack_params

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "ptx_corpus"
KINDS = ("ptx", "fatbin", "nvrtc")
_results: dict[tuple[str, str], dict[str, np.ndarray]] = {}
_nvrtc_ptx: dict[str, bytes] = {}


def nvrtc_ptx(source: str) -> bytes:
    """NVRTC's PTX for a corpus file (compute_75, NVRTC's defaults: optimised)."""
    if source not in _nvrtc_ptx:
        nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is not installed")
        from gleam.peer.cuda.examples import cuda_include

        cu = CORPUS / f"{source}.cu"
        err, prog = nvrtc.nvrtcCreateProgram(cu.read_bytes(), cu.name.encode(), 0, [], [])
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
        opts = [b"--gpu-architecture=compute_75", f"-I{cuda_include()}".encode()]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            pytest.fail(f"NVRTC cannot compile {cu.name}: {log.decode(errors='replace')}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
        nvrtc.nvrtcDestroyProgram(prog)
        _nvrtc_ptx[source] = ptx.rstrip(b"\0")
    return _nvrtc_ptx[source]


def image(source: str, kind: str) -> bytes:
    if kind == "nvrtc":
        return nvrtc_ptx(source) + b"\0"
    data = (CORPUS / f"{source}.{kind}").read_bytes()
    return data + b"\0" if kind == "ptx" else data  # cuModuleLoadData wants PTX terminated


@pytest.fixture(scope="module")
def backend():
    be = native.HostBackend({}, memory_limit=1 << 28)  # nothing registered: PTX only
    yield be
    be.close()


def run_case(be: native.HostBackend, case: Case, kind: str) -> dict[str, np.ndarray]:
    """Load, fill, launch, read back: the outputs by name, as the kernel left them."""
    s = Session(be, 1 << 26)
    s.context()
    try:
        values = inputs(case)
        mod = s.load(image(case.source, kind))
        for sym in case.symbols:
            rc, ptr, size = s.global_(mod, sym.name)
            assert rc == 0, f"cuModuleGetGlobal({sym.name}) returned {rc}"
            assert size == values[sym.name].nbytes, f"{sym.name}: {size} bytes"
            s.htod(ptr, values[sym.name].tobytes())
        pointers = {}
        for a in case.args:
            if isinstance(a, Buf):
                data = values[a.name].tobytes()
                pointers[a.name] = s.alloc(len(data))
                s.htod(pointers[a.name], data)
        fn = s.function(mod, case.kernel)
        s.launch(fn, case.grid, case.block, pack_params(case, pointers, values), case.shared)
        result, deferred = s.sync()
        assert (result, deferred) == (0, 0), f"{case.kernel} failed: CUDA error {deferred}"
        got = {}
        for a in case.args:
            if isinstance(a, Buf) and a.out:
                want = values[a.name]
                raw = s.dtoh(pointers[a.name], want.nbytes)
                got[a.name] = np.frombuffer(raw, want.dtype).copy()
        for sym in case.symbols:
            if sym.out:
                _, ptr, size = s.global_(mod, sym.name)
                got[sym.name] = np.frombuffer(s.dtoh(ptr, size), values[sym.name].dtype).copy()
        return got
    finally:
        s.close()


def results(be: native.HostBackend, case: Case, kind: str) -> dict[str, np.ndarray]:
    key = (case.kernel, kind)
    if key not in _results:
        _results[key] = run_case(be, case, kind)
    return _results[key]


def check(case: Case, got: dict[str, np.ndarray], want: dict[str, Any]) -> None:
    for name, expected in want.items():
        msg = f"{case.kernel}: {name}"
        if case.tol == EXACT:
            np.testing.assert_array_equal(got[name], expected, err_msg=msg)
        else:
            np.testing.assert_allclose(got[name], expected, rtol=case.tol.rtol,
                                       atol=case.tol.atol, equal_nan=True, err_msg=msg)


def _params(cases: list[Case]) -> list[Any]:
    """Cases as parameters, those with a known interpreter gap as strict expected failures."""
    return [pytest.param(c, id=c.kernel, marks=[pytest.mark.xfail(reason=c.gap, strict=True)]
                         if c.gap else []) for c in cases]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", _params(CASES))
def test_case_matches_numpy(backend, case, kind):
    check(case, results(backend, case, kind), case.reference(inputs(case)))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kernel)
def test_fatbin_and_ptx_give_identical_results(backend, case):
    try:
        ptx, fatbin = results(backend, case, "ptx"), results(backend, case, "fatbin")
    except AssertionError:
        if case.gap:  # a wrong answer can still be the same wrong answer for both images
            pytest.xfail(case.gap)
        raise
    for name in ptx:
        assert ptx[name].tobytes() == fatbin[name].tobytes(), f"{case.kernel}: {name}"


def test_registered_host_kernel_still_wins():
    """A registered entry name takes the host fast path even though the image has PTX."""
    case = next(c for c in CASES if c.kernel == "reduce_warp_xor_max")
    ran = []

    def marker(launch: Any) -> None:
        ran.append(1)
        launch.array(launch.arg(1, "Q"), "int32", 128)[:] = -42

    kernels = {case.kernel: HostKernel(case.kernel, (8, 8), run=marker)}
    be = native.HostBackend(kernels, memory_limit=1 << 28)
    try:
        got = run_case(be, case, "ptx")
    finally:
        be.close()
    assert ran == [1]
    assert (got["out"] == -42).all()


def test_table_covers_every_corpus_kernel():
    declared = set()
    for cu in CORPUS.glob("*.cu"):
        declared |= {(cu.stem, k) for k in
                     re.findall(r'extern "C" __global__ void (\w+)', cu.read_text())}
    tabled = [(c.source, c.kernel) for c in CASES]
    assert len(tabled) == len(set(tabled)), "a kernel is in the table twice"
    assert declared == set(tabled)
    for source, kernel in tabled:
        assert f".entry {kernel}(" in (CORPUS / f"{source}.ptx").read_text()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kernel)
def test_cases_stay_small(case):
    assert case.threads <= 65536 and all(d > 0 for d in (*case.grid, *case.block))
    assert np.prod(case.block) <= 1024


def _nvcc_release() -> str | None:
    if shutil.which("nvcc") is None:
        return None
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    found = re.search(r"release [\d.]+, V[\d.]+", out)
    return found.group(0) if found else None


def test_committed_images_match_nvcc(tmp_path):
    release = _nvcc_release()
    if release is None or release not in (CORPUS / "reductions.ptx").read_text():
        pytest.skip("needs the nvcc release that made the committed images")
    subprocess.run([str(ROOT / "scripts" / "gen-ptx-corpus.sh"), str(tmp_path)], check=True,
                   capture_output=True)
    for cu in CORPUS.glob("*.cu"):
        for kind in ("ptx", "fatbin"):  # the committed ones (NVRTC's are made per run)
            fresh = (tmp_path / f"{cu.stem}.{kind}").read_bytes()
            assert fresh == (CORPUS / f"{cu.stem}.{kind}").read_bytes(), (
                f"{cu.stem}.{kind} is stale: run scripts/gen-ptx-corpus.sh")
