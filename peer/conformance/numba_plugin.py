"""A pytest plugin for running numba-cuda's tests inside a program run through gleam.

Loaded with ``-p gleam.peer.conformance.numba_plugin`` by the conformance run
(numba.py). It does three things:

* provides what numba-cuda's own ``testing/conftest.py`` provides (it is not
  in the wheel): the ``--dump-failed-filechecks`` option and the class fixture
  ``initialize_from_pytest_config`` that ``CUDATestCase`` uses;
* deselects the tests named in ``$GLEAM_CONFORMANCE_DESELECT`` (one id a line:
  those a previous attempt already reported, so a run resumes after a test
  that hung or crashed the process);
* appends one JSON line per event to ``$GLEAM_CONFORMANCE_EVENTS``, flushed at
  once, so the harness sees which test is running and keeps every result even
  when the process dies: ``collected`` (the ids), ``start``, ``report`` (per
  phase and per subtest), ``finish``, ``collect-error``;
* ends the process after a test that failed with an error that leaves the CUDA
  context unusable (``CUDA_ERROR_ILLEGAL_ADDRESS`` and the other sticky errors:
  on a GPU too, no later call in that process can succeed), with the event
  ``context-lost`` and the exit status ``CONTEXT_LOST_EXIT``, so the harness runs
  the tests after it in a fresh process, as after a crash, instead of counting
  each of them as that one test's failure again.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

EVENTS_ENV = "GLEAM_CONFORMANCE_EVENTS"
DESELECT_ENV = "GLEAM_CONFORMANCE_DESELECT"
SECTION_LIMIT = 4000
CONTEXT_LOST_EXIT = 86
# The errors after which CUDA documents that the context "cannot be used anymore".
STICKY_ERRORS = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
                 "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                 "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
                 "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_LAUNCH_TIMEOUT",
                 "CUDA_ERROR_ASSERT")
_lost_in: set[str] = set()   # tests that failed with a sticky error


class _Events:
    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, event: dict[str, Any]) -> None:
        if self._file is None:
            return
        event["t"] = time.time()
        self._file.write(json.dumps(event) + "\n")
        self._file.flush()


_events = _Events(os.environ.get(EVENTS_ENV))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--dump-failed-filechecks", action="store_true",
                     help="numba-cuda: dump reproducers for FileCheck tests that fail")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request: pytest.FixtureRequest) -> None:
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get(DESELECT_ENV)
    done = set(Path(path).read_text().split("\n")) if path and Path(path).is_file() else set()
    keep = [item for item in items if item.nodeid not in done]
    dropped = [item for item in items if item.nodeid in done]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    _events.write({"event": "collected", "ids": [item.nodeid for item in items]})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _events.write({"event": "collect-error", "id": report.nodeid,
                       "message": _crash_line(report), "text": str(report.longrepr)[-3000:]})


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _events.write({"event": "start", "id": nodeid})


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    _events.write({"event": "finish", "id": nodeid})
    if nodeid in _lost_in:
        _events.write({"event": "context-lost", "id": nodeid})
        os._exit(CONTEXT_LOST_EXIT)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    event: dict[str, Any] = {
        "event": "report", "id": report.nodeid, "when": report.when,
        "outcome": report.outcome, "seconds": report.duration,
        "subtest": type(report).__name__ == "SubtestReport",
        "xfail": hasattr(report, "wasxfail"),
    }
    if report.failed:
        event["message"] = _crash_line(report)
        event["text"] = str(report.longrepr)[-3000:]
        event["gleam"] = _gleam_lines(report)
        if any(name in event["text"] for name in STICKY_ERRORS):
            _lost_in.add(report.nodeid)
    elif report.skipped and isinstance(report.longrepr, tuple):
        event["message"] = str(report.longrepr[2])[:300]
    _events.write(event)


def _crash_line(report: pytest.CollectReport | pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0][:300] if crash.message else ""
    lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    return (errors or lines or [""])[0][:300]


def _gleam_lines(report: pytest.TestReport) -> list[str]:
    """The lines gleam printed on the test's stderr (pytest captured them)."""
    found: list[str] = []
    for title, text in report.sections:
        if "stderr" in title:
            found += [line for line in text[-SECTION_LIMIT * 4:].splitlines()
                      if line.startswith("gleam:")]
    return found[:20]
