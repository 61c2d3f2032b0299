"""The CUDA forwarding component: per-agent state, one way to open a served session,
and a stop that leaves the Trio thread free while an executor finishes its kernel."""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from typing import Any

import pytest
import trio
import trio.testing

from gleam.peer.addresses import PeerAddress
from gleam.peer.cuda.client.opening import OpenFailed, open_local, open_remote
from gleam.peer.cuda.forwarding import CudaForwarding
from gleam.peer.cuda.server.sessions import ServedSession
from gleam.peer.cuda.wire.channel import LoopbackChannel
from gleam.peer.sched.leasing import LeaseService, service_of

from .conftest import AgentStarter, wait_until

BAD_RANGE = (1, 1 << 20)  # not 64 KiB aligned: the backend refuses it


def _fw(agent: Any) -> CudaForwarding:
    fw = agent.components.get(CudaForwarding)
    assert fw is not None
    return fw


async def _backend_open(agent: Any) -> CudaForwarding:
    fw = _fw(agent)
    await wait_until(lambda: fw.backend is not None, timeout=30)
    return fw


def _count_openings(fw: CudaForwarding, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sessions that went through ``fw.open_served`` (the one way a served session opens)."""
    seen: list[int] = []
    inner = fw.open_served

    async def spy(session: int, *args: Any, **kwargs: Any) -> ServedSession:
        seen.append(session)
        return await inner(session, *args, **kwargs)

    monkeypatch.setattr(fw, "open_served", spy)
    return seen


# ------------------------------------------------------------ per-agent state


def _globals_holding(objects: list[Any]) -> list[str]:
    """Module globals of gleam (a plugin's or a helper's) whose container holds one of
    ``objects``: per-agent state that would leak between agents and outlive them."""
    found = []
    for name, module in list(sys.modules.items()):
        if name != "gleam" and not name.startswith("gleam."):
            continue
        for attr, value in list(vars(module).items()):
            items: list[Any] = []
            if isinstance(value, dict | weakref.WeakKeyDictionary | weakref.WeakValueDictionary):
                items = [*value.keys(), *value.values()]
            elif isinstance(value, list | set | frozenset | tuple):
                items = list(value)
            if any(item is obj for item in items for obj in objects):
                found.append(f"{name}.{attr}")
    return found



async def test_two_agents_in_one_process_keep_their_own_state(state_factory, mesh_key):
    refs: list[weakref.ref[Any]] = []
    async with trio.open_nursery() as nursery:
        starter = AgentStarter(nursery, state_factory)
        a = await starter.start("a", mesh_key, backend="host")
        b = await starter.start("b", mesh_key, backend="host")
        fa, fb = await _backend_open(a), await _backend_open(b)
        assert fa is not fb and fa.agent is a and fb.agent is b
        assert service_of(a) is not service_of(b)
        assert isinstance(service_of(a), LeaseService) and service_of(a).agent is a

        served, _, data = await open_local(fa, 7, "only-on-a")
        assert data is not None  # its own program's session has the native lanes too
        assert fa.server.get(7) is served and fb.server.get(7) is None
        assert [r["id"] for r in a.session_rows()] == [f"{7:016x}"]
        assert b.session_rows() == []
        assert b.snapshot()["cuda"]["served_sessions"] == 0
        assert _globals_holding([a, b, fa, fb, service_of(a), service_of(b)]) == []

        refs = [weakref.ref(x) for x in (a, b, fa, fb)]
        data.close()
        del a, b, fa, fb, served, data
        nursery.cancel_scope.cancel()
    # Both stopped: no module global (of a plugin or its helpers) keeps them alive.
    del starter
    gc.collect()
    assert [r() for r in refs] == [None] * 4


# ------------------------------------------------------------ opening served sessions


async def test_local_and_remote_openings_refuse_and_release_through_one_method(
        agents, mesh_key, monkeypatch):
    server = await agents.start("srv", mesh_key, backend="host", max_sessions=1)
    client = await agents.start("cli", mesh_key, backend="none",
                                peers=[PeerAddress("127.0.0.1", server.listen_port)])
    await wait_until(lambda: server.node_id in client.links, timeout=10)
    fw = await _backend_open(server)
    openings = _count_openings(fw, monkeypatch)
    link = client.links[server.node_id]

    # The backend refuses the range: the place admit reserved is given back.
    with pytest.raises(OpenFailed, match=r"srv refused: .*bad address range request"):
        await open_local(fw, 1, "t", BAD_RANGE)
    assert fw.server.count() == 0
    with pytest.raises(OpenFailed, match=r"srv refused: .*bad address range request"):
        await open_remote(_fw(client), link, 2, "t", BAD_RANGE)
    assert fw.server.count() == 0

    # The one place is had locally; a peer's open is then refused as full, and a
    # second local one too, without taking a place.
    served, _, data = await open_local(fw, 3, "t")
    with pytest.raises(OpenFailed, match="srv refused: server is full"):
        await open_remote(_fw(client), link, 4, "t")
    with pytest.raises(OpenFailed, match="srv refused: server is full"):
        await open_local(fw, 5, "t")
    assert fw.server.count() == 1

    # Once it ends, the place is free for a peer's session.
    served.stop("done")
    await wait_until(lambda: fw.server.count() == 0, timeout=10)
    if data is not None:
        data.close()
    opened = await open_remote(_fw(client), link, 6, "t")
    assert opened.session == 6 and fw.server.get(6) is not None
    assert sorted(openings) == [1, 2, 3, 4, 5, 6]


async def test_a_stopped_component_refuses_to_open(agents, mesh_key):
    server = await agents.start("srv", mesh_key, backend="host")
    fw = await _backend_open(server)
    await fw.stop()
    with pytest.raises(OpenFailed, match="srv refused: srv is shutting down"):
        await open_local(fw, 1, "t")
    assert fw.server.count() == 0
    assert not fw.spawn(trio.sleep, 0)


# ------------------------------------------------------------ stopping


class BusyExecutor:
    """An ExecSession stand-in whose closing waits, until released, for a kernel
    still running (what an executor that is asked to stop may have to do)."""

    va_base, va_size = 1 << 40, 1 << 20

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()
        self.closed = threading.Event()

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.running.set()
        # Bounded, so that a stop that blocked the Trio thread ends the test
        # (failing it) instead of hanging it.
        self.release.wait(30)
        self.closed.set()


async def test_stop_leaves_the_trio_thread_free_while_an_executor_is_busy(agents, mesh_key):
    agent = await agents.start("srv", mesh_key, backend="none")
    fw = _fw(agent)
    busy = BusyExecutor()
    served = ServedSession(
        session=9, channel=LoopbackChannel(agent.node_id, "srv"), program="t", client="t",
        exec=busy, reply_capacity=64, batch_error=ValueError, on_end=fw._served_ended,
    )
    assert fw.server.admit(9) is None
    fw.server.add(served)
    fw.stop_join = 3600.0  # stop waits for the kernel however slow this machine is

    stopped = trio.Event()

    async def stop() -> None:
        await fw.stop()
        stopped.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop)
        await trio.to_thread.run_sync(busy.running.wait)
        # Every task, stop among them, is waiting: the Trio thread is not held.
        await trio.testing.wait_all_tasks_blocked()
        assert fw.stopped and not stopped.is_set()
        assert not busy.release.is_set() and not busy.closed.is_set()
        busy.release.set()
    assert stopped.is_set() and busy.closed.is_set()
    assert fw.server.count() == 0
