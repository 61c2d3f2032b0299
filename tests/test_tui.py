"""The status view is a pure function of the status document: pinned as text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gleam.peer.tui import render_text, serves_text

GOLDEN = Path(__file__).parent / "golden"
NOW = 1_800_000_000.0

DOC = {
    "node": {"id": "a1b2c3d4" * 4, "name": "desk", "port": 47470, "version": "0.1.0",
             "mesh_id": "0123456789abcdef"},
    "devices": {"kind": "cuda", "why": None},
    "cuda": {"backend": "cuda", "note": None, "client_sessions": 1, "served_sessions": 0,
             "max_sessions": 8},
    "gpus": [],
    "peers": [
        {"id": "b" * 32, "name": "laptop", "address": "10.0.0.7:47470", "authenticated": True,
         "state": "alive", "foreign": False, "rtt_ms": 1.234, "bandwidth_bps": 94_300_000,
         "sessions": 1, "gpus": [{"name": "host", "backend": "host", "gflops": 21.5,
                                  "utilization": 12.0, "memory_used": 0,
                                  "memory_total": 16 << 30}]},
        {"id": "c" * 32, "name": "tower", "address": "10.0.0.9:47470", "authenticated": True,
         "state": "suspect", "foreign": False, "rtt_ms": None, "bandwidth_bps": 941_000_000,
         "sessions": 0, "gpus": [{"name": "NVIDIA GeForce RTX 4090", "backend": "cuda",
                                  "utilization": 87.0, "memory_used": 20 << 30,
                                  "memory_total": 24 << 30}]},
        {"id": "d" * 32, "name": "neighbour", "address": "10.0.0.23:47470",
         "authenticated": False, "state": "foreign", "foreign": True, "rtt_ms": None,
         "bandwidth_bps": None, "sessions": 0, "gpus": []},
    ],
    "sessions": [
        {"id": "5e55" * 8, "role": "client", "peer": "tower", "calls": 123456,
         "bytes": 3 << 30, "cache_hits": 7},
        {"id": "6a7b" * 8, "role": "client", "peer": "laptop", "calls": 420,
         "bytes": 5 << 20, "hit_rate": 0.5, "bytes_saved": 1 << 20, "journal_bytes": 3 << 20,
         "checkpoints": 2, "movable": True, "migrations": 1, "failovers": 1},
    ],
    "finished": [
        {"id": "7c8d" * 8, "role": "served", "peer": "laptop", "program": "python3",
         "ended": NOW - 40, "seconds": 0.2, "calls": 12, "round_trips": 3,
         "bytes_to_server": 4096, "bytes_saved": 0,
         "end_reason": "lost the link to laptop: connection reset"},
        {"id": "9e0f" * 8, "role": "client", "peer": "tower", "program": "mlp_infer",
         "ended": NOW - 12, "seconds": 1.64, "calls": 178, "round_trips": 22,
         "bytes_to_server": 640_000, "bytes_saved": 1_250_000, "end_reason": None},
    ],
    "events": [
        {"at": NOW - 65, "kind": "joined", "text": "laptop at 10.0.0.7:47470"},
        {"at": NOW - 3, "kind": "suspect", "text": "tower stopped answering"},
    ],
}


@pytest.mark.parametrize("width", [120, 80])
def test_status_view_golden(width):
    text = render_text(DOC, width=width, now=NOW)
    path = GOLDEN / f"status_{width}.txt"
    if os.environ.get("GLEAM_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_empty_mesh_renders():
    text = render_text({"node": {"name": "solo"}}, width=100)
    assert "(no peers yet)" in text and "(none)" in text


def test_plugin_sections_render_generically():
    doc = {**DOC, "batch_tuner": {"policy": "ppo", "global_batch": 512, "lr": 0.0125,
                                  "batches": [64, 128, 256, 64]}}
    text = render_text(doc, width=120, now=NOW)
    assert "batch_tuner" in text and "global_batch" in text and "64, 128, 256, 64" in text
    assert text.startswith(render_text(DOC, width=120, now=NOW).split("recent events")[0][:200])


@pytest.mark.parametrize(
    ("cuda", "header"),
    [
        ({"backend": "cuda"}, "serves CUDA on its GPU"),
        ({"backend": "host"}, "serves CUDA on the host device, CPU 21.5 GFLOP/s"),
        ({"backend": "none"}, "serves no CUDA"),
        (None, "serves no CUDA"),  # the cuda-forwarding plugin is disabled
    ],
)
def test_header_names_what_the_agent_serves(cuda, header):
    doc = {"node": {"name": "n"}, "gpus": [{"name": "host", "backend": "host", "gflops": 21.5}]}
    if cuda is not None:
        doc["cuda"] = cuda
    assert serves_text(doc) == header
    assert header in render_text(doc, width=200).splitlines()[0]


def _peer_cell(peer: dict, column: str) -> str:
    """One cell of a one-peer table, by its column's title."""
    doc = {"node": {"name": "n"}, "peers": [{"name": "p", "state": "alive", **peer}]}
    lines = render_text(doc, width=120).splitlines()
    titles = [t.strip() for t in next(line for line in lines if "┃ name" in line).split("┃")]
    cells = [c.strip() for c in next(line for line in lines if line.startswith("│ p ")).split("│")]
    return cells[titles.index(column)]


@pytest.mark.parametrize(("rtt_ms", "shown"), [
    (0.031, "31 µs"),  # loopback: µs, where two decimals of ms read 0.03 or 0.00
    (0.0004, "<1 µs"),  # measured, however small: never 0
    (0.9996, "1.00 ms"), (1.234, "1.23 ms"), (12.34, "12.3 ms"),
    (None, "-"),  # nothing measured yet
])
def test_rtt_has_the_precision_its_size_needs(rtt_ms, shown):
    assert _peer_cell({"rtt_ms": rtt_ms}, "RTT") == shown


@pytest.mark.parametrize(("used", "total", "shown"), [
    (48 << 20, 8 << 30, "48M/8G"),  # a session's memory on the host device's 8 GiB
    (0, 8 << 30, "0/8G"), (20 << 30, 24 << 30, "20.0G/24G"),
])
def test_device_memory_shows_what_sessions_hold(used, total, shown):
    gpu = {"name": "host", "backend": "host", "memory_used": used, "memory_total": total}
    assert _peer_cell({"gpus": [gpu]}, "memory") == shown
