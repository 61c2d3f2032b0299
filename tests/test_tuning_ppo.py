"""The numpy PPO: MLP gradients, GAE, the clipped objective, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from gleam.peer.tuning.mlp import MLP, Adam
from gleam.peer.tuning.observation import ACTOR_INPUTS
from gleam.peer.tuning.ppo import (
    N_ACTIONS,
    ActorCritic,
    PPOConfig,
    Rollout,
    Step,
    clipped_loss,
    gae,
)
from gleam.peer.tuning.pretrain import PretrainConfig, pretrain


def test_gae_matches_a_hand_computed_example():
    # gamma 0.9, lambda 0.8:
    #   delta_2 = 2 + 0.9 * 0.2 - 0.3 = 1.88            A_2 = 1.88
    #   delta_1 = 0 + 0.9 * 0.3 - 0.4 = -0.13           A_1 = -0.13 + 0.72 * 1.88 = 1.2236
    #   delta_0 = 1 + 0.9 * 0.4 - 0.5 = 0.86            A_0 = 0.86 + 0.72 * 1.2236 = 1.740992
    rewards = np.array([1.0, 0.0, 2.0])
    values = np.array([0.5, 0.4, 0.3])
    adv, ret = gae(rewards, values, np.zeros(3), 0.2, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [1.740992, 1.2236, 1.88])
    np.testing.assert_allclose(ret, adv + values)


def test_gae_does_not_bootstrap_across_an_episode_end():
    # The episode ends after step 1: delta_1 = 0 - 0.4, nothing carried into A_0 from A_2.
    adv, _ = gae(np.array([1.0, 0.0, 2.0]), np.array([0.5, 0.4, 0.3]), np.array([0.0, 1.0, 0.0]),
                 0.2, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [0.86 + 0.72 * -0.4, -0.4, 1.88])


def _loss_inputs(ratio_shift: float = 0.0):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, N_ACTIONS))
    mask = np.ones((6, N_ACTIONS), dtype=bool)
    mask[0, 4] = mask[1, 0] = False
    actions = np.array([2, 1, 3, 0, 4, 2])
    z = logits - logits.max(axis=1, keepdims=True)
    z = np.where(mask, z, -np.inf)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    old = logp[np.arange(6), actions] - ratio_shift
    return logits, mask, actions, old


@pytest.mark.parametrize("advantage, sign", [(1.0, -1.0), (-1.0, 1.0)])
def test_clipped_objective_pushes_the_chosen_action_by_the_advantage(advantage, sign):
    logits, mask, actions, old = _loss_inputs()
    _, grad, _ = clipped_loss(logits, mask, actions, old, np.full(6, advantage), 0.2, 0.0)
    chosen = grad[np.arange(6), actions]
    # Gradient descent moves the chosen logit against the gradient: up for A > 0.
    assert np.all(np.sign(chosen) == sign)
    assert np.all(grad[~mask] == 0.0)


def test_clipped_objective_stops_outside_the_trust_region():
    # ratio = e^0.5 > 1.2 with a positive advantage: the clipped term is the minimum.
    logits, mask, actions, old = _loss_inputs(ratio_shift=0.5)
    _, grad, stats = clipped_loss(logits, mask, actions, old, np.ones(6), 0.2, 0.0)
    assert np.all(grad == 0.0)
    assert stats["clip_fraction"] == 1.0
    # ...but with a negative advantage the unclipped term is the minimum, so it still pulls.
    _, grad, _ = clipped_loss(logits, mask, actions, old, -np.ones(6), 0.2, 0.0)
    assert np.all(grad[np.arange(6), actions] > 0)


def test_clipped_loss_gradient_matches_finite_differences():
    logits, mask, actions, old = _loss_inputs(ratio_shift=0.05)
    adv = np.array([1.0, -0.5, 0.3, 2.0, -1.0, 0.7])
    _, grad, _ = clipped_loss(logits, mask, actions, old, adv, 0.2, 0.05)
    eps = 1e-6
    numeric = np.zeros_like(logits)
    for idx in np.ndindex(*logits.shape):
        if not mask[idx]:
            continue
        up, down = logits.copy(), logits.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric[idx] = (clipped_loss(up, mask, actions, old, adv, 0.2, 0.05)[0]
                        - clipped_loss(down, mask, actions, old, adv, 0.2, 0.05)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, atol=1e-6)


def test_mlp_backward_matches_finite_differences():
    rng = np.random.default_rng(0)
    net = MLP.initialized((4, 5, 3), rng)
    x = rng.normal(size=(7, 4))
    target = rng.normal(size=(7, 3))

    def loss(params):
        return float(((MLP(net.sizes, params).forward(x) - target) ** 2).sum())

    out = net.forward(x)
    grad = net.backward(2 * (out - target))
    eps = 1e-6
    numeric = np.array([
        (loss(net.params + eps * e) - loss(net.params - eps * e)) / (2 * eps)
        for e in np.eye(net.size)
    ])
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


def test_adam_descends():
    params = np.array([3.0, -2.0])
    opt = Adam(2, lr=0.1, max_grad_norm=0)
    for _ in range(200):
        opt.step(params, 2 * params)
    assert np.abs(params).max() < 0.1


def test_ppo_update_makes_the_rewarded_action_likelier():
    rng = np.random.default_rng(1)
    model = ActorCritic.create(PPOConfig(lr=3e-3, entropy=0.0), rng)
    actor_in = rng.normal(size=(3, ACTOR_INPUTS))
    mask = np.ones((3, N_ACTIONS), dtype=bool)
    before = model.probabilities(actor_in, mask)[:, 4].mean()
    for _ in range(5):
        rollout = Rollout()
        for _ in range(32):
            actions, logp = model.act(actor_in, mask, rng)
            reward = float((actions == 4).mean())  # "double" pays
            critic_in = np.zeros(model.critic.sizes[0])
            rollout.add(Step(actor_in, mask, actions, logp, critic_in, model.value(critic_in),
                             reward=reward, done=True))
        rollout.close_segment(0.0, 0.9, 0.9)
        model.update(rollout, rng)
    assert model.probabilities(actor_in, mask)[:, 4].mean() > before + 0.1


def _tiny_pretrain(seed: int) -> np.ndarray:
    config = PretrainConfig(iterations=2, episodes=2, episode_len=4,
                            ppo=PPOConfig(hidden=(8, 8), epochs=1, minibatches=2))
    *_, (model, _) = pretrain(seed, config)
    return np.concatenate([model.actor.params, model.critic.params])


def test_pretraining_is_deterministic_under_a_seed():
    a, b, c = _tiny_pretrain(7), _tiny_pretrain(7), _tiny_pretrain(8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_policy_file_round_trips(tmp_path):
    model = ActorCritic.create(PPOConfig(hidden=(8, 8)), np.random.default_rng(0))
    path = tmp_path / "p.npz"
    model.save(path)
    loaded = ActorCritic.load(path)
    x = np.random.default_rng(1).normal(size=(2, ACTOR_INPUTS))
    mask = np.ones((2, N_ACTIONS), dtype=bool)
    np.testing.assert_allclose(loaded.probabilities(x, mask), model.probabilities(x, mask),
                               atol=1e-6)  # stored as float32
