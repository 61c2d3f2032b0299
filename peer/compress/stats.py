"""What an aggregation sent and decided, per call and accumulated over a job."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class AggregationStats:
    """One aggregation of one worker.

    ``mode`` is ``"sketch"`` (index, then cells/raw values) or ``"dense"``
    (the whole tensor in one plain sum: too small to gain, or recently
    dense). Block counts say what the planner chose for each block; bytes
    are what this worker contributed to each reduction (a ring allreduce
    moves about twice that over each link).
    """

    coordinates: int = 0
    mode: str = "dense"
    union: int = 0
    blocks_empty: int = 0
    blocks_sketch: int = 0
    blocks_raw_dense: int = 0
    blocks_raw_nonfinite: int = 0
    blocks_raw_spread: int = 0
    blocks_failed: int = 0
    bytes_index: int = 0
    bytes_cells: int = 0
    bytes_raw: int = 0
    bytes_fallback: int = 0
    bytes_dense: int = 0
    reductions: int = 0
    encode_s: float = 0.0
    decode_s: float = 0.0

    @property
    def bytes_uncompressed(self) -> int:
        return 4 * self.coordinates

    @property
    def bytes_sent(self) -> int:
        return (self.bytes_index + self.bytes_cells + self.bytes_raw + self.bytes_fallback
                + self.bytes_dense)

    @property
    def ratio(self) -> float:
        """Uncompressed bytes over bytes sent (1.0 for a dense aggregation)."""
        return self.bytes_uncompressed / self.bytes_sent if self.bytes_sent else float("inf")

    def as_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.update(bytes_sent=self.bytes_sent, bytes_uncompressed=self.bytes_uncompressed,
                   ratio=self.ratio)
        return doc


_COUNTERS = tuple(f.name for f in fields(AggregationStats) if f.name != "mode")


@dataclass
class CompressionStats:
    """Totals over many aggregations; safe to read while another thread adds."""

    aggregations: int = 0
    dense_aggregations: int = 0
    totals: AggregationStats = field(default_factory=AggregationStats)
    last: AggregationStats | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, one: AggregationStats) -> None:
        with self._lock:
            self.aggregations += 1
            self.dense_aggregations += one.mode == "dense"
            for name in _COUNTERS:
                setattr(self.totals, name, getattr(self.totals, name) + getattr(one, name))
            self.last = one

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            totals = self.totals.as_dict()
            del totals["mode"]
            return {
                "aggregations": self.aggregations,
                "dense_aggregations": self.dense_aggregations,
                "totals": totals,
                "last": None if self.last is None else self.last.as_dict(),
            }
