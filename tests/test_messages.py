"""Control messages: the registry, CBOR encoding and strict decoding."""

from __future__ import annotations

import dataclasses
from typing import Any

import cbor2
import pytest

from gleam.peer.protocol import (
    Auth,
    ErrorMessage,
    Goodbye,
    Hello,
    MalformedMessage,
    Message,
    Ping,
    Pong,
    ProtocolError,
    decode_cbor,
    decode_message,
    encode_message,
    register_message,
    registered_messages,
)


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory: int | None = None


@register_message("test.sample")
@dataclasses.dataclass(frozen=True)
class Sample(Message):
    count: int
    ratio: float
    label: str
    blob: bytes
    flag: bool
    tags: tuple[str, ...]
    extra: dict[str, Any]
    sizes: list[int]
    gpus: tuple[Gpu, ...]
    pair: tuple[int, str]
    note: str | None = None


def sample(**changes: Any) -> Sample:
    base = Sample(
        count=3,
        ratio=0.5,
        label="gpu",
        blob=b"\x00\x01",
        flag=True,
        tags=("a", "b"),
        extra={"k": [1, "two", None]},
        sizes=[1, 2],
        gpus=(Gpu(0, "H200", 141), Gpu(1, "T4")),
        pair=(7, "x"),
    )
    return dataclasses.replace(base, **changes)


def wire(**fields: Any) -> bytes:
    return cbor2.dumps(fields)


def sample_map(**changes: Any) -> dict[str, Any]:
    obj = cbor2.loads(encode_message(sample()))
    obj.update(changes)
    return obj


def hello(**changes: Any) -> Hello:
    base = Hello(
        node_id="n1",
        name="laptop",
        version=1,
        capabilities=("cuda",),
        nonce=bytes(32),
        mesh_id="0123456789abcdef",
        listen_port=7420,
    )
    return dataclasses.replace(base, **changes)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    "msg",
    [
        hello(),
        hello(listen_port=None, capabilities=()),
        Auth(mac=bytes(range(32))),
        Ping(seq=0),
        Pong(seq=2**64 - 1),
        ErrorMessage(code="busy", message="try later"),
        Goodbye(reason="shutting down"),
        sample(),
        sample(note="n"),
    ],
)
def test_round_trip(msg: Message) -> None:
    assert decode_message(encode_message(msg)) == msg


def test_wire_form_is_a_cbor_map_with_type_key() -> None:
    assert cbor2.loads(encode_message(Ping(seq=5))) == {"t": "ping", "seq": 5}
    assert cbor2.loads(encode_message(ErrorMessage("c", "m")))["t"] == "error"


def test_nested_records_travel_as_maps() -> None:
    obj = cbor2.loads(encode_message(sample()))
    assert obj["gpus"][0] == {"index": 0, "name": "H200", "memory": 141}


def test_decoding_normalises_arrays_to_tuples() -> None:
    msg = decode_message(wire(t="hello", **{**dataclasses.asdict(hello()), "capabilities": ["x"]}))
    assert isinstance(msg, Hello) and msg.capabilities == ("x",)


def test_float_field_accepts_an_integer() -> None:
    msg = decode_message(cbor2.dumps(sample_map(ratio=2)))
    assert isinstance(msg, Sample) and msg.ratio == 2.0 and type(msg.ratio) is float


def test_unknown_keys_are_ignored() -> None:
    assert decode_message(wire(t="ping", seq=1, added_in_v9="x")) == Ping(seq=1)


def test_missing_field_with_a_default_takes_the_default() -> None:
    obj = sample_map()
    del obj["note"]
    msg = decode_message(cbor2.dumps(obj))
    assert isinstance(msg, Sample) and msg.note is None


def test_registry_lists_builtins() -> None:
    names = registered_messages()
    for name, cls in [
        ("hello", Hello),
        ("auth", Auth),
        ("ping", Ping),
        ("pong", Pong),
        ("error", ErrorMessage),
        ("goodbye", Goodbye),
    ]:
        assert names[name] is cls
        assert cls.type_name == name


# ---------------------------------------------------------------- registration


def test_duplicate_type_name_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):

        @register_message("ping")
        @dataclasses.dataclass(frozen=True)
        class OtherPing(Message):
            seq: int


def test_mutable_dataclass_is_refused() -> None:
    with pytest.raises(TypeError, match="frozen"):

        @register_message("test.mutable")
        @dataclasses.dataclass
        class Mutable(Message):
            x: int


def test_non_message_class_is_refused() -> None:
    with pytest.raises(TypeError):

        @register_message("test.plain")  # type: ignore[type-var]
        @dataclasses.dataclass(frozen=True)
        class Plain:
            x: int


def test_field_named_t_is_refused() -> None:
    with pytest.raises(TypeError, match="reserved"):

        @register_message("test.t")
        @dataclasses.dataclass(frozen=True)
        class HasT(Message):
            t: int


def test_unsupported_annotation_is_refused() -> None:
    with pytest.raises(TypeError, match="unsupported"):

        @register_message("test.set")
        @dataclasses.dataclass(frozen=True)
        class HasSet(Message):
            items: set[int]


def test_encoding_an_unregistered_message_fails() -> None:
    @dataclasses.dataclass(frozen=True)
    class Loose(Message):
        x: int

    with pytest.raises(TypeError):
        encode_message(Loose(1))


def test_encoding_checks_field_types() -> None:
    with pytest.raises(TypeError):
        encode_message(Ping(seq="1"))  # type: ignore[arg-type]


def test_encoding_refuses_integers_beyond_64_bits() -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_message(sample(sizes=[2**64]))


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"\x1c",  # reserved additional information
        b"\x62\xff\xfe",  # invalid UTF-8
        b"\x9f\x01",  # unterminated indefinite array
        cbor2.dumps({"t": "ping", "seq": 1}) + b"\x00",  # trailing byte
        cbor2.dumps([1, 2]),
        cbor2.dumps("ping"),
        cbor2.dumps({"seq": 1}),
        cbor2.dumps({"t": 5, "seq": 1}),
        cbor2.dumps({"t": "no-such-message"}),
        cbor2.dumps({"t": "ping"}),  # missing field
        cbor2.dumps({"t": "ping", "seq": "1"}),
        cbor2.dumps({"t": "ping", "seq": True}),  # bool is not an int
        cbor2.dumps({"t": "ping", "seq": 1.0}),
        cbor2.dumps({"t": "ping", "seq": -1}),  # Ping's own range check
        cbor2.dumps({"t": "ping", "seq": None}),
        cbor2.dumps({"t": "auth", "mac": bytes(31)}),
        cbor2.dumps({"t": "auth", "mac": "x" * 32}),
        cbor2.dumps({"t": "error", "code": "", "message": "m"}),
        cbor2.dumps({"t": "goodbye", "reason": "x" * 5000}),
        bytes.fromhex("a2617464706f6e67617401"),  # duplicate key "t"
        b"\x81" * 100 + b"\x01",  # nesting too deep
    ],
)
def test_malformed_messages_raise_malformed_message(data: bytes) -> None:
    with pytest.raises(MalformedMessage) as info:
        decode_message(data)
    assert isinstance(info.value, ProtocolError)
    assert info.value.code == "malformed"


@pytest.mark.parametrize(
    "changes",
    [
        {"node_id": ""},
        {"node_id": "n" * 65},
        {"name": "x" * 65},
        {"nonce": bytes(31)},
        {"nonce": bytes(33)},
        {"capabilities": ["c"] * 33},
        {"capabilities": ["c" * 65]},
        {"capabilities": [""]},
        {"capabilities": "cuda"},
        {"mesh_id": ""},
        {"listen_port": 0},
        {"listen_port": 70000},
        {"version": -1},
    ],
)
def test_hello_sizes_are_validated(changes: dict[str, Any]) -> None:
    fields = {**dataclasses.asdict(hello()), **changes}
    with pytest.raises(MalformedMessage):
        decode_message(wire(t="hello", **fields))


@pytest.mark.parametrize(
    "changes",
    [
        {"count": "3"},
        {"ratio": "0.5"},
        {"blob": "text"},
        {"flag": 1},
        {"tags": [1]},
        {"extra": {"k": 1, "j": b"x"} | {"n": {1: 2}}},
        {"extra": [1]},
        {"sizes": [1, "2"]},
        {"gpus": [{"index": 0}]},
        {"gpus": [{"index": "0", "name": "x"}]},
        {"pair": [1]},
        {"pair": [1, 2]},
        {"note": 5},
    ],
)
def test_wrong_field_types_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(MalformedMessage):
        decode_message(cbor2.dumps(sample_map(**changes)))


def test_non_text_map_key_is_refused() -> None:
    # {"t": "test.sample", ..., "extra": {1: 2}} written by hand
    obj = sample_map()
    obj["extra"] = {}
    data = cbor2.dumps(obj)
    patched = data.replace(b"\x65extra\xa0", b"\x65extra\xa1\x01\x02")
    assert patched != data
    with pytest.raises(MalformedMessage):
        decode_message(patched)


@pytest.mark.parametrize(
    "item",
    [
        cbor2.CBORTag(0, "2024-01-01T00:00:00Z"),  # datetime
        cbor2.CBORTag(2, b"\x01" * 20),  # bignum
        cbor2.CBORTag(4, [-2, 12345]),  # decimal
        cbor2.CBORTag(5, [2**62, 1]),  # bigfloat
        cbor2.CBORTag(30, [1, 3]),  # rational
        cbor2.CBORTag(37, bytes(16)),  # uuid
        cbor2.CBORTag(258, [1, 2]),  # set
        cbor2.CBORTag(55799, 1),  # self-describe
        cbor2.CBORTag(12345, "unknown"),
    ],
)
def test_cbor_tags_are_refused_anywhere(item: cbor2.CBORTag) -> None:
    with pytest.raises(MalformedMessage, match="CBOR"):
        decode_message(cbor2.dumps(sample_map(extra={"v": item})))
    with pytest.raises(MalformedMessage):
        decode_cbor(cbor2.dumps(item))


@pytest.mark.parametrize(
    "raw",
    [
        b"\xd8\x1c\x81\xd8\x1d\x00",  # shared reference making a cycle
        b"\xf0",  # simple value
        b"\xf7",  # undefined
    ],
)
def test_exotic_cbor_values_are_refused(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_cbor(raw)


def test_decode_cbor_returns_plain_values() -> None:
    value = {"a": [1, 2.5, "x", b"y", True, None, {"b": []}]}
    assert decode_cbor(cbor2.dumps(value)) == value
    assert decode_cbor(memoryview(cbor2.dumps(value))) == value


def test_error_text_from_the_peer_is_bounded() -> None:
    with pytest.raises(MalformedMessage) as info:
        decode_message(wire(t="x" * 10_000))
    assert len(info.value.reason) < 200


def test_missing_field_is_named() -> None:
    with pytest.raises(MalformedMessage, match="missing field 'seq'"):
        decode_message(cbor2.dumps({"t": "ping"}))
