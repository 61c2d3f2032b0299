"""``BatchTuner``: the training loop's side of batch-size tuning.

    tuner = BatchTuner([32, 32, 32, 32], max_batch=[1024, 512, 256, 256])
    for step in ...:
        ...                                    # each worker runs its batch
        new = tuner.observe(IterationSample(compute_s=..., comm_wait_s=..., loss=...,
                                            local_sqr_norms=..., global_sqr_norm=...))
        if new is not None:
            ...                                # give every worker its new batch size
        lr = base_lr * tuner.lr_gain()

Every ``interval`` iterations (default 50) the samples of the window become an
:class:`~gleam.peer.tuning.observation.Observation`, the last decision gets
its reward, and the ``gleam_tune_batch`` hook chooses the next batch sizes.
The built-in plugin answers with the tuner's own policy (``ppo`` by default,
or ``pollux``); another plugin can answer first and replace it.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gleam.peer.tuning.noise import NoiseScaleEstimator, lr_gain
from gleam.peer.tuning.observation import (
    ACTION_FACTORS,
    ACTION_NAMES,
    KEEP,
    ElasticityTracker,
    Observation,
    WorkerObservation,
)
from gleam.peer.tuning.policies import BatchPolicy, make_policy
from gleam.peer.tuning.reward import Reward, RewardMeter, RewardWeights

if TYPE_CHECKING:
    import pluggy

log = logging.getLogger("gleam.tuning")


@dataclass(frozen=True)
class IterationSample:
    """What one synchronous iteration measured, one entry per worker."""

    compute_s: Sequence[float]
    comm_wait_s: Sequence[float]
    loss: float  # mean loss over the global batch
    local_sqr_norms: Sequence[float] | None = None  # |g_i|^2 of each worker's mean gradient
    global_sqr_norm: float | None = None  # |g_bar|^2 of the applied (weighted) gradient
    utilization: Sequence[float] | None = None  # 0..1; default compute / iteration time
    seconds: float | None = None  # wall time of the iteration; default max(compute + comm)
    batch_sizes: Sequence[int] | None = None  # the sizes this iteration ran (default: current)


@dataclass(frozen=True)
class Decision:
    iteration: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    reward: float | None
    by: str


def _per_worker(value: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    values = tuple(int(v) for v in value)
    if len(values) != n:
        raise ValueError(f"{what}: expected {n} values (one per worker), got {len(values)}")
    return values


def nearest_action(before: int, after: int) -> int:
    """The action whose factor best explains a change of batch size."""
    if before <= 0 or after == before:
        return KEEP
    ratio = math.log(after / before)
    return min(range(len(ACTION_FACTORS)), key=lambda a: abs(math.log(ACTION_FACTORS[a]) - ratio))


class BatchTuner:
    """Observes a data-parallel job and chooses each worker's batch size."""

    def __init__(
        self,
        batch_sizes: Sequence[int],
        *,
        max_batch: int | Sequence[int],
        min_batch: int | Sequence[int] = 1,
        base_batch: int | None = None,
        interval: int = 50,
        policy: str | BatchPolicy = "ppo",
        seed: int = 0,
        plugins: pluggy.PluginManager | None = None,
        reward_weights: RewardWeights | None = None,
        noise_decay: float = 0.98,
        job: str = "training",
        **policy_options: Any,
    ) -> None:
        n = len(batch_sizes)
        if n < 1:
            raise ValueError("a job needs at least one worker")
        if interval < 1:
            raise ValueError("interval must be at least one iteration")
        self.min_batch = _per_worker(min_batch, n, "min_batch")
        self.max_batch = _per_worker(max_batch, n, "max_batch")
        for lo, hi in zip(self.min_batch, self.max_batch, strict=True):
            if not 1 <= lo <= hi:
                raise ValueError(f"batch limits must satisfy 1 <= min <= max (got {lo}, {hi})")
        self.batch_sizes = self._clamped(batch_sizes)
        self.base_batch = base_batch or sum(self.batch_sizes)
        self.interval = interval
        self.policy: BatchPolicy = (
            make_policy(policy, seed=seed, **policy_options) if isinstance(policy, str) else policy
        )
        self.job = job
        self._plugins = plugins
        self.meter = RewardMeter(reward_weights)
        self.noise = NoiseScaleEstimator(noise_decay)
        self.links: list[tuple[float | None, float | None]] = [(None, None)] * n
        self.elasticity = ElasticityTracker(n)
        self.iteration = 0
        self.decisions: deque[Decision] = deque(maxlen=32)
        self.decision_count = 0
        self.last_reward: Reward | None = None
        self.last_observation: Observation | None = None
        self._previous_actions: tuple[int, ...] = (KEEP,) * n
        self._prev_loss: float | None = None
        self._prev_sqr: float | None = None
        self._builtin_answered = False
        self._warned_unanswered = False
        self._reset_window()

    # ------------------------------------------------------------ properties

    @property
    def workers(self) -> int:
        return len(self.batch_sizes)

    @property
    def global_batch(self) -> int:
        return sum(self.batch_sizes)

    @property
    def policy_name(self) -> str:
        return self.policy.name

    @property
    def plugins(self) -> pluggy.PluginManager:
        if self._plugins is None:
            from gleam.peer.plugin_manager import make_plugin_manager

            self._plugins = make_plugin_manager()
        return self._plugins

    def shares(self) -> tuple[float, ...]:
        """Each worker's weight in the global gradient: b_i / B."""
        total = self.global_batch
        return tuple(b / total for b in self.batch_sizes)

    def lr_gain(self) -> float:
        """Learning-rate multiplier for the current global batch (see ``noise.lr_gain``)."""
        return lr_gain(self.global_batch, self.base_batch, self.noise.noise_scale)

    def set_link(self, worker: int, rtt_ms: float | None, bandwidth_bps: float | None) -> None:
        """A worker's links as its agent measures them (mean RTT, slowest bandwidth)."""
        self.links[worker] = (rtt_ms, bandwidth_bps)

    # -------------------------------------------------------------- observing

    def _reset_window(self) -> None:
        n = self.workers
        self._w_iters = 0
        self._w_seconds = 0.0
        self._w_compute = [0.0] * n
        self._w_comm = [0.0] * n
        self._w_util = [0.0] * n
        self._w_loss = 0.0
        self._w_norm = 0.0

    def observe(self, sample: IterationSample) -> tuple[int, ...] | None:
        """Record one iteration; every ``interval`` iterations return new batch sizes."""
        n = self.workers
        if len(sample.compute_s) != n or len(sample.comm_wait_s) != n:
            raise ValueError(f"the sample must have one compute and comm time per worker ({n})")
        seconds = sample.seconds
        if seconds is None:
            seconds = max(c + w for c, w in zip(sample.compute_s, sample.comm_wait_s, strict=True))
        util = sample.utilization
        if util is None:
            util = [c / max(seconds, 1e-9) for c in sample.compute_s]
        for i in range(n):
            self._w_compute[i] += sample.compute_s[i]
            self._w_comm[i] += sample.comm_wait_s[i]
            self._w_util[i] += util[i]
        self._w_seconds += seconds
        self._w_loss += sample.loss
        if sample.global_sqr_norm is not None:
            self._w_norm += math.sqrt(max(0.0, sample.global_sqr_norm))
            if sample.local_sqr_norms is not None:
                ran = self.batch_sizes if sample.batch_sizes is None else sample.batch_sizes
                self.noise.update(ran, sample.local_sqr_norms, sample.global_sqr_norm)
        self._w_iters += 1
        self.iteration += 1
        if self._w_iters < self.interval:
            return None
        return self.decide(self._close_window())

    def _close_window(self) -> Observation:
        k = self._w_iters
        workers = []
        for i, b in enumerate(self.batch_sizes):
            compute = self._w_compute[i] / k
            rtt, bandwidth = self.links[i]
            workers.append(WorkerObservation(
                batch_size=b,
                samples_per_s=b / max(compute, 1e-9),
                compute_s=compute,
                comm_wait_s=self._w_comm[i] / k,
                utilization=self._w_util[i] / k,
                min_batch=self.min_batch[i],
                max_batch=self.max_batch[i],
                rtt_ms=rtt,
                bandwidth_bps=bandwidth,
                compute_elasticity=self.elasticity.update(i, b, compute),
            ))
        loss = self._w_loss / k
        trend = 0.0
        if self._prev_loss is not None and loss > 0 and self._prev_loss > 0:
            trend = math.log(self._prev_loss / loss)
        self._prev_loss = loss
        sqr = self.noise.grad_sqr if self.noise.noise_scale is not None else None
        change = 0.0
        if sqr is not None and self._prev_sqr is not None:
            change = math.log(sqr / self._prev_sqr)
        self._prev_sqr = sqr
        obs = Observation(
            workers=tuple(workers),
            iterations=k,
            seconds=self._w_seconds,
            loss=loss,
            loss_trend=trend,
            grad_norm=self._w_norm / k,
            base_batch=self.base_batch,
            grad_sqr=sqr,
            grad_var=self.noise.grad_var,
            grad_sqr_change=change,
            previous_actions=self._previous_actions,
        )
        self._reset_window()
        return obs

    # -------------------------------------------------------------- deciding

    def decide(self, obs: Observation) -> tuple[int, ...]:
        """Reward the last decision with ``obs`` and choose the next batch sizes."""
        reward = self.meter(obs)
        self.last_observation = obs
        if self.meter.reference is None:
            # No loss trend yet: the next window, still at the initial sizes,
            # becomes the reward's reference.
            return self.batch_sizes
        if self.decision_count:
            self.last_reward = reward
            self.policy.feedback(reward, obs)
        self._builtin_answered = False
        result = self.plugins.hook.gleam_tune_batch(tuner=self, observation=obs)
        by = self.policy.name if self._builtin_answered else "plugin"
        if result is None:
            if not self._warned_unanswered:
                log.warning("no plugin answered gleam_tune_batch (is the batch-tuner plugin "
                            "disabled?); the batch sizes stay as they are")
                self._warned_unanswered = True
            result, by = self.batch_sizes, "none"
        new = self._clamped(result)
        before = self.batch_sizes
        self._previous_actions = tuple(nearest_action(a, b) for a, b in zip(before, new,
                                                                            strict=True))
        self.batch_sizes = new
        self.decision_count += 1
        self.decisions.append(Decision(self.iteration, before, new,
                                       self.last_reward.total if self.last_reward else None, by))
        return new

    def builtin_decide(self, obs: Observation) -> list[int]:
        """The tuner's own policy's choice (what the built-in plugin answers)."""
        self._builtin_answered = True
        return self.policy.decide(obs)

    def _clamped(self, sizes: Sequence[int]) -> tuple[int, ...]:
        sizes = tuple(sizes)
        if len(sizes) != len(self.min_batch):
            raise ValueError(f"expected {len(self.min_batch)} batch sizes, got {len(sizes)}")
        out: list[int] = []
        for b, lo, hi in zip(sizes, self.min_batch, self.max_batch, strict=True):
            if isinstance(b, bool) or not isinstance(b, numbers.Real) or not math.isfinite(b):
                raise ValueError(f"batch sizes must be numbers, got {b!r}")
            out.append(max(lo, min(hi, int(b))))
        return tuple(out)

    # --------------------------------------------------------------- showing

    def status(self) -> dict[str, Any]:
        """A flat summary for the agent's status view (see ``report``)."""
        last = self.decisions[-1] if self.decisions else None
        actions = ",".join(ACTION_NAMES[a] for a in self._previous_actions)
        noise = self.noise.noise_scale
        obs = self.last_observation
        return {
            "job": self.job,
            "policy": self.policy.name,
            "iteration": self.iteration,
            "batches": list(self.batch_sizes),
            "global_batch": self.global_batch,
            "noise_scale": round(noise, 1) if noise is not None else None,
            "lr_gain": round(self.lr_gain(), 3),
            "decisions": self.decision_count,
            "last_action": actions if last else None,
            "reward": round(last.reward, 3) if last and last.reward is not None else None,
            "samples_per_s": round(obs.global_batch * obs.iterations / obs.seconds, 1)
            if obs and obs.seconds > 0 else None,
            "updates": int(self.policy.status().get("updates", 0) or 0),
        }
