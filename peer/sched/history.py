"""What each program needed in its past runs: the demand the scheduler ranks it by.

The interposer reports no demand before a session runs, so the client's agent
learns it: when a session ends, its measured demand (``measured.py``) updates
a running estimate under the program's key (``peer/cuda/client/program_key.py``).
The next session of the same program is ranked by that estimate instead of
``DEFAULT_DEMAND`` (docs/scheduler.md, "Learned demand").

Each estimate is an exponentially weighted mean, so a program whose inputs
grow is followed within a few runs and one odd run does not decide alone.
The table is bounded (the least recently updated program goes first) and
kept as one JSON file in the agent's state directory, written atomically;
the file is untrusted input: anything malformed in it is dropped, and a file
that cannot be read at all starts an empty table with one log line.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleam.peer.sched.cost import Demand

log = logging.getLogger("gleam.sched")

FILE_NAME = "demand.json"
FORMAT = 1
MAX_ENTRIES = 256  # programs remembered per agent
MAX_KEY = 512  # characters of a program key
MAX_FILE = 1 << 20  # bytes: a larger file is not ours (256 entries take ~60 kB)
WEIGHT = 0.5  # of the newest run in the running estimate
# Bounds of a remembered figure: larger ones are nonsense, not demand.
MAX_BYTES = 1 << 50
MAX_WAITS = 1 << 40
MAX_COMPUTE = 1e15  # GFLOP
MAX_RUNS = 1 << 31
# The words a ranking ends with when the program has no learned demand yet.
DEFAULT_NOTE = "demand guessed: no earlier run of this program"


@dataclass(frozen=True)
class Learned:
    """A program's running estimate and the number of runs behind it."""

    unique_bytes: float
    waits: float
    compute: float
    runs: int

    def demand(self) -> Demand:
        return Demand(unique_bytes=round(self.unique_bytes), waits=round(self.waits),
                      compute=self.compute)

    def note(self) -> str:
        return f"demand learned from {self.runs} run{'s' if self.runs != 1 else ''}"

    def updated(self, sample: Demand, weight: float = WEIGHT) -> Learned:
        def mix(old: float, new: float) -> float:
            return (1 - weight) * old + weight * new

        return Learned(mix(self.unique_bytes, sample.unique_bytes), mix(self.waits, sample.waits),
                       mix(self.compute, sample.compute), min(self.runs + 1, MAX_RUNS))

    def as_dict(self) -> dict[str, Any]:
        return {"unique_bytes": self.unique_bytes, "waits": self.waits,
                "compute": self.compute, "runs": self.runs}


def _figure(value: Any, limit: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0 <= value <= limit else None


def learned_of(doc: Any) -> Learned | None:
    """One entry of the file, or None when any field is missing or out of bounds."""
    if not isinstance(doc, dict):
        return None
    figures = [_figure(doc.get(k), limit) for k, limit in
               (("unique_bytes", MAX_BYTES), ("waits", MAX_WAITS), ("compute", MAX_COMPUTE))]
    runs = doc.get("runs")
    if any(f is None for f in figures) or not isinstance(runs, int) or isinstance(runs, bool) \
            or not 1 <= runs <= MAX_RUNS:
        return None
    unique_bytes, waits, compute = (f or 0.0 for f in figures)
    return Learned(unique_bytes, waits, compute, runs)


def _any_arguments(program: str) -> str:
    return f"{program} (any arguments)"


def _sample_ok(sample: Demand) -> bool:
    return (0 <= sample.unique_bytes <= MAX_BYTES and 0 <= sample.waits <= MAX_WAITS
            and math.isfinite(sample.compute) and 0 <= sample.compute <= MAX_COMPUTE)


class DemandHistory:
    """Programs' learned demands, least recently updated first (not thread-safe:
    the agent uses it from its Trio thread only)."""

    def __init__(self, path: Path | None = None, max_entries: int = MAX_ENTRIES) -> None:
        self.path = path
        self.max_entries = max(max_entries, 1)
        self._entries: OrderedDict[str, Learned] = OrderedDict()
        self._write_lock = threading.Lock()  # two saves in worker threads share one temp name

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Learned | None:
        return self._entries.get(key) if key else None

    def demand_for(self, key: str, default: Demand, program: str = "") -> tuple[Demand, str]:
        """The demand to rank ``key``'s session by, and the words that say which.

        ``program`` is the key of the program's runs with any arguments: the
        estimate when this exact command line has not run before."""
        learned = self.get(key)
        if learned is not None:
            return learned.demand(), learned.note()
        learned = self.get(_any_arguments(program)) if program and program != key else None
        if learned is not None:
            return learned.demand(), f"{learned.note()} of the program with other arguments"
        return default, DEFAULT_NOTE

    def record(self, key: str, sample: Demand, program: str = "") -> Learned | None:
        """Fold one finished run into ``key``'s estimate (and ``program``'s, the
        estimate over any arguments); None when nothing was kept."""
        if program and program != key:
            self._record(_any_arguments(program), sample)
        return self._record(key, sample)

    def _record(self, key: str, sample: Demand) -> Learned | None:
        if not key or len(key) > MAX_KEY or not _sample_ok(sample):
            return None
        old = self._entries.pop(key, None)
        new = (old.updated(sample) if old is not None else
               Learned(float(sample.unique_bytes), float(sample.waits), sample.compute, 1))
        self._entries[key] = new
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return new

    # ------------------------------------------------------------ the file

    def document(self) -> dict[str, Any]:
        return {"format": FORMAT,
                "programs": [{"key": k, **v.as_dict()} for k, v in self._entries.items()]}

    def load(self) -> None:
        """Read the file (a missing one is an empty table; a bad one too, said once)."""
        self._entries.clear()
        if self.path is None or not self.path.exists():
            return
        try:
            if self.path.stat().st_size > MAX_FILE:
                raise ValueError(f"larger than {MAX_FILE} bytes")
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or doc.get("format") != FORMAT \
                    or not isinstance(doc.get("programs"), list):
                raise ValueError("not a demand history of format 1")
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            log.warning("demand history %s unreadable (%s): starting empty", self.path, exc)
            return
        for item in doc["programs"][-self.max_entries:]:
            key = item.get("key") if isinstance(item, dict) else None
            learned = learned_of(item)
            if isinstance(key, str) and 0 < len(key) <= MAX_KEY and learned is not None:
                self._entries.pop(key, None)
                self._entries[key] = learned

    def save(self, document: dict[str, Any] | None = None) -> None:
        """Write the table atomically (a crash leaves the old file or the new one).

        ``document`` is a ``document()`` taken earlier: a worker thread writes
        it while the Trio thread goes on recording."""
        if self.path is None:
            return
        doc = document if document is not None else self.document()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with self._write_lock:
            try:
                tmp.write_text(json.dumps(doc), encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError as exc:
                log.warning("cannot write the demand history %s: %s", self.path, exc)
                tmp.unlink(missing_ok=True)
