"""mDNS discovery: the advert parser (pure, fuzzed) and real discovery over loopback.

Every Zeroconf here runs on the loopback interface only (``interfaces=["127.0.0.1"]``):
nothing is multicast on the machine's real networks.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import ifaddr
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from zeroconf import ServiceInfo, Zeroconf

from gleam.discovery import (
    SERVICE_TYPE,
    DiscoveryEvent,
    DuplicateNodeId,
    InvalidAdvert,
    LocalAdvert,
    MdnsDiscovery,
    PeerAdvert,
    PeerFound,
    PeerGone,
    PeerUpdated,
    parse_advert,
)
from gleam.discovery.adverts import (
    AdvertKind,
    classify,
    host_name,
    instance_name,
    order_addresses,
    transition,
    txt_properties,
)
from gleam.discovery.mdns import _name_taken, advert_from_info

MESH = "5a" * 8
LOOPBACK = next(a for a in ifaddr.get_adapters() if any(ip.ip == "127.0.0.1" for ip in a.ips))


def local_advert(name: str = "alice", **changes: object) -> LocalAdvert:
    base = LocalAdvert(name, node_id=secrets.token_hex(16), mesh_id=MESH, version=1, port=47470)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def txt_of(local: LocalAdvert) -> dict[bytes, bytes | None]:
    return {k.encode(): v.encode() for k, v in txt_properties(local).items()}


def parse(local: LocalAdvert, **changes: object) -> PeerAdvert:
    fields: dict[str, object] = {
        "instance": local.name,
        "host": host_name(local.node_id),
        "port": local.port,
        "properties": txt_of(local),
        "addresses": ["192.168.1.20"],
        "our_mesh_id": MESH,
    }
    fields.update(changes)
    return parse_advert(**fields)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ parser


def test_our_txt_record_parses_back() -> None:
    local = local_advert(port=5000, version=3)
    advert = parse(local, port=5000, addresses=["fe80::1%3", "10.0.0.2", "fd00::5"])
    assert advert == PeerAdvert(
        instance="alice",
        node_id=local.node_id,
        mesh_id=MESH,
        version=3,
        port=5000,
        addresses=("10.0.0.2", "fd00::5", "fe80::1%3"),
        host=host_name(local.node_id),
        foreign=False,
    )
    assert set(txt_properties(local)) == {"id", "v", "port", "mesh"}


def test_other_mesh_is_foreign_and_unknown_keys_are_ignored() -> None:
    local = local_advert(mesh_id="77" * 8)
    properties = {**txt_of(local), b"future": b"whatever", b"flag": None}
    advert = parse(local, properties=properties)
    assert advert.foreign and advert.mesh_id == "77" * 8


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({b"id": None}, "'id' missing"),
        ({b"mesh": b"ZZ" * 8}, "'mesh' is not"),
        ({b"id": b"AB" * 16}, "'id' is not"),  # upper case is not what we write
        ({b"id": b"\xff" * 32}, "not ASCII"),
        ({b"v": b"1" * 200}, "200 bytes"),
        ({b"v": b"-1"}, "'v' is not a number"),
        ({b"v": b"70000"}, "'v' is not a number"),
        ({b"port": b"47471"}, "disagrees with SRV port"),
    ],
)
def test_bad_txt_is_refused_with_a_reason(change: dict[bytes, bytes | None], reason: str) -> None:
    local = local_advert()
    properties = {**txt_of(local), **change}
    properties = {k: v for k, v in properties.items() if not (k == b"id" and v is None)}
    with pytest.raises(InvalidAdvert, match=reason):
        parse(local, properties=properties)


@pytest.mark.parametrize(
    "changes",
    [
        {"port": True},
        {"port": 0},
        {"port": "47470"},
        {"host": None},
        {"instance": ""},
        {"instance": "x" * 64},
        {"instance": "\udcff"},
        {"addresses": []},
        {"addresses": ["not an address", "224.0.0.251", "0.0.0.0", 7]},
    ],
)
def test_bad_service_fields_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidAdvert):
        parse(local_advert(), **changes)


def test_addresses_are_ordered_stably_and_deduplicated() -> None:
    shuffled = ["fe80::2%4", "fd00::1", "10.0.0.9", "169.254.1.1", "10.0.0.3", "10.0.0.9"]
    assert order_addresses(shuffled) == (
        "10.0.0.3",
        "10.0.0.9",
        "169.254.1.1",
        "fd00::1",
        "fe80::2%4",
    )
    assert order_addresses(list(reversed(shuffled))) == order_addresses(shuffled)
    assert order_addresses(["10.0.0.1%7"]) == ("10.0.0.1",)  # scope only on link-local v6


def test_link_local_ipv6_without_scope_gets_ours_or_goes() -> None:
    assert order_addresses(["fe80::1", "10.0.0.1"]) == ("10.0.0.1",)
    assert order_addresses(["fe80::1", "fe80::2%9"], link_scope=3) == ("fe80::1%3", "fe80::2%9")
    with pytest.raises(InvalidAdvert):
        order_addresses(["fe80::1"])


def test_instance_names_fit_one_dns_label() -> None:
    assert instance_name("alice") == "alice"
    assert instance_name("alice", 2) == "alice (2)"
    assert instance_name("laptop.example.com") == "laptop-example-com"
    assert instance_name("bad\x00\nname") == "badname"
    assert instance_name("  \x7f ") == "gleam"
    long = instance_name("é" * 40, 12)
    assert long.endswith(" (12)") and len(long.encode()) <= 63


def test_local_advert_is_validated() -> None:
    with pytest.raises(ValueError, match="listen first"):
        local_advert(port=0)
    with pytest.raises(ValueError, match="node id"):
        local_advert(node_id="not-hex")


def test_classify_own_peer_and_duplicate() -> None:
    me = local_advert()
    mine = parse(me, instance="alice")
    own = {("alice", host_name(me.node_id))}
    assert classify(mine, me, own)[0] is AdvertKind.OWN
    clone = dataclasses.replace(mine, instance="alice (2)")
    assert classify(clone, me, own)[0] is AdvertKind.DUPLICATE
    other = parse(local_advert("bob"), instance="bob")
    assert classify(other, me, own)[0] is AdvertKind.PEER
    kind, flagged = classify(other, dataclasses.replace(me, mesh_id="11" * 8), own)
    assert kind is AdvertKind.PEER and flagged.foreign


def test_transitions_keep_the_agents_view_exact() -> None:
    a = parse(local_advert("bob"), instance="bob")
    b = dataclasses.replace(a, port=1)
    peer, dup, own = AdvertKind.PEER, AdvertKind.DUPLICATE, AdvertKind.OWN
    gone = PeerGone("bob", a.node_id)
    assert transition("bob", None, (peer, a)) == [PeerFound(a)]
    assert transition("bob", (peer, a), (peer, a)) == []
    assert transition("bob", (peer, a), (peer, b)) == [PeerUpdated(b)]
    assert transition("bob", (peer, a), None) == [gone]
    assert transition("bob", (peer, a), (dup, b)) == [gone, DuplicateNodeId(b)]
    assert transition("bob", (dup, a), (peer, a)) == [gone, PeerFound(a)]
    assert transition("bob", (dup, a), (dup, a)) == []
    assert transition("bob", (dup, a), (own, a)) == [gone]
    assert transition("bob", (own, a), None) == []
    assert transition("bob", None, (own, a)) == []


text_or_junk = st.one_of(st.text(max_size=80), st.integers(), st.none(), st.binary(max_size=8))
txt_keys = st.one_of(st.sampled_from([b"id", b"v", b"port", b"mesh"]), st.binary(max_size=12))
txt_values = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.sampled_from([b"0" * 32, b"5a" * 8, b"1", b"47470", b"65535", b"00047470", b"\xc3\x28"]),
)


@settings(max_examples=400, deadline=None)
@given(
    instance=text_or_junk,
    host=text_or_junk,
    port=st.one_of(st.integers(-5, 70000), st.booleans(), st.text(max_size=6), st.none()),
    properties=st.dictionaries(txt_keys, txt_values, max_size=8),
    addresses=st.lists(st.one_of(st.ip_addresses().map(str), text_or_junk), max_size=40),
)
def test_parser_only_ever_returns_an_advert_or_refuses(
    instance: object, host: object, port: object, properties: dict, addresses: list
) -> None:
    try:
        advert = parse_advert(
            instance=instance,
            host=host,
            port=port,
            properties=properties,
            addresses=addresses,
            our_mesh_id=MESH,
        )
    except InvalidAdvert:
        return
    assert 1 <= advert.port <= 65535 and 1 <= len(advert.addresses) <= 16
    assert len(advert.instance.encode()) <= 63


@settings(max_examples=300, deadline=None)
@given(
    raw_txt=st.one_of(
        st.binary(max_size=600),
        st.lists(st.binary(max_size=80), max_size=12).map(
            lambda parts: b"".join(bytes([len(p)]) + p for p in parts)
        ),
    ),
    port=st.integers(0, 65535),
)
def test_hostile_txt_wire_bytes_never_crash_the_reader(raw_txt: bytes, port: int) -> None:
    info = ServiceInfo(
        SERVICE_TYPE,
        f"x.{SERVICE_TYPE}",
        port=port,
        properties=raw_txt,
        server="h.local.",
        parsed_addresses=["10.0.0.1"],
    )
    try:
        advert = advert_from_info(info, "x", MESH)
    except InvalidAdvert:
        return
    assert advert.port == port


# ------------------------------------------------------------- loopback discovery


class Node:
    """One MdnsDiscovery on loopback, its events collected as they come."""

    def __init__(self, discovery: MdnsDiscovery) -> None:
        self.discovery = discovery
        self.events: list[DiscoveryEvent] = []
        self.scope = trio.CancelScope()
        self._changed = trio.Event()

    @property
    def local(self) -> LocalAdvert:
        return self.discovery.local

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        send, receive = trio.open_memory_channel[DiscoveryEvent](0)
        with self.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._collect, receive)
                await nursery.start(self.discovery.run, send)
                task_status.started()

    async def _collect(self, receive: trio.MemoryReceiveChannel[DiscoveryEvent]) -> None:
        async for event in receive:
            self.events.append(event)
            self._changed.set()
            self._changed = trio.Event()

    async def wait_for(
        self, predicate: Callable[[DiscoveryEvent], bool], timeout: float = 8.0
    ) -> DiscoveryEvent:
        with trio.fail_after(timeout):
            seen = 0
            while True:
                for event in self.events[seen:]:
                    if predicate(event):
                        return event
                seen = len(self.events)
                await self._changed.wait()

    async def found(self, other: Node | LocalAdvert, kind: type = PeerFound) -> PeerAdvert:
        """The advert of the first ``kind`` event (found, updated, duplicate) about ``other``."""
        node_id = other.local.node_id if isinstance(other, Node) else other.node_id
        event = await self.wait_for(
            lambda e: isinstance(e, kind) and e.advert.node_id == node_id  # type: ignore[attr-defined]
        )
        return event.advert  # type: ignore[union-attr]


StartNodes = Callable[..., Awaitable[list[Node]]]


@pytest.fixture
async def start() -> AsyncIterator[StartNodes]:
    async with trio.open_nursery() as nursery:

        async def start_nodes(*nodes_: LocalAdvert | MdnsDiscovery) -> list[Node]:
            """Start nodes concurrently: loopback only, no rescans, unless given ready-made."""
            nodes = [
                Node(n if isinstance(n, MdnsDiscovery) else on_loopback(n)) for n in nodes_
            ]
            async with trio.open_nursery() as starter:
                for node in nodes:
                    starter.start_soon(nursery.start, node.run)
            return nodes

        yield start_nodes
        nursery.cancel_scope.cancel()


def on_loopback(local: LocalAdvert, **options: object) -> MdnsDiscovery:
    options.setdefault("interfaces", ["127.0.0.1"])
    options.setdefault("rescan_interval", None)
    return MdnsDiscovery(local, **options)  # type: ignore[arg-type]


def unique(name: str) -> str:
    # Adverts of earlier tests may linger in nobody's cache, but stay safe.
    return f"{name}-{secrets.token_hex(3)}"


def events_about_self(node: Node) -> list[DiscoveryEvent]:
    own = node.local.node_id
    return [
        e
        for e in node.events
        if (e.node_id if isinstance(e, PeerGone) else e.advert.node_id) == own
    ]


async def test_two_nodes_find_each_other_and_see_the_goodbye(start: StartNodes) -> None:
    a, b = await start(local_advert(unique("a"), port=4001), local_advert(unique("b"), port=4002))
    seen_by_a = await a.found(b)
    seen_by_b = await b.found(a)
    assert seen_by_a == PeerAdvert(
        instance=b.discovery.instance or "",
        node_id=b.local.node_id,
        mesh_id=MESH,
        version=1,
        port=4002,
        addresses=("127.0.0.1",),
        host=host_name(b.local.node_id),
        foreign=False,
    )
    assert seen_by_b.port == 4001 and seen_by_b.instance == a.local.name
    assert a.discovery.interfaces == (LOOPBACK.name,)
    assert a.discovery.addresses == ("127.0.0.1",)
    # Own adverts come back over loopback too, and are filtered out.
    assert events_about_self(a) == [] and events_about_self(b) == []

    b.scope.cancel()
    gone = await a.wait_for(lambda e: isinstance(e, PeerGone))
    assert gone == PeerGone(b.local.name, b.local.node_id)


async def test_other_mesh_is_reported_as_foreign(start: StartNodes) -> None:
    a, b = await start(local_advert(unique("a")), local_advert(unique("b"), mesh_id="0f" * 8))
    assert (await a.found(b)).foreign
    assert (await b.found(a)).foreign


async def test_name_collision_renames_the_later_node(start: StartNodes) -> None:
    name = unique("twin")
    (a,) = await start(local_advert(name))
    (b,) = await start(local_advert(name))
    assert a.discovery.instance == name
    assert b.discovery.instance == f"{name} (2)"
    assert (await a.found(b)).instance == f"{name} (2)"
    assert (await b.found(a)).instance == name


def lose_unicast_replies(node: Node) -> None:
    """Drop every unicast datagram ``node`` sends, as the kernel does in effect on a
    machine where a unicast reply to port 5353 lands on another socket of the port
    (several responders on one host; which socket gets it depends on a boot-time hash)."""
    zc = node.discovery._zc
    assert zc is not None
    send = zc.async_send

    def multicast_only(out: Any, addr: Any = None, *args: Any, **kwargs: Any) -> None:
        if addr is None:
            send(out, addr, *args, **kwargs)

    zc.async_send = multicast_only  # type: ignore[method-assign]


async def test_name_collision_is_seen_when_unicast_replies_go_astray(start: StartNodes) -> None:
    name = unique("twin")
    (a,) = await start(local_advert(name))
    lose_unicast_replies(a)
    (b,) = await start(local_advert(name))
    assert b.discovery.instance == f"{name} (2)"


async def test_a_name_in_use_is_seen_by_a_multicast_question(start: StartNodes) -> None:
    name = unique("held")
    (a,) = await start(local_advert(name))
    lose_unicast_replies(a)
    zc = await trio.to_thread.run_sync(lambda: Zeroconf(interfaces=["127.0.0.1"]))
    try:
        assert await trio.to_thread.run_sync(_name_taken, zc, name)
        assert not await trio.to_thread.run_sync(_name_taken, zc, unique("free"))
    finally:
        await trio.to_thread.run_sync(zc.close)


async def test_readvertise_with_a_new_port_is_an_update(start: StartNodes) -> None:
    a, b = await start(local_advert(unique("a")), local_advert(unique("b"), port=4100))
    await a.found(b)
    await b.discovery.readvertise(dataclasses.replace(b.local, port=4200))
    updated = await a.found(b, PeerUpdated)
    assert updated.port == 4200 and updated.instance == b.discovery.instance
    assert not any(isinstance(e, PeerGone) for e in a.events)


async def test_duplicate_node_id_is_reported_until_one_side_regenerates(start: StartNodes) -> None:
    name = unique("clone")
    first = local_advert(name)
    (a,) = await start(first)
    (b,) = await start(first)  # a cloned machine: same name, same node id
    at_a = await a.found(b, DuplicateNodeId)
    assert at_a.instance == f"{name} (2)" and at_a.addresses == ("127.0.0.1",)
    assert (await b.found(a, DuplicateNodeId)).instance == name
    assert not any(isinstance(e, PeerFound) for e in a.events + b.events)

    # b takes a fresh node id: a sees the duplicate go and a new peer come.
    await b.discovery.readvertise(dataclasses.replace(first, node_id=secrets.token_hex(16)))
    assert (await a.found(b)).node_id == b.local.node_id
    await a.wait_for(lambda e: e == PeerGone(f"{name} (2)", first.node_id))
    # ...and b, judging again, now sees a as an ordinary peer.
    assert (await b.found(a)).instance == name


def loopback(*addresses: str) -> list[ifaddr.Adapter]:
    """The real loopback adapter, as if it held ``addresses``."""
    ips = [ifaddr.IP(address, 8, LOOPBACK.name) for address in addresses]
    return [ifaddr.Adapter(LOOPBACK.name, LOOPBACK.nice_name, ips, LOOPBACK.index)]


async def test_interface_change_restarts_and_readvertises(start: StartNodes) -> None:
    adapters: list[Iterable[ifaddr.Adapter]] = [loopback("127.0.0.1")]
    mover = on_loopback(
        local_advert(unique("mover")),
        interfaces=[LOOPBACK.name],  # the whole interface, whatever addresses it gets
        rescan_interval=0.1,
        adapters=lambda: adapters[0],
    )
    a, b = await start(mover, local_advert(unique("b")))
    assert (await b.found(a)).addresses == ("127.0.0.1",)
    assert a.discovery.addresses == ("127.0.0.1",)

    # A second loopback address appears: Zeroconf is re-created and re-registered.
    adapters[0] = loopback("127.0.0.1", "127.0.0.2")
    await b.wait_for(
        lambda e: isinstance(e, PeerFound | PeerUpdated)
        and e.advert.addresses == ("127.0.0.1", "127.0.0.2")
    )
    assert a.discovery.addresses == ("127.0.0.1", "127.0.0.2")


async def test_adverts_with_bad_txt_are_ignored_until_they_are_valid(
    start: StartNodes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="gleam.discovery.mdns")
    (a,) = await start(local_advert(unique("a")))
    stranger = local_advert(unique("stranger"))
    bad = ServiceInfo(
        SERVICE_TYPE,
        f"{stranger.name}.{SERVICE_TYPE}",
        port=stranger.port,
        properties={"id": "not hex", "v": "1", "port": str(stranger.port), "mesh": MESH},
        server="stranger.local.",
        parsed_addresses=["127.0.0.1"],
    )
    zc = await trio.to_thread.run_sync(lambda: Zeroconf(interfaces=["127.0.0.1"]))
    try:
        await trio.to_thread.run_sync(zc.register_service, bad)
        with trio.fail_after(8):
            while not any("ignoring advert" in r.getMessage() for r in caplog.records):
                await trio.sleep(0.02)
        assert a.events == []
        good = ServiceInfo(
            SERVICE_TYPE,
            bad.name,
            port=stranger.port,
            properties=txt_properties(stranger),
            server="stranger.local.",
            parsed_addresses=["127.0.0.1"],
        )
        await trio.to_thread.run_sync(zc.update_service, good)
        advert = await a.found(stranger)
        # The first event about the stranger is its valid advert: the bad one was dropped.
        assert a.events[0] == PeerFound(advert)
        assert advert.host == "stranger.local."
    finally:
        await trio.to_thread.run_sync(zc.close)
