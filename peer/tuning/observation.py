"""What the tuner sees every K iterations, and the actions it may take.

An :class:`Observation` summarises one window of K iterations: per worker
its batch size, throughput, compute time, communication wait, utilization
and links; globally the straggler gap, loss and its trend, gradient norm
and the gradient noise scale. :func:`worker_features` and
:func:`global_features` turn it into the fixed-size, dimensionless vectors
the PPO networks read, so one policy serves any number of workers and any
speed of hardware.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

# The five actions, per worker: halve, -25 %, keep, +25 %, double.
ACTION_FACTORS: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 2.0)
ACTION_NAMES: tuple[str, ...] = ("halve", "-25%", "keep", "+25%", "double")
KEEP = 2


def apply_action(batch: int, action: int, min_batch: int, max_batch: int) -> int:
    """The batch size after ``action``, clamped to ``[min_batch, max_batch]``.

    A growing action always grows by at least one sample (and a shrinking one
    shrinks by at least one), so that small batches are not stuck by rounding.
    """
    factor = ACTION_FACTORS[action]
    new = round(batch * factor)
    if factor > 1.0:
        new = max(new, batch + 1)
    elif factor < 1.0:
        new = min(new, batch - 1)
    return max(min_batch, min(max_batch, new))


def action_mask(batch: int, min_batch: int, max_batch: int) -> NDArray[np.bool_]:
    """Actions that change something: at a limit, moving further equals keeping."""
    mask = np.ones(len(ACTION_FACTORS), dtype=bool)
    for a in range(len(ACTION_FACTORS)):
        if a != KEEP and apply_action(batch, a, min_batch, max_batch) == batch:
            mask[a] = False
    return mask


def max_batch_for_memory(
    free_bytes: int, bytes_per_sample: int, *, reserve: float = 0.1, ceiling: int | None = None
) -> int:
    """The largest batch whose activations fit in ``free_bytes`` (less a reserve).

    ``bytes_per_sample`` is what one sample costs during forward and backward
    (activations and their gradients); measure it once with two batch sizes
    (the difference of peak memory over the difference of sizes).
    """
    if bytes_per_sample <= 0:
        raise ValueError("bytes_per_sample must be positive")
    fits = int(free_bytes * (1.0 - reserve)) // bytes_per_sample
    if ceiling is not None:
        fits = min(fits, ceiling)
    return max(1, fits)


@dataclass(frozen=True)
class WorkerObservation:
    """One worker over one window (means per iteration)."""

    batch_size: int
    samples_per_s: float  # the worker's compute throughput: batch / compute time
    compute_s: float  # forward, backward and optimizer work per iteration
    comm_wait_s: float  # time in the gradient exchange, waiting for others included
    utilization: float  # 0..1: the GPU's (NVML) or, without one, the process's CPU share
    min_batch: int
    max_batch: int  # what its memory allows
    rtt_ms: float | None = None  # its links, from the mesh's gossip (mean over links)
    bandwidth_bps: float | None = None  # bits/s, the slowest of its links
    # d ln(compute) / d ln(batch), from its past batch changes: 0 when fixed
    # overhead dominates (more samples are nearly free), 1 when time is per sample.
    compute_elasticity: float | None = None

    @property
    def iteration_s(self) -> float:
        return self.compute_s + self.comm_wait_s


@dataclass(frozen=True)
class Observation:
    """The state of a data-parallel job over the last window of iterations."""

    workers: tuple[WorkerObservation, ...]
    iterations: int  # in the window
    seconds: float  # wall time of the window
    loss: float  # mean training loss over the window
    loss_trend: float  # ln(previous window's loss / this one's): > 0 is progress
    grad_norm: float  # |mean gradient|, mean over the window
    base_batch: int  # the global batch the learning rate was tuned for
    grad_sqr: float | None = None  # |G|^2, smoothed (noise-scale estimator)
    grad_var: float | None = None  # tr(Sigma) of one sample's gradient, smoothed
    grad_sqr_change: float = 0.0  # ln(|G|^2 now / |G|^2 a window ago)
    previous_actions: tuple[int, ...] = field(default=())

    @property
    def global_batch(self) -> int:
        return sum(w.batch_size for w in self.workers)

    @property
    def noise_scale(self) -> float | None:
        """B_noise = tr(Sigma) / |G|^2, in samples; None until both are known."""
        if self.grad_sqr is None or self.grad_var is None or self.grad_sqr <= 0:
            return None
        return self.grad_var / self.grad_sqr

    @property
    def straggler_gap_s(self) -> float:
        """Slowest worker's compute time minus the mean: what the others wait for."""
        times = [w.compute_s for w in self.workers]
        return max(times) - sum(times) / len(times)

    @property
    def iteration_s(self) -> float:
        return self.seconds / max(1, self.iterations)


def efficiency(batch: float, base_batch: float, noise_scale: float | None) -> float:
    """Statistical efficiency of ``batch`` relative to ``base_batch`` (Pollux):
    progress per sample at ``batch`` over progress per sample at ``base_batch``,
    ``(B_noise + B0) / (B_noise + B)``; 1 while the noise scale is unknown."""
    if noise_scale is None:
        return 1.0
    return (noise_scale + base_batch) / (noise_scale + batch)


WORKER_FEATURES = 12
DEFAULT_ELASTICITY = 0.7  # until a worker's batch has changed once


class ElasticityTracker:
    """Each worker's compute-time elasticity, from consecutive windows.

    When a worker's batch changed by more than 10 % between two windows,
    ln(c / c_prev) / ln(b / b_prev) is one measurement (clipped to [0, 1.5]);
    measurements are averaged with weight 1/2 on the newest.
    """

    def __init__(self, workers: int) -> None:
        self.values: list[float | None] = [None] * workers
        self._last: list[tuple[int, float] | None] = [None] * workers

    def update(self, worker: int, batch: int, compute_s: float) -> float | None:
        last = self._last[worker]
        self._last[worker] = (batch, compute_s)
        if last is not None and last[0] > 0 and last[1] > 0 and compute_s > 0:
            step = math.log(batch / last[0])
            if abs(step) > 0.1:
                measured = _clip(math.log(compute_s / last[1]) / step, 0.0, 1.5)
                old = self.values[worker]
                self.values[worker] = measured if old is None else 0.5 * (old + measured)
        return self.values[worker]
GLOBAL_FEATURES = 9


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -30.0


def _clip(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def worker_features(obs: Observation) -> NDArray[np.float64]:
    """One row per worker, every entry of order one."""
    workers = obs.workers
    n = len(workers)
    total = max(1, obs.global_batch)
    slowest = max(w.compute_s for w in workers) or 1e-9
    iteration = max(obs.iteration_s, 1e-9)
    speeds = [w.batch_size / max(w.compute_s, 1e-9) for w in workers]
    speed_sum = sum(speeds) or 1.0
    rows = np.zeros((n, WORKER_FEATURES))
    for i, w in enumerate(workers):
        balanced = total * speeds[i] / speed_sum  # its share if all finished together
        elasticity = (
            DEFAULT_ELASTICITY if w.compute_elasticity is None else w.compute_elasticity
        )
        # Its compute time after doubling, over the slowest's today.
        doubled = w.compute_s * 2 ** elasticity / slowest
        rows[i] = (
            _clip(_log2(w.batch_size * n / total), -4, 4) / 2,
            _clip(_log2(w.batch_size / max(balanced, 1e-9)), -3, 3) / 2,
            w.compute_s / slowest,
            _clip(w.comm_wait_s / iteration, 0, 1),
            _clip(w.utilization, 0, 1),
            _clip(_log2(w.max_batch / w.batch_size), 0, 4) / 4,
            _clip(_log2(w.batch_size / w.min_batch), 0, 4) / 4,
            math.log10(1 + w.rtt_ms) / 2 if w.rtt_ms is not None else 0.0,
            math.log10(1 + w.bandwidth_bps / 1e6) / 3 if w.bandwidth_bps is not None else 0.0,
            1.0 if w.compute_s >= slowest else 0.0,
            elasticity if w.compute_elasticity is not None else -0.5,
            _clip(math.log2(max(doubled, 1e-9)), -3, 2) / 2,
        )
    return rows


def global_features(obs: Observation) -> NDArray[np.float64]:
    """The job-wide entries, every one of order one."""
    batch = max(1, obs.global_batch)
    noise = obs.noise_scale
    iteration = max(obs.iteration_s, 1e-9)
    pure_comm = min(w.comm_wait_s for w in obs.workers)  # the slowest waits for no one
    return np.array((
        _clip(_log2(batch / noise), -6, 6) / 4 if noise else 0.0,
        1.0 if noise else 0.0,
        efficiency(batch, obs.base_batch, noise),
        _clip(obs.straggler_gap_s / iteration, 0, 1),
        _clip(obs.loss_trend * 10, -1, 1),
        _clip(pure_comm / iteration, 0, 1),
        math.log2(len(obs.workers)) / 3,
        _clip(_log2(batch / obs.base_batch), -4, 8) / 4,
        _clip(obs.grad_sqr_change, -2, 2) / 2,
    ))


def policy_inputs(obs: Observation) -> NDArray[np.float64]:
    """Actor input: each worker's row followed by the global entries."""
    rows = worker_features(obs)
    glob = np.broadcast_to(global_features(obs), (rows.shape[0], GLOBAL_FEATURES))
    return np.concatenate([rows, glob], axis=1)


def value_inputs(obs: Observation) -> NDArray[np.float64]:
    """Critic input: global entries, then the mean and the max of the worker rows."""
    rows = worker_features(obs)
    return np.concatenate([global_features(obs), rows.mean(axis=0), rows.max(axis=0)])


def masks(obs: Observation) -> NDArray[np.bool_]:
    return np.stack([action_mask(w.batch_size, w.min_batch, w.max_batch) for w in obs.workers])


def apply_actions(obs: Observation, actions: Sequence[int]) -> list[int]:
    return [apply_action(w.batch_size, a, w.min_batch, w.max_batch)
            for w, a in zip(obs.workers, actions, strict=True)]


ACTOR_INPUTS = WORKER_FEATURES + GLOBAL_FEATURES
CRITIC_INPUTS = GLOBAL_FEATURES + 2 * WORKER_FEATURES
