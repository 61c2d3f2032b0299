"""Control-plane messages: frozen dataclasses carried as CBOR maps.

A message travels as ``{"t": type_name, field: value, ...}``. Classes join the
registry with ``@register_message("name")``, so features add messages without
touching this file. Decoding checks every field against the class annotations
and the class's own ``__post_init__`` checks (sizes), and reports any problem
as ``MalformedMessage``; keys a class does not know are ignored, so newer
peers may add fields. Fields with a default may be absent.

Supported field types: int, float, str, bytes, bool, None, Any, X | None,
tuple[X, ...], tuple[X, Y], list[X], dict[str, X] and nested frozen
dataclasses (carried as maps without "t").
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, Union

import cbor2

from gleam.peer.protocol.errors import MalformedMessage

M = TypeVar("M", bound="Message")

# CBOR can nest deeper than any message needs; a low bound keeps hostile
# input from costing stack or time.
MAX_NESTING = 32

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1  # anything outside takes a CBOR bignum tag, which decoding refuses


class Message:
    """Base class of control messages; subclasses are ``@dataclass(frozen=True)``."""

    type_name: ClassVar[str]


_REGISTRY: dict[str, type[Message]] = {}
_FIELD_CHECKS: dict[type, tuple[_FieldSpec, ...]] = {}


class _Invalid(Exception):
    """A value does not match its annotation; the text names what was expected."""


Check = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class _FieldSpec:
    name: str
    check: Check
    required: bool


def register_message(name: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: make a frozen dataclass a control message called ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError("a message type name must be a non-empty string")

    def decorate(cls: type[M]) -> type[M]:
        if not (isinstance(cls, type) and issubclass(cls, Message)):
            raise TypeError(f"{cls!r} must subclass Message")
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"{cls.__qualname__} must be a @dataclass(frozen=True)")
        if name in _REGISTRY:
            raise ValueError(
                f"message type {name!r} is already registered by {_REGISTRY[name].__qualname__}"
            )
        if any(f.name == "t" for f in dataclasses.fields(cls)):  # type: ignore[arg-type]
            raise TypeError(f"{cls.__qualname__}: field name 't' is reserved for the type")
        cls.type_name = name
        # Fail at import time on an unsupported annotation; names not yet
        # resolvable are checked on first use instead.
        with contextlib.suppress(NameError):
            _field_specs(cls)
        _REGISTRY[name] = cls
        return cls

    return decorate


def registered_messages() -> dict[str, type[Message]]:
    """A copy of the registry: type name -> class."""
    return dict(_REGISTRY)


# ---------------------------------------------------------------- encoding


def encode_message(msg: Message) -> bytes:
    """The CBOR bytes of ``msg``; raises TypeError/ValueError if a field breaks its type."""
    cls = type(msg)
    if _REGISTRY.get(getattr(cls, "type_name", "")) is not cls:
        raise TypeError(f"{cls.__qualname__} is not a registered message")
    wire: dict[str, Any] = {"t": cls.type_name}
    wire.update(_record_to_wire(msg))
    return cbor2.dumps(wire)


def _record_to_wire(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in _field_specs(type(record)):
        value = getattr(record, spec.name)
        try:
            spec.check(value)
        except _Invalid as exc:
            raise TypeError(f"{type(record).__qualname__}.{spec.name}: {exc}") from None
        out[spec.name] = _to_wire(value)
    return out


def _to_wire(value: Any) -> Any:
    if isinstance(value, bool | str | bytes | float) or value is None:
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValueError("integers on the wire must fit in 64 bits")
        return value
    if isinstance(value, list | tuple):
        return [_to_wire(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_wire(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _record_to_wire(value)
    raise TypeError(f"{type(value).__qualname__} cannot be sent in a message")


# ---------------------------------------------------------------- decoding


def _refuse_tag(*_args: object) -> Any:
    raise _Invalid("CBOR tags are not allowed")


class _EveryTag(dict[int, Any]):
    """Maps every semantic tag to a refusal, so cbor2 builds no rich objects."""

    def __missing__(self, key: int) -> Any:
        return _refuse_tag

    def get(self, key: int, default: Any = None) -> Any:
        return _refuse_tag

    def __contains__(self, key: object) -> bool:
        return True


_NO_TAGS = _EveryTag()


def decode_cbor(data: bytes | bytearray | memoryview) -> Any:
    """Decode one plain CBOR item: maps (text keys), arrays, text, bytes, numbers, bools, null.

    Tags, simple values, undefined, duplicate keys, nesting deeper than
    MAX_NESTING and trailing bytes are refused. Raises MalformedMessage and
    nothing else.
    """
    stream = io.BytesIO(data)
    try:
        decoder = cbor2.CBORDecoder(
            stream,
            tag_hook=_refuse_tag,
            semantic_decoders=_NO_TAGS,
            max_depth=MAX_NESTING,
            allow_duplicate_keys=False,
            strict_hashable_types=True,
        )
        value = decoder.decode()
    except Exception as exc:  # cbor2 raises a zoo; none may escape to the transport
        raise MalformedMessage(f"bad CBOR: {_short(exc)}") from None
    if stream.tell() != len(stream.getbuffer()):
        raise MalformedMessage("bad CBOR: trailing bytes after the message")
    if not _is_plain(value, 0):
        raise MalformedMessage(
            "bad CBOR: only maps with text keys, arrays, text, bytes, "
            "numbers, booleans and null are allowed"
        )
    return value


def _is_plain(value: Any, depth: int) -> bool:
    if depth > MAX_NESTING:
        return False
    kind = type(value)
    if kind in (int, float, str, bytes, bool) or value is None:
        return True
    if kind is list:
        return all(_is_plain(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def decode_message(data: bytes | bytearray | memoryview) -> Message:
    """Decode a control message; raises MalformedMessage (a ProtocolError) on any defect."""
    return message_from_map(decode_cbor(data))


def message_from_map(obj: Any) -> Message:
    """Build the message a decoded CBOR map describes; raises MalformedMessage."""
    if not isinstance(obj, dict):
        raise MalformedMessage("a control message must be a CBOR map")
    name = obj.get("t")
    if not isinstance(name, str):
        raise MalformedMessage("control message has no text type field 't'")
    cls = _REGISTRY.get(name)
    if cls is None:
        raise MalformedMessage(f"unknown message type {name[:64]!r}")
    try:
        return _record_from_map(cls, obj)
    except _Invalid as exc:
        raise MalformedMessage(f"malformed {name} message: {exc}") from None


def _record_from_map(cls: type[M], obj: dict[str, Any]) -> M:
    kwargs: dict[str, Any] = {}
    for spec in _field_specs(cls):
        if spec.name not in obj:
            if spec.required:
                raise _Invalid(f"missing field {spec.name!r}")
            continue
        try:
            kwargs[spec.name] = spec.check(obj[spec.name])
        except _Invalid as exc:
            raise _Invalid(f"field {spec.name!r}: {exc}") from None
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:  # the class's own size checks
        raise _Invalid(_short(exc)) from None


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


# ---------------------------------------------------------------- field checks


def _field_specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = _FIELD_CHECKS.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        specs = tuple(
            _FieldSpec(
                name=f.name,
                check=_compile(hints[f.name]),
                required=f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
        _FIELD_CHECKS[cls] = specs
    return specs


def _exact(kind: type, label: str) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise _Invalid(f"expected {label}, got {type(value).__name__}")
        return value

    return check


def _check_int(value: Any) -> int:
    if type(value) is not int:
        raise _Invalid(f"expected an integer, got {type(value).__name__}")
    if not _INT_MIN <= value <= _INT_MAX:
        raise _Invalid("integer does not fit in 64 bits")
    return value


def _check_float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(_check_int(value))
    raise _Invalid(f"expected a number, got {type(value).__name__}")


def _check_none(value: Any) -> None:
    if value is not None:
        raise _Invalid(f"expected null, got {type(value).__name__}")


def _check_any(value: Any) -> Any:
    return value


_SIMPLE_CHECKS: dict[Any, Check] = {
    int: _check_int,
    float: _check_float,
    str: _exact(str, "text"),
    bytes: _exact(bytes, "bytes"),
    bool: _exact(bool, "a boolean"),
    type(None): _check_none,
    None: _check_none,
    Any: _check_any,
}


def _compile(tp: Any) -> Check:
    """Turn an annotation into a function that checks (and normalises) a decoded value."""
    simple = _SIMPLE_CHECKS.get(tp)
    if simple is not None:
        return simple
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _union([_compile(a) for a in args])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _sequence(_compile(args[0]), tuple)
        return _fixed_tuple([_compile(a) for a in args])
    if origin is list:
        return _sequence(_compile(args[0]), list)
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"unsupported field type {tp!r}: map keys must be str")
        return _mapping(_compile(args[1]))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _nested(tp)
    raise TypeError(f"unsupported message field type {tp!r}")


def _union(checks: list[Check]) -> Check:
    def check(value: Any) -> Any:
        for option in checks:
            try:
                return option(value)
            except _Invalid:
                continue
        raise _Invalid(f"unexpected {type(value).__name__}")

    return check


def _sequence(item: Check, build: type) -> Check:
    def check(value: Any) -> Any:
        if type(value) not in (list, tuple):
            raise _Invalid(f"expected an array, got {type(value).__name__}")
        return build(item(v) for v in value)

    return check


def _fixed_tuple(items: list[Check]) -> Check:
    def check(value: Any) -> Any:
        if type(value) not in (list, tuple) or len(value) != len(items):
            raise _Invalid(f"expected an array of {len(items)} items")
        return tuple(c(v) for c, v in zip(items, value, strict=True))

    return check


def _mapping(item: Check) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not dict:
            raise _Invalid(f"expected a map, got {type(value).__name__}")
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _Invalid("map keys must be text")
            out[k] = item(v)
        return out

    return check


def _nested(cls: type) -> Check:
    def check(value: Any) -> Any:
        if isinstance(value, cls):  # encoding side: already a record
            _record_to_wire(value)
            return value
        if type(value) is not dict:
            raise _Invalid(f"expected a {cls.__name__} map, got {type(value).__name__}")
        return _record_from_map(cls, value)

    return check


# ---------------------------------------------------------------- size checks


def _check_text(field: str, value: str, max_len: int, *, min_len: int = 0) -> None:
    if not min_len <= len(value) <= max_len:
        raise ValueError(f"{field} must be {min_len}..{max_len} characters, not {len(value)}")


def _check_bytes(field: str, value: bytes, size: int) -> None:
    if len(value) != size:
        raise ValueError(f"{field} must be exactly {size} bytes, not {len(value)}")


def _check_range(field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{field} must be in {low}..{high}")


# ---------------------------------------------------------------- built-in messages

MAX_NODE_ID = 64
MAX_NAME = 64
MAX_MESH_ID = 64
MAX_CAPABILITIES = 32
MAX_CAPABILITY = 64
NONCE_SIZE = 32
MAC_SIZE = 32
MAX_ERROR_CODE = 64
MAX_TEXT = 4096


@register_message("hello")
@dataclasses.dataclass(frozen=True)
class Hello(Message):
    """First frame of each side: who it is, which mesh, and a fresh nonce."""

    node_id: str
    name: str
    version: int
    capabilities: tuple[str, ...]
    nonce: bytes
    mesh_id: str
    listen_port: int | None

    def __post_init__(self) -> None:
        _check_text("node_id", self.node_id, MAX_NODE_ID, min_len=1)
        _check_text("name", self.name, MAX_NAME)
        _check_range("version", self.version, 0, 0xFFFF_FFFF)
        if len(self.capabilities) > MAX_CAPABILITIES:
            raise ValueError(
                f"at most {MAX_CAPABILITIES} capabilities, not {len(self.capabilities)}"
            )
        for capability in self.capabilities:
            _check_text("a capability", capability, MAX_CAPABILITY, min_len=1)
        _check_bytes("nonce", self.nonce, NONCE_SIZE)
        _check_text("mesh_id", self.mesh_id, MAX_MESH_ID, min_len=1)
        if self.listen_port is not None:
            _check_range("listen_port", self.listen_port, 1, 65535)


@register_message("auth")
@dataclasses.dataclass(frozen=True)
class Auth(Message):
    """Proof of the mesh key: an HMAC over the handshake transcript."""

    mac: bytes

    def __post_init__(self) -> None:
        _check_bytes("mac", self.mac, MAC_SIZE)


@register_message("ping")
@dataclasses.dataclass(frozen=True)
class Ping(Message):
    seq: int

    def __post_init__(self) -> None:
        _check_range("seq", self.seq, 0, 2**64 - 1)


@register_message("pong")
@dataclasses.dataclass(frozen=True)
class Pong(Message):
    seq: int

    def __post_init__(self) -> None:
        _check_range("seq", self.seq, 0, 2**64 - 1)


@register_message("error")
@dataclasses.dataclass(frozen=True)
class ErrorMessage(Message):
    """Why the sender is about to close (or refuses a request): ``code`` for tools."""

    code: str
    message: str

    def __post_init__(self) -> None:
        _check_text("code", self.code, MAX_ERROR_CODE, min_len=1)
        _check_text("message", self.message, MAX_TEXT)


@register_message("goodbye")
@dataclasses.dataclass(frozen=True)
class Goodbye(Message):
    """The sender closes the connection on purpose."""

    reason: str

    def __post_init__(self) -> None:
        _check_text("reason", self.reason, MAX_TEXT)
