"""What ``gleam-peer run`` tells the program's user about its CUDA sessions.

When a session opens, the client agent writes one line into its HELLO: the
server, its device, why it was chosen and the link (``open_line``); the
interposer prints it on the program's stderr when ``GLEAM_SESSION_LINE`` is set,
which ``run`` does unless ``--quiet``. ``run`` tags the program's sessions with a
run id (``GLEAM_RUN_ID``, passed on in the attach request); the agent tallies
the sessions of each run as they end (``RunBook``), and once the program has
exited ``run`` asks for the tally (the ``cuda_run`` control request) and prints
one line (``end_line``). A run may open no session, one, or several (a program
that starts CUDA programs of its own): the line says which.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gleam.peer.sched.ranking import duration, parts
from gleam.peer.units import bits_text, bytes_text, rtt_text

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink
    from gleam.peer.sched.choice import Choice

MAX_RUN_ID = 64  # characters of a run id
RUNS_KEPT = 64  # runs whose tally the agent keeps
FAILURES_KEPT = 4  # end reasons kept per run


# ---------------------------------------------------------------- the open line

def why_chosen(choice: Choice, note: str) -> str:
    """Why the session's server was chosen, in a few words: the cost model's
    estimate for it and what that rests on, or the choice's own reason (named
    with --peer, this agent's own backend, a fallback after denied leases)."""
    ranking = choice.ranking
    if choice.link is None or ranking is None or not ranking.order:
        return choice.reason
    chosen = ranking.estimate_of(choice.link.node_id)
    if chosen is None or ranking.order[0] != chosen.node_id:
        return choice.reason
    return (f"soonest estimated completion {duration(chosen.total)} "
            f"({parts(chosen.transfer, chosen.waiting, chosen.compute)}) [{note}]")


def link_words(link: PeerLink | None) -> str:
    """The link to the server as measured now."""
    if link is None:
        return "no link: this agent's own backend serves it"
    rate = link.bandwidth.bytes_per_s
    measured = link.rtt_ms
    rtt = f"RTT {rtt_text(measured)}" if measured is not None else "RTT not measured yet"
    return f"link {rtt}, " + (bits_text(rate * 8) if rate else "bandwidth not measured yet")


# How the interposer prints the open line (with its "gleam: " prefix): readers of a
# program's stderr (the scheduler lab, conformance) find or skip it by this.
OPEN_LINE_PREFIX = "gleam: running on "


def open_line(server: str, device: str, why: str, link: str) -> str:
    """The line the interposer prints when the session opens."""
    return f"running on {server} ({device}), {why}; {link}"


# ---------------------------------------------------------------- the tally

@dataclass
class RunTally:
    """The ended sessions of one run, added up."""

    sessions: int = 0
    servers: dict[str, int] = field(default_factory=dict)  # server name -> sessions
    seconds: float = 0.0  # the sessions' time, added up
    calls: int = 0
    oneway: int = 0
    waiting: int = 0
    bytes_to_server: int = 0
    bytes_saved: int = 0
    failed: int = 0  # sessions that ended early (not by the program)
    failures: list[str] = field(default_factory=list)  # why, the first few

    def add(self, row: Mapping[str, Any]) -> None:
        """Count one finished session (a ``finished.finished_row``)."""
        self.sessions += 1
        server = str(row.get("peer") or "?")
        self.servers[server] = self.servers.get(server, 0) + 1
        self.seconds += float(row.get("seconds") or 0.0)
        for name in ("calls", "oneway", "waiting", "bytes_to_server", "bytes_saved"):
            setattr(self, name, getattr(self, name) + int(row.get(name) or 0))
        if row.get("end_reason"):
            self.failed += 1
            if len(self.failures) < FAILURES_KEPT:
                self.failures.append(str(row["end_reason"]))

    def as_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "servers": dict(self.servers),
                "seconds": self.seconds, "calls": self.calls, "oneway": self.oneway,
                "waiting": self.waiting, "round_trips": self.waiting,
                "bytes_to_server": self.bytes_to_server, "bytes_saved": self.bytes_saved,
                "failed": self.failed, "failures": list(self.failures)}


class RunBook:
    """The tallies of the last ``RUNS_KEPT`` runs, by run id. Sessions end on their
    reader threads; ``run`` asks on the Trio thread: hence the lock."""

    def __init__(self, kept: int = RUNS_KEPT) -> None:
        self._kept = kept
        self._runs: collections.OrderedDict[str, RunTally] = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, run: str, row: Mapping[str, Any]) -> None:
        with self._lock:
            tally = self._runs.pop(run, None) or RunTally()
            tally.add(row)
            self._runs[run] = tally
            while len(self._runs) > self._kept:
                self._runs.popitem(last=False)

    def report(self, run: str) -> dict[str, Any]:
        with self._lock:
            tally = self._runs.get(run)
            return (tally or RunTally()).as_dict()


MAX_WAIT = 10.0  # seconds a `cuda_run` request waits for its sessions' end


def run_args(args: Mapping[str, Any]) -> tuple[str, float]:
    """The ``cuda_run`` request's (run id, seconds to wait); a malformed one asks
    about no run and waits for nothing."""
    run, wait = args.get("run", ""), args.get("wait", 0)
    run = run[:MAX_RUN_ID] if isinstance(run, str) else ""
    wait = float(wait) if isinstance(wait, int | float) and not isinstance(wait, bool) else 0.0
    return run, min(max(wait, 0.0), MAX_WAIT) if wait == wait else 0.0


# ---------------------------------------------------------------- the end line

def _servers(servers: Mapping[str, int]) -> str:
    if len(servers) == 1:
        return next(iter(servers))
    named = [f"{name} ({n})" for name, n in sorted(servers.items())]
    return ", ".join(named[:-1]) + f" and {named[-1]}"


def end_line(report: Mapping[str, Any], wall: float) -> str:
    """The line ``run`` prints once the program exited: its sessions' calls, bytes
    and round trips, and the program's wall time."""
    sessions, running = int(report.get("sessions", 0)), int(report.get("running", 0))
    if sessions == 0:
        head = "the program opened no CUDA session" if running == 0 else "no session ended yet"
        return f"{head} (it ran {wall:.2f} s)" + _still(running)
    where = _servers(report.get("servers") or {})
    head = f"ran on {where}" if sessions == 1 else f"{sessions} sessions on {where}"
    calls, oneway, waiting = (int(report.get(k, 0)) for k in ("calls", "oneway", "waiting"))
    line = (f"{head}: {calls:,} calls ({oneway:,} one-way, {waiting:,} waiting), "
            f"{int(report.get('round_trips', waiting)):,} round trips, "
            f"{bytes_text(report.get('bytes_to_server', 0))} sent, "
            f"{bytes_text(report.get('bytes_saved', 0))} saved by the blob cache; "
            f"{'its session' if sessions == 1 else 'the sessions'} lasted "
            f"{duration(float(report.get('seconds', 0.0)))}, the program {wall:.2f} s")
    failures = list(report.get("failures") or [])
    if failures:
        failed = int(report.get("failed", len(failures)))
        ended = "the session ended" if sessions == 1 else f"{failed} ended early"
        line += f"; {ended}: {failures[0]}"
    return line + _still(running)


def _still(running: int) -> str:
    if running <= 0:
        return ""
    return f"; {running} session{'s' if running != 1 else ''} of its children still running"
