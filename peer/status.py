"""The status document: what ``gleam-peer status --json`` prints and the view renders.

Built from ``StatusInputs``, which the agent reads from its live state in one
pass on the Trio thread, so the document is a consistent snapshot; everything
in it is plain data. This module knows nothing of the agent: a test builds the
inputs itself.
Peers are merged by node id from every source that knows of them: the
gossip view (members, their GPUs and load), our own links (RTT,
bandwidth), static ``--peer`` targets (connection errors) and discovery
(foreign meshes, peers not yet connected). Each is shown by its display name
(``name``, unique in the document; peer/names.py), beside the name it gave
itself (``node_name``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gleam.peer.meshview import MeshGossip, gpu_dict
from gleam.peer.protocol import PROTOCOL_VERSION, Role

if TYPE_CHECKING:
    from gleam.peer.gpus import GpuInventory
    from gleam.peer.link import PeerLink
    from gleam.peer.plugin_info import PluginInfo

CORE_KEYS = ("node", "devices", "gpus", "peers", "links", "sessions", "finished", "plugins",
             "events")
FINISHED_KEPT = 16  # finished sessions the document shows, the last by their end


class TargetRow(Protocol):
    """A static ``--peer`` target as the document shows it (the agent's ``DialTarget``)."""

    @property
    def address(self) -> object: ...
    @property
    def state(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def node_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...


class EventRow(Protocol):
    """One of the agent's recent events (its ``AgentEvent``)."""

    @property
    def at(self) -> float: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class StatusInputs:
    """Everything the document is made of, as the agent holds it now."""

    node_id: str
    name: str
    names: Mapping[str, str]  # node id -> display name (peer/names.py), us included
    port: int | None
    mesh_id: str
    started_at: float  # time.time()
    state_dir: Path
    mesh: MeshGossip
    inventory: GpuInventory
    links: Mapping[str, PeerLink]
    targets: Sequence[TargetRow]
    adverts: Sequence[Mapping[str, Any]]  # discovered peers: id, name, address, foreign
    sessions: list[dict[str, Any]]
    plugins: Sequence[PluginInfo]
    events: Iterable[EventRow]  # oldest first
    finished: Sequence[dict[str, Any]] = ()  # sessions that ended, any order


def _bits(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else round(bytes_per_s * 8)


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _version() -> str:
    from gleam.peer import __version__

    return __version__


def _rtt_fields(link: PeerLink) -> dict[str, Any]:
    """The link's RTT is the kernel's (``tcp``); the application ping is its own
    figure, and stands in only where the kernel has none."""
    ping = link.rtt.summary()
    tcp = link.tcp_rtt
    return {
        "rtt_ms": link.rtt_ms,
        "rtt_source": "tcp" if tcp is not None else ("ping" if ping.samples else None),
        "rtt_srtt_ms": None if tcp is None else tcp.srtt_ms,
        "rtt_var_ms": None if tcp is None else tcp.rttvar_ms,
        "ping_ms": ping.ewma_ms,
        "ping_p50_ms": ping.p50_ms,
        "ping_p90_ms": ping.p90_ms,
        "ping_samples": ping.samples,
    }


def _link_fields(link: PeerLink) -> dict[str, Any]:
    return {
        "address": link.address,
        "authenticated": True,
        "direction": "outgoing" if link.role is Role.INITIATOR else "incoming",
        **_rtt_fields(link),
        "bandwidth_bps": _bits(link.bandwidth.bytes_per_s),
        "bandwidth_age_s": _rounded(link.bandwidth.age()),
        "capabilities": list(link.peer.capabilities),
        "bytes_sent": link.bytes_sent,
        "bytes_received": link.bytes_received,
    }


def _blank(node_id: str | None) -> dict[str, Any]:
    return {
        "id": node_id, "name": None, "address": None, "authenticated": False,
        "state": "unknown", "foreign": False, "rtt_ms": None, "bandwidth_bps": None,
        "gpus": [], "sessions": 0, "queue_depth": 0, "via": None,
    }


def _peers(status: StatusInputs) -> list[dict[str, Any]]:
    peers: dict[str, dict[str, Any]] = {}
    for node_id, member in status.mesh.members().items():
        entry = peers.setdefault(node_id, _blank(node_id))
        record = member.record
        entry.update(
            name=record.name or None, state=member.status,
            gpus=[gpu_dict(g) for g in record.gpus], sessions=record.sessions,
            queue_depth=record.queue_depth, extra=record.to_wire()["extra"], via="gossip",
            incarnation=member.incarnation,
        )
    for node_id, link in status.links.items():
        entry = peers.setdefault(node_id, _blank(node_id))
        entry.update(_link_fields(link), via="link")
        entry["name"] = entry["name"] or link.peer.name
        if entry["state"] == "unknown":
            entry["state"] = "connected"
    for target in status.targets:
        if target.node_id in peers:
            continue
        entry = peers.setdefault(target.node_id or str(target.address), _blank(target.node_id))
        entry.update(name=target.name, address=str(target.address), state=target.state,
                     error=target.error, via="static")
    for advert in status.adverts:
        known = peers.get(advert["id"])
        if known is not None:
            known["address"] = known["address"] or advert["address"]
            continue
        entry = peers.setdefault(advert["id"], _blank(advert["id"]))
        entry.update(name=advert["name"], address=advert["address"],
                     state="foreign" if advert["foreign"] else "discovered",
                     foreign=advert["foreign"], via="mdns")
    for entry in peers.values():
        entry["node_name"] = entry["name"]
        entry["name"] = status.names.get(entry["id"] or "", entry["name"])
    return sorted(peers.values(), key=lambda p: (p["foreign"], p["name"] or "", p["id"] or ""))


def _links(status: StatusInputs) -> list[dict[str, Any]]:
    rows = []
    for link in status.links.values():
        rows.append({
            "peer": link.node_id, "name": status.names.get(link.node_id, link.peer.name),
            **_rtt_fields(link),
            "bandwidth_bps": _bits(link.bandwidth.bytes_per_s),
            "bandwidth_age_s": _rounded(link.bandwidth.age()),
            "bandwidth_samples": link.bandwidth.samples,
        })
    return sorted(rows, key=lambda r: r["name"])


def last_finished(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last finished sessions, oldest first (plugins' lists merged by end time)."""
    def ended(row: dict[str, Any]) -> float:
        at = row.get("ended")
        return float(at) if isinstance(at, int | float) else 0.0

    return sorted(rows, key=ended)[-FINISHED_KEPT:]


def build_status(status: StatusInputs) -> dict[str, Any]:
    """The core of the status document (see docs/status.md for the schema)."""
    return {
        "node": {
            "id": status.node_id,
            "name": status.names.get(status.node_id, status.name),
            "node_name": status.name,
            "port": status.port,
            "version": _version(),
            "protocol": PROTOCOL_VERSION,
            "mesh_id": status.mesh_id,
            "uptime_s": round(time.time() - status.started_at, 1),
            "state_dir": str(status.state_dir),
            "incarnation": status.mesh.membership.incarnation,
        },
        # What the inventory found (NVML GPUs or the host device); what the agent
        # serves to CUDA programs is the cuda section's "backend".
        "devices": {"kind": status.inventory.backend, "why": status.inventory.why_host},
        "gpus": [gpu_dict(g) for g in status.mesh.gpus],
        "peers": _peers(status),
        "links": _links(status),
        "sessions": status.sessions,
        "finished": last_finished(status.finished),
        "plugins": [p.as_dict() for p in status.plugins],
        "events": [
            {"at": e.at, "kind": e.kind, "text": e.text} for e in list(status.events)[-20:]
        ],
    }


def node_names(doc: Mapping[str, Any]) -> dict[str, str]:
    """``{node_id: name}`` of the nodes a status document knows by name: the agent
    and every peer heard from (not those only seen advertised). The inverse of
    the display names, for resolving a name the user typed (peer/names.py)."""
    known = {p["id"]: p["node_name"] for p in doc.get("peers", ())
             if p.get("id") and p.get("node_name") and p.get("via") != "mdns"}
    node = doc.get("node") or {}
    if node.get("id"):
        known[node["id"]] = node.get("node_name") or node.get("name") or ""
    return known


def add_plugin_sections(
    doc: dict[str, Any], sections: Iterable[dict[str, Any] | None]
) -> dict[str, Any]:
    """Add the plugins' sections (the gleam_status hook's results) to ``doc``: the
    first plugin to name a key wins, and none may replace a core key."""
    for extra in sections:
        for key, value in (extra or {}).items():
            if key not in CORE_KEYS:
                doc.setdefault(key, value)
    return doc
