"""Shared fixtures: state directories, in-process agents, and child-process meshes."""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from gleam.peer.agent import Agent, AgentConfig
from gleam.peer.gpus import GpuInventory
from gleam.peer.localmesh import LocalMesh, local_mesh
from gleam.peer.plugin_manager import make_plugin_manager
from gleam.peer.state import StateDir

# A shell starts background jobs with SIGINT ignored, and an ignored signal stays
# ignored across exec: the agents and commands these tests start would then never
# see the Ctrl-C that some tests send them. Catching it here (Python's own
# handler) makes every child start with the default disposition again.
signal.signal(signal.SIGINT, signal.default_int_handler)

# The host device's compile tier keeps compiled kernels in a cache directory: the tests
# (and the agents they start) get a private one, so that they compile what they test and
# leave nothing in the user's cache. Its object removes it when the session ends.
_PTX_CACHE = tempfile.TemporaryDirectory(prefix="gleam-ptx-cache-")
os.environ.setdefault("GLEAM_PTX_CACHE", _PTX_CACHE.name)
# ... and compile at -O1: a third of -O3's compile time, the same C and the same checks
# (the tier's results may not depend on the optimisation level; bench ptx measures -O3).
os.environ.setdefault("GLEAM_PTX_OPT", "1")


@pytest.fixture
def mesh_key() -> bytes:
    return secrets.token_bytes(32)


@pytest.fixture
def state_factory(tmp_path: Path):
    counter = iter(range(1000))

    def make(key: bytes | None = None) -> StateDir:
        # Unix socket paths are limited to ~107 bytes; keep them short.
        state = StateDir(tmp_path / f"s{next(counter)}")
        state.ensure()
        if key is not None:
            state.store_mesh_key(key)
        return state

    return make


class AgentStarter:
    """Starts in-process agents in a nursery, on loopback, with fast timers."""

    def __init__(self, nursery: trio.Nursery, state_factory) -> None:
        self.nursery = nursery
        self.state_factory = state_factory

    async def start(self, name: str, key: bytes, *, peers=(), plugins=(), **config) -> Agent:
        cfg = AgentConfig(
            state=self.state_factory(key), name=name, host="127.0.0.1", port=0,
            peers=tuple(peers), ping_interval=0.2, peer_timeout=2.0, handshake_timeout=3.0,
            **config,
        )
        pm = make_plugin_manager(disabled=(), extra=plugins)
        # A fixed host speed: measuring it costs 0.2 s per agent.
        agent = Agent(cfg, pm, inventory=GpuInventory(measure=lambda: 10.0))
        await self.nursery.start(agent.run)
        return agent


@pytest.fixture
async def agents(state_factory) -> AsyncIterator[AgentStarter]:
    async with trio.open_nursery() as nursery:
        yield AgentStarter(nursery, state_factory)
        nursery.cancel_scope.cancel()


@pytest.fixture
def process_mesh(tmp_path: Path) -> Iterator[LocalMesh]:
    with local_mesh(tmp_path) as mesh:
        yield mesh


async def wait_until(predicate, timeout: float = 10.0) -> None:
    """Wait for ``predicate()`` to hold, checking as the event loop runs."""
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


def _example(name: str, tmp_path_factory) -> Path:
    from gleam.peer.cuda.examples import ExampleError, build_example

    try:
        return build_example(name, tmp_path_factory.mktemp("bin"))
    except ExampleError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def accumulate(tmp_path_factory) -> Path:
    """The accumulate example (state carried in device memory across gated steps),
    built once per test module: tests/test_consistency.py, test_sched_rebalance.py."""
    return _example("accumulate", tmp_path_factory)


@pytest.fixture(scope="module")
def bench_calls(tmp_path_factory) -> Path:
    """The bench_calls example (its h2d mode uploads fixed bytes: a model's weights),
    built once per test module: tests/test_disk_probation.py."""
    return _example("bench_calls", tmp_path_factory)
