"""Proximal policy optimisation in numpy: actor and critic MLPs, GAE, clipped loss.

The job is one agent whose action is a tuple (one choice per worker). The
actor is shared by the workers: it reads one worker's row plus the job's
global entries and gives logits over the five actions, so the same network
serves two workers or twenty. The joint policy is the product of the
per-worker choices; each worker's choice is trained with the job's
advantage and its own probability ratio, clipped independently (as in
multi-agent PPO with a shared reward), which keeps the ratios of large jobs
from exploding. The critic reads the global entries with the mean and the
max of the worker rows.

Formulas (Schulman et al. 2017; GAE: Schulman et al. 2016), with the
discount of step t, gamma_t = gamma^(length of the window after t), since
the tuner discounts by time (see ``reward``):

    delta_t = r_t + gamma_t * V(s_{t+1}) * (1 - done_t) - V(s_t)
    A_t     = delta_t + gamma_t * lambda * (1 - done_t) * A_{t+1}
    R_t     = A_t + V(s_t)                                  (critic target)
    rho     = exp(log pi(a|s) - log pi_old(a|s))
    L_clip  = -mean(min(rho * A, clip(rho, 1 - eps, 1 + eps) * A))
    L       = L_clip - c_entropy * mean(H(pi(.|s))) + c_value * mean((V(s) - R)^2)

Actions that cannot change the batch (doubling at the memory limit) are
masked out of the softmax both when acting and when learning.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gleam.peer.tuning.mlp import MLP, Adam, Array
from gleam.peer.tuning.observation import (
    ACTION_FACTORS,
    ACTOR_INPUTS,
    CRITIC_INPUTS,
)

N_ACTIONS = len(ACTION_FACTORS)
FORMAT = "gleam-batch-policy/1"


@dataclass(frozen=True)
class PPOConfig:
    gamma: float = 0.95
    lam: float = 0.95
    clip: float = 0.2
    entropy: float = 0.01
    value_coef: float = 0.5
    lr: float = 3e-4
    epochs: int = 4
    minibatches: int = 4
    max_grad_norm: float = 0.5
    hidden: tuple[int, ...] = (64, 64)


def gae(
    rewards: Array, values: Array, dones: Array, last_value: float, gamma: float | Array,
    lam: float,
) -> tuple[Array, Array]:
    """Generalised advantage estimates and critic targets for one trajectory segment.

    ``values[t]`` is V(s_t); ``dones[t]`` is 1 when the episode ended after
    step t (then nothing is bootstrapped across it); ``last_value`` is V of
    the state after the last step (ignored if that step ended the episode).
    ``gamma`` is one discount, or one per step (the tuner discounts by time:
    gamma^(window length)).
    """
    steps = len(rewards)
    gammas = np.broadcast_to(np.asarray(gamma, dtype=float), (steps,))
    adv = np.zeros(steps)
    running = 0.0
    for t in range(steps - 1, -1, -1):
        next_value = last_value if t == steps - 1 else values[t + 1]
        live = 1.0 - dones[t]
        delta = rewards[t] + gammas[t] * next_value * live - values[t]
        running = delta + gammas[t] * lam * live * running
        adv[t] = running
    return adv, adv + values


def masked_log_softmax(logits: Array, mask: NDArray[np.bool_]) -> Array:
    z = np.where(mask, logits, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=1, keepdims=True))
    return np.where(mask, z - log_norm, -np.inf)


def clipped_loss(
    logits: Array, mask: NDArray[np.bool_], actions: NDArray[np.int64], old_logp: Array,
    advantages: Array, clip: float, entropy_coef: float,
) -> tuple[float, Array, dict[str, float]]:
    """The clipped surrogate minus the entropy bonus, and its gradient in the logits."""
    rows = np.arange(len(actions))
    logp_all = masked_log_softmax(logits, mask)
    probs = np.where(mask, np.exp(logp_all), 0.0)
    logp = logp_all[rows, actions]
    ratio = np.exp(logp - old_logp)
    clipped = np.clip(ratio, 1 - clip, 1 + clip)
    surrogate = np.minimum(ratio * advantages, clipped * advantages)
    safe_logp = np.where(mask, logp_all, 0.0)
    entropy = -(probs * safe_logp).sum(axis=1)
    n = len(actions)
    loss = -surrogate.mean() - entropy_coef * entropy.mean()
    # The unclipped term is the minimum (so it carries the gradient) unless the
    # ratio left the trust region in the direction the advantage rewards.
    active = ratio * advantages <= clipped * advantages
    onehot = np.zeros_like(probs)
    onehot[rows, actions] = 1.0
    d_logp = np.where(active, -ratio * advantages, 0.0) / n  # d loss / d log pi(a)
    grad = d_logp[:, None] * (onehot - probs)
    # d H / d z_k = -p_k (log p_k + H)
    d_entropy = -probs * (safe_logp + entropy[:, None])
    grad -= entropy_coef * d_entropy / n
    stats = {
        "policy_loss": float(-surrogate.mean()),
        "entropy": float(entropy.mean()),
        "clip_fraction": float((np.abs(ratio - 1) > clip).mean()),
        "approx_kl": float(np.mean(old_logp - logp)),
    }
    return float(loss), grad, stats


@dataclass
class Step:
    """One decision: per-worker inputs and choices, and what followed."""

    actor_in: Array  # (workers, ACTOR_INPUTS)
    mask: NDArray[np.bool_]  # (workers, N_ACTIONS)
    actions: NDArray[np.int64]
    logp: Array
    critic_in: Array  # (CRITIC_INPUTS,)
    value: float
    reward: float = 0.0
    done: bool = False
    elapsed: float = 1.0  # the following window's length, in the reward's time unit


@dataclass
class Rollout:
    """Decisions collected by the current policy, segment by segment."""

    steps: list[Step] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    _open: int = 0  # first step without advantages yet

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def close_segment(self, last_value: float, gamma: float, lam: float) -> None:
        """Compute advantages of the steps added since the last segment closed."""
        seg = self.steps[self._open:]
        if not seg:
            return
        adv, ret = gae(
            np.array([s.reward for s in seg]), np.array([s.value for s in seg]),
            np.array([float(s.done) for s in seg]), last_value,
            gamma ** np.array([s.elapsed for s in seg]), lam,
        )
        self.advantages.extend(adv.tolist())
        self.returns.extend(ret.tolist())
        self._open = len(self.steps)

    def __len__(self) -> int:
        return len(self.steps)


class ActorCritic:
    """The two networks, their optimizers, and how they act and learn."""

    def __init__(self, actor: MLP, critic: MLP, config: PPOConfig) -> None:
        self.actor = actor
        self.critic = critic
        self.config = config
        self.actor_opt = Adam(actor.size, config.lr, max_grad_norm=config.max_grad_norm)
        self.critic_opt = Adam(critic.size, config.lr, max_grad_norm=config.max_grad_norm)
        self.updates = 0

    @classmethod
    def create(cls, config: PPOConfig, rng: np.random.Generator) -> ActorCritic:
        actor = MLP.initialized((ACTOR_INPUTS, *config.hidden, N_ACTIONS), rng, out_gain=0.01)
        critic = MLP.initialized((CRITIC_INPUTS, *config.hidden, 1), rng, out_gain=1.0)
        return cls(actor, critic, config)

    # ---------------------------------------------------------------- acting

    def act(
        self, actor_in: Array, mask: NDArray[np.bool_], rng: np.random.Generator | None
    ) -> tuple[NDArray[np.int64], Array]:
        """Sample one action per row (``rng`` None: take the most likely one)."""
        logp_all = masked_log_softmax(self.actor.forward(actor_in), mask)
        if rng is None:
            actions = np.argmax(logp_all, axis=1)
        else:
            probs = np.exp(logp_all)
            cdf = np.cumsum(probs, axis=1)
            draws = rng.random(len(probs))[:, None] * cdf[:, -1:]
            actions = np.minimum((draws >= cdf).sum(axis=1), N_ACTIONS - 1)
            # Numerical edge: never land on a masked action.
            bad = ~mask[np.arange(len(actions)), actions]
            actions[bad] = np.argmax(logp_all[bad], axis=1)
        return actions.astype(np.int64), logp_all[np.arange(len(actions)), actions]

    def probabilities(self, actor_in: Array, mask: NDArray[np.bool_]) -> Array:
        return np.exp(masked_log_softmax(self.actor.forward(actor_in), mask))

    def value(self, critic_in: Array) -> float:
        return float(self.critic.forward(critic_in[None, :])[0, 0])

    # -------------------------------------------------------------- learning

    def update(self, rollout: Rollout, rng: np.random.Generator) -> dict[str, float]:
        """Several epochs of minibatch steps on the clipped objective and value loss."""
        cfg = self.config
        steps = rollout.steps[: len(rollout.advantages)]
        if not steps:
            return {}
        adv = np.array(rollout.advantages)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        returns = np.array(rollout.returns)
        stats: dict[str, float] = {}
        order = np.arange(len(steps))
        for _ in range(cfg.epochs):
            rng.shuffle(order)
            for chunk in np.array_split(order, min(cfg.minibatches, len(order))):
                stats = self._minibatch([steps[i] for i in chunk], adv[chunk], returns[chunk])
        self.updates += 1
        return stats

    def _minibatch(self, steps: list[Step], adv: Array, returns: Array) -> dict[str, float]:
        cfg = self.config
        counts = [len(s.actions) for s in steps]
        actor_in = np.concatenate([s.actor_in for s in steps])
        mask = np.concatenate([s.mask for s in steps])
        actions = np.concatenate([s.actions for s in steps])
        old_logp = np.concatenate([s.logp for s in steps])
        row_adv = np.repeat(adv, counts)
        logits = self.actor.forward(actor_in)
        loss, d_logits, stats = clipped_loss(
            logits, mask, actions, old_logp, row_adv, cfg.clip, cfg.entropy
        )
        self.actor_opt.step(self.actor.params, self.actor.backward(d_logits))
        critic_in = np.stack([s.critic_in for s in steps])
        values = self.critic.forward(critic_in)[:, 0]
        err = values - returns
        d_values = (2 * cfg.value_coef * err / len(err))[:, None]
        self.critic_opt.step(self.critic.params, self.critic.backward(d_values))
        stats["value_loss"] = float(np.mean(err**2))
        stats["loss"] = loss
        return stats

    # ------------------------------------------------------------ persistence

    def save(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        """Write both networks (and the training config) as a small ``.npz``."""
        np.savez_compressed(
            path,
            format=np.array(FORMAT),
            actor_sizes=np.array(self.actor.sizes),
            critic_sizes=np.array(self.critic.sizes),
            actor=self.actor.params.astype(np.float32),
            critic=self.critic.params.astype(np.float32),
            config=np.array(repr(asdict(self.config))),
            meta=np.array(repr(meta or {})),
        )

    @classmethod
    def load(cls, path: str | Path, config: PPOConfig | None = None) -> ActorCritic:
        with np.load(path, allow_pickle=False) as data:
            if str(data["format"]) != FORMAT:
                raise ValueError(f"{path}: not a gleam batch policy ({data['format']})")
            actor_sizes = tuple(int(s) for s in data["actor_sizes"])
            critic_sizes = tuple(int(s) for s in data["critic_sizes"])
            if actor_sizes[0] != ACTOR_INPUTS or critic_sizes[0] != CRITIC_INPUTS:
                raise ValueError(
                    f"{path}: the policy was trained on other observation features "
                    f"({actor_sizes[0]}/{critic_sizes[0]} inputs, this version has "
                    f"{ACTOR_INPUTS}/{CRITIC_INPUTS}); pre-train it again"
                )
            actor = MLP(actor_sizes, data["actor"].astype(np.float64))
            critic = MLP(critic_sizes, data["critic"].astype(np.float64))
            saved = ast.literal_eval(str(data["config"]))
        if config is None:
            # Fine-tuning goes on with the hyperparameters the policy was trained with.
            known = {f.name for f in fields(PPOConfig)}
            saved = {k: v for k, v in saved.items() if k in known}
            saved["hidden"] = actor_sizes[1:-1]
            config = PPOConfig(**saved)
        return cls(actor, critic, config)
