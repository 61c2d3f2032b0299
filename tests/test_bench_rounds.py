"""Interleaved rounds: each measure once per round, the order reversed every other round."""

from __future__ import annotations

import pytest

from gleam.peer.bench.rounds import interleave


def test_rounds_reverse_their_order_every_other_round_and_keep_every_value():
    calls: list[str] = []

    def measure(name: str, value: float):
        def run() -> float:
            calls.append(name)
            return value + len(calls)
        return run

    rounds = interleave(3, [("gleam", measure("gleam", 0)), ("raw", measure("raw", 100))])
    assert calls == ["gleam", "raw", "raw", "gleam", "gleam", "raw"]
    assert rounds.orders == [["gleam", "raw"], ["raw", "gleam"], ["gleam", "raw"]]
    assert rounds.values == {"gleam": [1, 4, 5], "raw": [102, 103, 106]}
    assert rounds.median("gleam") == 4 and rounds.median("raw") == 103


def test_rounds_need_at_least_one_round():
    with pytest.raises(ValueError):
        interleave(0, [("gleam", lambda: 1.0)])


def test_a_measure_of_several_values_keeps_each_under_its_own_name():
    runs = iter([{"client": 1.0, "server": 2.0}, {"client": 3.0, "server": 4.0}])
    rounds = interleave(2, [("h2d", lambda: next(runs)), ("raw", lambda: 5.0)])
    assert rounds.values == {"h2d_client": [1.0, 3.0], "h2d_server": [2.0, 4.0],
                             "raw": [5.0, 5.0]}
    assert rounds.median("h2d_server") == 3.0
