"""A simulator of data-parallel training on heterogeneous peers, for pre-training.

Throughput model, per worker i with batch b_i (synchronous data parallelism,
one gradient exchange per iteration):

    compute_i = alpha_i + beta_i * b_i             (fixed overhead + per-sample cost)
    T_iter    = max_i compute_i + max_i link_i      (everyone waits for the slowest,
                                                     then for the slowest link)
    comm_wait_i = T_iter - compute_i

Statistical efficiency (Pollux): one iteration at global batch B advances
training by as much as  S * E(B)  iterations at the base batch B0, where
S = B / B0 and E(B) = (B_noise + B0) / (B_noise + B). The loss follows
L(p) = L_floor + (L_0 - L_floor) / (1 + p / tau)^c in those base-batch
iterations p, and the noise scale grows as the loss approaches its floor,
B_noise(p) = B_noise0 * ((L_0 - L_floor) / (L(p) - L_floor))^kappa, as
measured for real networks (McCandlish et al. 2018). |G|^2 shrinks with the
loss. What the tuner observes (times, loss, gradient statistics,
utilization) carries measurement noise of realistic size.

:func:`random_cluster` draws a job from wide ranges (2 to 8 workers whose
per-sample speed differs up to 20 fold, memory from 128 to 4096 samples,
links from Ethernet to poor Wi-Fi): the policy must not learn one machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from gleam.peer.tuning.observation import (
    KEEP,
    ElasticityTracker,
    Observation,
    WorkerObservation,
)


@dataclass(frozen=True)
class SimWorker:
    alpha_s: float  # fixed time per iteration
    beta_s: float  # time per sample
    link_s: float  # its share of the gradient exchange per iteration
    max_batch: int
    rtt_ms: float
    bandwidth_bps: float
    util_factor: float = 1.0  # how busy "computing" looks to NVML or the CPU counter


@dataclass(frozen=True)
class SimTask:
    base_batch: int  # B0, the global batch the learning rate was tuned for
    loss0: float
    loss_floor: float
    tau: float  # in base-batch iterations
    power: float
    noise0: float  # B_noise at the start, in samples
    kappa: float
    grad_sqr0: float = 1.0


@dataclass(frozen=True)
class SimCluster:
    workers: tuple[SimWorker, ...]
    task: SimTask
    initial_batch: tuple[int, ...]
    min_batch: int = 4
    interval: int = 50  # iterations per observation window
    noise: float = 1.0  # scale of every measurement noise (0: exact observations)


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def random_cluster(rng: np.random.Generator, *, workers: int | None = None) -> SimCluster:
    """One job drawn from the ranges the policy is trained on."""
    n = workers if workers is not None else int(rng.integers(2, 9))
    beta_fast = _log_uniform(rng, 5e-6, 5e-4)
    slow = rng.uniform(0.0, 1.3, n)
    slow[rng.integers(n)] = 0.0  # someone is the fastest
    overhead = beta_fast * _log_uniform(rng, 8, 1024)
    link = beta_fast * _log_uniform(rng, 8, 4096)
    members = []
    for i in range(n):
        rtt = _log_uniform(rng, 0.1, 20.0)
        bandwidth = _log_uniform(rng, 2e7, 1e9)
        members.append(SimWorker(
            alpha_s=overhead * rng.uniform(0.6, 1.6),
            beta_s=beta_fast * 10 ** slow[i],
            link_s=link * rng.uniform(0.3, 1.0) * (1 + rtt / 20) * (1 + 1e8 / bandwidth) / 3,
            max_batch=int(2 ** rng.integers(7, 13)),
            rtt_ms=rtt,
            bandwidth_bps=bandwidth,
            util_factor=rng.uniform(0.3, 1.0),
        ))
    start = int(2 ** rng.integers(3, 8))
    if rng.random() < 0.25:
        initial = tuple(int(2 ** rng.integers(3, 8)) for _ in range(n))
    else:
        initial = (start,) * n
    initial = tuple(min(b, w.max_batch) for b, w in zip(initial, members, strict=True))
    base = max(4, int(sum(initial) * rng.choice([0.5, 1.0])))
    loss0 = rng.uniform(0.7, 3.0)
    interval = int(rng.choice([20, 50, 50, 100]))
    task = SimTask(
        base_batch=base,
        loss0=loss0,
        loss_floor=loss0 * rng.uniform(0.02, 0.4),
        tau=interval * _log_uniform(rng, 1.0, 40.0),
        power=rng.uniform(0.6, 1.5),
        noise0=base * _log_uniform(rng, 0.5, 64.0),
        kappa=rng.uniform(0.4, 1.2),
    )
    return SimCluster(tuple(members), task, initial, min_batch=int(rng.choice([1, 4, 8])),
                      interval=interval)


class ClusterSim:
    """One simulated training job; ``step`` runs one window of ``interval`` iterations."""

    SUBSTEPS = 5  # integration steps per window (the noise scale moves within one)

    def __init__(self, cluster: SimCluster, rng: np.random.Generator) -> None:
        self.cluster = cluster
        self.rng = rng
        self.progress = 0.0  # base-batch iterations' worth of training done
        self.clock = 0.0
        self.batch = list(cluster.initial_batch)
        self._loss_obs: float | None = None
        self._loss_true: float | None = None
        self._sqr_prev: float | None = None
        self._sqr_true: float | None = None
        self.exact: Observation | None = None
        self.elasticity = ElasticityTracker(len(cluster.workers))
        self.history: list[tuple[float, float]] = []  # (clock, true loss) after each window

    # -------------------------------------------------------------- the task

    def loss(self, progress: float | None = None) -> float:
        t = self.cluster.task
        p = self.progress if progress is None else progress
        return t.loss_floor + (t.loss0 - t.loss_floor) / (1 + p / t.tau) ** t.power

    def noise_scale(self, progress: float | None = None) -> float:
        t = self.cluster.task
        excess = (self.loss(progress) - t.loss_floor) / (t.loss0 - t.loss_floor)
        return t.noise0 * excess ** -t.kappa

    def grad_sqr(self) -> float:
        t = self.cluster.task
        return t.grad_sqr0 * (self.loss() - t.loss_floor) / (t.loss0 - t.loss_floor)

    # --------------------------------------------------------------- running

    def _jitter(self, sigma: float) -> float:
        s = sigma * self.cluster.noise
        return float(math.exp(self.rng.normal(0.0, s))) if s else 1.0

    def reset(self) -> Observation:
        """Two windows at the initial batches; the second has a loss trend (the
        reward's reference)."""
        self.step(list(self.cluster.initial_batch), (KEEP,) * len(self.batch))
        return self.step(list(self.cluster.initial_batch), (KEEP,) * len(self.batch))

    def step(self, batch: list[int], actions: tuple[int, ...] | None = None) -> Observation:
        c = self.cluster
        t = c.task
        self.batch = list(batch)
        total = sum(batch)
        compute = [w.alpha_s + w.beta_s * b for w, b in zip(c.workers, batch, strict=True)]
        link = max(w.link_s for w in c.workers)
        iteration = max(compute) + link
        seconds = c.interval * iteration * self._jitter(0.02)
        loss_sum = 0.0
        for _ in range(self.SUBSTEPS):
            noise = self.noise_scale()
            gain = (total / t.base_batch) * (noise + t.base_batch) / (noise + total)
            self.progress += gain * c.interval / self.SUBSTEPS
            loss_sum += self.loss()
        self.clock += seconds
        self.history.append((self.clock, self.loss()))
        # Window mean loss, with sampling noise of K * B samples of spread ~ loss.
        spread = 0.5 / math.sqrt(c.interval * total)
        loss_obs = loss_sum / self.SUBSTEPS * self._jitter(math.hypot(spread, 0.002))
        trend = 0.0 if self._loss_obs is None else math.log(self._loss_obs / loss_obs)
        self._loss_obs = loss_obs
        loss_true = loss_sum / self.SUBSTEPS
        true_trend = 0.0 if self._loss_true is None else math.log(self._loss_true / loss_true)
        self._loss_true = loss_true
        # The estimator's error shrinks with more iterations and more workers.
        est_sigma = min(1.0, 1.5 / math.sqrt(c.interval * max(1, len(batch) - 1)))
        sqr_true = self.grad_sqr()
        sqr = sqr_true * self._jitter(est_sigma)
        var = self.noise_scale() * sqr_true * self._jitter(est_sigma)
        change = 0.0 if self._sqr_prev is None else math.log(sqr / self._sqr_prev)
        self._sqr_prev = sqr
        true_change = 0.0 if self._sqr_true is None else math.log(sqr_true / self._sqr_true)
        self._sqr_true = sqr_true
        workers = []
        for i, (w, b, comp) in enumerate(zip(c.workers, batch, compute, strict=True)):
            measured = comp * self._jitter(0.03)
            workers.append(WorkerObservation(
                batch_size=b,
                samples_per_s=b / measured,
                compute_s=measured,
                comm_wait_s=max(0.0, iteration - comp) * self._jitter(0.05),
                utilization=min(1.0, comp / iteration * w.util_factor * self._jitter(0.05)),
                min_batch=min(c.min_batch, b),
                max_batch=max(w.max_batch, b),
                rtt_ms=w.rtt_ms * self._jitter(0.1),
                bandwidth_bps=w.bandwidth_bps * self._jitter(0.1),
                compute_elasticity=self.elasticity.update(i, b, measured),
            ))
        obs = Observation(
            workers=tuple(workers),
            iterations=c.interval,
            seconds=seconds,
            loss=loss_obs,
            loss_trend=trend,
            grad_norm=math.sqrt(sqr_true + var / total),
            base_batch=t.base_batch,
            grad_sqr=sqr,
            grad_var=var,
            grad_sqr_change=change,
            previous_actions=tuple(actions) if actions is not None else (KEEP,) * len(batch),
        )
        # The same window as the simulator knows it, free of measurement noise:
        # pre-training computes rewards from it (the policy still sees ``obs``).
        self.exact = replace(obs, loss=loss_true, loss_trend=true_trend,
                             grad_sqr_change=true_change)
        return obs

    def time_to_loss(self, target: float) -> float | None:
        """Simulated seconds until the true loss first fell to ``target``."""
        for clock, loss in self.history:
            if loss <= target:
                return clock
        return None


def bench_like_cluster(interval: int = 20) -> SimCluster:
    """The four-worker home LAN of ``gleam-peer bench batch``, as a simulated job
    (its speed knobs, plus the ~4 ms per iteration that Python and gloo add)."""
    workers = (
        SimWorker(0.006, 10e-6, 0.0006, 2048, 0.3, 1e9, 0.9),
        SimWorker(0.006, 30e-6, 0.0031, 1024, 2.0, 3e8, 0.8),
        SimWorker(0.007, 80e-6, 0.0063, 512, 3.0, 1e8, 0.7),
        SimWorker(0.007, 160e-6, 0.0008, 256, 0.5, 1e9, 0.6),
    )
    task = SimTask(base_batch=64, loss0=2.3, loss_floor=0.35, tau=interval * 6, power=1.0,
                   noise0=700.0, kappa=0.3)
    return SimCluster(workers, task, (32,) * 4, min_batch=8, interval=interval)


def with_noise(cluster: SimCluster, noise: float) -> SimCluster:
    return replace(cluster, noise=noise)
