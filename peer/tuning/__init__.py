"""Batch-size tuning for data-parallel training on heterogeneous peers.

A policy chooses each worker's batch size from what the job observes every
K iterations (throughput, communication, gradient noise scale); see
docs/batch-tuning.md. Needs numpy (the ``gleam[train]`` extra); torch is
imported only by :mod:`gleam.peer.tuning.ddp`.
"""

from gleam.peer.tuning.noise import NoiseScaleEstimator, lr_gain
from gleam.peer.tuning.observation import (
    ACTION_FACTORS,
    ACTION_NAMES,
    Observation,
    WorkerObservation,
    apply_action,
    efficiency,
    max_batch_for_memory,
)
from gleam.peer.tuning.policies import (
    BatchPolicy,
    PolluxPolicy,
    PPOPolicy,
    StaticPolicy,
    make_policy,
    pretrained_path,
)
from gleam.peer.tuning.reward import Reward, RewardMeter, RewardWeights
from gleam.peer.tuning.tuner import BatchTuner, Decision, IterationSample

__all__ = [
    "ACTION_FACTORS",
    "ACTION_NAMES",
    "BatchPolicy",
    "BatchTuner",
    "Decision",
    "IterationSample",
    "NoiseScaleEstimator",
    "Observation",
    "PPOPolicy",
    "PolluxPolicy",
    "Reward",
    "RewardMeter",
    "RewardWeights",
    "StaticPolicy",
    "WorkerObservation",
    "apply_action",
    "efficiency",
    "lr_gain",
    "make_policy",
    "max_batch_for_memory",
    "pretrained_path",
]
