"""Pre-training the PPO batch policy on the simulator, and judging policies there.

``scripts/pretrain-batch-policy.py`` runs :func:`pretrain` and writes the
networks shipped as ``pretrained_policy.npz``. Every random draw comes from
one ``numpy.random.Generator`` seeded by the caller, so the same seed gives
the same file (on the same numpy and BLAS).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from gleam.peer.tuning.observation import (
    Observation,
    apply_actions,
    masks,
    policy_inputs,
    value_inputs,
)
from gleam.peer.tuning.policies import BatchPolicy, PolluxPolicy, StaticPolicy
from gleam.peer.tuning.ppo import ActorCritic, PPOConfig, Rollout, Step
from gleam.peer.tuning.reward import RewardMeter, RewardWeights
from gleam.peer.tuning.simulator import ClusterSim, SimCluster, random_cluster
from gleam.peer.tuning.tuner import nearest_action


@dataclass(frozen=True)
class PretrainConfig:
    iterations: int = 800
    episodes: int = 32  # per PPO update
    episode_len: int = 40  # decisions per episode
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(
        lr=1e-3, epochs=8, minibatches=8, entropy=0.003, lam=0.9))
    reward: RewardWeights = field(default_factory=RewardWeights)


@dataclass(frozen=True)
class Progress:
    iteration: int
    mean_reward: float
    stats: dict[str, float]


def _prev_actions(before: list[int], after: list[int]) -> tuple[int, ...]:
    return tuple(nearest_action(a, b) for a, b in zip(before, after, strict=True))


def collect_episode(
    model: ActorCritic, cluster: SimCluster, rng: np.random.Generator, length: int,
    weights: RewardWeights, rollout: Rollout,
) -> float:
    """Run one simulated job with the current policy; returns the summed reward."""
    sim = ClusterSim(cluster, rng)
    meter = RewardMeter(weights)
    obs = sim.reset()
    meter(sim.exact or obs)
    total = 0.0
    for _ in range(length):
        actor_in, mask, critic_in = policy_inputs(obs), masks(obs), value_inputs(obs)
        actions, logp = model.act(actor_in, mask, rng)
        before = [w.batch_size for w in obs.workers]
        after = apply_actions(obs, actions.tolist())
        obs = sim.step(after, _prev_actions(before, after))
        # Rewards from the simulator's exact loss: the same formula with less noise
        # than a real job measures (the policy still observes the noisy window).
        reward = meter(sim.exact or obs)
        total += reward.total
        rollout.add(Step(actor_in, mask, actions, logp, critic_in, model.value(critic_in),
                         reward=reward.total, elapsed=reward.elapsed))
    # Episodes end by a time limit, not in a terminal state: bootstrap.
    cfg = model.config
    rollout.close_segment(model.value(value_inputs(obs)), cfg.gamma, cfg.lam)
    return total


def pretrain(seed: int, config: PretrainConfig | None = None) -> Iterator[tuple[ActorCritic,
                                                                                 Progress]]:
    """Train from scratch; yields the model and progress after every PPO update."""
    config = config or PretrainConfig()
    rng = np.random.default_rng(seed)
    model = ActorCritic.create(config.ppo, rng)
    for iteration in range(config.iterations):
        rollout = Rollout()
        rewards = [
            collect_episode(model, random_cluster(rng), rng, config.episode_len,
                            config.reward, rollout)
            for _ in range(config.episodes)
        ]
        stats = model.update(rollout, rng)
        yield model, Progress(iteration, float(np.mean(rewards)) / config.episode_len, stats)


# ------------------------------------------------------------------ judging


class GreedyPPO:
    """The PPO actor without exploration or learning (for judging in the simulator)."""

    name = "ppo"

    def __init__(self, model: ActorCritic) -> None:
        self.model = model

    def decide(self, obs: Observation) -> list[int]:
        actions, _ = self.model.act(policy_inputs(obs), masks(obs), None)
        return apply_actions(obs, actions.tolist())


def simulate_policy(
    decide: Callable[[Observation], list[int]], cluster: SimCluster, seed: int, length: int
) -> ClusterSim:
    """Run ``decide`` for ``length`` windows on ``cluster``; the sim keeps the history."""
    sim = ClusterSim(cluster, np.random.default_rng(seed))
    obs = sim.reset()
    for _ in range(length):
        before = [w.batch_size for w in obs.workers]
        after = decide(obs)
        obs = sim.step(after, _prev_actions(before, after))
    return sim


def time_to_fraction(sim: ClusterSim, fraction: float) -> float | None:
    """Simulated time until the loss covered ``fraction`` of the way to its floor."""
    t = sim.cluster.task
    return sim.time_to_loss(t.loss0 - fraction * (t.loss0 - t.loss_floor))


def compare(
    model: ActorCritic, clusters: list[SimCluster], length: int = 80, fraction: float = 0.85,
    seed: int = 0,
) -> dict[str, float]:
    """Geometric-mean time to ``fraction`` of the loss drop, relative to the best
    static batch of each job (its initial batch, halved, or 2x, 4x, 8x)."""
    ratios: dict[str, list[float]] = {"ppo": [], "pollux": []}
    for n, cluster in enumerate(clusters):
        best_static = np.inf
        for factor in (0.5, 1, 2, 4, 8):
            sized = _scaled(cluster, factor)
            t = time_to_fraction(simulate_policy(StaticPolicy().decide, sized, seed + n,
                                                 length), fraction)
            best_static = min(best_static, t if t is not None else np.inf)
        if not np.isfinite(best_static):
            continue
        policies: dict[str, BatchPolicy | GreedyPPO] = {
            "ppo": GreedyPPO(model), "pollux": PolluxPolicy(),
        }
        for name, policy in policies.items():
            t = time_to_fraction(simulate_policy(policy.decide, cluster, seed + n, length),
                                 fraction)
            ratios[name].append((t if t is not None else 10 * best_static) / best_static)
    return {k: float(np.exp(np.mean(np.log(v)))) for k, v in ratios.items() if v}


def _scaled(cluster: SimCluster, factor: float) -> SimCluster:
    from dataclasses import replace

    sizes = tuple(
        max(cluster.min_batch, min(w.max_batch, round(b * factor)))
        for b, w in zip(cluster.initial_batch, cluster.workers, strict=True)
    )
    return replace(cluster, initial_batch=sizes)


def held_out_clusters(count: int, seed: int = 10_000) -> list[SimCluster]:
    rng = np.random.default_rng(seed)
    return [random_cluster(rng) for _ in range(count)]
