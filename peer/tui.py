"""The status view: a pure function from a status document to rich renderables.

The agent's live view (``gleam-peer up``) and ``gleam-peer status [--watch]``
render the same document (``Agent.snapshot()``, also ``status --json``), so
what a user sees on either terminal is the same, and tests can pin it as
text at a fixed width.
"""

from __future__ import annotations

import io
import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from gleam.peer.units import bits_text, bytes_text, rtt_text

STATE_STYLES = {
    "alive": "green", "connected": "green", "suspect": "yellow", "connecting": "yellow",
    "dead": "red", "refused": "red", "unreachable": "red", "foreign": "magenta",
}


def _size(value: float, digits: int) -> str:
    """Device memory in a few characters: 0, MiB below a GiB (what a session
    holds is often that small), else GiB with ``digits`` decimals."""
    if not value:
        return "0"
    if value < 2**30:
        return f"{value / 2**20:.0f}M"
    return f"{value / 2**30:.{digits}f}G"


def _gpu_cell(gpus: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(device, utilization, memory) cells for a peer's GPU list."""
    if not gpus:
        return "-", "-", "-"
    names, utils, mems = [], [], []
    for gpu in gpus:
        name = gpu.get("name", "?")
        if gpu.get("backend") == "host":
            speed = gpu.get("gflops")
            name = f"host {speed:.1f} GFLOP/s" if speed else "host"
        names.append(name)
        utils.append(f"{gpu.get('utilization', 0):.0f}%")
        mems.append(f"{_size(gpu.get('memory_used') or 0, 1)}/"
                    f"{_size(gpu.get('memory_total') or 0, 0)}")
    return "\n".join(names), "\n".join(utils), "\n".join(mems)


def serves_text(doc: dict[str, Any]) -> str:
    """What the agent serves to CUDA programs, in the words of the header.

    The serving backend comes from the cuda section (absent when CUDA forwarding
    is off); the host device's speed is the CPU's measured rate, labelled as such.
    """
    cuda = doc.get("cuda")
    serving = cuda.get("backend") if isinstance(cuda, dict) else None
    if serving == "cuda":
        return "serves CUDA on its GPU"
    if serving == "host":
        speeds = [g.get("gflops") for g in doc.get("gpus") or []
                  if g.get("backend") == "host" and g.get("gflops")]
        speed = f", CPU {speeds[0]:.1f} GFLOP/s" if speeds else ""
        return f"serves CUDA on the host device{speed}"
    return "serves no CUDA"


def _header(doc: dict[str, Any]) -> Text:
    node = doc.get("node", {})
    return Text.assemble(
        ("gleam ", "bold"),
        (f"{node.get('name', '?')} ", "bold cyan"),
        f"id {str(node.get('id', '?'))[:8]}  port {node.get('port')}  "
        f"mesh {node.get('mesh_id', '?')}  v{node.get('version', '?')}  "
        f"{serves_text(doc)}",
    )


def _peers(doc: dict[str, Any], compact: bool) -> Table:
    table = Table(title="peers", expand=True, title_justify="left")
    wide = () if compact else ("address",)
    table.add_column("name", overflow="fold", min_width=8)
    for column in wide:
        table.add_column(column, no_wrap=True)
    table.add_column("GPU", overflow="fold", min_width=10)
    numbers = ("util", "memory", "RTT", "bandwidth", "state") if compact else (
        "util", "memory", "sess", "RTT", "bandwidth", "state")
    for column in numbers:
        table.add_column(column, no_wrap=column in ("util", "sess", "state", "memory"),
                         overflow="fold")
    if not compact:
        table.add_column("trust", no_wrap=True)
    peers = doc.get("peers", [])
    for peer in peers:
        state = str(peer.get("state", "?"))
        device, util, memory = _gpu_cell(peer.get("gpus") or [])
        trust = "foreign" if peer.get("foreign") else (
            "trusted" if peer.get("authenticated") else "untrusted")
        cells: list[Any] = [peer.get("name") or (peer.get("id") or "?")[:8]]
        if not compact:
            cells.append(peer.get("address") or "-")
        cells += [device, util, memory]
        if not compact:
            cells.append(str(peer.get("sessions", 0)))
        cells += [
            rtt_text(peer.get("rtt_ms")),
            bits_text(peer.get("bandwidth_bps")),
            Text(state, style=STATE_STYLES.get(state, "")),
        ]
        if not compact:
            cells.append(trust)
        table.add_row(*cells)
    if not peers:
        table.add_row("(no peers yet)", *[""] * (len(table.columns) - 1))
    return table


def _sessions(doc: dict[str, Any], compact: bool = False) -> Table:
    table = Table(title="sessions", expand=True, title_justify="left")
    extra = ("moves",) if compact else ("journal", "moves")
    for column in ("id", "role", "peer", "calls", "bytes", "saved", "cache hits", *extra):
        table.add_column(column, no_wrap=True, ratio=2 if column == "peer" else None)
    sessions = doc.get("sessions", [])
    for s in sessions:
        # Client sessions carry the blob cache's hit rate (bytes referenced / cacheable bytes).
        rate, hits = s.get("hit_rate"), s.get("cache_hits")
        shown = f"{rate:.0%}" if rate is not None else "-" if hits is None else str(hits)
        saved = s.get("bytes_saved")
        table.add_row(
            str(s.get("id", "?"))[:8], s.get("role", "?"), s.get("peer", "?"),
            f"{s.get('calls', 0):,}", bytes_text(s.get("bytes")),
            bytes_text(saved) if saved else "-", shown, *_consistency(s)[-len(extra):],
        )
    if not sessions:
        table.add_row("(none)", *[""] * (len(table.columns) - 1))
    return table


def _consistency(s: dict[str, Any]) -> tuple[str, str]:
    """A client session's journal (size, checkpoints) and moves: migrations/failovers
    (docs/consistency.md)."""
    if "journal_bytes" not in s:
        return "-", "-"
    journal = (f"{bytes_text(s['journal_bytes'])}, {s.get('checkpoints', 0)} ckpt"
               if s.get("movable") else "not movable")
    return journal, f"{s.get('migrations', 0)}/{s.get('failovers', 0)}"


def _when(at: float | None, now: float | None) -> str:
    """A past moment: relative to ``now`` when given, else the local clock time."""
    if not at:
        return ""
    return f"-{now - at:.0f}s" if now is not None else time.strftime("%H:%M:%S",
                                                                      time.localtime(at))


def _finished_cells(s: dict[str, Any], now: float | None) -> dict[str, str]:
    seconds, saved = s.get("seconds"), s.get("bytes_saved")
    return {
        "id": str(s.get("id", "?"))[:8], "role": str(s.get("role", "?")),
        "peer": str(s.get("peer") or "?"), "program": str(s.get("program") or "-")[:16],
        "ended": _when(s.get("ended"), now),
        "ran": "-" if seconds is None else f"{seconds:.2f} s",
        "calls": f"{s.get('calls', 0):,}", "round trips": f"{s.get('round_trips', 0):,}",
        "sent": bytes_text(s.get("bytes_to_server")), "saved": bytes_text(saved) if saved else "-",
        "end": s.get("end_reason") or "ok",
    }


def _finished(doc: dict[str, Any], compact: bool, now: float | None) -> Table | None:
    """The last sessions that ended, newest first; None when there are none."""
    rows = doc.get("finished") or []
    if not rows:
        return None
    columns = ("id", "peer", "ran", "calls", "sent", "end") if compact else (
        "id", "role", "peer", "program", "ended", "ran", "calls", "round trips", "sent",
        "saved", "end")
    table = Table(title="finished sessions", expand=True, title_justify="left")
    for column in columns:
        last = column == "end"  # why it ended: the one column that may wrap
        table.add_column(column, no_wrap=not last, overflow="fold" if last else "ellipsis",
                         ratio=1 if last else None, min_width=8 if last else None)
    for s in reversed(rows[-8:]):
        cells = _finished_cells(s, now)
        table.add_row(*(cells[c] for c in columns))
    return table


def _events(doc: dict[str, Any], now: float | None) -> Table:
    table = Table(title="recent events", expand=True, title_justify="left", show_header=False)
    table.add_column("when", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("text", overflow="fold", ratio=1)
    for event in doc.get("events", [])[-8:]:
        table.add_row(_when(event.get("at"), now), event.get("kind", ""), event.get("text", ""))
    return table


COMPACT_BELOW = 110
# Sections of the document the view lays out itself; any other dict section
# (a plugin's, through gleam_status) gets a generic key/value table.
CORE_SECTIONS = ("node", "devices", "gpus", "peers", "links", "sessions", "finished", "plugins",
                 "events")


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(_short(v) for v in value[:8]) + (" ..." if len(value) > 8 else "")
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in list(value.items())[:6])
    return str(value)


def _plugin_sections(doc: dict[str, Any]) -> list[Table]:
    tables = []
    for key, section in doc.items():
        if key in CORE_SECTIONS or not isinstance(section, dict) or not section:
            continue
        table = Table(title=key, expand=True, title_justify="left", show_header=False)
        table.add_column("field", no_wrap=True)
        table.add_column("value", overflow="fold", ratio=1)
        for field, value in list(section.items())[:12]:
            table.add_row(str(field), _short(value))
        tables.append(table)
    return tables


def render_status(
    doc: dict[str, Any], *, now: float | None = None, width: int = 120
) -> RenderableType:
    """The whole status view for one status document, laid out for ``width`` columns.

    ``now`` shows event times relative to it (for tests and for watching
    from another clock); without it they are local wall-clock times.
    Narrow terminals get a compact peers table (no address or trust column) and
    sessions table (no journal column).
    """
    compact = width < COMPACT_BELOW
    finished = _finished(doc, compact, now)
    return Group(_header(doc), _peers(doc, compact), _sessions(doc, compact),
                 *([finished] if finished is not None else []), *_plugin_sections(doc),
                 _events(doc, now))


def render_text(doc: dict[str, Any], width: int = 120, now: float | None = None) -> str:
    """The view as plain text at a fixed width (golden tests, logs)."""
    console = Console(width=width, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render_status(doc, now=now, width=width))
    return console.file.getvalue()  # type: ignore[attr-defined]
