"""The tuner's model of training: actions and limits, noise scale, LR rule, simulator, tuner."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gleam.peer.tuning import (
    BatchTuner,
    IterationSample,
    NoiseScaleEstimator,
    apply_action,
    efficiency,
    lr_gain,
    max_batch_for_memory,
)
from gleam.peer.tuning.observation import (
    ACTION_NAMES,
    KEEP,
    action_mask,
    global_features,
    policy_inputs,
    value_inputs,
    worker_features,
)
from gleam.peer.tuning.policies import PolluxPolicy
from gleam.peer.tuning.reward import RewardMeter
from gleam.peer.tuning.simulator import ClusterSim, bench_like_cluster, random_cluster, with_noise

HALVE, DOWN, UP, DOUBLE = 0, 1, 3, 4


# ------------------------------------------------------------ actions, limits


def test_actions_scale_and_clamp_to_the_limits():
    assert [apply_action(64, a, 8, 1024) for a in range(5)] == [32, 48, 64, 80, 128]
    assert apply_action(12, HALVE, 8, 1024) == 8
    assert apply_action(600, DOUBLE, 8, 1024) == 1024
    # Rounding never traps a small batch.
    assert apply_action(2, UP, 1, 100) == 3
    assert apply_action(2, DOWN, 1, 100) == 1


def test_actions_that_cannot_move_are_masked():
    mask = action_mask(1024, 8, 1024)
    assert [ACTION_NAMES[a] for a in range(5) if mask[a]] == ["halve", "-25%", "keep"]
    assert action_mask(8, 8, 1024).tolist() == [False, False, True, True, True]


def test_memory_limit():
    # 2 GiB free, 1 MiB per sample, 10 % reserve: 1843 samples.
    assert max_batch_for_memory(2 << 30, 1 << 20) == 1843
    assert max_batch_for_memory(2 << 30, 1 << 20, ceiling=512) == 512
    assert max_batch_for_memory(100, 1 << 20) == 1
    with pytest.raises(ValueError):
        max_batch_for_memory(1 << 30, 0)


def test_tuner_clamps_every_decision_to_each_workers_memory():
    class Greedy:
        name = "greedy"

        def decide(self, obs):
            return [10_000] * len(obs.workers)

        def feedback(self, reward, obs):
            pass

        def status(self):
            return {}

    tuner = BatchTuner([32, 32, 32], max_batch=[1024, 256, 64], min_batch=8, interval=2,
                       policy=Greedy())

    def sample(loss):
        return IterationSample(compute_s=[0.01] * 3, comm_wait_s=[0.002] * 3, loss=loss)

    assert tuner.observe(sample(2.0)) is None
    # The first window has no loss trend yet, so nothing is decided...
    assert tuner.observe(sample(2.0)) == (32, 32, 32)
    assert tuner.decision_count == 0
    tuner.observe(sample(1.9))
    # ...the second, at the initial sizes, is the reward's reference; then the policy decides.
    assert tuner.observe(sample(1.9)) == (1024, 256, 64)


# ---------------------------------------------------------------- noise scale


def test_noise_scale_estimator_recovers_a_known_case():
    # Per-sample gradients g = G + e, e ~ N(0, diag(s^2)): |G|^2 and tr(Sigma) are known.
    rng = np.random.default_rng(0)
    dim = 40
    grad = rng.normal(size=dim) * 0.5
    sigma = rng.uniform(0.5, 2.0, size=dim)
    true_sqr, true_var = float(grad @ grad), float((sigma**2).sum())
    est = NoiseScaleEstimator(decay=0.995)
    sizes = [64, 16, 8, 32]
    total = sum(sizes)
    for _ in range(4000):
        means = [grad + rng.normal(size=dim) * sigma / math.sqrt(b) for b in sizes]
        applied = sum(m * (b / total) for m, b in zip(means, sizes, strict=True))
        assert est.update(sizes, [float(m @ m) for m in means], float(applied @ applied))
    assert est.grad_sqr == pytest.approx(true_sqr, rel=0.1)
    assert est.grad_var == pytest.approx(true_var, rel=0.1)
    assert est.noise_scale == pytest.approx(true_var / true_sqr, rel=0.15)


def test_noise_scale_needs_two_workers():
    est = NoiseScaleEstimator()
    assert not est.update([32], [1.0], 1.0)
    assert est.noise_scale is None and est.grad_sqr is None


def test_lr_gain_rule():
    assert lr_gain(64, 64, 500.0) == pytest.approx(1.0)
    # Batch far below the noise scale: linear scaling.
    assert lr_gain(256, 64, 1e9) == pytest.approx(4.0, rel=1e-6)
    # Batch far above: the gain flattens at 1 + B_noise / B0.
    assert lr_gain(1e9, 64, 64.0) == pytest.approx(2.0, rel=1e-6)
    assert lr_gain(256, 64, None) == pytest.approx(2.0)  # sqrt rule before an estimate
    assert efficiency(64, 64, 100.0) == 1.0
    assert efficiency(1000, 64, None) == 1.0


# ------------------------------------------------------------------ simulator


def test_simulator_throughput_model():
    cluster = with_noise(bench_like_cluster(), 0.0)
    sim = ClusterSim(cluster, np.random.default_rng(0))
    obs = sim.step([64, 64, 64, 64])
    slow = cluster.workers[3]
    assert obs.workers[3].compute_s == pytest.approx(slow.alpha_s + slow.beta_s * 64)
    assert obs.workers[3].comm_wait_s == pytest.approx(max(w.link_s for w in cluster.workers))
    # Giving the fast workers more work at the same global batch shortens iterations.
    balanced = ClusterSim(cluster, np.random.default_rng(0)).step([152, 55, 25, 24])
    assert balanced.global_batch == obs.global_batch
    assert balanced.seconds < obs.seconds
    assert balanced.straggler_gap_s < obs.straggler_gap_s


def test_simulator_statistical_efficiency_and_noise_growth():
    cluster = with_noise(bench_like_cluster(), 0.0)
    small, large = (ClusterSim(cluster, np.random.default_rng(0)) for _ in range(2))
    small.step([16] * 4)
    large.step([256] * 4)
    # 16x the samples per iteration buys less than 16x the progress.
    assert large.progress / small.progress < 16 * 0.9
    assert large.progress > small.progress
    losses, noise = [], []
    for _ in range(20):
        small.step([16] * 4)
        losses.append(small.loss())
        noise.append(small.noise_scale())
    assert all(a > b for a, b in itertools.pairwise(losses))
    assert all(a < b for a, b in itertools.pairwise(noise))


def test_random_clusters_are_valid_and_features_are_bounded():
    rng = np.random.default_rng(5)
    for _ in range(30):
        cluster = random_cluster(rng)
        sim = ClusterSim(cluster, rng)
        obs = sim.reset()
        for _ in range(3):
            obs = sim.step([w.batch_size for w in obs.workers])
        assert 2 <= len(obs.workers) <= 8
        assert all(w.min_batch <= w.batch_size <= w.max_batch for w in obs.workers)
        for x in (worker_features(obs), global_features(obs), policy_inputs(obs),
                  value_inputs(obs)):
            assert np.all(np.isfinite(x)) and np.abs(x).max() <= 4


def test_reward_prefers_progress_and_punishes_straggling():
    cluster = with_noise(bench_like_cluster(), 0.0)
    meter_a, meter_b = RewardMeter(), RewardMeter()
    sim_a, sim_b = (ClusterSim(cluster, np.random.default_rng(0)) for _ in range(2))
    for meter, sim in ((meter_a, sim_a), (meter_b, sim_b)):
        assert meter(sim.reset()).total == 0.0  # the reference window
        assert meter.reference is not None
    balanced = meter_a(sim_a.step([152, 55, 25, 24]))
    straggling = meter_b(sim_b.step([64] * 4))
    assert balanced.straggle < straggling.straggle
    # The same work per window, done in less time: more progress per second.
    assert balanced.elapsed < straggling.elapsed
    assert balanced.progress / balanced.elapsed > straggling.progress / straggling.elapsed
    assert straggling.progress == pytest.approx(
        math.log(sim_b.history[-2][1] / sim_b.history[-1][1]) / meter_b.reference[0], rel=0.2)


def test_reward_discounts_by_time_not_by_window():
    cluster = with_noise(bench_like_cluster(), 0.0)
    meter = RewardMeter()
    sim = ClusterSim(cluster, np.random.default_rng(0))
    meter(sim.reset())
    _, dt0 = meter.reference
    slow = meter(sim.step([256] * 4))  # a window with far more work
    assert slow.elapsed > 1.5
    assert slow.elapsed * dt0 == pytest.approx(sim.history[-1][0] - sim.history[-2][0])


# ---------------------------------------------------------------------- tuner


def _window(tuner: BatchTuner, compute, loss: float, *, rng) -> tuple[int, ...] | None:
    result = None
    for _ in range(tuner.interval):
        means = [rng.normal(size=8) + 1.0 for _ in compute]
        result = tuner.observe(IterationSample(
            compute_s=compute, comm_wait_s=[max(compute) - c + 0.002 for c in compute],
            loss=loss, local_sqr_norms=[float(m @ m) for m in means],
            global_sqr_norm=float(np.mean(means, axis=0) @ np.mean(means, axis=0)),
        ))
    return result


def test_tuner_observes_windows_and_rewards_decisions():
    rng = np.random.default_rng(0)
    tuner = BatchTuner([32, 32], max_batch=512, min_batch=8, interval=5, policy="static")
    assert _window(tuner, [0.01, 0.03], 2.0, rng=rng) == (32, 32)
    assert _window(tuner, [0.01, 0.03], 1.8, rng=rng) == (32, 32)
    obs = tuner.last_observation
    assert obs is not None and obs.loss_trend == pytest.approx(math.log(2.0 / 1.8))
    assert obs.straggler_gap_s == pytest.approx(0.01)
    assert tuner.noise.noise_scale is not None
    assert tuner.last_reward is None  # the reference window rewards no decision
    assert _window(tuner, [0.01, 0.03], 1.7, rng=rng) == (32, 32)
    assert tuner.last_reward is not None and tuner.last_reward.progress == pytest.approx(
        math.log(1.8 / 1.7) / math.log(2.0 / 1.8))
    status = tuner.status()
    assert status["decisions"] == 2 and status["batches"] == [32, 32]
    assert status["last_action"] == "keep,keep"


def test_pollux_heuristic_gives_every_worker_the_same_batch_within_the_smallest_memory():
    rng = np.random.default_rng(0)
    tuner = BatchTuner([32] * 3, max_batch=[2048, 1024, 128], min_batch=8, interval=4,
                       policy="pollux")
    sizes = _window(tuner, [0.004, 0.008, 0.02], 2.0, rng=rng)
    assert sizes is not None and len(set(sizes)) == 1 and 8 <= sizes[0] <= 128
    assert isinstance(tuner.policy, PolluxPolicy)


def test_ppo_policy_ships_and_decides_deterministically():
    def run(seed: int) -> list[tuple[int, ...]]:
        rng = np.random.default_rng(0)
        tuner = BatchTuner([32] * 4, max_batch=[2048, 1024, 512, 256], min_batch=8,
                           interval=3, policy="ppo", seed=seed)
        out = []
        for n in range(6):
            sizes = _window(tuner, [0.002 + 1e-5 * tuner.batch_sizes[0],
                                    0.002 + 3e-5 * tuner.batch_sizes[1],
                                    0.003 + 8e-5 * tuner.batch_sizes[2],
                                    0.003 + 1.6e-4 * tuner.batch_sizes[3]], 2.0 - 0.1 * n,
                            rng=rng)
            assert sizes is not None
            out.append(sizes)
        return out

    first = run(0)
    assert run(0) == first
    assert all(8 <= b <= m for sizes in first for b, m in zip(sizes, (2048, 1024, 512, 256),
                                                              strict=True))


def test_previous_actions_reach_the_next_observation():
    rng = np.random.default_rng(0)

    class Doubler:
        name = "doubler"

        def decide(self, obs):
            return [w.batch_size * 2 for w in obs.workers]

        def feedback(self, reward, obs):
            pass

        def status(self):
            return {}

    tuner = BatchTuner([16, 16], max_batch=1024, interval=2, policy=Doubler())
    for loss in (1.0, 0.9, 0.8):
        _window(tuner, [0.01, 0.01], loss, rng=rng)
    assert tuner.batch_sizes == (64, 64)
    assert tuner.last_observation is not None
    assert tuner.last_observation.previous_actions == (DOUBLE, DOUBLE)
    assert KEEP not in tuner.last_observation.previous_actions


# ---------------------------------------------------------------- utilization


def test_utilization_reads_nvml_and_falls_back_to_the_cpu_share():
    from types import SimpleNamespace

    from gleam.peer.tuning.system import UtilizationMeter

    class FakeNvml:
        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByIndex(self, index):
            return ("gpu", index)

        def nvmlDeviceGetUtilizationRates(self, handle):
            return SimpleNamespace(gpu=42)

    meter = UtilizationMeter(0, nvml=FakeNvml())
    assert meter.source == "nvml" and meter.sample() == pytest.approx(0.42)

    class NoDriver(FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    cpu = UtilizationMeter(0, nvml=NoDriver())
    assert cpu.source == "cpu"
    sum(i * i for i in range(200_000))  # some CPU work between samples
    assert 0.0 <= cpu.sample() <= 1.0
    assert UtilizationMeter().source == "cpu"
