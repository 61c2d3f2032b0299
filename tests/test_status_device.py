"""The status view shows the served device as programs see it, and measured RTTs."""

from __future__ import annotations

import json
import re

from gleam.peer.localmesh import wait_for
from gleam.peer.tui import render_text
from tests.cuda_mesh import HOLD_MIB, host_mesh, start_holder


def _host_gpu(doc: dict) -> dict:
    return next(g for g in doc["gpus"] if g["backend"] == "host")


def _peer(doc: dict, name: str) -> dict:
    return next(p for p in doc["peers"] if p["name"] == name)


def test_memory_is_the_served_devices_and_used_comes_from_sessions(tmp_path):
    """The host device reports its memory limit to programs (cuDeviceTotalMem); the
    status shows that total, not the machine's memory, and the memory its
    sessions hold as used, on the server and in the client's view of it."""
    with host_mesh(tmp_path) as (client, server):
        holder = start_holder(client)
        try:
            total = json.loads(holder.stdout.readline())["total"]
            held = HOLD_MIB << 20

            def holding(doc: dict) -> bool:
                gpu = _host_gpu(doc)
                return gpu["memory_total"] == total and gpu["memory_used"] >= held

            wait_for(lambda: holding(server.status()), 20, "the server to count the memory")
            wait_for(lambda: holding({"gpus": _peer(client.status(), "server")["gpus"]}), 20,
                     "the client to hear the server's memory")
            text = render_text(client.status(), width=120)
            assert f"{HOLD_MIB}M/{total / 2**30:.0f}G" in text  # what the session holds
            holder.communicate("0\n", timeout=60)
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.communicate()
        assert holder.returncode == 0
        wait_for(lambda: _host_gpu(server.status())["memory_used"] == 0, 20,
                 "the memory to be free once the session ended")


def test_loopback_rtt_is_measured_and_shown_in_microseconds(tmp_path):
    with host_mesh(tmp_path) as (client, _server):
        doc = wait_for(lambda: (d := client.status()) and _peer(d, "server")["rtt_ms"] and d,
                       20, "a measured RTT")
        rtt = _peer(doc, "server")["rtt_ms"]
        assert rtt > 0
        row = next(line for line in render_text(doc, width=120).splitlines()
                   if line.startswith("│ server"))
        assert "0.00 ms" not in row
        shown = re.search(r"(\d+) µs|<1 µs|(\d+\.\d+) ms", row)
        assert shown is not None, row
