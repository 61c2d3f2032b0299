"""Each of the agent's components runs against a stand-in of the interface it declares.

No Agent is built here: if a component starts to need more of the agent than
its Protocol says, these stand-ins lack it and the test fails (the import side
of the same rule is tests/test_import_graph.py).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cbor2
import pytest
import trio
import trio.testing

from gleam.discovery import PeerAdvert, PeerFound, PeerGone
from gleam.peer import control
from gleam.peer.addresses import PeerAddress
from gleam.peer.components import Components
from gleam.peer.cuda.client.choose import NoServer, choose
from gleam.peer.discovering import Discovering
from gleam.peer.gossip import GossipConfig, GossipRecords
from gleam.peer.link import PeerLink, establish
from gleam.peer.meshview import LocalFields, MeshGossip
from gleam.peer.names import PeerNames
from gleam.peer.protocol import PROTOCOL_VERSION, Connection, LocalIdentity, Role
from gleam.peer.protocol.framing import FrameBuffer, frame
from gleam.peer.state import StateDir
from gleam.peer.status import CORE_KEYS, StatusInputs, add_plugin_sections, build_status

ME = "0" * 32  # the smallest node id: discovery dials at once


# ------------------------------------------------------------------ link


class Owner:
    """A LinkOwner that keeps what it is handed."""

    def __init__(self) -> None:
        self.messages: list[object] = []
        self.batches: list[bytes] = []
        self.got = trio.Event()

    def on_message(self, link: PeerLink, message: object) -> None:
        self.messages.append(message)
        self.got.set()

    def on_data_batch(self, link: PeerLink, payload: bytes) -> bool:
        self.batches.append(payload)  # the reader thread: no Trio here
        return True


async def _linked_pair(key: bytes) -> tuple[PeerLink, PeerLink]:
    left, right = trio.socket.socketpair()
    streams = trio.SocketStream(left), trio.SocketStream(right)
    conns = [
        Connection(role, LocalIdentity(node_id=name * 32, name=name, mesh_key=key))
        for role, name in ((Role.INITIATOR, "a"), (Role.RESPONDER, "b"))
    ]
    hellos: list[Any] = [None, None]

    async def shake(i: int) -> None:
        hellos[i] = await establish(streams[i], conns[i], 5.0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(shake, 0)
        nursery.start_soon(shake, 1)
    return tuple(  # type: ignore[return-value]
        PeerLink(streams[i], conns[i], hellos[i], "socketpair",
                 ping_interval=0.2, peer_timeout=5.0, probe_interval=0)
        for i in (0, 1)
    )


async def test_a_link_hands_its_owner_messages_and_batches() -> None:
    a, b = await _linked_pair(secrets.token_bytes(32))
    owner = Owner()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run, Owner())
            nursery.start_soon(b.run, owner)
            await a.send_batch(b"payload")
            await a.send(GossipRecords(records=()))
            await owner.got.wait()
            await a.ping()  # the batch went before the ping: b has read it
            nursery.cancel_scope.cancel()
    assert owner.messages == [GossipRecords(records=())]
    assert owner.batches == [b"payload"]


# ------------------------------------------------------------------ control


class Operations:
    """A ControlHandler with one operation of each kind."""

    def control_request(self, op: str, args: dict[str, Any]) -> object:
        if op == "echo":
            return args
        if op == "later":
            return self._later(args)
        if op == "refuse":
            raise control.RequestError("not today")
        return None

    async def _later(self, args: dict[str, Any]) -> object:
        await trio.lowlevel.checkpoint()
        return {"later": args}


async def test_the_control_server_asks_its_handler() -> None:
    client, server = trio.testing.memory_stream_pair()
    buffer = FrameBuffer()

    async def ask(op: str, args: dict[str, Any]) -> dict[str, Any]:
        await client.send_all(frame(cbor2.dumps({"op": op, "args": args})))
        while (body := buffer.next_frame()) is None:
            buffer.feed(await client.receive_some(65536))
        reply: dict[str, Any] = cbor2.loads(body)
        return reply

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(control.serve_control_client, Operations(), server)
            assert await ask("echo", {"x": 1}) == {"ok": True, "result": {"x": 1}}
            assert await ask("later", {"y": 2}) == {"ok": True, "result": {"later": {"y": 2}}}
            assert await ask("refuse", {}) == {"ok": False, "error": "not today"}
            assert await ask("nope", {}) == {"ok": False, "error": "unknown operation 'nope'"}
            await client.aclose()


# ------------------------------------------------------------------ gossip


class GossipDesk:
    """A GossipHost without links."""

    def __init__(self, extra: dict[str, Any]) -> None:
        self.links: dict[str, PeerLink] = {}
        self.events: list[tuple[str, str]] = []
        self.extra = extra

    def record(self, kind: str, text: str) -> None:
        self.events.append((kind, text))

    def local_fields(self) -> LocalFields:
        return LocalFields(port=7420, sessions=2, extra=self.extra)

    def member_gone(self, node_id: str) -> None:
        self.events.append(("gone", node_id))


class NoGpus:
    backend = "host"
    why_host = "a stand-in"

    def sample(self) -> list[object]:
        return []


async def _started_mesh(extra: dict[str, Any]) -> MeshGossip:
    mesh = MeshGossip(GossipDesk(extra), GossipConfig(), NoGpus(),  # type: ignore[arg-type]
                      node_id=ME, name="here")
    async with trio.open_nursery() as nursery:
        await nursery.start(mesh.run)  # started once the first record is published
        nursery.cancel_scope.cancel()
    return mesh


async def test_gossip_publishes_the_hosts_fields() -> None:
    mesh = await _started_mesh({"colour": "blue"})
    record = mesh.membership.view()[ME].record
    assert (record.name, record.port, record.sessions) == ("here", 7420, 2)
    assert dict(record.extra) == {"colour": "blue"}
    assert mesh.members() == {}  # ourselves are not a member


async def test_gossip_drops_plugin_fields_it_cannot_publish() -> None:
    mesh = await _started_mesh({"bad": object()})
    record = mesh.membership.view()[ME].record
    assert record.port == 7420 and dict(record.extra) == {}


# ------------------------------------------------------------------ discovery


class Dialer:
    """A DiscoveryHost that counts dials and notices their cancellation."""

    def __init__(self) -> None:
        self.links: dict[str, object] = {}
        self.events: list[tuple[str, str]] = []
        self.dialled: list[tuple[str, str, list[PeerAddress]]] = []
        self.cancelled = trio.Event()
        self.dialling = trio.Event()

    def record(self, kind: str, text: str) -> None:
        self.events.append((kind, text))

    async def dial_discovered(self, node_id: str, name: str, addresses: list[PeerAddress]) -> None:
        self.dialled.append((node_id, name, addresses))
        self.dialling.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.set()
            raise


def _advert(node_id: str) -> PeerAdvert:
    return PeerAdvert(instance="bob", node_id=node_id, mesh_id="5a" * 8,
                      version=PROTOCOL_VERSION, host="bob.local.", port=7420,
                      addresses=("10.0.0.8",), foreign=False)


def _discovering(host: Dialer, tmp_path: Path) -> Discovering:
    return Discovering(host, StateDir(tmp_path), node_id=ME, name="here", mesh_id="5a" * 8,
                       started_at=0.0, enabled=False, interfaces=())


BOB = "b" * 32


async def _bob_found(disco: Discovering, host: Dialer, nursery: trio.Nursery) -> None:
    """Bob's advert arrives and discovery starts dialling him."""
    await disco._handle(nursery, PeerFound(_advert(BOB)))
    await host.dialling.wait()


@pytest.mark.parametrize("linked", [False, True])
async def test_discovery_dials_what_it_finds(tmp_path: Path, linked: bool) -> None:
    host = Dialer()
    disco = _discovering(host, tmp_path)
    bob = BOB
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await _bob_found(disco, host, nursery)
            if linked:  # the peer is linked: its dialer outlives the advert
                host.links[bob] = object()
            await disco._handle(nursery, PeerGone("bob", bob))
            if not linked:
                await host.cancelled.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert host.cancelled.is_set() is not linked
            nursery.cancel_scope.cancel()
    assert host.dialled == [(bob, "bob", [PeerAddress("10.0.0.8", 7420)])]
    assert host.events[0][0] == "found"


async def test_a_forgotten_advert_leaves_the_rows_and_its_expiry_ends_the_dialer(
        tmp_path: Path) -> None:
    """Gossip declared bob dead: his row goes at once, his dialer stays (he may only be
    cut off) until zeroconf's expiry says he is gone."""
    host = Dialer()
    disco = _discovering(host, tmp_path)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await _bob_found(disco, host, nursery)
            disco.forget(BOB)
            assert disco.rows() == []
            await trio.testing.wait_all_tasks_blocked()
            assert not host.cancelled.is_set()
            await disco._handle(nursery, PeerGone("bob", BOB))
            await host.cancelled.wait()
            nursery.cancel_scope.cancel()


# ------------------------------------------------------------------ status


@dataclass
class Target:
    address: PeerAddress
    state: str = "unreachable"
    error: str | None = "connection refused"
    node_id: str | None = None
    name: str | None = None


@dataclass
class Event:
    at: float
    kind: str
    text: str


async def test_status_is_built_from_its_inputs(tmp_path: Path) -> None:
    mesh = await _started_mesh({})
    inputs = StatusInputs(
        node_id=ME, name="here", names={ME: "here"}, port=7420, mesh_id="5a" * 8,
        started_at=0.0,
        state_dir=tmp_path, mesh=mesh, inventory=NoGpus(),  # type: ignore[arg-type]
        links={}, targets=[Target(PeerAddress("10.0.0.9", 7420))],
        adverts=[{"id": "c" * 32, "name": "carol", "address": "10.0.0.7:7420", "foreign": True}],
        sessions=[], plugins=[], events=[Event(float(i), "found", f"e{i}") for i in range(25)],
    )
    doc = build_status(inputs)
    assert set(doc) == set(CORE_KEYS)
    assert doc["node"]["id"] == ME and doc["devices"] == {"kind": "host", "why": "a stand-in"}
    assert {p["state"] for p in doc["peers"]} == {"unreachable", "foreign"}
    assert [e["text"] for e in doc["events"]] == [f"e{i}" for i in range(5, 25)]
    add_plugin_sections(doc, [{"peers": "taken", "mine": 1}, None, {"mine": 2}])
    assert doc["mine"] == 1 and doc["peers"] != "taken"


# ------------------------------------------------------------------ choose


class Here:
    """A ChoosingAgent with no links, which knows one peer through gossip."""

    node_id = ME
    display_name = "here"
    pm = None  # never asked: no serving peer is linked to be ranked

    def __init__(self) -> None:
        self.links: dict[str, PeerLink] = {}
        self.components = Components()  # no lease service: no book of loads
        far = SimpleNamespace(record=SimpleNamespace(name="far"))
        self.mesh = SimpleNamespace(members=lambda: {"f" * 32: far})
        self.names = PeerNames(lambda: {ME: "here", "f" * 32: "far"})


async def test_choose_reads_only_its_interface() -> None:
    here = Here()
    assert choose(here, "", "host").link is None  # no serving peer: our own backend
    assert choose(here, "here", "host").reason == "named with --peer"
    with pytest.raises(NoServer, match="no agent in the mesh"):
        choose(here, "", None)
    with pytest.raises(NoServer, match="in the mesh but not linked"):
        choose(here, "far", "host")
    with pytest.raises(NoServer, match="no peer nobody"):
        choose(here, "nobody", "host")
