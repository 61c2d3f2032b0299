"""Property tests: hostile bytes only ever produce ProtocolError, and chunking never matters."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
from collections.abc import Callable
from typing import Any

import cbor2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.wire import messages as _cuda_messages  # noqa: F401 - fuzzed too
from gleam.peer.protocol import (
    NEED_DATA,
    PROTOCOL_VERSION,
    Connection,
    ConnectionClosed,
    DataBatch,
    Event,
    FrameBuffer,
    FrameKind,
    FrameTooLarge,
    Goodbye,
    LocalIdentity,
    MalformedMessage,
    Message,
    PeerAuthenticated,
    Ping,
    Pong,
    ProtocolError,
    Role,
    decode_cbor,
    decode_message,
    encode_message,
    frame,
    mesh_id,
    registered_messages,
)
from gleam.peer.sched.messages import LeaseDeny, LeaseGrant, LeaseRelease, LeaseRequest, ServerLoad

KEY = bytes(range(32))
FUZZ = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])


def seeded_random(seed: int) -> Callable[[int], bytes]:
    counter = itertools.count()

    def random_bytes(n: int) -> bytes:
        return hashlib.sha256(f"{seed}:{next(counter)}".encode()).digest()[:n]

    return random_bytes


def connection(role: Role, node_id: str, seed: int = 0, max_frame: int = 1 << 20) -> Connection:
    ident = LocalIdentity(node_id=node_id, name=node_id, mesh_key=KEY)
    return Connection(role, ident, max_frame=max_frame, random_bytes=seeded_random(seed))


def established() -> tuple[Connection, Connection]:
    a = connection(Role.INITIATOR, "node-a", 1)
    b = connection(Role.RESPONDER, "node-b", 2)
    b.receive_data(a.start())
    a.receive_data(b.start())
    assert a.next_event() is NEED_DATA and b.next_event() is NEED_DATA
    b.receive_data(a.data_to_send())
    a.receive_data(b.data_to_send())
    assert isinstance(a.next_event(), PeerAuthenticated)
    assert isinstance(b.next_event(), PeerAuthenticated)
    return a, b


def feed_expecting_only_protocol_errors(conn: Connection, chunks: list[bytes]) -> list[Event]:
    """Feed chunks then EOF; return the events, stopping at the first ProtocolError."""
    events: list[Event] = []
    try:
        for chunk in [*chunks, b""]:
            conn.receive_data(chunk)
            while (event := conn.next_event()) is not NEED_DATA:
                events.append(event)
                if isinstance(event, ConnectionClosed):
                    return events
    except ProtocolError:
        conn.data_to_send()  # whatever it queued for the peer must be producible
    return events


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[i:j] for i, j in itertools.pairwise(points)]


# ---------------------------------------------------------------- strategies

plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

_FIELD_NAMES = {
    name: [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for name, cls in registered_messages().items()
}


@st.composite
def message_like_maps(draw: st.DrawFn) -> dict[str, Any]:
    """Maps with a real type name and a mix of real and junk fields."""
    name = draw(st.sampled_from(sorted(_FIELD_NAMES)))
    fields = _FIELD_NAMES[name]
    obj: dict[str, Any] = {"t": name}
    for field in fields:
        if draw(st.integers(0, 9)) > 0:
            obj[field] = draw(plain_values)
    obj.update(draw(st.dictionaries(st.text(max_size=6), plain_values, max_size=2)))
    return obj


@st.composite
def hello_like_maps(draw: st.DrawFn) -> dict[str, Any]:
    """Hellos that are nearly valid, so the handshake logic past decoding gets exercised."""
    obj: dict[str, Any] = {
        "t": "hello",
        "node_id": draw(st.sampled_from(["node-a", "node-b", "x", ""])),
        "name": draw(st.text(max_size=70)),
        "version": draw(st.sampled_from([PROTOCOL_VERSION, PROTOCOL_VERSION + 1, 0, -1])),
        "capabilities": draw(st.lists(st.text(max_size=70), max_size=3)),
        "nonce": draw(st.binary(min_size=31, max_size=33)),
        "mesh_id": draw(st.sampled_from([mesh_id(KEY), mesh_id(b"x" * 32), ""])),
        "listen_port": draw(st.sampled_from([None, 1, 0, 65535, 70000])),
    }
    if draw(st.booleans()):
        obj.pop(draw(st.sampled_from(sorted(obj))))
    return obj


def encodable(obj: Any) -> bytes:
    return cbor2.dumps(obj)


cbor_bodies = st.one_of(
    st.binary(max_size=200),
    plain_values.map(encodable),
    message_like_maps().map(encodable),
)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """A valid encoding with a few bytes flipped, dropped or inserted."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "drop", "insert"]))
        pos = draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "drop" and out:
            del out[pos]
        else:
            out.insert(pos, draw(st.integers(0, 255)))
    return bytes(out)


VALID_MESSAGES: list[Message] = [
    Ping(seq=1),
    Pong(seq=2**64 - 1),
    Goodbye(reason="bye"),
    # The scheduler's leases (docs/scheduler.md).
    LeaseRequest(lease=7, memory=1 << 30, client="laptop"),
    LeaseGrant(lease=7, ttl=15.0, load=ServerLoad(1, 2, 8, 250.0, 1 << 33)),
    LeaseDeny(lease=2**64 - 1, reason="full", load=ServerLoad(8, 0, 8, 250.0)),
    LeaseRelease(lease=7),
]


def test_the_lease_messages_are_among_the_fuzzed():
    assert {"lease_request", "lease_grant", "lease_deny", "lease_release"} <= set(_FIELD_NAMES)
    for msg in VALID_MESSAGES:
        assert decode_message(encode_message(msg)) == msg


# ---------------------------------------------------------------- decoding


@FUZZ
@given(st.binary(max_size=300))
def test_decode_message_raises_only_malformed_message(data: bytes) -> None:
    try:
        msg = decode_message(data)
    except MalformedMessage:
        return
    assert isinstance(msg, Message)


@FUZZ
@given(st.one_of(message_like_maps(), hello_like_maps(), plain_values))
def test_decode_message_of_structured_junk(obj: Any) -> None:
    data = cbor2.dumps(obj)
    try:
        msg = decode_message(data)
    except MalformedMessage:
        return
    assert isinstance(msg, Message)
    assert decode_message(encode_message(msg)) == msg  # what decodes re-encodes


@FUZZ
@given(st.sampled_from(VALID_MESSAGES).flatmap(lambda m: mutated(encode_message(m))))
def test_decode_message_of_mutated_messages(data: bytes) -> None:
    with contextlib.suppress(MalformedMessage):
        decode_message(data)


@FEW
@given(st.binary(max_size=300))
def test_decode_cbor_raises_only_malformed_message(data: bytes) -> None:
    with contextlib.suppress(MalformedMessage):
        decode_cbor(data)


# ---------------------------------------------------------------- framing


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(0, 10_000)))
def test_frame_buffer_reassembles_any_chunking(bodies: list[bytes], cuts: list[int]) -> None:
    buf = FrameBuffer(max_frame=300)
    got: list[bytes] = []
    for chunk in chunked(b"".join(frame(b) for b in bodies), cuts):
        buf.feed(chunk)
        while (body := buf.next_frame()) is not None:
            got.append(body)
    assert got == bodies
    assert buf.pending() == 0


@FUZZ
@given(st.binary(max_size=2000), st.lists(st.integers(0, 10_000), max_size=10))
def test_frame_buffer_on_junk_raises_only_frame_too_large(data: bytes, cuts: list[int]) -> None:
    buf = FrameBuffer(max_frame=500)
    try:
        for chunk in chunked(data, cuts):
            buf.feed(chunk)
            while buf.next_frame() is not None:
                pass
    except FrameTooLarge:
        pass


# ---------------------------------------------------------------- connections


@FUZZ
@given(
    st.sampled_from(Role),
    st.booleans(),
    st.binary(max_size=600),
    st.lists(st.integers(0, 10_000), max_size=6),
)
def test_junk_into_a_fresh_connection(
    role: Role, started: bool, data: bytes, cuts: list[int]
) -> None:
    conn = connection(role, "node-b")
    if started:
        conn.start()
    events = feed_expecting_only_protocol_errors(conn, chunked(data, cuts))
    assert not any(isinstance(e, PeerAuthenticated) for e in events)


@FUZZ
@given(
    st.sampled_from(Role),
    st.lists(
        st.tuples(
            st.sampled_from([*FrameKind, 0x00, 0xFF]),
            st.one_of(cbor_bodies, hello_like_maps().map(encodable)),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_junk_frames_during_the_handshake(role: Role, frames: list[tuple[int, bytes]]) -> None:
    conn = connection(role, "node-b")
    conn.start()
    wire = b"".join(frame(bytes((kind,)) + body) for kind, body in frames)
    events = feed_expecting_only_protocol_errors(conn, [wire])
    # Nobody without the key can produce a valid auth.
    assert not any(isinstance(e, PeerAuthenticated) for e in events)


@FUZZ
@given(st.binary(max_size=600), st.lists(st.integers(0, 10_000), max_size=6))
def test_junk_into_the_decrypt_path(data: bytes, cuts: list[int]) -> None:
    _, b = established()
    events = feed_expecting_only_protocol_errors(b, chunked(data, cuts))
    assert all(isinstance(e, ConnectionClosed) for e in events)  # nothing forged gets through


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from([*FrameKind, 0x00, 0x7F, 0xFF]),
            st.one_of(
                cbor_bodies,
                st.sampled_from(VALID_MESSAGES).flatmap(lambda m: mutated(encode_message(m))),
            ),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_junk_inside_correctly_sealed_frames(frames: list[tuple[int, bytes]]) -> None:
    a, b = established()
    assert a._sealer is not None
    wire = b"".join(a._sealer.seal(kind, body) for kind, body in frames)
    events = feed_expecting_only_protocol_errors(b, [wire])
    for event in events:
        assert isinstance(event, Message | DataBatch | ConnectionClosed)


# ---------------------------------------------------------------- chunking


def _script(role: Role) -> list[Message | bytes]:
    """What each side's application sends once authenticated."""
    if role is Role.INITIATOR:
        return [Ping(seq=1), b"x" * 3000, b"", Ping(seq=2), Goodbye(reason="done")]
    return [Pong(seq=7), b"y" * 70_000]


def _send(conn: Connection, item: Message | bytes) -> bytes:
    return conn.send_batch(item) if isinstance(item, bytes) else conn.send(item)


def run_conversation(schedule: list[tuple[bool, int]]) -> tuple[list[Event], list[Event]]:
    """Run a full conversation, delivering bytes in the order and sizes ``schedule`` says.

    Each schedule step moves up to N bytes in one direction; once the schedule
    runs out, everything left is delivered. Returns the events each side saw.
    """
    a = connection(Role.INITIATOR, "node-a", 1)
    b = connection(Role.RESPONDER, "node-b", 2)
    sides = {Role.INITIATOR: a, Role.RESPONDER: b}
    wire = {Role.INITIATOR: bytearray(a.start()), Role.RESPONDER: bytearray(b.start())}
    seen: dict[Role, list[Event]] = {Role.INITIATOR: [], Role.RESPONDER: []}

    def deliver(sender: Role, size: int) -> None:
        receiver = sender.other
        conn = sides[receiver]
        chunk = bytes(wire[sender][:size])
        del wire[sender][:size]
        conn.receive_data(chunk)
        while (event := conn.next_event()) is not NEED_DATA:
            seen[receiver].append(event)
            if isinstance(event, PeerAuthenticated):
                for item in _script(receiver):
                    wire[receiver] += _send(conn, item)
            if isinstance(event, ConnectionClosed):
                break
        wire[receiver] += conn.data_to_send()

    steps = iter(schedule)
    while any(wire.values()):
        from_a, size = next(steps, (bool(wire[Role.INITIATOR]), 1 << 30))
        sender = Role.INITIATOR if from_a else Role.RESPONDER
        if wire[sender]:
            deliver(sender, size)
    for conn, events in ((a, seen[Role.INITIATOR]), (b, seen[Role.RESPONDER])):
        conn.receive_data(b"")  # both sides hang up
        events.append(conn.next_event())
    return seen[Role.INITIATOR], seen[Role.RESPONDER]


REFERENCE = run_conversation([])


def test_reference_conversation_is_complete() -> None:
    seen_a, seen_b = REFERENCE
    assert [type(e) for e in seen_b] == [
        PeerAuthenticated,
        Ping,
        DataBatch,
        DataBatch,
        Ping,
        Goodbye,
        ConnectionClosed,
    ]
    assert seen_b[-1] == ConnectionClosed("peer said goodbye: done")
    assert [type(e) for e in seen_a] == [PeerAuthenticated, Pong, DataBatch, ConnectionClosed]
    assert seen_a[2] == DataBatch(b"y" * 70_000)


@FUZZ
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 5000)), max_size=60))
def test_any_chunking_and_interleaving_yields_the_same_events(
    schedule: list[tuple[bool, int]],
) -> None:
    assert run_conversation(schedule) == REFERENCE
