"""Interleaved rounds: a figure and its references measured turn about, medians kept.

A shared machine's load drifts during a run. Measuring gleam first and the
reference once afterwards hands the drift to one side; running both in every
round, in an order that reverses each round, spreads it over both, and the
median of the rounds drops the round a neighbour's burst spoiled.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass
class Rounds:
    """Every round's value of each measure, and the order each round ran them in."""

    values: dict[str, list[float]] = field(default_factory=dict)
    orders: list[list[str]] = field(default_factory=list)

    def median(self, name: str) -> float:
        return statistics.median(self.values[name])

    def as_dict(self) -> dict[str, object]:
        return {"values": self.values, "order": self.orders}


Measure = Callable[[], float | Mapping[str, float]]


def interleave(rounds: int, measures: Sequence[tuple[str, Measure]]) -> Rounds:
    """Run each ``(name, measure)`` once per round: in the given order in even
    rounds, reversed in odd ones. A measure that returns several values (a mapping,
    as one run read on several processes) keeps each as ``name_key``."""
    if rounds <= 0:
        raise ValueError("rounds must be positive")
    out = Rounds()
    for index in range(rounds):
        ordered = list(measures) if index % 2 == 0 else list(reversed(measures))
        out.orders.append([name for name, _ in ordered])
        for name, measure in ordered:
            value = measure()
            if isinstance(value, Mapping):
                for key, one in value.items():
                    out.values.setdefault(f"{name}_{key}", []).append(one)
            else:
                out.values.setdefault(name, []).append(value)
    return out
