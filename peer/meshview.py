"""The agent's side of gossip: feeds the sans-I/O ``Membership`` and sends what it says.

One task per agent runs the rounds: it refreshes this node's record (GPUs and
load from the inventory, links measured by the links themselves, plugin
fields), ticks the membership and hands each outgoing message to the link of
its target. Received gossip arrives here from the links. Membership events
become the agent's recent events, which the status view shows.

Of the agent it needs only a ``GossipHost``: its links, its event log, and
the fields it adds to this node's record each round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import trio

from gleam.peer.gossip import (
    GossipConfig,
    GossipMessage,
    GpuInfo,
    InvalidRecord,
    Link,
    Member,
    Membership,
    Outgoing,
    PeerRecord,
)
from gleam.peer.gpus import GpuInventory

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink

log = logging.getLogger("gleam.gossip")


def gpu_dict(gpu: GpuInfo) -> dict[str, Any]:
    return {
        "name": gpu.name,
        "backend": gpu.backend,
        "compute_capability": ".".join(map(str, gpu.compute_capability))
        if gpu.compute_capability else None,
        "memory_total": gpu.memory_total,
        "memory_used": gpu.memory_used,
        "utilization": gpu.utilization,
        "gflops": gpu.gflops,
    }


@dataclass(frozen=True)
class LocalFields:
    """What the agent puts in this node's record each round (GPUs and links are ours)."""

    port: int | None
    sessions: int
    extra: dict[str, Any] = field(default_factory=dict)  # plugins' fields


class GossipHost(Protocol):
    """What gossip needs of the agent."""

    @property
    def links(self) -> Mapping[str, PeerLink]:
        """The live links by node id: measured for the record, used to send."""

    def record(self, kind: str, text: str) -> None:
        """Note a membership event for the status view."""

    def local_fields(self) -> LocalFields:
        """This round's fields of the agent's own record (asks the plugins)."""

    def member_gone(self, node_id: str) -> None:
        """``node_id`` left the view (declared dead, or it said goodbye): whatever
        else still shows it may let it go."""


class MeshGossip:
    def __init__(
        self, host: GossipHost, config: GossipConfig, inventory: GpuInventory, *,
        node_id: str, name: str,
    ) -> None:
        self.host = host
        self.node_id = node_id
        self.name = name
        self.config = config
        self.inventory = inventory
        self.gpus: list[GpuInfo] = []
        self.membership = Membership(PeerRecord(node_id=node_id, name=name), config=config)
        self._clock = time.monotonic
        # The last name each member had: a member declared dead has left the view
        # by the time its event is told, and "died 93f20a4c" says little.
        self._names: dict[str, str] = {}

    # ------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.gpus = await trio.to_thread.run_sync(self.inventory.sample)
        self._refresh_local()
        task_status.started()
        last_sample = self._clock()
        while True:
            await trio.sleep(self.config.interval)
            now = self._clock()
            if now - last_sample >= self.config.refresh_interval:
                self.gpus = await trio.to_thread.run_sync(self.inventory.sample)
                last_sample = now
            self._refresh_local()
            self._send(self.membership.tick(self._clock()))
            self._drain_events()

    def _refresh_local(self) -> None:
        fields = self.host.local_fields()
        changes: dict[str, Any] = {
            "name": self.name,
            "port": fields.port,
            "gpus": tuple(self.gpus),
            "sessions": fields.sessions,
            "queue_depth": 0,
            "links": tuple(self._links()),
        }
        try:
            self.membership.update_local(self._clock(), extra=fields.extra, **changes)
        except (InvalidRecord, TypeError) as exc:
            # Plugin fields are the only part we do not control: drop them.
            log.warning("plugin gossip fields refused (%s); publishing without them", exc)
            self.membership.update_local(self._clock(), extra={}, **changes)

    def _links(self) -> list[Link]:
        links = []
        for link in self.host.links.values():
            rtt = link.rtt.summary()
            if rtt.ewma_ms is None or rtt.p50_ms is None or rtt.p90_ms is None:
                continue
            tcp = link.tcp_rtt
            links.append(Link(
                peer=link.node_id, rtt_ewma_ms=rtt.ewma_ms, rtt_p50_ms=rtt.p50_ms,
                rtt_p90_ms=rtt.p90_ms, bandwidth=link.bandwidth.bytes_per_s,
                bandwidth_measured_at=link.bandwidth.measured_at,
                rtt_ms=None if tcp is None else tcp.rtt_ms,
                rttvar_ms=None if tcp is None else tcp.rttvar_ms,
            ))
        return links[: self.config.max_links]

    def _send(self, outgoing: Outgoing) -> None:
        for node_id, message in outgoing:
            link = self.host.links.get(node_id)
            if link is not None and not link.closed:
                link.io.submit(message)

    def _drain_events(self) -> None:
        for event in self.membership.drain_events():
            member = self.membership.view().get(event.node_id)
            if member is not None and member.record.name:
                self._names[event.node_id] = member.record.name
            name = self._names.get(event.node_id, event.node_id[:8])
            self.host.record(event.kind, f"{name} ({event.node_id[:8]})")
            if member is None:
                self._names.pop(event.node_id, None)
                self.host.member_gone(event.node_id)

    # ------------------------------------------------------------ from links

    def link_up(self, link: PeerLink) -> None:
        self._send(self.membership.link_up(link.node_id, self._clock()))
        self._drain_events()

    def link_down(self, link: PeerLink) -> None:
        if link.peer_left:
            self._send(self.membership.left(link.node_id, self._clock()))
        else:
            self._send(self.membership.link_down(link.node_id, self._clock()))
        self._drain_events()

    def receive(self, link: PeerLink, message: GossipMessage) -> None:
        self._send(self.membership.receive(link.node_id, message, self._clock()))

    # ------------------------------------------------------------ for status

    def members(self) -> dict[str, Member]:
        return {k: v for k, v in self.membership.view().items() if k != self.node_id}

    def links_of(self, node_id: str) -> tuple[Link, ...]:
        member = self.membership.view().get(node_id)
        return member.links if member else ()
