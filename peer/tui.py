"""Rendering the status document with rich: a pure function of the snapshot."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def render_status(doc: dict[str, Any]) -> RenderableType:
    """The whole status view for one status document (no I/O, no clock)."""
    node = doc.get("node", {})
    header = Text.assemble(
        ("gleam ", "bold"),
        (f"{node.get('name', '?')} ", "bold cyan"),
        f"id {str(node.get('id', '?'))[:8]}  port {node.get('port')}  "
        f"mesh {node.get('mesh_id', '?')}  v{node.get('version', '?')}",
    )
    peers = Table(title="peers", expand=True, title_justify="left")
    for column in ("name", "id", "address", "state", "auth", "rtt", "error"):
        peers.add_column(column, overflow="fold")
    for peer in doc.get("peers", []):
        state = peer.get("state", "?")
        style = "green" if state == "connected" else "yellow" if state == "connecting" else "red"
        peers.add_row(
            peer.get("name") or "-",
            (peer.get("id") or "-")[:8],
            peer.get("address") or "-",
            Text(state, style=style),
            "yes" if peer.get("authenticated") else "no",
            _fmt_ms(peer.get("rtt_ms")),
            peer.get("error") or "",
        )
    if not doc.get("peers"):
        peers.add_row("(no peers yet)", "", "", "", "", "", "")
    events = Table(title="recent events", expand=True, title_justify="left", show_header=False)
    events.add_column("kind", width=9)
    events.add_column("text", overflow="fold")
    for event in doc.get("events", [])[-8:]:
        events.add_row(event.get("kind", ""), event.get("text", ""))
    return Group(header, peers, events)
