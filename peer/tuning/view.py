"""What a ``gleam_tune_batch`` implementation sees of the tuner asking.

A Protocol, not :class:`gleam.peer.tuning.BatchTuner` itself: the hook
specifications name it, and the tuner builds its plugin manager from those
specifications, so naming the class there would make the two import each
other (docs/architecture.md, "Components and the way their imports point").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gleam.peer.tuning.observation import Observation


class TunerView(Protocol):
    """The tuner's state a batch-size hook decides from."""

    min_batch: Sequence[int]
    max_batch: Sequence[int]
    interval: int

    @property
    def policy_name(self) -> str:
        """The policy the user selected ("ppo", "pollux", "static" or a custom one's name)."""
        ...

    @property
    def batch_sizes(self) -> Sequence[int]:
        """Every worker's current batch size, in worker order."""
        ...

    def builtin_decide(self, obs: Observation) -> list[int]:
        """The tuner's own policy's choice (what the built-in plugin answers)."""
        ...
