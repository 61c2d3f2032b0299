"""numba-cuda's own test suite, from its wheel, through gleam.

Every test module of ``numba.cuda.tests`` that applies to a real device (the
folders numba's ``load_tests`` picks on a GPU: nocuda, cudasim, cudadrv,
cudapy, nrt, doc_examples; and core; not the benchmarks, which time rather
than check and need pytest-benchmark) runs as one pytest process, started
exactly as ``gleam-peer run`` starts a program, with numba_plugin.py loaded,
which writes an event per test to a file.

The harness watches those events: a test that runs longer than the per-test
limit has its process group stopped and is reported as a timeout; a test
during which the process dies is reported as a crash; either way the module
goes on in a fresh process that deselects every test already reported. The
events stay in ``RESULTS/<module>.jsonl``, so ``--resume`` carries on an
interrupted run where it stopped (a finished module is not run again).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from gleam.peer.conformance.causes import cause_label
from gleam.peer.conformance.numba_plugin import CONTEXT_LOST_EXIT, DESELECT_ENV, EVENTS_ENV
from gleam.peer.conformance.run import Stopped, stop_group

SUITES = ("nocuda", "cudasim", "cudadrv", "cudapy", "nrt", "doc_examples", "core")
PACKAGE = "numba.cuda.tests"
MAX_ATTEMPTS = 25          # fresh processes per module after hangs and crashes
POLL = 0.2
# Starting pytest and importing a module of numba's takes seconds, many on a busy
# machine: the time to the first event may be this long even when a test's is less.
STARTUP_LIMIT = 180.0
PYTEST_INI = """\
[pytest]
consider_namespace_packages = true
"""
PASSING = ("passed", "xfailed")
FAILING = ("failed", "error", "timeout", "crash")


class NumbaUnavailable(Exception):
    """numba-cuda's suite cannot run here; the message says what to install."""


@dataclass
class TestOutcome:
    """One test's result: passed, xfailed, skipped, failed, error, timeout or crash."""

    id: str
    module: str
    outcome: str
    seconds: float = 0.0
    message: str = ""                       # the first error line
    gleam: list[str] = field(default_factory=list)
    group: str = ""                         # causes.CAUSES label, or "other"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "module": self.module, "outcome": self.outcome,
                "seconds": round(self.seconds, 3), "message": self.message,
                "gleam": self.gleam, "cause": self.group}


def tests_folder() -> Path:
    """Where the wheel put numba-cuda's tests (found without importing numba)."""
    from importlib import metadata

    try:
        dist = metadata.distribution("numba-cuda")
    except metadata.PackageNotFoundError:
        raise NumbaUnavailable("numba-cuda is not installed: pip install 'numba-cuda>=0.30' "
                               "'cuda-toolkit[nvrtc,nvvm]==13.*'") from None
    folder = Path(str(dist.locate_file("numba_cuda/numba/cuda/tests")))
    if not folder.is_dir():
        raise NumbaUnavailable(f"numba-cuda {dist.version} has no tests folder at {folder}")
    return folder


def check_ready() -> None:
    """Raise NumbaUnavailable when a module the suite imports first is missing."""
    from importlib.util import find_spec

    tests_folder()
    missing = [name for name in ("pytest", "filecheck", "ml_dtypes", "psutil")
               if find_spec(name) is None]
    if missing:
        raise NumbaUnavailable(
            f"numba-cuda's tests need {', '.join(missing)} (its test dependencies): "
            f"pip install {' '.join(missing)}")
    for folder in map(Path, sys.path):
        if any(folder.glob("nvidia/*/lib/libnvJitLink.so*")):
            raise NumbaUnavailable(
                "nvJitLink is installed, so numba-cuda links to SASS, which the host device "
                "cannot run: pip uninstall nvidia-nvjitlink (docs/cuda-forwarding.md)")


def test_modules(patterns: Sequence[str] = ()) -> list[str]:
    """The suite's module names (``numba.cuda.tests.cudapy.test_array``), those matching
    one of ``patterns`` (globs over the name without ``numba.cuda.tests.``) if any."""
    root = tests_folder()
    found = []
    for suite in SUITES:
        for path in sorted((root / suite).glob("test_*.py")):
            short = f"{suite}.{path.stem}"
            if not patterns or any(fnmatch(short, p) or fnmatch(f"{PACKAGE}.{short}", p)
                                   for p in patterns):
                found.append(f"{PACKAGE}.{short}")
    return found


# ---------------------------------------------------------------- one module's events


@dataclass
class ModuleState:
    """What a module's events file says so far."""

    collected: list[str] = field(default_factory=list)
    reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    abandoned: dict[str, dict[str, Any]] = field(default_factory=dict)
    collect_errors: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = False
    last: float = 0.0          # when the latest event was written

    def apply(self, event: dict[str, Any]) -> None:
        kind, test = event.get("event"), event.get("id", "")
        self.last = max(self.last, float(event.get("t", 0.0)))
        if kind == "collected":
            self.collected = list(event["ids"])
        elif kind == "start":
            self.started[test] = event["t"]
        elif kind == "finish":
            self.finished.add(test)
        elif kind == "report":
            self.reports.setdefault(test, []).append(event)
        elif kind == "abandoned":
            self.abandoned[test] = event
        elif kind == "collect-error":
            self.collect_errors.append(event)
        elif kind == "complete":
            self.complete = True

    def reported(self) -> set[str]:
        return self.finished | set(self.abandoned)

    def running(self) -> str | None:
        """The test that started and has not finished, if any (tests run one at a time,
        so it is the latest one started)."""
        latest = next(reversed(self.started), None)
        return None if latest is None or latest in self.reported() else latest


def read_events(path: Path, state: ModuleState | None = None, offset: int = 0
                ) -> tuple[ModuleState, int]:
    """Apply the events from ``offset`` on; a torn last line waits for the next read."""
    state = state or ModuleState()
    if not path.exists():
        return state, offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        try:
            state.apply(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue   # a line cut by a kill; the test it belonged to is re-reported
    return state, offset + end


def _append_event(path: Path, event: dict[str, Any]) -> None:
    event.setdefault("t", time.time())
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(event) + "\n")


def outcomes(module: str, state: ModuleState) -> list[TestOutcome]:
    """One outcome per test the module's events name."""
    results = []
    for error in state.collect_errors:
        results.append(TestOutcome(f"{module}::(collection)", module, "error", 0.0,
                                   error.get("message", ""), []))
    for test in dict.fromkeys([*state.collected, *state.reports, *state.abandoned]):
        reports = state.reports.get(test, [])
        if test in state.abandoned:
            gone = state.abandoned[test]
            results.append(TestOutcome(test, module, gone["why"], gone.get("seconds", 0.0),
                                       gone.get("message", ""), gone.get("gleam", [])))
        elif reports:
            results.append(_from_reports(test, module, reports))
    for result in results:
        # with --pyargs from another root, pytest's ids start at "::": name the module
        if result.id.startswith("::"):
            result.id = module + result.id
        if result.outcome in FAILING:
            result.group = cause_label("\n".join([result.message, *result.gleam]))
    return results


def _from_reports(test: str, module: str, reports: list[dict[str, Any]]) -> TestOutcome:
    seconds = sum(r.get("seconds", 0.0) for r in reports if not r.get("subtest"))
    failed = [r for r in reports if r["outcome"] == "failed"]
    if failed:
        first = failed[0]
        in_test = any(r["when"] == "call" or r.get("subtest") for r in failed)
        gleam = [line for r in failed for line in r.get("gleam", [])]
        return TestOutcome(test, module, "failed" if in_test else "error", seconds,
                           first.get("message", ""), list(dict.fromkeys(gleam)))
    skipped = [r for r in reports if r["outcome"] == "skipped" and not r.get("subtest")]
    if skipped:
        outcome = "xfailed" if any(r.get("xfail") for r in skipped) else "skipped"
        return TestOutcome(test, module, outcome, seconds, skipped[0].get("message", ""))
    return TestOutcome(test, module, "passed", seconds)


# ---------------------------------------------------------------- running a module


@dataclass(frozen=True)
class NumbaSetup:
    env: Mapping[str, str]          # gleam-peer run's environment for the client agent
    results: Path                    # where each module's events and logs go
    test_timeout: float              # seconds one test may take
    stop: threading.Event            # set on Ctrl-C: every module's process is stopped


def _pytest_command(module: str, setup: NumbaSetup) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "gleam.peer.conformance.numba_plugin",
            "-p", "no:cacheprovider", "-c", str(setup.results / "pytest.ini"),
            "--rootdir", str(setup.results), "-q", "-rN", "--pyargs", module]


def run_module(module: str, setup: NumbaSetup) -> tuple[list[TestOutcome], float]:
    """Run one module to its end (through hangs and crashes); its outcomes and wall time."""
    events = setup.results / f"{module}.jsonl"
    state, offset = read_events(events)
    started = time.monotonic()
    attempts = 0
    while not state.complete:
        attempts += 1
        deselect = setup.results / f"{module}.deselect"
        deselect.write_text("\n".join(sorted(state.reported())))
        log = setup.results / "logs" / f"{module}.{attempts}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**setup.env, EVENTS_ENV: str(events), DESELECT_ENV: str(deselect),
               "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "0", "NUMBA_ENABLE_CUDASIM": "0"}
        with open(log, "wb") as out:
            proc = subprocess.Popen(_pytest_command(module, setup), cwd=setup.results, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                state, offset, hung = _watch(proc, events, state, offset, setup)
            finally:
                stop_group(proc)
        if setup.stop.is_set():
            raise Stopped
        state, offset = read_events(events, state, offset)
        running = state.running()
        if running is not None:
            why = "timeout" if hung else "crash"
            message = (f"no result within {setup.test_timeout:.0f} s" if hung
                       else f"the test process died ({_exit_text(proc.returncode)})")
            _append_event(events, {"event": "abandoned", "id": running, "why": why,
                                   "message": message, "gleam": _gleam_tail(log),
                                   "seconds": time.time() - state.started[running]})
        elif hung:   # stopped before any test started: collection hung
            _append_event(events, {"event": "collect-error", "id": module,
                                   "message": "no test started in time (collection hung)"})
        state, offset = read_events(events, state, offset)
        left = [t for t in state.collected if t not in state.reported()]
        # the plugin ended a process whose CUDA context was lost: the rest go on afresh
        restart = running is not None or proc.returncode == CONTEXT_LOST_EXIT
        if not restart or not left or attempts >= MAX_ATTEMPTS:
            for test in left if restart else []:
                _append_event(events, {"event": "abandoned", "id": test, "why": "crash",
                                       "message": f"not run: {attempts} processes died first"})
            _append_event(events, {"event": "complete", "exit": proc.returncode})
            state, offset = read_events(events, state, offset)
    return outcomes(module, state), time.monotonic() - started


def _watch(proc: subprocess.Popen[bytes], events: Path, state: ModuleState, offset: int,
           setup: NumbaSetup) -> tuple[ModuleState, int, bool]:
    """Follow the events until the process ends, or a test (or the collection, or the
    time between tests) outruns the limit; True in the last place when it was stopped
    for that."""
    since = time.time()
    heard = False   # any event from this process yet
    while proc.poll() is None and not setup.stop.is_set():
        before = offset
        state, offset = read_events(events, state, offset)
        heard = heard or offset > before
        running = state.running()
        begun = state.started[running] if running else max(since, state.last)
        limit = setup.test_timeout if heard else max(setup.test_timeout, STARTUP_LIMIT)
        if time.time() - begun > limit:
            stop_group(proc)
            return state, offset, True
        time.sleep(POLL)
    return state, offset, False


def _exit_text(status: int | None) -> str:
    if status is None:
        return "no status"
    if status < 0:
        import signal

        return f"killed by {signal.Signals(-status).name}" \
            if -status in signal.valid_signals() else f"signal {-status}"
    return f"exit status {status}"


def _gleam_tail(log: Path) -> list[str]:
    """The last lines of a dead process's output that say why: gleam's and a fatal error."""
    text = log.read_text(errors="replace")[-20000:] if log.exists() else ""
    lines = [line for line in text.splitlines()
             if line.startswith("gleam:") or "Fatal Python error" in line
             or "Segmentation" in line or "Aborted" in line]
    return lines[-8:]


def run_suite(modules: Iterable[str], setup: NumbaSetup, jobs: int, resume: bool,
              progress: Callable[[str, list[TestOutcome], float], None]) -> list[TestOutcome]:
    """Run the modules (``jobs`` at once); every module's outcomes, in module order."""
    setup.results.mkdir(parents=True, exist_ok=True)
    (setup.results / "pytest.ini").write_text(PYTEST_INI)
    modules = list(modules)
    if not resume:
        for module in modules:
            for stale in (setup.results / f"{module}.jsonl", setup.results / f"{module}.deselect"):
                stale.unlink(missing_ok=True)
    done: dict[str, list[TestOutcome]] = {}
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(run_module, m, setup): m for m in modules}
        for future in as_completed(futures):
            results, seconds = future.result()
            done[futures[future]] = results
            progress(futures[future], results, seconds)
    except BaseException:   # Ctrl-C, or a module's error: stop the others' processes
        setup.stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for m in modules for r in done.get(m, [])]


def partial_results(modules: Iterable[str], results: Path) -> list[TestOutcome]:
    """What the events files hold for ``modules`` (after an interrupted run)."""
    found = []
    for module in modules:
        state, _ = read_events(results / f"{module}.jsonl")
        found += outcomes(module, state)
    return found


def counts(results: Sequence[TestOutcome]) -> dict[str, int]:
    tally = {k: 0 for k in ("passed", "xfailed", "skipped", "failed", "error", "timeout",
                            "crash")}
    for r in results:
        tally[r.outcome] = tally.get(r.outcome, 0) + 1
    tally["run"] = sum(tally[k] for k in (*PASSING, *FAILING))
    return tally
