"""The conformance run end to end: ``gleam-peer conformance`` builds stand-in samples
(tests/conformance_checkout: gleam's own small programs in the folders of four table
entries) with nvcc, runs them through two real agents, and reports pass, a device
fault, a waiver and a timeout in its table and JSON; numba's harness runs a pytest
module through a hang and a crash and resumes an interrupted run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from gleam.peer.conformance import numba
from gleam.peer.conformance.toolchain import ToolchainError, find_nvcc

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).parent / "conformance_checkout"
STAND_INS = ("vectorAdd", "template", "simpleAttributes", "simpleCallback")


# What one stand-in may take: simpleCallback's waits forever and is stopped at it;
# the others finish in a second or two, and this leaves room for a loaded CI machine.
SAMPLE_TIMEOUT = 45


def _conformance(tmp_path: Path, temp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    only = [a for name in STAND_INS for a in ("--only", name)]
    return subprocess.run(
        [sys.executable, "-m", "gleam.peer", "conformance", "--samples", str(CHECKOUT),
         "--samples-commit", "stand-ins", *only, "--timeout", str(SAMPLE_TIMEOUT), "--jobs", "2",
         "--cache", str(tmp_path / "cache"), *args],
        capture_output=True, text=True, timeout=1200, env={**os.environ, "TMPDIR": str(temp)})


@pytest.fixture
def short_temp():
    """The command's temporary folder (agents' sockets live there: Unix socket paths
    are limited to ~107 bytes, so not under pytest's long tmp_path)."""
    temp = Path(tempfile.mkdtemp(prefix="gcf"))
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_stand_in_samples_through_two_agents_and_the_report(tmp_path, short_temp):
    try:
        find_nvcc(None)
    except ToolchainError as exc:
        pytest.skip(str(exc))
    done = _conformance(tmp_path, short_temp, "--json")
    assert done.returncode == 1, done.stderr[-3000:]   # ran; 1 of 4 is short of 95%
    doc = json.loads(done.stdout)
    s = doc["samples"]
    got = {r["name"]: r for r in s["results"]}
    assert {n: r["status"] for n, r in got.items()} == {
        "vectorAdd": "pass", "template": "fail", "simpleAttributes": "waived",
        "simpleCallback": "timeout"}, done.stderr[-3000:]
    fault = got["template"]
    assert fault["first_error"].startswith("gleam: server: kernel"), fault
    assert "illegal address" in fault["first_error"]
    assert fault["cause"] == "kernel fault on the host device"
    assert got["simpleAttributes"]["first_error"].endswith("waiving")
    assert got["simpleCallback"]["first_error"] == \
        f"no result within {SAMPLE_TIMEOUT} s (last line: waiting forever)"
    assert (s["passed"], s["total"], s["percent"], s["met"], s["commit"]) == \
        (1, 4, 25.0, False, "stand-ins")
    assert json.loads(Path(doc["report_file"]).read_text())["samples"] == s
    # the logs of the last run stay in the cache, whole
    assert "Test passed" in (tmp_path / "cache" / "logs" / "vectorAdd" / "stdout").read_text()
    # everything the run started is gone: its temporary folder, its processes
    assert list(short_temp.iterdir()) == []
    assert not _processes_under(short_temp)

    again = _conformance(tmp_path, short_temp)   # the table this time; builds come from the cache
    assert again.returncode == 1
    assert again.stderr.count("(cached)") == len(STAND_INS), again.stderr
    assert "1/4 passed (25.0%" in " ".join(again.stdout.split())


def _processes_under(folder: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(folder) in cmdline:
                found.append(cmdline)
    return found


PROBE = '''
import os
import threading

import pytest


def test_a_passes():
    assert 1 + 1 == 2


def test_b_fails():
    raise ValueError("wrong answer at 0x1f")


@pytest.mark.skip(reason="not on this device")
def test_c_skips():
    pass


def test_d_hangs():
    threading.Event().wait()   # never set: the harness's per-test limit stops it


def test_e_crashes():
    os.abort()


def test_f_after_them():
    assert True


def test_g_loses_the_context():
    os.environ["PROBE_CONTEXT"] = "lost"   # what a later test in this process would see
    raise RuntimeError("[CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: 700] Call to cuMemcpyDtoH")


def test_h_runs_in_a_fresh_process():
    assert os.environ.get("PROBE_CONTEXT") is None
'''


def test_the_numba_harness_outlives_a_hang_and_a_crash_and_resumes(tmp_path):
    """... and runs the tests after one that lost the CUDA context in a fresh process."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "conformance_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "probe"), os.environ.get("PYTHONPATH", "")])}
    setup = numba.NumbaSetup(env=env, results=tmp_path / "results", test_timeout=5.0,
                             stop=threading.Event())
    seen: list[str] = []
    results = numba.run_suite(["conformance_probe"], setup, 1, False,
                              lambda module, rs, s: seen.append(module))
    outcome = {r.id.rsplit("::", 1)[1]: r for r in results}
    assert {k: v.outcome for k, v in outcome.items()} == {
        "test_a_passes": "passed", "test_b_fails": "failed", "test_c_skips": "skipped",
        "test_d_hangs": "timeout", "test_e_crashes": "crash", "test_f_after_them": "passed",
        "test_g_loses_the_context": "failed", "test_h_runs_in_a_fresh_process": "passed"}
    assert seen == ["conformance_probe"]
    assert outcome["test_b_fails"].message == "ValueError: wrong answer at 0x1f"
    assert outcome["test_e_crashes"].message.startswith("the test process died (killed by SIGABRT")
    assert all(r.id.startswith("conformance_probe") for r in results)

    # an interrupted run: cut the events after the first test, then resume
    events = tmp_path / "results" / "conformance_probe.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if '"event": "finish"' in line)
    events.write_text("".join(lines[:first_end + 1]))
    resumed = numba.run_suite(["conformance_probe"], setup, 1, True, lambda *a: None)
    assert sorted(r.outcome for r in resumed) == sorted(r.outcome for r in results)
    starts = [json.loads(line)["id"] for line in events.read_text().splitlines()
              if '"event": "start"' in line]
    assert starts.count(outcome["test_a_passes"].id.removeprefix("conformance_probe")) == 1
