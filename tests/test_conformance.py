"""The conformance run's parts that need no compiler and no agents: the sample
table, verdicts and causes, numba's event stream, the report's numbers."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.conformance import build, causes, numba, report, run, samples
from gleam.peer.conformance.samples import SAMPLES, Sample

CHECKOUT = Path(__file__).parent / "conformance_checkout"


# ---------------------------------------------------------------- the table


def test_the_table_has_at_least_75_samples_with_unique_names_and_real_recipes():
    names = [s.name for s in SAMPLES]
    assert len(names) >= 75 and len(set(names)) == len(names)
    assert not set(names) & set(samples.EXCLUDED)
    for s in SAMPLES:
        assert s.path.startswith("Samples/") and s.path.endswith(s.name), s
        assert set(s.needs) <= {"nvrtc", "nvvm", "openmp", "cdp", "cudadevrt-path",
                                "libdevice"}, s
        re.compile(s.expect)
        for source, image in s.images:
            assert source.endswith(".cu") and image.endswith((".fatbin", ".ptx")), s


def test_no_excluded_reason_is_blank_and_none_admits_a_library_the_rule_allows():
    for name, why in samples.EXCLUDED.items():
        assert why.strip(), name
        assert "NVRTC" not in why and "runtime" not in why.lower(), (name, why)


def test_unlisted_names_a_checkout_folder_neither_table_knows(tmp_path):
    for folder in ("Samples/0_Introduction/vectorAdd", "Samples/0_Introduction/brandNew",
                   "Samples/4_CUDA_Libraries/simpleCUFFT"):
        (tmp_path / folder).mkdir(parents=True)
    assert samples.unlisted(tmp_path) == ["brandNew"]


# ---------------------------------------------------------------- builds


def _stand_in(name: str) -> Sample:
    return samples.by_name()[name]


def test_a_build_key_changes_with_the_sources_and_the_recipe_not_the_arguments(tmp_path):
    import shutil

    from gleam.peer.conformance.toolchain import Toolchain

    checkout = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, checkout)
    tools = Toolchain(Path("/usr/bin/nvcc"), "13.0", Path("/lib"), None, None, None)
    sample = _stand_in("vectorAdd")
    common = build.common_digest(checkout)
    key = build.build_key(sample, checkout, tools, common)
    same = Sample(sample.name, sample.path, args=("-n=4",), expect="other", note="x",
                  timeout=9.0)
    assert build.build_key(same, checkout, tools, common) == key
    flagged = Sample(sample.name, sample.path, flags=("-DX",))
    assert build.build_key(flagged, checkout, tools, common) != key
    (checkout / sample.path / "data" / "count.txt").write_text("5\n")   # data: not an input
    assert build.build_key(sample, checkout, tools, common) == key
    source = checkout / sample.path / "vectorAdd.cu"
    source.write_text(source.read_text() + "// changed\n")
    assert build.build_key(sample, checkout, tools, common) != key
    newer = Toolchain(Path("/usr/bin/nvcc"), "13.1", Path("/lib"), None, None, None)
    assert build.build_key(sample, checkout, newer, common) != \
        build.build_key(sample, checkout, tools, common)


def test_a_build_key_changes_with_where_its_libraries_live(tmp_path):
    """An NVRTC sample records NVRTC's folder (its rpath): a build made against a
    virtualenv that was since moved or removed cannot load it, so it is not reused."""
    from gleam.peer.conformance.toolchain import Library, Toolchain

    checkout = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, checkout)
    sample = Sample("vectorAdd", _stand_in("vectorAdd").path, needs=("nvrtc",))
    common = build.common_digest(checkout)

    def key(lib: str) -> str:
        nvrtc = Library(Path(lib) / "include", Path(lib) / "lib" / "libnvrtc.so.13")
        tools = Toolchain(Path("/usr/bin/nvcc"), "13.0", Path("/lib"), nvrtc, None, None)
        return build.build_key(sample, checkout, tools, common)

    assert key("/venv-a") == key("/venv-a")
    assert key("/venv-a") != key("/venv-b")


def test_build_commands_make_images_first_and_link_the_interposer(tmp_path):
    from gleam.peer.conformance.toolchain import Toolchain

    tools = Toolchain(Path("/cuda/bin/nvcc"), "13.0", Path("/gleam/lib"), None, None,
                      Path("/cuda/lib64/libcudadevrt.a"))
    drv = samples.by_name()["matrixMulDrv"]
    commands = build.build_commands(drv, CHECKOUT, tools, tmp_path)
    assert [c[c.index("-o") + 1] for c in commands] == [
        str(tmp_path / "matrixMul_kernel64.fatbin"), str(tmp_path / "matrixMulDrv")]
    assert "-fatbin" in commands[0] and build.GENCODE in commands[1]
    assert commands[1][-3:] == ["-L", "/gleam/lib", "-l:libcuda.so.1"]
    cdp_sample = samples.by_name()["cdpSimplePrint"]
    (tmp_path / cdp_sample.path).mkdir(parents=True)
    (tmp_path / cdp_sample.path / "cdpSimplePrint.cu").write_text("")
    cdp = build.build_commands(cdp_sample, tmp_path, tools, tmp_path)
    assert str(tmp_path / cdp_sample.path / "cdpSimplePrint.cu") in cdp[-1]
    assert "-rdc=true" in cdp[-1] and "/cuda/lib64/libcudadevrt.a" in cdp[-1]
    with pytest.raises(build.BuildError, match="NVRTC"):
        build.build_commands(samples.by_name()["vectorAdd_nvrtc"], CHECKOUT, tools, tmp_path)


# ptxgen's own macros, as cuda-samples' ptxgen.c builds libdevice's path from them
PTXGEN_PATH = r"""
#include <stdio.h>
#define getLibDeviceName() _getLibDeviceName(LIBDEVICE_MAJOR_VERSION, LIBDEVICE_MINOR_VERSION)
#define _getLibDeviceName(MAJOR, MINOR) __getLibDeviceName(MAJOR, MINOR)
#define __getLibDeviceName(MAJOR, MINOR) ("/libdevice/libdevice." #MAJOR #MINOR ".bc")
#define getLibnvvmHome() _getLibnvvmHome(LIBNVVM_HOME)
#define _getLibnvvmHome(NVVM_HOME) __getLibnvvmHome(NVVM_HOME)
#define __getLibnvvmHome(NVVM_HOME) (#NVVM_HOME)
int main(void) { printf("%s%s", getLibnvvmHome(), getLibDeviceName()); return 0; }
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="a C compiler expands the macros")
def test_ptxgen_finds_libdevice_where_the_flags_name_it(tmp_path):
    home = tmp_path / "cuda-13.0" / "nvvm"
    (home / "libdevice").mkdir(parents=True)
    (home / "libdevice" / "libdevice.10.bc").write_bytes(b"BC")
    (tmp_path / "p.c").write_text(PTXGEN_PATH)
    subprocess.run(["cc", "-o", str(tmp_path / "p"), str(tmp_path / "p.c"),
                    *build.libdevice_flags(home)], check=True, capture_output=True)
    shown = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True).stdout
    assert Path(shown).read_bytes() == b"BC"


@pytest.mark.parametrize("folder", ["with space/nvvm", "linux/nvvm", "__x86_64__/nvvm",
                                    'q"uote/nvvm'])
def test_a_libdevice_folder_a_macro_cannot_name_is_a_build_error(tmp_path, folder):
    home = tmp_path / folder
    (home / "libdevice").mkdir(parents=True)
    (home / "libdevice" / "libdevice.10.bc").write_bytes(b"BC")
    with pytest.raises(build.BuildError, match="cannot name"):
        build.libdevice_flags(home)
    with pytest.raises(build.BuildError, match=r"libdevice\.10\.bc"):
        build.libdevice_flags(tmp_path / "absent")


def test_first_error_of_a_compiler_log():
    log = "a.cu(3): warning: unused\na.cu(7): error: identifier \"x\" is undefined\n1 error"
    assert build.first_error(log) == 'a.cu(7): error: identifier "x" is undefined'
    assert build.first_error("/usr/bin/ld: a.o: undefined reference to `f'\n") \
        .endswith("undefined reference to `f'")


# ---------------------------------------------------------------- verdicts and causes


def _done(status, out="", err="", seconds=1.0):
    return run.Finished(status, seconds, out, err)


def test_verdicts_pass_fail_waived_timeout_crash():
    s = Sample("x", "Samples/0_Introduction/x", expect=samples.PASS)
    assert run.verdict(s, _done(0, "Test passed\n"), 60).status == "pass"
    # exit 0 without its success line, or with a failure marker, is no pass
    quiet = run.verdict(s, _done(0, "done\n"), 60)
    assert (quiet.status, quiet.cause) == ("fail", f"exit 0 without its success line /{s.expect}/")
    assert run.verdict(s, _done(0, "Result = FAIL\nTest passed\n"), 60).status == "fail"
    waived = run.verdict(s, _done(2, "Waiving: no managed memory\n"), 60)
    assert (waived.status, waived.cause) == ("waived", "Waiving: no managed memory")
    timeout = run.verdict(s, _done(None, "step 3\n"), 60)
    assert timeout.status == "timeout" and timeout.group == "timeout (host device speed)"
    assert timeout.cause == "no result within 60 s (last line: step 3)"
    crash = run.verdict(s, _done(-signal.SIGSEGV, "", "Segmentation fault\n"), 60)
    assert crash.status == "crash" and crash.cause.startswith("killed by SIGSEGV")


def test_the_servers_reason_is_the_first_error_line_and_names_the_cause():
    err = ("gleam: trace: cuGraphCreate -> CUDA_ERROR_NOT_SUPPORTED\n"
           "gleam: server: kernel _Z1kPi: illegal address (PTX line 9, address 0x0, block 0)\n")
    out = "CUDA error at sample.cu:40 code=700(cudaErrorIllegalAddress)\n"
    s = Sample("x", "Samples/0_Introduction/x", expect=samples.PASS)
    v = run.verdict(s, _done(1, out, err), 60)
    assert v.cause.startswith("gleam: server: kernel _Z1kPi: illegal address")
    assert v.group == "CUDA graphs, stream capture, host functions"   # the failing call


def test_a_sample_that_prints_textures_in_passing_is_not_blamed_on_textures():
    out = "Using texture memory\nresult mismatch at 3\n"
    assert causes.cause_label(causes.evidence(out, "")) == causes.OTHER
    assert causes.first_error_line(out, "") == "result mismatch at 3"


@pytest.mark.parametrize(("line", "label"), [
    ("gleam: server: kernel k has no PTX and its image carries no PTX (only a cubin)",
     "SASS only: NVRTC or nvJitLink built a cubin"),
    ("Call to cuMemHostGetDevicePointer results in CUDA_ERROR_NOT_SUPPORTED",
     "mapped (zero-copy) host memory"),
    ("gleam: trace: cuMemAllocManaged -> CUDA_ERROR_NOT_SUPPORTED", "managed (unified) memory"),
    ("gleam: trace: cuLaunchCooperativeKernel -> CUDA_ERROR_NOT_SUPPORTED",
     "cooperative launch / grid sync"),
    ("gleam: cuIpcGetMemHandle is not forwarded; returning CUDA_ERROR_NOT_SUPPORTED",
     "IPC between processes"),
    ("gleam: cuFooBar is not forwarded; returning CUDA_ERROR_NOT_SUPPORTED",
     "a call gleam does not forward"),
    ("gleam: server: kernel k: time limit reached (PTX line 3)", "timeout (host device speed)"),
])
def test_known_causes(line, label):
    assert causes.cause_label(line) == label


# ---------------------------------------------------------------- numba's events


def _events(path: Path, *events: dict) -> None:
    with open(path, "a") as f:
        for i, e in enumerate(events):
            f.write(json.dumps({"t": 1000.0 + i, **e}) + "\n")


def test_numba_events_become_one_outcome_per_test(tmp_path):
    path = tmp_path / "m.jsonl"
    ok, sub, skip, xf, err, hung = ("::A::ok", "::A::sub", "::A::skip", "::A::xf",
                                     "::A::err", "::A::hung")
    _events(path,
            {"event": "collected", "ids": [ok, sub, skip, xf, err, hung]},
            {"event": "report", "id": ok, "when": "call", "outcome": "passed", "seconds": 1.5},
            {"event": "report", "id": sub, "when": "call", "outcome": "passed", "subtest": True},
            {"event": "report", "id": sub, "when": "call", "outcome": "failed", "subtest": True,
             "message": "CudaAPIError: cuMemHostGetDevicePointer", "gleam": []},
            {"event": "report", "id": sub, "when": "call", "outcome": "passed"},
            {"event": "report", "id": skip, "when": "setup", "outcome": "skipped",
             "message": "needs a GPU"},
            {"event": "report", "id": xf, "when": "call", "outcome": "skipped", "xfail": True},
            {"event": "report", "id": err, "when": "setup", "outcome": "failed",
             "message": "fixture broke", "gleam": ["gleam: server: x"]},
            {"event": "start", "id": hung},
            {"event": "abandoned", "id": hung, "why": "timeout", "message": "no result"})
    with open(path, "a") as f:
        f.write('{"event": "start", "id": "::A::to')   # a line cut by a kill
    state, offset = numba.read_events(path)
    assert offset < path.stat().st_size and state.running() is None
    got = {o.id: o for o in numba.outcomes("pkg.m", state)}
    assert {k.removeprefix("pkg.m"): v.outcome for k, v in got.items()} == {
        ok: "passed", sub: "failed", skip: "skipped", xf: "xfailed", err: "error",
        hung: "timeout"}
    assert got["pkg.m" + sub].group == "mapped (zero-copy) host memory"
    assert got["pkg.m" + err].gleam == ["gleam: server: x"]
    tally = numba.counts(list(got.values()))
    assert (tally["run"], tally["passed"], tally["skipped"]) == (5, 1, 1)


def test_a_running_test_is_the_latest_started_one_without_an_end(tmp_path):
    path = tmp_path / "m.jsonl"
    _events(path, {"event": "collected", "ids": ["::a", "::b"]},
            {"event": "start", "id": "::a"}, {"event": "finish", "id": "::a"},
            {"event": "start", "id": "::b"})
    state, _ = numba.read_events(path)
    assert state.running() == "::b" and state.reported() == {"::a"}


def test_numba_modules_are_the_device_suites_and_patterns_choose(monkeypatch, tmp_path):
    for suite in ("cudapy", "cudadrv", "benchmarks"):
        (tmp_path / suite).mkdir()
        (tmp_path / suite / "test_one.py").write_text("")
    (tmp_path / "cudapy" / "test_two.py").write_text("")
    monkeypatch.setattr(numba, "tests_folder", lambda: tmp_path)
    assert numba.test_modules() == [
        "numba.cuda.tests.cudadrv.test_one", "numba.cuda.tests.cudapy.test_one",
        "numba.cuda.tests.cudapy.test_two"]
    assert numba.test_modules(["cudapy.*one"]) == ["numba.cuda.tests.cudapy.test_one"]


# ---------------------------------------------------------------- the report


def test_the_report_counts_against_the_targets_and_groups_causes():
    table = [Sample(f"s{i}", f"Samples/0_Introduction/s{i}") for i in range(20)]
    outcomes = {s.name: run.Outcome(s.name, "pass", 1.0) for s in table}
    outcomes["s3"] = run.Outcome("s3", "fail", 2.0, "gleam: server: boom", causes.OTHER)
    doc = report.samples_section(table, outcomes, "/c", "abc")
    assert (doc["passed"], doc["total"], doc["percent"], doc["met"]) == (19, 20, 95.0, True)
    assert doc["causes"] == [{"cause": "other: gleam: server: boom", "count": 1,
                              "samples": ["s3"], "fixed_by": "not yet assigned"}]
    tests = [numba.TestOutcome(f"m::t{i}", "m", "passed") for i in range(30)]
    tests += [numba.TestOutcome("m::x", "m", "failed", message="ValueError: 0x1f at 12",
                                group=causes.OTHER),
              numba.TestOutcome("m::y", "m", "failed", message="ValueError: 0x2e at 13",
                                group=causes.OTHER),
              numba.TestOutcome("m::s", "m", "skipped")]
    n = report.numba_section(tests, "0.30", 1, True, 5.0)
    assert (n["counts"]["run"], n["passed"], n["percent"], n["met"]) == (32, 30, 93.8, False)
    assert [(c["cause"], c["tests"]) for c in n["causes"]] == [("other: ValueError: N at N", 2)]
    json.dumps({"samples": doc, "numba": n})


def test_the_command_says_what_to_give_when_given_nothing():
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "conformance"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "nothing to run" in done.stderr
    helped = subprocess.run([sys.executable, "-m", "gleam.peer", "conformance", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--numba-only" in helped.stdout
