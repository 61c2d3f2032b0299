"""The last sessions that ended on this agent, as the status view keeps them.

A session's live row (``ClientSession.row()``, ``ServedSession.row()``) leaves
the status document when the session ends; what a user still wants to know
afterwards is kept here, for both roles, in one shape: when it ended, how
long it ran, where, its call, byte and round-trip counters, and why it ended
when that was not the program ending it. Rows arrive on the sessions' own
threads and are read on the Trio thread, hence the lock.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Mapping
from typing import Any

KEEP = 16  # finished sessions the status document shows
# How sessions end when nothing went wrong: the program closed its connection
# (client), or its client closed the session or its data connection (server).
ENDED_BY_PROGRAM = "the program ended the session"
_NORMAL = frozenset({ENDED_BY_PROGRAM, "closed"})


def _int(row: Mapping[str, Any], key: str) -> int:
    value = row.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def finished_row(row: Mapping[str, Any], *, ended: float, reason: str,
                 failed: bool = False) -> dict[str, Any]:
    """The kept account of a session whose live row was ``row``: ``end_reason`` is
    None when the program ended it, else why it ended."""
    client = row.get("role") == "client"
    calls, waiting = _int(row, "calls"), _int(row, "waiting")
    started = row.get("started")
    out: dict[str, Any] = {
        "id": row.get("id"), "role": row.get("role"), "peer": row.get("peer"),
        "program": row.get("program"), "started": started, "ended": ended,
        "seconds": round(max(ended - started, 0.0), 3)
        if isinstance(started, float | int) else None,
        "calls": calls, "oneway": calls - waiting, "waiting": waiting,
        # Each waiting call is one round trip to the server and back.
        "round_trips": waiting,
        "bytes_to_server": _int(row, "bytes_to_server" if client else "bytes_in"),
        "bytes_from_server": _int(row, "bytes_from_server" if client else "bytes_out"),
        "bytes_saved": _int(row, "bytes_saved"),
        "end_reason": reason if failed or reason not in _NORMAL else None,
    }
    if client:
        out.update(pid=row.get("pid"), backend=row.get("backend"), reason=row.get("reason"),
                   estimate=row.get("estimate"), run=row.get("run") or None)
    return out


class FinishedSessions:
    """The last ``KEEP`` finished sessions, oldest first."""

    def __init__(self, keep: int = KEEP) -> None:
        self._rows: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, row: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append(row)

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._rows)
