"""Decisions taken before a tensor is indexed: compress it at all, and how.

Per block, the native planner (``gl_sketch_plan``) chooses empty, sketch or
raw from the union index. Two choices come earlier and cost a round trip
when wrong, so they are made here, from facts every worker shares without
talking: the tensor's size, and what the last aggregations of the same key
(a DDP bucket) showed after their OR.

* A tensor below ``min_coordinates`` is summed plainly: the index round trip
  costs more than the bytes it could save.
* A key whose last aggregation saved less than ``min_saving`` of the
  uncompressed bytes (dense gradients) is summed plainly for the next
  ``reprobe_every`` aggregations, then indexed again in case it became
  sparse. The index costs 1/32 of a dense tensor, so a dense key costs at
  most that once every ``reprobe_every`` steps.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class DensityMemory:
    min_coordinates: int = 16384
    min_saving: float = 0.1
    reprobe_every: int = 16
    _dense_for: dict[Hashable, int] = field(default_factory=dict)

    def send_dense(self, key: Hashable, coordinates: int) -> bool:
        """True when this aggregation should skip the index and sum plainly."""
        if coordinates < self.min_coordinates:
            return True
        left = self._dense_for.get(key, 0)
        if left > 0:
            self._dense_for[key] = left - 1
            return True
        return False

    def observe(self, key: Hashable, bytes_uncompressed: int, bytes_sent: int) -> None:
        """Record what an indexed aggregation of ``key`` achieved."""
        saved = 1.0 - bytes_sent / bytes_uncompressed if bytes_uncompressed else 0.0
        if saved < self.min_saving:
            self._dense_for[key] = self.reprobe_every
        else:
            self._dense_for.pop(key, None)
