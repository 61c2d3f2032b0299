"""Batch-size policies: the PPO policy, a Pollux-style goodput heuristic, static.

A policy turns an :class:`Observation` into each worker's next batch size
(``decide``) and may learn from the reward of its last decision
(``feedback``, called with the observation of the window that followed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gleam.peer.tuning.observation import (
    ACTION_NAMES,
    Observation,
    apply_actions,
    efficiency,
    masks,
    policy_inputs,
    value_inputs,
)
from gleam.peer.tuning.ppo import ActorCritic, Rollout, Step
from gleam.peer.tuning.reward import Reward

PRETRAINED = "pretrained_policy.npz"


def pretrained_path() -> Path:
    """The policy shipped with the package (see scripts/pretrain-batch-policy.py)."""
    return Path(str(resources.files("gleam.peer.tuning").joinpath(PRETRAINED)))


class BatchPolicy(Protocol):
    name: str

    def decide(self, obs: Observation) -> list[int]: ...

    def feedback(self, reward: Reward, obs: Observation) -> None: ...

    def status(self) -> dict[str, Any]: ...


class StaticPolicy:
    """Never changes a batch size (the baseline)."""

    name = "static"

    def decide(self, obs: Observation) -> list[int]:
        return [w.batch_size for w in obs.workers]

    def feedback(self, reward: Reward, obs: Observation) -> None:
        pass

    def status(self) -> dict[str, Any]:
        return {}


class PPOPolicy:
    """The learned policy: acts with the actor, fine-tunes online with PPO.

    Starts from the pre-trained networks shipped with the package (or
    ``path``). With ``learn`` it keeps every decision and its reward and runs
    a PPO update every ``update_every`` decisions, at a smaller learning rate
    than pre-training so that a few noisy windows cannot undo what the
    simulator taught. With ``explore`` it samples its actions (needed to
    learn on-policy); otherwise it takes the most likely action.
    """

    name = "ppo"

    def __init__(
        self, model: ActorCritic | None = None, *, path: str | Path | None = None, seed: int = 0,
        explore: bool = True, learn: bool = True, update_every: int = 8,
        finetune_lr: float = 5e-5,
    ) -> None:
        if model is None:
            model = ActorCritic.load(path or pretrained_path())
        self.model = model
        if learn:
            for opt in (model.actor_opt, model.critic_opt):
                opt.lr = finetune_lr
        self.rng = np.random.default_rng(seed)
        self.explore = explore
        self.learn = learn
        self.update_every = update_every
        self.rollout = Rollout()
        self._pending: Step | None = None
        self.last_actions: list[str] = []
        self.last_stats: dict[str, float] = {}

    def decide(self, obs: Observation) -> list[int]:
        actor_in = policy_inputs(obs)
        mask = masks(obs)
        actions, logp = self.model.act(actor_in, mask, self.rng if self.explore else None)
        if self.learn:
            critic_in = value_inputs(obs)
            self._pending = Step(actor_in, mask, actions, logp, critic_in,
                                 self.model.value(critic_in))
        self.last_actions = [ACTION_NAMES[a] for a in actions]
        return apply_actions(obs, actions.tolist())

    def feedback(self, reward: Reward, obs: Observation) -> None:
        if not self.learn or self._pending is None:
            return
        self._pending.reward = reward.total
        self._pending.elapsed = reward.elapsed
        self.rollout.add(self._pending)
        self._pending = None
        if len(self.rollout) >= self.update_every:
            cfg = self.model.config
            self.rollout.close_segment(self.model.value(value_inputs(obs)), cfg.gamma, cfg.lam)
            self.last_stats = self.model.update(self.rollout, self.rng)
            self.rollout = Rollout()

    def status(self) -> dict[str, Any]:
        return {"updates": self.model.updates, "actions": self.last_actions}

    def save(self, path: str | Path) -> None:
        self.model.save(path, meta={"finetuned_updates": self.model.updates})


class PolluxPolicy:
    """Pollux-style goodput maximisation (Qiao et al., OSDI 2021), for comparison.

    As in Pollux, every replica gets the same batch size b; the heuristic
    picks the b that maximises

        goodput(b) = throughput(b) * efficiency(n b)
        throughput(b) = n b / (max_i (alpha_i + beta_i b) + T_comm)
        efficiency(B) = (B_noise + B0) / (B_noise + B)

    with each worker's alpha_i, beta_i fitted by least squares to the
    (batch, compute time) pairs it has seen (before two distinct sizes are
    seen, a quarter of the compute time is taken as fixed overhead), and
    T_comm the exchange time the slowest worker measures (it waits for no
    one). Pollux itself jumps straight to the optimum, and so does this
    heuristic; it is limited to the smallest worker's memory because a common
    batch must fit everywhere.
    """

    name = "pollux"

    def __init__(self, history: int = 16, candidates: int = 48) -> None:
        self.history: list[deque[tuple[int, float]]] = []
        self.history_len = history
        self.candidates = candidates
        self.last_goodput: float | None = None
        self.last_choice: int | None = None

    def _fit(self, i: int) -> tuple[float, float]:
        points = self.history[i]
        sizes = np.array([p[0] for p in points], dtype=float)
        times = np.array([p[1] for p in points])
        if len(set(sizes.tolist())) < 2:
            b, t = sizes[-1], times[-1]
            return 0.25 * t, 0.75 * t / b
        design = np.stack([np.ones_like(sizes), sizes], axis=1)
        (alpha, beta), *_ = np.linalg.lstsq(design, times, rcond=None)
        if beta <= 0:
            return float(times.mean()), 1e-12
        if alpha < 0:
            return 0.0, float((sizes @ times) / (sizes @ sizes))
        return float(alpha), float(beta)

    def decide(self, obs: Observation) -> list[int]:
        n = len(obs.workers)
        while len(self.history) < n:
            self.history.append(deque(maxlen=self.history_len))
        for i, w in enumerate(obs.workers):
            self.history[i].append((w.batch_size, w.compute_s))
        fits = [self._fit(i) for i in range(n)]
        comm = min(w.comm_wait_s for w in obs.workers)
        lo = max(w.min_batch for w in obs.workers)
        hi = min(w.max_batch for w in obs.workers)
        if hi <= lo:
            return [hi] * n
        grid = np.unique(np.round(np.geomspace(lo, hi, self.candidates)).astype(int))
        noise = obs.noise_scale
        best, best_goodput = lo, -1.0
        for b in grid.tolist():
            iteration = max(a + beta * b for a, beta in fits) + comm
            goodput = n * b / iteration * efficiency(n * b, obs.base_batch, noise)
            if goodput > best_goodput:
                best, best_goodput = b, goodput
        self.last_goodput, self.last_choice = best_goodput, best
        return [best] * n

    def feedback(self, reward: Reward, obs: Observation) -> None:
        pass

    def status(self) -> dict[str, Any]:
        return {"goodput": self.last_goodput, "choice": self.last_choice}


def make_policy(name: str, *, seed: int = 0, **options: Any) -> BatchPolicy:
    """A built-in policy by name: ``ppo`` (default), ``pollux`` or ``static``."""
    if name == "ppo":
        return PPOPolicy(seed=seed, **options)
    if name == "pollux":
        return PolluxPolicy(**options)
    if name == "static":
        return StaticPolicy()
    raise ValueError(f"unknown batch policy {name!r}: choose ppo, pollux or static")


POLICY_NAMES: Sequence[str] = ("ppo", "pollux", "static")
