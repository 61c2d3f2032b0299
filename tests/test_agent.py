"""In-process agents on loopback: real sockets, real handshakes, fast timers."""

from __future__ import annotations

import secrets

import trio

from gleam.peer.addresses import PeerAddress
from gleam.peer.hookspecs import hookimpl

from .conftest import wait_until


def addr(agent) -> PeerAddress:
    return PeerAddress("127.0.0.1", agent.listen_port)


async def test_two_agents_authenticate(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    await wait_until(lambda: a.node_id in b.links and b.node_id in a.links)
    doc = b.snapshot()
    (peer,) = doc["peers"]
    assert peer["id"] == a.node_id
    assert peer["name"] == "a"
    assert peer["authenticated"] is True
    assert peer["state"] in ("connected", "alive")
    # Pings flow both ways and give a round-trip time.
    await wait_until(lambda: b.snapshot()["peers"][0]["rtt_ms"] is not None)
    assert doc["node"]["id"] == b.node_id


async def test_a_peer_that_dialled_in_is_shown_where_it_listens(agents, mesh_key):
    """Not at the ephemeral port it dialled from: that one reaches nobody."""
    a = await agents.start("a", mesh_key)
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    await wait_until(lambda: b.node_id in a.links)
    (row,) = [p for p in a.snapshot()["peers"] if p["id"] == b.node_id]
    assert row["direction"] == "incoming"
    assert row["address"] == str(addr(b))


async def test_other_mesh_is_refused_and_agents_stay_up(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    stranger = await agents.start("x", secrets.token_bytes(32), peers=[addr(a), addr(b)])
    await wait_until(lambda: a.node_id in b.links)
    await wait_until(
        lambda: all(t.state == "refused" for t in stranger.targets), timeout=10
    )
    assert not stranger.links
    assert stranger.node_id not in a.links and stranger.node_id not in b.links
    assert "another mesh" in stranger.targets[0].error
    assert any(e.kind == "refused" for e in a.events)
    # Both are still serving each other.
    assert await b.links[a.node_id].ping() > 0


async def test_mutual_dials_converge_on_one_link(agents, mesh_key, state_factory):
    a = await agents.start("a", mesh_key)
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    # Restart-free way to make a dial b too: add a target and a dialer.
    from gleam.peer.agent import DialTarget

    target = DialTarget(addr(b))
    a.targets.append(target)
    a.nursery.start_soon(a._dial_forever, target)
    await wait_until(lambda: target.node_id == b.node_id or a.node_id in b.links)
    await wait_until(lambda: b.node_id in a.links and a.node_id in b.links)
    await trio.sleep(0.5)
    # One link each side, and it is the same TCP connection (same initiator).
    a_link, b_link = a.links[b.node_id], b.links[a.node_id]
    assert not a_link.closed and not b_link.closed
    a_initiator = a._initiator_of(a_link)
    assert a_initiator == b._initiator_of(b_link) == min(a.node_id, b.node_id)


async def test_peer_that_goes_away_is_dropped(agents, mesh_key, state_factory):
    from gleam.peer.agent import Agent, AgentConfig
    from gleam.peer.plugin_manager import make_plugin_manager

    a = await agents.start("a", mesh_key)
    cfg = AgentConfig(
        state=state_factory(mesh_key), name="b", host="127.0.0.1", port=0,
        peers=(addr(a),), ping_interval=0.2, peer_timeout=2.0,
    )
    b = Agent(cfg, make_plugin_manager(disabled=()))
    async with trio.open_nursery() as nursery:
        await nursery.start(b.run)
        await wait_until(lambda: b.node_id in a.links)
        nursery.cancel_scope.cancel()
    await wait_until(lambda: b.node_id not in a.links)
    assert any(e.kind == "left" and "goodbye" in e.text for e in a.events), list(a.events)


async def test_data_batches_reach_plugins(agents, mesh_key):
    received: list[bytes] = []

    class Sink:
        @hookimpl
        def gleam_data_batch(self, payload):
            if payload.startswith(b"test:"):
                received.append(payload)
                return True
            return None

    a = await agents.start("a", mesh_key, plugins=[("sink", Sink())])
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    await wait_until(lambda: a.node_id in b.links)
    link = b.links[a.node_id]
    big = b"test:" + secrets.token_bytes(3 << 20)
    await link.send_batch(b"test:small")
    await link.send_batch(big)
    await link.ping()
    assert received == [b"test:small", big]


async def test_capabilities_travel_in_hello(agents, mesh_key):
    class Caps:
        @hookimpl
        def gleam_capabilities(self):
            return ["x-test", "x-test", ""]

    a = await agents.start("a", mesh_key, plugins=[("caps", Caps())])
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    await wait_until(lambda: a.node_id in b.links)
    caps = b.links[a.node_id].peer.capabilities
    assert "x-test" in caps and "wire-bench" in caps
    assert len(caps) == len(set(caps)) and "" not in caps


async def test_bandwidth_is_estimated_from_a_probe(agents, mesh_key):
    a = await agents.start("a", mesh_key, probe_interval=0.3)
    b = await agents.start("b", mesh_key, peers=[addr(a)], probe_interval=0.3)
    await wait_until(lambda: a.node_id in b.links)
    await wait_until(lambda: b.snapshot()["peers"][0]["bandwidth_bps"] is not None, timeout=10)
    # Loopback carries far more than a gigabit even through Python.
    assert b.snapshot()["peers"][0]["bandwidth_bps"] > 1e8


async def test_bulk_transfers_are_measured_without_probes(agents, mesh_key):
    a = await agents.start("a", mesh_key, probe_interval=0)
    b = await agents.start("b", mesh_key, peers=[addr(a)], probe_interval=0)
    await wait_until(lambda: a.node_id in b.links)
    link = b.links[a.node_id]
    for _ in range(24):
        await link.send_batch(b"gleam-bench\x00" + bytes(256 * 1024))
    await link.ping()
    a_link = a.links[b.node_id]
    await wait_until(lambda: a_link.bandwidth.bytes_per_s is not None, timeout=5)
    assert b.links[a.node_id].bandwidth.bytes_per_s is None  # nothing came the other way


async def test_a_failing_data_plane_consumer_closes_only_its_link(agents, mesh_key):
    class Broken:
        @hookimpl
        def gleam_data_batch(self, payload):
            raise RuntimeError("consumer bug")

    a = await agents.start("a", mesh_key, plugins=[("broken", Broken())])
    b = await agents.start("b", mesh_key, peers=[addr(a)])
    await wait_until(lambda: a.node_id in b.links)
    await b.links[a.node_id].send_batch(b"boom")
    await wait_until(lambda: any("internal error" in e.text for e in a.events), timeout=5)
    # The static dialer brings the link back; the agent itself is unharmed.
    await wait_until(lambda: a.node_id in b.links and b.node_id in a.links, timeout=10)
