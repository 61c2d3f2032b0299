"""The reward of a batch-size decision, measured over the window that followed it.

The goal is the most training progress per unit of wall time. Progress is
the relative loss decrease, ln(L_prev / L); a window that lasts dt seconds
at a progress rate of p per second earns p * dt. Returns are discounted by
time, not by decision: the discount from one window to the next is
gamma^(dt / dt_0). So a policy's return is its discounted progress per
second integrated over the next few tens of seconds of training, whatever
its windows' lengths, and a slow window is not rewarded for lasting longer.

Everything is expressed in units of the job's first measured window (its
progress P_0 and length dt_0, measured before the policy decides anything:
the tuner's first decision comes after the second window, the first with a
loss trend), which makes one policy fit any task, model
or hardware, and leaves the comparison of two actions from one state
unbiased (a normaliser that tracked the recent rate would punish a policy
for reaching the flat end of the loss curve sooner):

    reward = ln(L_prev / L) / P_0                       progress
             - w_straggle * gap / T_iter * dt / dt_0    straggling
             - w_instability * max(0, ln(|G|^2 / |G|^2_prev))   instability

* gap / T_iter: the straggler gap (slowest worker's compute time minus
  the mean) over the iteration time, the share of each iteration the
  average worker idles; weighted by the window's length because it is time
  lost for as long as it lasts.
* |G|^2: the noise-scale estimator's true-gradient norm. As training
  converges it shrinks; growth between windows means the step overshot (a
  batch jump with its learning-rate gain, or divergence).

Weights: w_straggle = 0.1, w_instability = 0.1. Straggling already costs
progress; the small penalty is shaping that speeds learning to balance the
workers, kept small so that it never outweighs real progress.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gleam.peer.tuning.observation import Observation


@dataclass(frozen=True)
class RewardWeights:
    straggle: float = 0.1
    instability: float = 0.1
    clip: float = 5.0  # bound on the progress term per reference window
    min_reference: float = 1e-3  # floor of P_0 (a job that starts on its loss plateau)


@dataclass(frozen=True)
class Reward:
    total: float
    progress: float
    straggle: float
    instability: float
    elapsed: float  # the window's length in units of dt_0 (for the discount)


class RewardMeter:
    """Turns consecutive observations into rewards; keeps the job's reference units."""

    def __init__(self, weights: RewardWeights | None = None) -> None:
        self.weights = weights or RewardWeights()
        self.reference: tuple[float, float] | None = None  # (P_0, dt_0)

    def __call__(self, obs: Observation) -> Reward:
        """The reward of the window ``obs``; the first window with a loss trend sets
        the reference units (and earns 0: no decision of the policy led to it)."""
        w = self.weights
        trend = obs.loss_trend if math.isfinite(obs.loss_trend) else 0.0
        seconds = max(obs.seconds, 1e-9)
        if self.reference is None:
            if trend:
                self.reference = (max(abs(trend), w.min_reference), seconds)
            return Reward(0.0, 0.0, 0.0, 0.0, 1.0)
        p0, dt0 = self.reference
        elapsed = seconds / dt0
        progress = max(-w.clip * elapsed, min(w.clip * elapsed, trend / p0))
        straggle = min(1.0, obs.straggler_gap_s / max(obs.iteration_s, 1e-9)) * elapsed
        instability = min(2.0, max(0.0, obs.grad_sqr_change))
        total = progress - w.straggle * straggle - w.instability * instability
        return Reward(total, progress, straggle, instability, elapsed)
