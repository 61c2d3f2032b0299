"""Gossip records and messages: round trips, bounds, and hostile bytes."""

from __future__ import annotations

import math
from typing import Any

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.gossip import (
    GossipDigest,
    GossipRecords,
    GossipRumor,
    GossipSync,
    GossipWant,
    GpuInfo,
    InvalidRecord,
    Link,
    LinkReport,
    PeerRecord,
    decode_record,
    encode_record,
)
from gleam.peer.gossip.records import (
    MAX_COUNTER,
    MAX_EXTRA_BYTES,
    MAX_GPUS,
    MAX_LINKS,
    MAX_RECORD_BYTES,
)
from gleam.peer.protocol import MalformedMessage, decode_message, encode_message

FUZZ = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])

node_ids = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64
)
counters = st.integers(0, MAX_COUNTER)
finite = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)

gpus = st.builds(
    GpuInfo,
    name=st.text(max_size=40).filter(str.isprintable),
    backend=st.sampled_from(["cuda", "host"]),
    compute_capability=st.none() | st.tuples(st.integers(0, 255), st.integers(0, 255)),
    memory_total=st.integers(0, 2**63 - 1),
    memory_used=st.integers(0, 2**63 - 1),
    utilization=st.floats(0, 100),
    gflops=st.none() | finite,
)
leaves = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | finite | st.text(max_size=8)
    | st.binary(max_size=8)
)


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)


# Shallow enough for plugin fields (at most 4 levels); ``anything`` for fuzzing.
plain = leaves | containers(leaves | containers(leaves))
anything = st.recursive(leaves, containers, max_leaves=12)
extras = st.dictionaries(st.text(min_size=1, max_size=10), plain, max_size=4)
peer_records = st.builds(
    PeerRecord,
    node_id=node_ids,
    incarnation=counters,
    version=counters,
    name=st.text(max_size=64).filter(str.isprintable),
    address=st.sampled_from(["", "10.0.0.7", "fe80::1", "gpu-box.local"]),
    port=st.none() | st.integers(1, 65535),
    gpus=st.lists(gpus, max_size=4).map(tuple),
    sessions=st.integers(0, 2**32 - 1),
    queue_depth=st.integers(0, 2**32 - 1),
    extra=extras,
)
links = st.builds(
    Link,
    peer=node_ids,
    rtt_ewma_ms=finite,
    rtt_p50_ms=finite,
    rtt_p90_ms=finite,
    bandwidth=st.none() | finite,
    bandwidth_measured_at=st.none() | finite,
    rtt_ms=st.none() | finite,
    rttvar_ms=st.none() | finite,
)
link_reports = st.builds(
    LinkReport,
    node_id=node_ids,
    incarnation=counters,
    version=counters,
    links=st.lists(links, max_size=6, unique_by=lambda link: link.peer).map(tuple),
)
records = peer_records | link_reports


def peer(**changes: Any) -> PeerRecord:
    fields: dict[str, Any] = {
        "node_id": "n1", "incarnation": 2, "version": 7, "name": "box",
        "address": "10.0.0.7", "port": 7420,
        "gpus": (GpuInfo("RTX 4090", "cuda", (8, 9), 24 << 30, 1 << 30, 40.0),),
        "sessions": 1, "queue_depth": 0, "extra": {"plugin": {"kernels": ["gemm"]}},
    }
    fields.update(changes)
    return PeerRecord(**fields)


# ---------------------------------------------------------------- round trips


@FUZZ
@given(records)
def test_records_round_trip(record: PeerRecord | LinkReport) -> None:
    blob = encode_record(record)
    assert decode_record(blob) == record
    assert type(record).from_wire(cbor2.loads(blob)) == record
    assert encode_record(decode_record(blob)) == blob


def test_extra_is_stored_read_only() -> None:
    record = peer(extra={"a": [1, {"b": 2}]})
    assert record.extra == {"a": (1, {"b": 2})}
    with pytest.raises(TypeError):
        record.extra["a"] = 3  # type: ignore[index]
    assert decode_record(encode_record(record)).extra["a"][1]["b"] == 2
    hash(record)  # records are hashable despite the map


def test_host_gpu_carries_its_measured_speed() -> None:
    record = peer(gpus=(GpuInfo("host", "host", None, 16 << 30, 0, 0.0, 212.5),))
    assert decode_record(encode_record(record)).gpus[0].gflops == 212.5


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "changes",
    [
        {"node_id": ""},
        {"node_id": "x" * 65},
        {"node_id": "bad\nid"},
        {"incarnation": -1},
        {"version": MAX_COUNTER + 1},
        {"version": True},
        {"port": 0},
        {"sessions": -1},
        {"name": "x" * 65},
        {"gpus": tuple(GpuInfo(f"g{i}") for i in range(MAX_GPUS + 1))},
        {"gpus": ("not a gpu",)},
        {"extra": {"": 1}},
        {"extra": {f"k{i}": i for i in range(33)}},
        {"extra": {"big": "x" * MAX_EXTRA_BYTES}},
        {"extra": {"deep": [[[[[1]]]]]}},
        {"extra": {"nan": math.nan}},
        {"extra": {"obj": object()}},
        {"extra": {"huge": 2**64}},
    ],
)
def test_peer_record_refuses(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidRecord):
        peer(**changes)


@pytest.mark.parametrize(
    "make",
    [
        lambda: GpuInfo("g", backend="rocm"),
        lambda: GpuInfo("g", utilization=101),
        lambda: GpuInfo("g", utilization=math.inf),
        lambda: GpuInfo("g", compute_capability=(8, 9, 0)),  # type: ignore[arg-type]
        lambda: GpuInfo("g", memory_total=-1),
        lambda: GpuInfo("g", gflops=-1.0),
        lambda: Link("p", -1, 0, 0),
        lambda: Link("p", math.nan, 0, 0),
        lambda: LinkReport("n", links=(Link("p", 1, 1, 1), Link("p", 2, 2, 2))),
        lambda: LinkReport("n", links=tuple(Link(f"p{i}", 1, 1, 1) for i in range(MAX_LINKS + 1))),
    ],
)
def test_entries_refuse(make: Any) -> None:
    with pytest.raises(InvalidRecord):
        make()


def wire_with(**changes: Any) -> bytes:
    wire = peer().to_wire()
    wire.update(changes)
    return cbor2.dumps(wire)


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\xff",
        cbor2.dumps([1, 2]),
        cbor2.dumps({"kind": "unknown"}),
        cbor2.dumps({"kind": ["peer"]}),
        wire_with(inc=2**60),
        wire_with(ver=-5),
        wire_with(gpus=[["g", "cuda", [8], 0, 0, 0, None]]),
        wire_with(gpus=[["g", "cuda"]]),
        wire_with(extra=[1]),
        wire_with(node=None),
        cbor2.dumps({k: v for k, v in peer().to_wire().items() if k != "ver"}),
        cbor2.dumps(cbor2.CBORTag(1, 5)),
        cbor2.dumps(peer().to_wire()) + b"\x00",
        b"\xa1" * 40,
        bytearray(encode_record(peer())),
    ],
)
def test_decode_refuses(blob: bytes) -> None:
    with pytest.raises(InvalidRecord):
        decode_record(blob)


def test_decode_refuses_oversized_blob_before_parsing() -> None:
    with pytest.raises(InvalidRecord, match="at most"):
        decode_record(b"\x00" * (MAX_RECORD_BYTES + 1))


def test_decoder_ignores_unknown_fields_and_trailing_items() -> None:
    wire = peer().to_wire()
    wire["future"] = {"anything": 1}
    wire["gpus"][0].append("future item")
    assert decode_record(cbor2.dumps(wire)) == peer()


# ---------------------------------------------------------------- fuzz: records


@FUZZ
@given(st.binary(max_size=600))
def test_fuzz_record_bytes(blob: bytes) -> None:
    try:
        record = decode_record(blob)
    except InvalidRecord:
        return
    assert decode_record(encode_record(record)) == record


@FUZZ
@given(
    st.sampled_from(["node", "inc", "ver", "name", "address", "port", "gpus", "sessions",
                     "queue", "extra", "kind", "links"]),
    anything,
    st.booleans(),
)
def test_fuzz_record_fields(key: str, value: Any, links: bool) -> None:
    base = LinkReport("n1", 1, 1, (Link("p", 1, 1, 1),)) if links else peer()
    wire = base.to_wire()
    wire[key] = value
    try:
        record = decode_record(cbor2.dumps(wire))
    except InvalidRecord:
        return
    assert decode_record(encode_record(record)) == record


@FUZZ
@given(st.lists(anything, min_size=0, max_size=9), st.sampled_from(["gpus", "links"]))
def test_fuzz_record_entries(entry: list[Any], where: str) -> None:
    base = LinkReport("n1", 1, 1) if where == "links" else peer()
    wire = base.to_wire()
    wire[where] = [entry]
    try:
        record = decode_record(cbor2.dumps(wire))
    except InvalidRecord:
        return
    assert decode_record(encode_record(record)) == record


# ---------------------------------------------------------------- messages

summaries = st.tuples(
    node_ids, st.integers(0, 2), counters, st.integers(-1, MAX_COUNTER),
    st.integers(-1, MAX_COUNTER),
)
messages = (
    st.builds(GossipRumor, st.lists(summaries, max_size=5).map(tuple), st.booleans())
    | st.builds(
        GossipWant, st.lists(st.tuples(node_ids, st.integers(0, 1)), max_size=5).map(tuple)
    )
    | st.builds(GossipRecords, st.lists(records.map(encode_record), max_size=3).map(tuple))
    | st.builds(
        GossipSync,
        st.sampled_from([1, 2, 64, 1024]).flatmap(
            lambda n: st.binary(min_size=8 * n, max_size=8 * n)
        ),
    )
    | st.sampled_from([1, 4, 64]).flatmap(
        lambda n: st.builds(
            GossipDigest,
            st.just(n),
            st.lists(st.integers(0, n - 1), max_size=n, unique=True).map(tuple),
            st.lists(summaries, max_size=4).map(tuple),
            st.booleans(),
        )
    )
)


@FEW
@given(messages)
def test_messages_round_trip(message: Any) -> None:
    assert decode_message(encode_message(message)) == message


@pytest.mark.parametrize(
    "wire",
    [
        {"t": "gossip-rumor", "summaries": [["n", 3, 0, 0, 0]]},
        {"t": "gossip-rumor", "summaries": [["n", 0, -1, 0, 0]]},
        {"t": "gossip-rumor", "summaries": [["n", 0, 0, -2, 0]]},
        {"t": "gossip-rumor", "summaries": [["", 0, 0, 0, 0]]},
        {"t": "gossip-rumor", "summaries": [["n", 0, 0, 0]]},
        {"t": "gossip-rumor", "summaries": [["n", 0, 2**53, 0, 0]]},
        {"t": "gossip-rumor", "summaries": [["n", 0, 0, 0, 0]] * 4097},
        {"t": "gossip-want", "wanted": [["n", 2]]},
        {"t": "gossip-records", "records": ["text"]},
        {"t": "gossip-records", "records": [b"x" * (MAX_RECORD_BYTES + 1)]},
        {"t": "gossip-records", "records": [b""] * 257},
        {"t": "gossip-sync", "hashes": b"x" * 24},
        {"t": "gossip-sync", "hashes": b""},
        {"t": "gossip-sync", "hashes": b"x" * 8 * 2048},
        {"t": "gossip-digest", "buckets": 3, "mismatched": [], "summaries": []},
        {"t": "gossip-digest", "buckets": 4, "mismatched": [4], "summaries": []},
        {"t": "gossip-digest", "buckets": 2, "mismatched": [0, 1, 1], "summaries": []},
    ],
)
def test_messages_refuse(wire: dict[str, Any]) -> None:
    with pytest.raises(MalformedMessage):
        decode_message(cbor2.dumps(wire))


@FUZZ
@given(
    st.sampled_from(["gossip-rumor", "gossip-want", "gossip-records", "gossip-sync",
                     "gossip-digest"]),
    st.dictionaries(
        st.sampled_from(["summaries", "reply", "wanted", "records", "hashes", "buckets",
                         "mismatched"]),
        anything | st.lists(st.lists(anything, max_size=6), max_size=3),
        max_size=4,
    ),
)
def test_fuzz_messages(name: str, fields: dict[str, Any]) -> None:
    try:
        message = decode_message(cbor2.dumps({"t": name, **fields}))
    except MalformedMessage:
        return
    assert decode_message(encode_message(message)) == message


def test_a_link_carries_the_kernel_rtt_and_reads_entries_without_it():
    node = "ab" * 16
    link = Link(node, 6.2, 3.4, 5.8, 1.2e7, 1.7e9, rtt_ms=3.017, rttvar_ms=0.4)
    assert Link.from_wire(link.to_wire()) == link
    assert link.best_rtt_ms == 3.017
    # An origin from before the kernel figures sends six items: the ping stands in.
    old = Link.from_wire([node, 6.2, 3.4, 5.8, None, None])
    assert old.rtt_ms is None and old.best_rtt_ms == 6.2
    with pytest.raises(InvalidRecord):
        Link.from_wire([node, 6.2, 3.4, 5.8, None, None, -1.0, 0.4])
