"""Running one program through gleam, with a time limit, and reading its verdict.

A program runs exactly as ``gleam-peer run`` runs it (the same environment,
``run_cmd.run_environment``: gleam's libcuda.so.1 first on LD_LIBRARY_PATH and
the client agent's socket), in a process group of its own so that a time limit
or Ctrl-C stops it and every process it started.

A sample runs in a folder laid out like the checkout (``Samples/<group>/<name>``
with links to the sample's files and its built images, ``Common`` beside
``Samples``), because the samples look for their data and kernel files relative
to the working directory, and whatever a sample writes lands there, not in the
checkout.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gleam.peer.conformance.build import Built
from gleam.peer.conformance.causes import (
    LINE_LIMIT,
    OPEN_LINE,
    cause_label,
    evidence,
    first_error_line,
)
from gleam.peer.conformance.samples import EXIT_WAIVED, FAILURE, Sample

OUTPUT_LIMIT = 1 << 20   # bytes of each stream kept for the verdict
POLL = 0.2
# A program's stdout into a file is block-buffered: one stopped by the time limit
# would leave nothing to say where it was. stdbuf (coreutils) makes C stdio flush
# each line; without it the run goes on buffered.
_STDBUF = shutil.which("stdbuf")
LINE_BUFFERED = [_STDBUF, "-oL", "-eL"] if _STDBUF else []


@dataclass(frozen=True)
class Finished:
    """A program's end: exit status (None when it ran out of time) and its output."""

    status: int | None
    seconds: float
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Outcome:
    """A sample's verdict: pass, fail, waived, timeout, crash or build-failure."""

    name: str
    status: str
    seconds: float
    cause: str = ""          # the first error line
    group: str = ""          # the known cause it belongs to (causes.CAUSES), or "other"
    exit: int | None = None
    tail: list[str] = field(default_factory=list)   # the output's last lines, for the JSON

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - OUTPUT_LIMIT))
        return f.read().decode(errors="replace")


class Stopped(Exception):
    """The run was interrupted (Ctrl-C); the program was stopped."""


def run_program(argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float,
                logs: Path, stop: threading.Event) -> Finished:
    """Run ``argv`` in its own process group; stop the group when ``timeout`` passes
    (status None) or ``stop`` is set (Stopped)."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / "stdout", logs / "stderr"
    started = time.monotonic()
    status: int | None = None
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)
        try:
            while time.monotonic() - started < timeout and not stop.is_set():
                try:
                    status = proc.wait(POLL)
                    break
                except subprocess.TimeoutExpired:
                    continue
        finally:
            stop_group(proc)
    if status is None and stop.is_set():
        raise Stopped
    return Finished(status, time.monotonic() - started, _tail(out_path), _tail(err_path))


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of the program's process group (children it forked too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def verdict(sample: Sample, done: Finished, timeout: float) -> Outcome:
    """What ``done`` means for ``sample`` (samples.py says what success looks like)."""
    output = done.stdout + "\n" + done.stderr
    # Where the session ran (its open line) says nothing of how the program did.
    tail = [line for line in output.splitlines()
            if line.strip() and not line.startswith(OPEN_LINE)][-12:]
    cause = first_error_line(done.stdout, done.stderr)
    found = evidence(done.stdout, done.stderr)
    if done.status is None:
        cause = f"no result within {timeout:.0f} s (last line: {tail[-1] if tail else '-'})"
        return Outcome(sample.name, "timeout", done.seconds, cause[:LINE_LIMIT],
                       cause_label(cause), None, tail)
    if done.status == 0 and FAILURE.search(done.stdout) is None \
            and (not sample.expect or re.search(sample.expect, output)):
        return Outcome(sample.name, "pass", done.seconds, "", "", 0, tail)
    if done.status < 0:
        signo = -done.status
        name = signal.Signals(signo).name if signo in signal.valid_signals() else str(signo)
        status, cause = "crash", f"killed by {name}" + (f"; {cause}" if cause else "")
    elif done.status == EXIT_WAIVED:
        status = "waived"
    else:
        status = "fail"
        if not cause:
            cause = (f"exit 0 without its success line /{sample.expect}/" if done.status == 0
                     else f"exit status {done.status}")
    return Outcome(sample.name, status, done.seconds, cause, cause_label(found or cause),
                   done.status, tail)


def lay_out(sample: Sample, built: Built, checkout: Path, root: Path,
            include: Path | None) -> Path:
    """The sample's working folder under ``root``: links to its files, its built images
    and the toolkit headers it reads at run time (from ``include``)."""
    (root / "Samples").mkdir(parents=True, exist_ok=True)
    common = root / "Common"
    # Samples are laid out by --jobs threads at once: the first one makes the link.
    with contextlib.suppress(FileExistsError):
        common.symlink_to(checkout / "Common")
    work = root / sample.path
    work.mkdir(parents=True, exist_ok=True)
    source = checkout / sample.path
    for entry in sorted(source.iterdir()):
        link = work / entry.name
        if not link.exists():
            link.symlink_to(entry)
    for _, image in sample.images:
        link = work / image
        if link.is_symlink():
            link.unlink()
        link.symlink_to(built.folder / image)
    for header in sample.headers:
        link = work / Path(header).name
        if include is not None and not link.exists():
            link.symlink_to(include / header)
    return work


def run_sample(sample: Sample, built: Built, checkout: Path, root: Path, logs: Path,
               env: Mapping[str, str], timeout: float, stop: threading.Event,
               include: Path | None = None) -> Outcome:
    """Run one sample in a folder under ``root``; its stdout and stderr stay in
    ``logs/NAME`` (the last run's, for reading a failure whole)."""
    if not built.ok:
        return Outcome(sample.name, "build-failure", 0.0, built.error, "build failure")
    work = lay_out(sample, built, checkout, root, include)
    limit = max(sample.timeout or 0.0, timeout)
    done = run_program([*LINE_BUFFERED, str(built.program), *sample.args], work, env, limit,
                       logs / sample.name, stop)
    return verdict(sample, done, limit)
