"""What a gleam node advertises over DNS-SD, and how a received advert is read.

Everything here is pure: building the TXT properties of our own service, naming the
instance, turning the fields of a resolved service into a :class:`PeerAdvert` (or
refusing it), and deciding what a resolved advert means for us (a peer, ourselves, or
another node that carries our node id). ``mdns.py`` does the I/O around it.

A received advert is untrusted input from anyone on the link, so the parser accepts
only the exact shapes this module writes and reports everything else as
:class:`InvalidAdvert`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

SERVICE_TYPE = "_gleam._tcp.local."

# DNS labels hold at most 63 bytes; the instance name is one label.
MAX_INSTANCE_BYTES = 63
MAX_HOST_CHARS = 255
# A hostile advert may list any number of addresses; a real node has a handful.
MAX_ADDRESSES = 16
U16_MAX = 65535

_HEX_ID = re.compile(r"[0-9a-f]{16,64}")
_DECIMAL = re.compile(r"[0-9]{1,5}")


class InvalidAdvert(ValueError):
    """A received advert does not have the shape gleam writes; the message says why."""


@dataclass(frozen=True)
class LocalAdvert:
    """What this node publishes: its human name and the stable facts of its TXT record."""

    name: str
    node_id: str
    mesh_id: str
    version: int
    port: int
    # When this agent started (Unix ms): stable for the advert's lifetime, and
    # what decides which of two nodes sharing an id is the younger one.
    since: int | None = None

    def __post_init__(self) -> None:
        if self.since is not None and not 0 <= self.since < 10**15:
            raise ValueError(f"start time {self.since} is out of range")
        if not _HEX_ID.fullmatch(self.node_id):
            raise ValueError(f"node id {self.node_id!r} is not 16-64 lowercase hex digits")
        if not _HEX_ID.fullmatch(self.mesh_id):
            raise ValueError(f"mesh id {self.mesh_id!r} is not 16-64 lowercase hex digits")
        if not 0 <= self.version <= U16_MAX:
            raise ValueError(f"protocol version {self.version} is outside 0-{U16_MAX}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"cannot advertise port {self.port}; listen first, then advertise")


@dataclass(frozen=True)
class PeerAdvert:
    """Another node's advert, as resolved from DNS-SD."""

    instance: str  # DNS-SD instance name
    node_id: str
    mesh_id: str
    version: int
    port: int
    addresses: tuple[str, ...]  # IPv4 first, then IPv6 (with %scope for link-local)
    host: str  # SRV target
    foreign: bool  # mesh_id != ours
    since: int | None = None  # when that agent started (Unix ms), if it says


@dataclass(frozen=True)
class PeerFound:
    advert: PeerAdvert


@dataclass(frozen=True)
class PeerUpdated:
    advert: PeerAdvert


@dataclass(frozen=True)
class PeerGone:
    instance: str
    node_id: str | None


@dataclass(frozen=True)
class DuplicateNodeId:
    """Another instance advertises our node id; ``advert`` says where it lives."""

    advert: PeerAdvert


DiscoveryEvent = PeerFound | PeerUpdated | PeerGone | DuplicateNodeId


# ------------------------------------------------------------------ our own advert


def txt_properties(local: LocalAdvert) -> dict[str, str]:
    """The TXT record of our service: stable facts only, never secrets."""
    txt = {
        "id": local.node_id,
        "v": str(local.version),
        "port": str(local.port),
        "mesh": local.mesh_id,
    }
    if local.since is not None:
        txt["since"] = str(local.since)
    return txt


def host_name(node_id: str) -> str:
    """The SRV target of our service.

    It is derived from the node id rather than the machine's hostname so that it never
    collides with the host records that the system's own responder (Avahi, Bonjour)
    publishes, nor with another agent on the same machine.
    """
    return f"gleam-{node_id[:12]}.local."


def instance_name(name: str, attempt: int = 1) -> str:
    """The instance name for ``name``; ``attempt`` > 1 gives ``"name (2)"`` and so on.

    python-zeroconf splits names at dots and a label holds 63 bytes, so dots become
    dashes, control characters go, and the name is cut (on a character boundary) to
    leave room for the suffix.
    """
    cleaned = "".join(
        "-" if ch == "." else ch
        for ch in name
        if not unicodedata.category(ch).startswith("C")
    ).strip()
    cleaned = cleaned or "gleam"
    suffix = "" if attempt <= 1 else f" ({attempt})"
    budget = MAX_INSTANCE_BYTES - len(suffix.encode())
    while len(cleaned.encode()) > budget:
        cleaned = cleaned[:-1]
    return cleaned.rstrip() + suffix


# --------------------------------------------------------------- received adverts


def parse_advert(
    *,
    instance: object,
    host: object,
    port: object,
    properties: Mapping[bytes, bytes | None],
    addresses: Sequence[object],
    our_mesh_id: str,
    link_scope: int | None = None,
) -> PeerAdvert:
    """Read the fields of a resolved ``_gleam._tcp`` service into a :class:`PeerAdvert`.

    ``port`` is the SRV port and must agree with the TXT ``port``. Unknown TXT keys are
    ignored so that later versions can add facts. ``link_scope`` is given to link-local
    IPv6 addresses that came without one (see :func:`order_addresses`). Raises
    :class:`InvalidAdvert` for anything else that is missing, mistyped, oversized or not
    ASCII where ASCII is due.
    """
    if not isinstance(instance, str) or not instance:
        raise InvalidAdvert("no instance name")
    try:
        if len(instance.encode()) > MAX_INSTANCE_BYTES:
            raise InvalidAdvert("instance name longer than one DNS label")
    except UnicodeError:
        raise InvalidAdvert("instance name is not valid Unicode") from None
    if not isinstance(host, str) or not host or len(host) > MAX_HOST_CHARS:
        raise InvalidAdvert("no usable SRV target host")
    if type(port) is not int or not 1 <= port <= 65535:
        raise InvalidAdvert(f"SRV port {port!r} is not 1-65535")
    node_id = _hex_id(properties, b"id")
    mesh_id = _hex_id(properties, b"mesh")
    version = _decimal(properties, b"v")
    txt_port = _decimal(properties, b"port")
    if txt_port != port:
        raise InvalidAdvert(f"TXT port {txt_port} disagrees with SRV port {port}")
    since: int | None = None
    if b"since" in properties:
        try:
            raw = _ascii_value(properties, b"since")
            since = int(raw) if raw.isdigit() and len(raw) <= 15 else None
        except InvalidAdvert:
            since = None  # optional: a bad value only costs the tie-break
    return PeerAdvert(
        instance=instance,
        node_id=node_id,
        mesh_id=mesh_id,
        version=version,
        port=port,
        addresses=order_addresses(addresses, link_scope),
        host=host,
        foreign=mesh_id != our_mesh_id,
        since=since,
    )


def _ascii_value(properties: Mapping[bytes, bytes | None], key: bytes) -> str:
    raw = properties.get(key)
    if not isinstance(raw, bytes):
        raise InvalidAdvert(f"TXT key {key.decode()!r} missing or without a value")
    if len(raw) > 64:
        raise InvalidAdvert(f"TXT value of {key.decode()!r} is {len(raw)} bytes long")
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidAdvert(f"TXT value of {key.decode()!r} is not ASCII") from None


def _hex_id(properties: Mapping[bytes, bytes | None], key: bytes) -> str:
    value = _ascii_value(properties, key)
    if not _HEX_ID.fullmatch(value):
        raise InvalidAdvert(f"TXT {key.decode()!r} is not 16-64 lowercase hex digits")
    return value


def _decimal(properties: Mapping[bytes, bytes | None], key: bytes) -> int:
    value = _ascii_value(properties, key)
    if not _DECIMAL.fullmatch(value) or int(value) > U16_MAX:
        raise InvalidAdvert(f"TXT {key.decode()!r} is not a number in 0-65535")
    return int(value)


def order_addresses(addresses: Sequence[object], link_scope: int | None = None) -> tuple[str, ...]:
    """Valid, distinct addresses in a stable order: IPv4, then IPv6 with link-local last.

    A stable order keeps an unchanged advert equal to itself, so a reshuffle by the
    resolver is never reported as an update. A link-local IPv6 address cannot be dialled
    without its scope; one that comes without (the resolver heard it over IPv4) gets
    ``link_scope``, or is dropped when that is ``None``. Raises :class:`InvalidAdvert`
    when no address is usable.
    """
    keyed: dict[str, tuple[int, bool, int, str]] = {}
    for text in addresses:
        if not isinstance(text, str) or len(text) > 64:
            continue
        bare, _, scope = text.partition("%")
        try:
            ip = ipaddress.ip_address(bare)
        except ValueError:
            continue
        if ip.is_multicast or ip.is_unspecified:
            continue
        link_local = ip.is_link_local
        shown = str(ip)
        # A scope only means something on a link-local IPv6 address.
        if ip.version == 6 and link_local:
            if not scope and link_scope is None:
                continue
            shown = f"{ip}%{scope or link_scope}"
        keyed.setdefault(shown, (ip.version, link_local, int(ip), shown))
        if len(keyed) >= MAX_ADDRESSES:
            break
    if not keyed:
        raise InvalidAdvert("no usable address")
    return tuple(key[3] for key in sorted(keyed.values()))


# ------------------------------------------------------------------ what it means


class AdvertKind(enum.Enum):
    OWN = "own"  # one of our own registrations, seen coming back
    PEER = "peer"
    DUPLICATE = "duplicate"  # another instance carrying our node id


def classify(
    advert: PeerAdvert, local: LocalAdvert, own: frozenset[tuple[str, str]] | set[tuple[str, str]]
) -> tuple[AdvertKind, PeerAdvert]:
    """What ``advert`` is to us, with its ``foreign`` flag set against our mesh.

    ``own`` holds the (instance, host) pairs this node has registered or is probing.
    The pair, not the node id, identifies our own adverts: a cloned machine carries the
    same node id (and so the same host name) but can never hold the same instance name
    on the link, because probing renames one of the two.
    """
    advert = replace(advert, foreign=advert.mesh_id != local.mesh_id)
    if (advert.instance, advert.host) in own:
        return AdvertKind.OWN, advert
    if advert.node_id == local.node_id:
        return AdvertKind.DUPLICATE, advert
    return AdvertKind.PEER, advert


def transition(
    instance: str,
    old: tuple[AdvertKind, PeerAdvert] | None,
    new: tuple[AdvertKind, PeerAdvert] | None,
) -> list[DiscoveryEvent]:
    """The events that tell the agent an instance went from ``old`` to ``new``.

    ``None`` means not known (before) or gone (after). Our own adverts are silent; an
    instance that stops being a peer (it now carries our node id, or turned out to be
    ours) is reported gone first, so the agent's set of peers stays exact.
    """
    events: list[DiscoveryEvent] = []
    old_kind, old_advert = old if old else (None, None)
    new_kind, new_advert = new if new else (None, None)
    if old_kind in (AdvertKind.PEER, AdvertKind.DUPLICATE) and new_kind is not old_kind:
        assert old_advert is not None
        events.append(PeerGone(instance, old_advert.node_id))
    if new_advert is None:
        return events
    if new_kind is AdvertKind.PEER:
        if old_kind is not AdvertKind.PEER:
            events.append(PeerFound(new_advert))
        elif new_advert != old_advert:
            events.append(PeerUpdated(new_advert))
    elif new_kind is AdvertKind.DUPLICATE and (
        old_kind is not AdvertKind.DUPLICATE or new_advert != old_advert
    ):
        events.append(DuplicateNodeId(new_advert))
    return events
