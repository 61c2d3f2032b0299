"""The host device's simulation knobs (peer/cuda/server/slowdown.py): ``--host-slowdown``
stretches each kernel, ``GLEAM_HOST_EXCLUSIVE`` runs one kernel at a time across
sessions, as a GPU shared by several contexts does."""

from __future__ import annotations

import threading

import pytest

from gleam.peer.cuda.server.kernels import HostKernel
from gleam.peer.cuda.server.slowdown import EXCLUSIVE_ENV, exclusive_from_env, slowed_kernels

INSIDE_WAIT = 0.5  # how long the first kernel waits for the second to come in beside it


def _overlapped(exclusive: bool) -> bool:
    """Two sessions launch at once: did the second kernel start while the first ran?"""
    entered = [threading.Event(), threading.Event()]
    saw_other: list[bool] = []

    def run(launch: int) -> None:
        entered[launch].set()
        if launch == 0:
            saw_other.append(entered[1].wait(INSIDE_WAIT))

    kernels = slowed_kernels({"k": HostKernel("k", (8,), run=run)}, 1.0, exclusive)
    first = threading.Thread(target=kernels["k"].run, args=(0,))
    first.start()
    entered[0].wait(5)
    second = threading.Thread(target=kernels["k"].run, args=(1,))
    second.start()
    first.join(5)
    second.join(5)
    assert entered[1].is_set()  # the second ran, in either case
    return saw_other[0]


def test_an_exclusive_device_runs_one_kernel_at_a_time():
    assert _overlapped(exclusive=False) is True
    assert _overlapped(exclusive=True) is False


def test_without_either_knob_the_kernels_are_the_registrys_own():
    run = HostKernel("k", (8,), run=lambda launch: None)
    assert slowed_kernels({"k": run}, 1.0)["k"] is run
    native = HostKernel("n", (8,), native="gleam_empty")
    assert slowed_kernels({"n": native}, 4.0, exclusive=True)["n"] is native


@pytest.mark.parametrize(("value", "on"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_exclusive_knob_is_read_from_the_environment(monkeypatch, value, on):
    monkeypatch.setenv(EXCLUSIVE_ENV, value)
    assert exclusive_from_env() is on


def test_a_slowdown_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        slowed_kernels({}, 0.5)
