"""Refused connections, logged so that a hostile client cannot flood the log.

The first refusal of a (source host, reason) pair in an interval is logged in
full; the rest are counted and reported as one summary line when the interval
ends. Sources are hosts, not host:port pairs (an attacker picks a new port per
connection). The table is bounded: past ``max_sources`` pairs, refusals are
counted under one "other sources" entry, so memory stays bounded too.

Sans-I/O: the agent passes the time in and logs the lines it gets back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DEFAULT_INTERVAL_S = 60.0
DEFAULT_MAX_SOURCES = 256
OTHER = "other sources"
# Sizes, counts and versions inside a reason would make every refusal unique.
_NUMBERS = re.compile(r"\d+")


def reason_class(reason: str) -> str:
    """The part of a refusal reason that identifies its kind (numbers masked)."""
    return _NUMBERS.sub("N", reason)[:120]


@dataclass
class _Count:
    first_reason: str
    suppressed: int = 0


@dataclass
class RefusalLog:
    """Counts refusals per source and reason; says which lines to log."""

    interval_s: float = DEFAULT_INTERVAL_S
    max_sources: int = DEFAULT_MAX_SOURCES
    _since: float | None = None
    _counts: dict[tuple[str, str], _Count] = field(default_factory=dict)

    def note(self, source: str, reason: str, now: float) -> list[str]:
        """Record one refusal; returns the lines to log now (possibly none)."""
        lines = self.flush(now)
        if self._since is None:
            self._since = now
        key = (source, reason_class(reason))
        count = self._counts.get(key)
        if count is None and len(self._counts) >= self.max_sources:
            key = (OTHER, "any reason")
            count = self._counts.get(key)
        if count is None:
            self._counts[key] = _Count(reason)
            if key[0] == OTHER:
                return [*lines, f"refusing connections from more than {self.max_sources} "
                        f"sources and reasons; counting the rest together"]
            return [*lines, f"refused connection from {source}: {reason}"]
        count.suppressed += 1
        return lines

    def flush(self, now: float, force: bool = False) -> list[str]:
        """Summary lines for the interval, once it has ended (or at once with ``force``)."""
        if self._since is None or (not force and now - self._since < self.interval_s):
            return []
        span = now - self._since
        lines = [
            f"refused {c.suppressed} more connection{'s' if c.suppressed != 1 else ''} "
            f"from {source} ({c.first_reason}) in the last {span:.0f} s"
            for (source, _), c in self._counts.items()
            if c.suppressed
        ]
        self._counts.clear()
        self._since = None
        return lines
