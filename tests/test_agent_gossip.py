"""Gossip between real in-process agents: views converge, a lost peer leaves every view."""

from __future__ import annotations

import trio

from gleam.peer.addresses import PeerAddress
from gleam.peer.agent import Agent, AgentConfig
from gleam.peer.gossip import GossipConfig
from gleam.peer.gpus import GpuInventory
from gleam.peer.hookspecs import hookimpl
from gleam.peer.plugin_manager import make_plugin_manager

from .conftest import wait_until

FAST = GossipConfig(interval=0.1, suspect_timeout=1.0, refresh_interval=0.2,
                    sync_interval=1.0, links_refresh_interval=0.5)


def addr(agent) -> PeerAddress:
    return PeerAddress("127.0.0.1", agent.listen_port)


def peer_ids(agent) -> dict[str, dict]:
    return {p["id"]: p for p in agent.snapshot()["peers"]}


async def test_views_converge_through_a_middle_peer(agents, mesh_key):
    a = await agents.start("a", mesh_key, gossip=FAST)
    b = await agents.start("b", mesh_key, gossip=FAST, peers=[addr(a)])
    c = await agents.start("c", mesh_key, gossip=FAST, peers=[addr(b)])
    # a and c never connect to each other, yet each learns of the other's device.
    await wait_until(lambda: c.node_id in peer_ids(a) and a.node_id in peer_ids(c), timeout=10)
    seen = peer_ids(a)[c.node_id]
    assert seen["name"] == "c" and seen["via"] == "gossip" and seen["state"] == "alive"
    assert seen["gpus"][0]["backend"] == "host" and seen["gpus"][0]["gflops"] == 10.0
    # b's links (measured RTT to both) reach a too.
    await wait_until(lambda: len(a.mesh.links_of(b.node_id)) == 2, timeout=10)


async def test_a_peer_that_dies_leaves_every_view(agents, mesh_key, state_factory):
    a = await agents.start("a", mesh_key, gossip=FAST)
    b = await agents.start("b", mesh_key, gossip=FAST, peers=[addr(a)])
    cfg = AgentConfig(state=state_factory(mesh_key), name="c", host="127.0.0.1", port=0,
                      peers=(addr(b),), ping_interval=0.2, peer_timeout=2.0, gossip=FAST)
    c = Agent(cfg, make_plugin_manager(()), inventory=GpuInventory(measure=lambda: 1.0))
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        await wait_until(lambda: c.node_id in peer_ids(a), timeout=10)
        nursery.cancel_scope.cancel()
    await wait_until(lambda: c.node_id not in peer_ids(a) and c.node_id not in peer_ids(b),
                     timeout=5)
    await wait_until(lambda: {"suspected", "died"} & {e.kind for e in a.events}, timeout=5)


async def test_plugins_contribute_gossip_fields(agents, mesh_key):
    class Fields:
        @hookimpl
        def gleam_gossip_fields(self):
            return {"tuner": {"batch": 64}}

    a = await agents.start("a", mesh_key, gossip=FAST)
    b = await agents.start("b", mesh_key, gossip=FAST, peers=[addr(a)],
                           plugins=[("fields", Fields())])
    # Other built-in plugins (CUDA forwarding) advertise their own fields beside it.
    await wait_until(lambda: (peer_ids(a).get(b.node_id, {}).get("extra") or {}).get("tuner")
                     == {"batch": 64}, timeout=10)


async def test_a_peer_that_shuts_down_leaves_at_once(agents, mesh_key, state_factory):
    slow_suspicion = GossipConfig(interval=0.1, suspect_timeout=60.0, refresh_interval=0.2)
    a = await agents.start("a", mesh_key, gossip=slow_suspicion)
    cfg = AgentConfig(state=state_factory(mesh_key), name="b", host="127.0.0.1", port=0,
                      peers=(addr(a),), gossip=slow_suspicion)
    b = Agent(cfg, make_plugin_manager(()), inventory=GpuInventory(measure=lambda: 1.0))
    async with trio.open_nursery() as nursery:
        await nursery.start(b.run)
        await wait_until(lambda: b.node_id in peer_ids(a), timeout=10)
        # b must be a member of a's view (its gossip record arrived), not only linked,
        # for its leaving to be a death in that view.
        await wait_until(lambda: b.node_id in a.mesh.members(), timeout=10)
        nursery.cancel_scope.cancel()
    # Its goodbye says it shut down: no 60 s suspicion before it leaves the view.
    await wait_until(lambda: b.node_id not in peer_ids(a), timeout=10)
    await wait_until(lambda: "died" in [e.kind for e in a.events], timeout=5)
