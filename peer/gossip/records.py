"""The state each peer publishes about itself: versioned, immutable, strictly decoded.

An origin publishes two kinds of record, each with its own version counter:

* ``PeerRecord``: who it is (name, address, port), its GPUs with their load,
  active sessions, queue depth and plugin fields (``extra``);
* ``LinkReport``: what it measured on its links to other peers (RTT, bandwidth).

They are separate because link tables are large (one entry per peer) and change
slowly, while load is small and changes often: a load refresh must not carry
the link table. Both are ordered by ``(incarnation, version)``; the incarnation
belongs to the failure detector (a node bumps it to refute a suspicion or to
rejoin after being declared dead).

A record travels as its own CBOR item (``encode_record``) inside a byte string
of a gossip message, so relays forward it untouched and a defective record is
dropped alone. ``decode_record`` accepts only what ``encode_record`` can
produce: exact types, bounded sizes and counts, finite numbers; keys it does
not know are ignored and array entries may carry extra trailing items, so a
newer peer can add fields.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import cbor2

from gleam.peer.protocol import MalformedMessage, decode_cbor

__all__ = [
    "BACKENDS",
    "MAX_COUNTER",
    "MAX_EXTRA_BYTES",
    "MAX_GPUS",
    "MAX_LINKS",
    "MAX_RECORD_BYTES",
    "GpuInfo",
    "InvalidRecord",
    "Link",
    "LinkReport",
    "PeerRecord",
    "Record",
    "check_node_id",
    "decode_record",
    "encode_record",
]

MAX_NODE_ID = 64
MAX_NAME = 64
MAX_ADDRESS = 255
MAX_GPU_NAME = 96
MAX_GPUS = 16
MAX_LINKS = 64
MAX_EXTRA_KEYS = 32
MAX_EXTRA_KEY = 64
MAX_EXTRA_BYTES = 2048
MAX_EXTRA_DEPTH = 4
MAX_RECORD_BYTES = 16 * 1024
# Incarnations and versions stay exact in a float and in JSON; anything larger
# is an absurd counter that would also leave the origin no room to refute.
MAX_COUNTER = 2**53 - 1
MAX_COUNT = 2**32 - 1
MAX_MEMORY = 2**63 - 1
BACKENDS = ("cuda", "host")

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


class InvalidRecord(ValueError):
    """A record breaks the format or its bounds; the text says which field and why."""


# ---------------------------------------------------------------- value checks


def check_node_id(value: object, what: str = "node id") -> str:
    if type(value) is not str or not 1 <= len(value) <= MAX_NODE_ID or not value.isprintable():
        raise InvalidRecord(f"{what} must be 1..{MAX_NODE_ID} printable characters")
    return value


def _text(value: object, what: str, max_len: int) -> str:
    if type(value) is not str:
        raise InvalidRecord(f"{what} must be text, not {type(value).__name__}")
    if len(value) > max_len or not value.isprintable():
        raise InvalidRecord(f"{what} must be at most {max_len} printable characters")
    return value


def _int(value: object, what: str, low: int, high: int) -> int:
    if type(value) is not int:
        raise InvalidRecord(f"{what} must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidRecord(f"{what} must be in {low}..{high}")
    return value


def _float(value: object, what: str, low: float = 0.0, high: float = math.inf) -> float:
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise InvalidRecord(f"{what} must be a number, not {type(value).__name__}")
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidRecord(f"{what} must be a finite number in {low:g}..{high:g}")
    return value


def _optional(check: Callable[..., Any], value: object, *args: Any) -> Any:
    return None if value is None else check(value, *args)


def _tuple_of(value: object, what: str, max_len: int) -> tuple[Any, ...]:
    if type(value) not in (list, tuple):
        raise InvalidRecord(f"{what} must be an array")
    if len(value) > max_len:  # type: ignore[arg-type]
        raise InvalidRecord(f"{what} holds at most {max_len} entries")
    return tuple(value)  # type: ignore[arg-type]


def _entry(value: object, what: str, size: int) -> list[Any] | tuple[Any, ...]:
    """A positional wire entry: at least ``size`` items, later ones ignored."""
    if type(value) not in (list, tuple) or len(value) < size:  # type: ignore[arg-type]
        raise InvalidRecord(f"{what} must be an array of at least {size} items")
    return value  # type: ignore[return-value]


# ---------------------------------------------------------------- plugin fields


def _freeze(value: Any, depth: int) -> Any:
    """An immutable copy of a plain CBOR value: maps become read-only, arrays tuples."""
    kind = type(value)
    if value is None or kind in (str, bytes, bool):
        return value
    if kind is int:
        if not _INT64_MIN <= value <= _UINT64_MAX:
            raise InvalidRecord("extra: integers must fit in 64 bits")
        return value
    if kind is float:
        if not math.isfinite(value):
            raise InvalidRecord("extra: numbers must be finite")
        return value
    if depth >= MAX_EXTRA_DEPTH:
        raise InvalidRecord(f"extra: nested deeper than {MAX_EXTRA_DEPTH} levels")
    if kind in (list, tuple):
        return tuple(_freeze(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise InvalidRecord("extra: map keys must be text")
            out[k] = _freeze(v, depth + 1)
        return types.MappingProxyType(out)
    raise InvalidRecord(f"extra: {kind.__name__} values cannot be gossiped")


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    return value


def _freeze_extra(extra: object) -> Mapping[str, Any]:
    if not isinstance(extra, Mapping):
        raise InvalidRecord("extra must be a map")
    if len(extra) > MAX_EXTRA_KEYS:
        raise InvalidRecord(f"extra holds at most {MAX_EXTRA_KEYS} fields")
    for key in extra:
        if type(key) is not str or not 1 <= len(key) <= MAX_EXTRA_KEY:
            raise InvalidRecord(f"extra keys must be 1..{MAX_EXTRA_KEY} characters of text")
    frozen = _freeze(extra, 0)
    size = len(cbor2.dumps(_thaw(frozen)))
    if size > MAX_EXTRA_BYTES:
        raise InvalidRecord(f"extra takes {size} bytes encoded; at most {MAX_EXTRA_BYTES}")
    return frozen  # type: ignore[no-any-return]


# ---------------------------------------------------------------- GPUs


@dataclass(frozen=True)
class GpuInfo:
    """One device a peer offers, and its load when the record was published.

    ``utilization`` is a percentage (0..100). ``gflops`` is the measured speed
    of a ``host`` software device; a ``cuda`` device may leave it None.
    """

    name: str
    backend: str = "cuda"
    compute_capability: tuple[int, int] | None = None
    memory_total: int = 0
    memory_used: int = 0
    utilization: float = 0.0
    gflops: float | None = None

    def __post_init__(self) -> None:
        _text(self.name, "gpu name", MAX_GPU_NAME)
        if self.backend not in BACKENDS:
            raise InvalidRecord(f"gpu backend must be one of {', '.join(BACKENDS)}")
        if self.compute_capability is not None:
            cc = _entry(self.compute_capability, "compute capability", 2)
            if len(cc) != 2:
                raise InvalidRecord("compute capability must be (major, minor)")
            major = _int(cc[0], "compute capability major", 0, 255)
            minor = _int(cc[1], "compute capability minor", 0, 255)
            object.__setattr__(self, "compute_capability", (major, minor))
        _int(self.memory_total, "memory_total", 0, MAX_MEMORY)
        _int(self.memory_used, "memory_used", 0, MAX_MEMORY)
        object.__setattr__(self, "utilization", _float(self.utilization, "utilization", 0, 100))
        object.__setattr__(self, "gflops", _optional(_float, self.gflops, "gflops"))

    def to_wire(self) -> list[Any]:
        cc = list(self.compute_capability) if self.compute_capability else None
        return [
            self.name, self.backend, cc, self.memory_total, self.memory_used,
            self.utilization, self.gflops,
        ]

    @classmethod
    def from_wire(cls, obj: object) -> GpuInfo:
        e = _entry(obj, "gpu", 7)
        cc = e[2]
        if cc is not None:
            cc = _entry(cc, "compute capability", 2)
            if len(cc) != 2:
                raise InvalidRecord("compute capability must be [major, minor]")
            cc = (cc[0], cc[1])
        return cls(e[0], e[1], cc, e[3], e[4], e[5], e[6])

    def same_device(self, other: GpuInfo) -> bool:
        """Whether ``other`` is the same inventory entry, load aside."""
        return (self.name, self.backend, self.compute_capability, self.memory_total) == (
            other.name, other.backend, other.compute_capability, other.memory_total,
        )


# ---------------------------------------------------------------- links


@dataclass(frozen=True)
class Link:
    """The origin's measurements of its link to ``peer``.

    RTTs are in milliseconds. ``rtt_ms``/``rttvar_ms`` are the kernel's TCP
    estimate for the link's socket (the propagation RTT and the smoothed
    RTT's mean deviation, see ``peer/tcpinfo.py``): the link's RTT for
    decisions. The ``rtt_ewma/p50/p90`` figures are the application ping,
    which adds both agents' scheduling. The kernel figures travel as two
    trailing wire items, so an origin that predates them (or has no
    ``TCP_INFO``) sends None. The bandwidth estimate is in bytes per second,
    measured at ``bandwidth_measured_at`` (the origin's Unix time); both are
    None until a transfer has been measured.
    """

    peer: str
    rtt_ewma_ms: float
    rtt_p50_ms: float
    rtt_p90_ms: float
    bandwidth: float | None = None
    bandwidth_measured_at: float | None = None
    rtt_ms: float | None = None
    rttvar_ms: float | None = None

    def __post_init__(self) -> None:
        check_node_id(self.peer, "link peer")
        for name in ("rtt_ewma_ms", "rtt_p50_ms", "rtt_p90_ms"):
            object.__setattr__(self, name, _float(getattr(self, name), name, 0, 1e7))
        for name in ("rtt_ms", "rttvar_ms"):
            object.__setattr__(self, name, _optional(_float, getattr(self, name), name, 0, 1e7))
        object.__setattr__(self, "bandwidth", _optional(_float, self.bandwidth, "bandwidth"))
        measured = _optional(_float, self.bandwidth_measured_at, "bandwidth_measured_at")
        object.__setattr__(self, "bandwidth_measured_at", measured)

    def to_wire(self) -> list[Any]:
        return [
            self.peer, self.rtt_ewma_ms, self.rtt_p50_ms, self.rtt_p90_ms,
            self.bandwidth, self.bandwidth_measured_at, self.rtt_ms, self.rttvar_ms,
        ]

    @property
    def best_rtt_ms(self) -> float:
        """The RTT to rank this link by: the kernel's where the origin sent it."""
        return self.rtt_ewma_ms if self.rtt_ms is None else self.rtt_ms

    @classmethod
    def from_wire(cls, obj: object) -> Link:
        e = _entry(obj, "link", 6)
        kernel = [e[i] if len(e) > i else None for i in (6, 7)]
        return cls(e[0], e[1], e[2], e[3], e[4], e[5], *kernel)


# ---------------------------------------------------------------- records


def _counters(record: PeerRecord | LinkReport) -> None:
    check_node_id(record.node_id)
    _int(record.incarnation, "incarnation", 0, MAX_COUNTER)
    _int(record.version, "version", 0, MAX_COUNTER)


@dataclass(frozen=True)
class PeerRecord:
    """What a peer says about itself: identity, GPUs and load, sessions, plugin fields.

    ``extra`` holds plugin-contributed fields: plain CBOR values (text keys,
    at most MAX_EXTRA_KEYS fields and MAX_EXTRA_BYTES encoded). It is stored
    read-only: maps become read-only mappings and arrays become tuples.
    """

    kind: ClassVar[str] = "peer"

    node_id: str
    incarnation: int = 0
    version: int = 0
    name: str = ""
    address: str = ""
    port: int | None = None
    gpus: tuple[GpuInfo, ...] = ()
    sessions: int = 0
    queue_depth: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        _counters(self)
        _text(self.name, "name", MAX_NAME)
        _text(self.address, "address", MAX_ADDRESS)
        _optional(_int, self.port, "port", 1, 65535)
        gpus = _tuple_of(self.gpus, "gpus", MAX_GPUS)
        if not all(isinstance(g, GpuInfo) for g in gpus):
            raise InvalidRecord("gpus must hold GpuInfo entries")
        object.__setattr__(self, "gpus", gpus)
        _int(self.sessions, "sessions", 0, MAX_COUNT)
        _int(self.queue_depth, "queue_depth", 0, MAX_COUNT)
        object.__setattr__(self, "extra", _freeze_extra(self.extra))

    @property
    def key(self) -> tuple[int, int]:
        return (self.incarnation, self.version)

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "node": self.node_id, "inc": self.incarnation,
            "ver": self.version, "name": self.name, "address": self.address,
            "port": self.port, "gpus": [g.to_wire() for g in self.gpus],
            "sessions": self.sessions, "queue": self.queue_depth,
            "extra": _thaw(self.extra),
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> PeerRecord:
        gpus = _tuple_of(_get(obj, "gpus"), "gpus", MAX_GPUS)
        extra = _get(obj, "extra")
        if type(extra) is not dict:
            raise InvalidRecord("extra must be a map")
        return cls(
            node_id=_get(obj, "node"), incarnation=_get(obj, "inc"), version=_get(obj, "ver"),
            name=_get(obj, "name"), address=_get(obj, "address"), port=_get(obj, "port"),
            gpus=tuple(GpuInfo.from_wire(g) for g in gpus), sessions=_get(obj, "sessions"),
            queue_depth=_get(obj, "queue"), extra=extra,
        )


@dataclass(frozen=True)
class LinkReport:
    """The origin's table of measured links, at most MAX_LINKS entries, one per peer."""

    kind: ClassVar[str] = "links"

    node_id: str
    incarnation: int = 0
    version: int = 0
    links: tuple[Link, ...] = ()

    def __post_init__(self) -> None:
        _counters(self)
        links = _tuple_of(self.links, "links", MAX_LINKS)
        if not all(isinstance(link, Link) for link in links):
            raise InvalidRecord("links must hold Link entries")
        if len({link.peer for link in links}) != len(links):
            raise InvalidRecord("links name each peer at most once")
        object.__setattr__(self, "links", links)

    @property
    def key(self) -> tuple[int, int]:
        return (self.incarnation, self.version)

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "node": self.node_id, "inc": self.incarnation,
            "ver": self.version, "links": [link.to_wire() for link in self.links],
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> LinkReport:
        links = _tuple_of(_get(obj, "links"), "links", MAX_LINKS)
        return cls(
            node_id=_get(obj, "node"), incarnation=_get(obj, "inc"), version=_get(obj, "ver"),
            links=tuple(Link.from_wire(link) for link in links),
        )


Record = PeerRecord | LinkReport
_KINDS: dict[str, type[PeerRecord] | type[LinkReport]] = {
    PeerRecord.kind: PeerRecord,
    LinkReport.kind: LinkReport,
}


def _get(obj: Mapping[str, Any], key: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise InvalidRecord(f"missing field {key!r}") from None


def encode_record(record: Record) -> bytes:
    """The CBOR bytes of ``record``, as it travels inside gossip messages."""
    blob = cbor2.dumps(record.to_wire())
    if len(blob) > MAX_RECORD_BYTES:
        raise InvalidRecord(f"record takes {len(blob)} bytes; at most {MAX_RECORD_BYTES}")
    return blob


def decode_record(blob: object) -> Record:
    """Decode one record received from the network; raises InvalidRecord and nothing else."""
    if type(blob) is not bytes:
        raise InvalidRecord("a record must be a byte string")
    if len(blob) > MAX_RECORD_BYTES:
        raise InvalidRecord(f"record of {len(blob)} bytes; at most {MAX_RECORD_BYTES}")
    return _decode_cached(blob)


# Records are immutable and a blob always decodes to the same record, so a
# small cache saves the work when the same record arrives twice (or, in the
# benchmark's simulation, at a thousand in-process peers).
@functools.lru_cache(maxsize=2048)
def _decode_cached(blob: bytes) -> Record:
    try:
        obj = decode_cbor(blob)
    except MalformedMessage as exc:
        raise InvalidRecord(str(exc)) from None
    if type(obj) is not dict:
        raise InvalidRecord("a record must be a CBOR map")
    kind = obj.get("kind")
    cls = _KINDS.get(kind) if type(kind) is str else None
    if cls is None:
        raise InvalidRecord("unknown record kind")
    try:
        return cls.from_wire(obj)
    except InvalidRecord:
        raise
    except (TypeError, ValueError) as exc:  # defensive: any other slip is still a bad record
        raise InvalidRecord(str(exc)[:200]) from None

