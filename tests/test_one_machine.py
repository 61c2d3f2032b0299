"""The README's one-machine recipe, as written: two agents, two state directories,
discovery on lo. They get two names, show each other where they listen, and a
killed one leaves the other's view. Also: `up` says when it starts a new mesh."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gleam.peer import control
from gleam.peer.localmesh import wait_for
from gleam.peer.state import StateDir

GLEAM = [sys.executable, "-m", "gleam.peer"]


def gleam(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GLEAM, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def agents_up(*commands: list[str], logs: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``gleam-peer up ...`` for each command, stopped (SIGTERM, then SIGKILL) at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, command in enumerate(commands):
            with open(logs / f"up{i}.log", "wb") as log:
                procs.append(subprocess.Popen([*GLEAM, *command], stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT))
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def status(state: Path) -> dict[str, Any] | None:
    try:
        return control.request(StateDir(state).control_socket, "status", timeout=10)  # type: ignore[no-any-return]
    except (control.AgentNotRunning, control.ControlError):
        return None


def peer_row(state: Path, node_id: str) -> dict[str, Any] | None:
    doc = status(state) or {"peers": []}
    return next((p for p in doc["peers"] if p["id"] == node_id), None)


def test_the_readme_recipe_gives_two_names_and_forgets_a_killed_peer(tmp_path: Path) -> None:
    g1, g2 = tmp_path / "g1", tmp_path / "g2"
    code = gleam("mesh", "show", "--state-dir", str(g1))
    assert code.returncode == 0, code.stderr
    imported = gleam("mesh", "import", "--state-dir", str(g2), code.stdout.strip())
    assert imported.returncode == 0, imported.stderr
    # As in the README, but port 0: another test's agents may hold 47471.
    common = ["--host", "127.0.0.1", "--port", "0", "--interface", "lo", "--no-tui"]
    with agents_up(["up", "--state-dir", str(g1), *common],
                   ["up", "--state-dir", str(g2), *common], logs=tmp_path) as (first, _):
        one = wait_for(lambda: status(g1), 30, "the first agent")["node"]
        two = wait_for(lambda: status(g2), 30, "the second agent")["node"]
        host = socket.gethostname()
        assert (one["name"], two["name"]) == (f"{host}-g1", f"{host}-g2")

        def linked(state: Path, other: dict[str, Any]) -> dict[str, Any] | None:
            row = peer_row(state, other["id"])
            return row if row and row.get("authenticated") else None

        seen_by_two = wait_for(lambda: linked(g2, one), 30, "the agents to link")
        seen_by_one = wait_for(lambda: linked(g1, two), 30, "the agents to link")
        assert seen_by_two["name"] == one["name"] and seen_by_one["name"] == two["name"]
        # One of the two links is incoming on each side: both show the listening port.
        assert seen_by_two["address"] == f"127.0.0.1:{one['port']}"
        assert seen_by_one["address"] == f"127.0.0.1:{two['port']}"
        # The names are kept for the next start.
        assert json.loads((g1 / "node.json").read_text())["name"] == one["name"]

        first.kill()  # SIGKILL: no goodbye, and zeroconf keeps its advert
        first.wait()
        # Gossip drops it after its suspect timeout (docs/gossip.md); the row that
        # discovery kept goes with it.
        # (90 s: a loaded machine stretches the suspect timeout's rounds)
        wait_for(lambda: status(g2) and peer_row(g2, one["id"]) is None, 90,
                 "the killed agent to leave the view")
    logs = "".join(p.read_text() for p in tmp_path.glob("up*.log"))
    assert "starts a new mesh" not in logs  # both had a key before they started
    assert "Traceback" not in logs


def test_up_says_it_starts_a_new_mesh_and_how_to_join_one(tmp_path: Path) -> None:
    state = tmp_path / "fresh"
    with agents_up(["up", "--state-dir", str(state), "--host", "127.0.0.1", "--port", "0",
                    "--no-mdns", "--no-tui"], logs=tmp_path):
        wait_for(lambda: status(state), 30, "the agent")
    lines = [line for line in (tmp_path / "up0.log").read_text().splitlines()
             if "new mesh" in line]
    assert len(lines) == 1, lines
    assert "gleam-peer mesh show" in lines[0] and "gleam-peer mesh import CODE" in lines[0]
    assert str(state) in lines[0]
