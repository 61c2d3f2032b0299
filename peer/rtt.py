"""Round-trip time of one link: a smoothed value for decisions, a window for percentiles."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RttSummary:
    ewma_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    samples: int


class RttEstimator:
    # TCP's classic smoothing gain: recent enough to follow a changing link,
    # smooth enough that one scheduling hiccup does not swing decisions.
    ALPHA = 0.125

    def __init__(self, window: int = 64) -> None:
        self._ewma: float | None = None
        self._window: deque[float] = deque(maxlen=window)
        self._count = 0

    def add(self, seconds: float) -> None:
        if seconds < 0:
            return
        self._count += 1
        self._window.append(seconds)
        self._ewma = seconds if self._ewma is None else (
            (1 - self.ALPHA) * self._ewma + self.ALPHA * seconds
        )

    @property
    def ewma(self) -> float | None:
        return self._ewma

    def _percentile(self, q: float) -> float | None:
        if not self._window:
            return None
        ordered = sorted(self._window)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> RttSummary:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v * 1000, 3)

        return RttSummary(
            ms(self._ewma), ms(self._percentile(0.5)), ms(self._percentile(0.9)), self._count
        )
