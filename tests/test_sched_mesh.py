"""The scheduler between real in-process agents over loopback TCP: the ranking hook on
gossip, and leases that keep concurrent clients from piling onto one server."""

from __future__ import annotations

import trio

from gleam.peer.agent import Agent, AgentConfig
from gleam.peer.cuda.client.choose import Choice, choose
from gleam.peer.gpus import GpuInventory
from gleam.peer.hookspecs import hookimpl
from gleam.peer.plugin_manager import make_plugin_manager
from gleam.peer.sched import leasing
from gleam.peer.sched.inputs import candidates_of
from gleam.peer.sched.ranking import Ranking

from .conftest import wait_until
from .test_agent_gossip import FAST, addr

# Host speed in GFLOP/s of the serving agents (as if measured).
SERVERS = {"fast": 40.0, "mid": 20.0, "slow": 10.0}


async def start(agents, name: str, key: bytes, *, gflops: float = 10.0, backend: str = "host",
                max_sessions: int = 2, peers=(), plugins=(), disabled=()) -> Agent:
    cfg = AgentConfig(state=agents.state_factory(key), name=name, host="127.0.0.1", port=0,
                      ping_interval=0.2, peer_timeout=2.0, handshake_timeout=3.0, gossip=FAST,
                      backend=backend, max_sessions=max_sessions, peers=tuple(peers))
    agent = Agent(cfg, make_plugin_manager(disabled=disabled, extra=plugins),
                  inventory=GpuInventory(measure=lambda: gflops))
    await agents.nursery.start(agent.run)
    return agent


async def mesh(agents, key, *, clients=("c1",), plugins=(), max_sessions=2, disabled=()):
    servers = {name: await start(agents, name, key, gflops=gflops, max_sessions=max_sessions)
               for name, gflops in SERVERS.items()}
    made = []
    for name in clients:
        made.append(await start(agents, name, key, backend="none", plugins=plugins,
                                disabled=disabled, peers=[addr(s) for s in servers.values()]))

    def adverts_arrived() -> bool:
        seen = [candidates_of(c) for c in made]
        return all(len(cs) == len(SERVERS) and all(x.offer.speed > 1.0 for x, _ in cs)
                   for cs in seen)

    await wait_until(adverts_arrived, 20)
    return servers, made


async def test_the_builtin_ranking_explains_its_choice(agents, mesh_key):
    _servers, (client,) = await mesh(agents, mesh_key)
    where = choose(client, "", None)
    assert where.name == "fast" and [link.peer.name for link in where.fallbacks] == ["mid", "slow"]
    assert where.reason.startswith("soonest estimated completion: fast")
    assert where.ranking is not None and len(where.ranking.estimates) == 3
    pinned = choose(client, "slow", None)
    assert pinned.name == "slow" and pinned.reason == "named with --peer"


class PreferSlow:
    @hookimpl
    def gleam_rank_servers(self, session, candidates):
        order = sorted(candidates, key=lambda c: c.offer.speed)
        return Ranking(tuple(c.node_id for c in order), "a plugin likes slow servers")


async def test_a_plugin_replaces_the_ranking(agents, mesh_key):
    _servers, (client,) = await mesh(agents, mesh_key, plugins=[("prefer-slow", PreferSlow())])
    where = choose(client, "", None)
    assert (where.name, where.reason) == ("slow", "a plugin likes slow servers")


async def test_with_the_scheduler_blocked_the_same_model_ranks_and_nobody_leases(agents,
                                                                                  mesh_key):
    servers, (client,) = await mesh(agents, mesh_key, disabled=("scheduler",))
    where = choose(client, "", None)
    assert where.name == "fast" and where.reason.startswith("soonest estimated completion")
    async with leasing.leased(client, where) as same:
        assert same == where
        assert all(len(leasing.service_of(s).desk) == 0 for s in servers.values())


async def test_concurrent_clients_spread_over_servers_by_lease(agents, mesh_key):
    servers, clients = await mesh(agents, mesh_key, clients=("c1", "c2"))
    # Six sessions decide at once on the same gossip: every one ranks `fast` first.
    choices: list[Choice] = [choose(c, "", None) for c in clients for _ in range(3)]
    assert {c.name for c in choices} == {"fast"}
    landed: list[str] = []
    hold = trio.Event()

    async def open_one(agent, choice: Choice) -> None:
        async with leasing.leased(agent, choice) as where:
            landed.append(where.name)
            await hold.wait()

    async with trio.open_nursery() as nursery:
        for i, choice in enumerate(choices):
            nursery.start_soon(open_one, clients[i // 3], choice)
        await wait_until(lambda: len(landed) == len(choices), 20)
        desks = {name: len(leasing.service_of(agent).desk) for name, agent in servers.items()}
        # Each server admitted what its capacity (2 sessions) allows, no more.
        assert desks == {"fast": 2, "mid": 2, "slow": 2}
        assert sorted(landed) == ["fast", "fast", "mid", "mid", "slow", "slow"]
        # The deny answers' load is fresher than gossip: the next ranking sees it.
        fast_id = servers["fast"].node_id
        offer = {c.node_id: c.offer for c, _ in candidates_of(clients[0])}[fast_id]
        assert offer.queue == 2
        hold.set()
    # Opened (here: given up): the places are free again.
    await wait_until(lambda: all(len(leasing.service_of(s).desk) == 0
                                 for s in servers.values()), 10)


async def test_every_server_full_fails_with_each_reason(agents, mesh_key):
    servers, (client,) = await mesh(agents, mesh_key, max_sessions=1)
    held = trio.Event()
    async with trio.open_nursery() as nursery:
        async def hold(choice: Choice) -> None:
            async with leasing.leased(client, choice):
                await held.wait()

        for _ in SERVERS:
            nursery.start_soon(hold, choose(client, "", None))
        await wait_until(lambda: sum(len(leasing.service_of(s).desk)
                                     for s in servers.values()) == 3, 20)
        try:
            async with leasing.leased(client, choose(client, "", None)):
                raise AssertionError("a fourth lease was granted")
        except leasing.NoServer as exc:
            text = str(exc)
        held.set()
    assert text.startswith("every server denied a lease: ")
    for name in SERVERS:
        assert f"{name}: full: 0 sessions + 1 leases of 1" in text
