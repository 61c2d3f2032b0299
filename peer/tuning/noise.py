"""Gradient noise scale from the workers' own gradients, and the learning-rate rule.

Each data-parallel step already holds two estimates of the true gradient G:
every worker's local mean gradient g_i over its b_i samples, and the global
mean over all B = sum(b_i) samples (the gradient that is applied). For
independent samples with per-sample gradient covariance Sigma,

    E |g_i|^2   = |G|^2 + tr(Sigma) / b_i
    E |g_bar|^2 = |G|^2 + tr(Sigma) / B

so with m = mean_i |g_i|^2 and h = mean_i (1 / b_i), the unbiased estimates
are

    tr(Sigma) = (m - |g_bar|^2) / (h - 1 / B)
    |G|^2     = |g_bar|^2 - tr(Sigma) / B

This is the estimator of Pollux (and of McCandlish et al.'s "simple noise
scale"), generalised to unequal batches. Single-step estimates are noisy
and may be negative, so both quantities are smoothed separately with a
bias-corrected exponential moving average and only then divided:
B_noise = tr(Sigma) / |G|^2, measured in samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gleam.peer.tuning.observation import efficiency


class NoiseScaleEstimator:
    """Smoothed |G|^2 and tr(Sigma) from per-replica and averaged squared norms."""

    def __init__(self, decay: float = 0.98) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError("decay must be in [0, 1)")
        self.decay = decay
        self._sqr = 0.0
        self._var = 0.0
        self._weight = 0.0  # for the bias correction of the moving averages
        self.updates = 0

    def update(
        self, batch_sizes: Sequence[int], local_sqr_norms: Sequence[float], global_sqr_norm: float
    ) -> bool:
        """Add one step. Returns False when the step says nothing (one worker,
        or a degenerate split)."""
        if len(batch_sizes) != len(local_sqr_norms):
            raise ValueError("one squared norm per worker is needed")
        sizes = [b for b in batch_sizes if b > 0]
        norms = [n for b, n in zip(batch_sizes, local_sqr_norms, strict=True) if b > 0]
        if len(sizes) < 2:
            return False
        total = sum(sizes)
        inv_mean = sum(1.0 / b for b in sizes) / len(sizes)
        spread = inv_mean - 1.0 / total
        if spread <= 0.0:
            return False
        var = (sum(norms) / len(norms) - global_sqr_norm) / spread
        sqr = global_sqr_norm - var / total
        if not (math.isfinite(var) and math.isfinite(sqr)):
            return False
        d = self.decay
        self._sqr = d * self._sqr + (1 - d) * sqr
        self._var = d * self._var + (1 - d) * var
        self._weight = d * self._weight + (1 - d)
        self.updates += 1
        return True

    @property
    def grad_sqr(self) -> float | None:
        """Smoothed |G|^2 (never below a tiny positive value), None before any update."""
        if not self._weight:
            return None
        return max(self._sqr / self._weight, 1e-12)

    @property
    def grad_var(self) -> float | None:
        """Smoothed tr(Sigma) of one sample's gradient, None before any update."""
        if not self._weight:
            return None
        return max(self._var / self._weight, 0.0)

    @property
    def noise_scale(self) -> float | None:
        """B_noise = tr(Sigma) / |G|^2; None before any update or while the smoothed
        |G|^2 is not positive (the gradient is then all noise as far as we can tell)."""
        if not self._weight or self._sqr <= 0.0:
            return None
        return max(self._var, 0.0) / self._sqr

    def state(self) -> dict[str, float | int]:
        return {"sqr": self._sqr, "var": self._var, "weight": self._weight,
                "updates": self.updates, "decay": self.decay}

    @classmethod
    def from_state(cls, state: dict[str, float | int]) -> NoiseScaleEstimator:
        est = cls(float(state["decay"]))
        est._sqr, est._var = float(state["sqr"]), float(state["var"])
        est._weight, est.updates = float(state["weight"]), int(state["updates"])
        return est


def lr_gain(batch: float, base_batch: float, noise_scale: float | None) -> float:
    """Learning-rate multiplier for a global ``batch`` when the rate was tuned at
    ``base_batch`` (the AdaScale gain that Pollux uses).

    With S = batch / base_batch, the gain is S * efficiency = S (B_noise + B0) / (B_noise + B):
    linear scaling while the batch is small beside the noise scale (each sample
    still adds new information), flattening towards 1 + B_noise / B0 once the
    batch is much larger (extra samples only average away noise that is
    already small). Below the base batch it falls between S and 1. Without a
    noise-scale estimate yet, the square-root rule sqrt(S) is used.
    """
    scale = batch / base_batch
    if noise_scale is None:
        return math.sqrt(scale)
    return scale * efficiency(batch, base_batch, noise_scale)
