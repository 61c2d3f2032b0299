"""Which part of a program's time a faster server shortens: a fit across its runs.

A run's time that the link does not explain (``measured.py``) is not all
compute: the program's own CPU work, the agents' processing of its bytes and
the machine's other load take the same time on any server. Taken whole as
compute, that time makes the model send a transfer to the fastest server. So
the history also fits, over the runs of a program,

    seconds not explained by the link = fixed + compute x seconds per GFLOP

where a run's *seconds per GFLOP* is ``sharing / speed`` of the server it ran on.
The slope is the program's compute; ``fixed`` adds the same to every server's
estimate and so never changes a ranking. The fit is a least-squares line on
exponentially weighted moments (newer runs weigh more, as in the history's
other figures), used only once the runs' seconds per GFLOP differ by more than
``MIN_SPREAD`` (runs on one server alone cannot tell fixed time from compute).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_SPREAD = 0.1  # standard deviation of the runs' seconds per GFLOP, relative to their mean
MAX_X = 1e9  # seconds per GFLOP: slower than any device
MAX_Y = 1e9  # seconds


@dataclass(frozen=True)
class SpeedFit:
    """Weighted moments of (x = seconds per GFLOP, y = seconds the link does not explain)."""

    n: int = 0
    mx: float = 0.0
    my: float = 0.0
    mxx: float = 0.0
    mxy: float = 0.0

    def updated(self, x: float, y: float, weight: float) -> SpeedFit:
        if not (math.isfinite(x) and math.isfinite(y) and 0 < x <= MAX_X and 0 <= y <= MAX_Y):
            return self
        if self.n == 0:
            return SpeedFit(1, x, y, x * x, x * y)

        def mix(old: float, new: float) -> float:
            return (1 - weight) * old + weight * new

        return SpeedFit(min(self.n + 1, 1 << 31), mix(self.mx, x), mix(self.my, y),
                        mix(self.mxx, x * x), mix(self.mxy, x * y))

    def compute(self) -> float | None:
        """The fitted GFLOP, or None when the runs do not tell (too few, too alike)."""
        if self.n < 2 or self.mx <= 0:
            return None
        variance = self.mxx - self.mx * self.mx
        if variance <= (MIN_SPREAD * self.mx) ** 2:
            return None
        slope = (self.mxy - self.mx * self.my) / variance
        # Never below nothing, never above all of the time (a negative fixed part).
        return min(max(slope, 0.0), self.my / self.mx)

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mx": self.mx, "my": self.my, "mxx": self.mxx, "mxy": self.mxy}


def fit_of(doc: Any) -> SpeedFit:
    """A fit from the history file; an absent or malformed one is no fit (untrusted input)."""
    if not isinstance(doc, dict):
        return SpeedFit()
    n = doc.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 1 << 31:
        return SpeedFit()
    values = []
    for key in ("mx", "my", "mxx", "mxy"):
        v = doc.get(key)
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) \
                or not 0 <= v <= MAX_X * MAX_Y:
            return SpeedFit()
        values.append(float(v))
    mx, my, mxx, mxy = values
    return SpeedFit(n, mx, my, mxx, mxy)
