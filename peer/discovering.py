"""The agent's side of discovery: mDNS adverts become dialled, authenticated peers.

Adverts of our mesh are dialled automatically (the handshake still decides
trust: a mesh id in TXT is a claim, the MAC is the proof). When both sides
see each other, only the one with the smaller node id dials at once; the
other waits a little before dialling too, in case the first cannot reach it.
Adverts of other meshes are only shown, never dialled. A node that sees its
own id advertised elsewhere and is the younger of the two regenerates its
id (see ``IdentityChanged``).

Of the agent it needs only a ``DiscoveryHost``: its links, a way to dial a
found peer, and its event log; the rest (who we are, the state directory) is
given as values.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import trio

from gleam.discovery import (
    DiscoveryError,
    DuplicateNodeId,
    LocalAdvert,
    MdnsDiscovery,
    PeerAdvert,
    PeerFound,
    PeerGone,
    PeerUpdated,
)
from gleam.peer.addresses import PeerAddress
from gleam.peer.protocol import PROTOCOL_VERSION
from gleam.peer.state import StateDir

log = logging.getLogger("gleam.discovery")

# How long the larger node id waits for the smaller one to dial first.
SECOND_DIAL_DELAY = 3.0


class IdentityChanged(Exception):
    """This node regenerated its id; the agent restarts under the new one."""


class DiscoveryHost(Protocol):
    """What discovery needs of the agent."""

    @property
    def links(self) -> Mapping[str, object]:
        """The peers linked now, by node id."""

    def record(self, kind: str, text: str) -> None:
        """Note an event for the status view."""

    async def dial_discovered(
        self, node_id: str, name: str, addresses: list[PeerAddress]
    ) -> None:
        """Keep the peer linked (never returns; cancelled when its advert goes)."""


class Discovering:
    def __init__(
        self, host: DiscoveryHost, state: StateDir, *, node_id: str, name: str,
        mesh_id: str, started_at: float, enabled: bool, interfaces: tuple[str, ...],
    ) -> None:
        self.host = host
        self.state = state
        self.node_id = node_id
        self.name = name
        self.mesh_id = mesh_id
        self.started_at = started_at
        self.enabled = enabled
        self.interfaces = interfaces
        self.port: int | None = None  # known once the agent listens (``run``)
        self.adverts: dict[str, PeerAdvert] = {}
        self.discovery: MdnsDiscovery | None = None
        self._dialers: dict[str, trio.CancelScope] = {}

    def local_advert(self) -> LocalAdvert:
        assert self.port is not None
        return LocalAdvert(
            name=self.name, node_id=self.node_id, mesh_id=self.mesh_id,
            version=PROTOCOL_VERSION, port=self.port,
            since=int(self.started_at * 1000),
        )

    async def run(
        self, port: int, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Advertise ``port`` (where the agent listens) and dial what is found."""
        self.port = port
        if not self.enabled:
            task_status.started()
            return
        self.discovery = MdnsDiscovery(self.local_advert(), interfaces=self.interfaces)
        send, receive = trio.open_memory_channel[Any](256)
        async with trio.open_nursery() as nursery:
            try:
                instance = await nursery.start(self.discovery.run, send)
            except DiscoveryError as exc:
                log.error("mDNS discovery is off: %s (static --peer still works)", exc)
                self.host.record("mdns", f"off: {exc}")
                task_status.started()
                return
            log.info("advertising as %r on %s", instance, ", ".join(self.discovery.interfaces))
            task_status.started()
            async for event in receive:
                await self._handle(nursery, event)

    async def _handle(self, nursery: trio.Nursery, event: object) -> None:
        if isinstance(event, PeerFound | PeerUpdated):
            advert = event.advert
            self.adverts[advert.instance] = advert
            if isinstance(event, PeerFound):
                what = "foreign mesh" if advert.foreign else "peer"
                self.host.record("found", f"{what} {advert.instance} at {_where(advert)}")
            if not advert.foreign and advert.version == PROTOCOL_VERSION:
                self._ensure_dialer(nursery, advert)
        elif isinstance(event, PeerGone):
            gone = self.adverts.pop(event.instance, None)
            node_id = gone.node_id if gone is not None else event.node_id
            # A forgotten advert (``forget``) still has its dialer: it goes now.
            if node_id is not None and not any(
                a.node_id == node_id for a in self.adverts.values()
            ):
                scope = self._dialers.pop(node_id, None)
                if scope is not None and node_id not in self.host.links:
                    scope.cancel()
        elif isinstance(event, DuplicateNodeId):
            await self._duplicate(event.advert)

    def forget(self, node_id: str) -> None:
        """Gossip declared ``node_id`` dead: its adverts leave the view now, not when
        zeroconf's cache lets them expire (a killed agent sends no goodbye). Its
        dialer keeps trying, so a peer that was only cut off links again; an
        advert heard again (a restarted agent announces itself) brings the row back."""
        for instance in [i for i, a in self.adverts.items() if a.node_id == node_id]:
            del self.adverts[instance]

    async def _duplicate(self, other: PeerAdvert) -> None:
        mine = self.local_advert()
        # The younger agent gives way; equal start times fall back to the name.
        if (mine.since or 0, mine.name) < (other.since or 0, other.instance):
            log.warning("node id %s is also used by %r at %s (a copied state directory or "
                        "cloned machine?); it is younger, so it should change its id",
                        self.node_id[:8], other.instance, _where(other))
            return
        log.warning("node id %s is also used by the older %r at %s (a copied state directory "
                    "or cloned machine?); this node takes a new id and restarts",
                    self.node_id[:8], other.instance, _where(other))
        self.state.regenerate_node_id()
        raise IdentityChanged(f"duplicate node id with {other.instance}")

    def _ensure_dialer(self, nursery: trio.Nursery, advert: PeerAdvert) -> None:
        if advert.node_id in self._dialers or not advert.addresses:
            return
        scope = trio.CancelScope()
        self._dialers[advert.node_id] = scope
        nursery.start_soon(self._dial, scope, advert)

    async def _dial(self, scope: trio.CancelScope, advert: PeerAdvert) -> None:
        with scope:
            if self.node_id > advert.node_id:
                await trio.sleep(SECOND_DIAL_DELAY)
            addresses = [PeerAddress(host, advert.port) for host in advert.addresses]
            await self.host.dial_discovered(advert.node_id, advert.instance, addresses)
        if self._dialers.get(advert.node_id) is scope:
            del self._dialers[advert.node_id]

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"id": a.node_id, "name": a.instance, "address": _where(a), "foreign": a.foreign}
            for a in self.adverts.values()
        ]


def _where(advert: PeerAdvert) -> str:
    host = advert.addresses[0] if advert.addresses else advert.host
    return str(PeerAddress(host, advert.port))
