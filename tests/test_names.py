"""Node names: chosen once and kept, unique on one machine, told apart across machines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from gleam.peer.addresses import PeerAddress
from gleam.peer.cuda.client.choose import NoServer, choose
from gleam.peer.localmesh import wait_for
from gleam.peer.names import (
    AmbiguousPeer,
    PeerNotFound,
    default_name,
    display_names,
    resolve,
)
from gleam.peer.state import StateDir

from .conftest import AgentStarter, wait_until

A, B, C = "a0" * 16, "a1" * 16, "c0" * 16


# ---------------------------------------------------------------- the rule


def test_the_builtin_state_dir_is_the_host(tmp_path: Path) -> None:
    builtin = tmp_path / ".local" / "state" / "gleam"
    assert default_name("vm", builtin, builtin, A) == "vm"


def test_another_state_dir_adds_its_own_name(tmp_path: Path) -> None:
    builtin = tmp_path / "gleam"
    assert default_name("vm", tmp_path / "g1", builtin, A) == "vm-g1"
    assert default_name("vm", tmp_path / "g2", builtin, B) == "vm-g2"
    # Nothing usable in the directory's name: the node id tells them apart.
    assert default_name("vm", Path("/"), builtin, A) == "vm-a0a0a0"
    assert default_name("vm", tmp_path / "..", builtin, A) == "vm-a0a0a0"
    assert len(default_name("v" * 80, tmp_path / ("d" * 80), builtin, A)) <= 64


def test_the_name_is_kept_across_starts(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    state = StateDir(tmp_path / "g1")
    first = state.node_name()
    assert first.endswith("-g1")
    assert StateDir(tmp_path / "g1").node_name() == first
    assert json.loads((tmp_path / "g1" / "node.json").read_text())["name"] == first
    # --name renames the node, for this start and the next ones.
    assert state.node_name("desk") == "desk"
    assert StateDir(tmp_path / "g1").node_name() == "desk"
    # A node that takes a new id (a cloned disk) keeps its name.
    old_id = state.node_identity().node_id
    assert state.regenerate_node_id().node_id != old_id
    assert state.node_name() == "desk"


def test_a_node_json_of_an_older_version_gets_a_name(tmp_path: Path, monkeypatch) -> None:
    older = json.dumps({"node_id": A, "created": 1.0})
    (tmp_path / "node.json").write_text(older)
    state = StateDir(tmp_path)
    name = state.node_name()
    assert name and state.node_identity().node_id == A
    # One that cannot be written (full, read-only) still gets the same name: it is
    # derived again, and the write the agent cannot skip says what is wrong.
    (tmp_path / "node.json").write_text(older)

    def no_room(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gleam.peer.state.os.fsync", no_room)
    assert StateDir(tmp_path).node_name() == name
    assert "name" not in json.loads((tmp_path / "node.json").read_text())


# ---------------------------------------------------------------- display names


def test_a_unique_name_is_shown_as_it_is() -> None:
    assert display_names({A: "vm", B: "desk"}) == {A: "vm", B: "desk"}


def test_a_shared_name_gets_the_shortest_distinct_id_prefix() -> None:
    shown = display_names({A: "vm", B: "vm", C: "desk"})
    assert shown == {A: "vm#a0a0", B: "vm#a1a1", C: "desk"}
    close = {"abcd" + "0" * 28: "vm", "abcd" + "1" * 28: "vm"}
    assert sorted(display_names(close).values()) == ["vm#abcd0", "vm#abcd1"]


def test_resolve_takes_a_display_name_a_unique_name_or_an_id_prefix() -> None:
    names = {A: "vm", B: "vm", C: "desk"}
    assert resolve("vm#a1a1", names) == B
    assert resolve("desk", names) == C
    assert resolve("c0c0", names) == C
    with pytest.raises(AmbiguousPeer) as refused:
        resolve("vm", names)
    assert refused.value.candidates == ["vm#a0a0", "vm#a1a1"]
    assert "vm#a0a0, vm#a1a1" in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(AmbiguousPeer):
        resolve("a", names)  # a prefix of two ids
    with pytest.raises(PeerNotFound, match="nobody"):
        resolve("nobody", names)


# ---------------------------------------------------------------- in agents


async def test_two_nodes_called_vm_are_told_apart_everywhere(agents, mesh_key) -> None:
    """Two machines both named vm: every view shows vm#<id>, --peer vm is refused with
    both, --peer vm#<id> and an id prefix choose."""
    first = await agents.start("vm", mesh_key, backend="host")
    second = await agents.start("vm", mesh_key, backend="host",
                                peers=[PeerAddress("127.0.0.1", first.listen_port)])
    await wait_until(lambda: second.node_id in first.links and first.node_id in second.links)
    shown = first.names.shown()
    mine, theirs = shown[first.node_id], shown[second.node_id]
    assert mine != theirs and mine.startswith("vm#") and theirs.startswith("vm#")
    assert second.names.shown() == shown  # both agents agree

    doc = first.snapshot()
    assert doc["node"]["name"] == mine and doc["node"]["node_name"] == "vm"
    row = next(p for p in doc["peers"] if p["id"] == second.node_id)
    assert row["name"] == theirs and row["node_name"] == "vm"
    assert first.links[second.node_id].name == theirs

    with pytest.raises(NoServer) as refused:
        choose(first, "vm", "host")
    assert mine in str(refused.value) and theirs in str(refused.value)
    assert choose(first, theirs, "host").link is first.links[second.node_id]
    assert choose(first, theirs, "host").name == theirs
    assert choose(first, second.node_id[:10], "host").name == theirs
    assert choose(first, mine, "host").link is None  # this agent itself


async def test_names_become_plain_when_the_twin_leaves(agents, state_factory, mesh_key) -> None:
    first = await agents.start("vm", mesh_key)
    async with trio.open_nursery() as nursery:
        twin = await AgentStarter(nursery, state_factory).start(
            "vm", mesh_key, peers=[PeerAddress("127.0.0.1", first.listen_port)])
        await wait_until(lambda: twin.node_id in first.links)
        assert first.display_name.startswith("vm#")
        nursery.cancel_scope.cancel()  # the twin says goodbye as it stops
    await wait_until(lambda: first.display_name == "vm", timeout=20)


def test_run_peer_refuses_a_name_two_nodes_share(process_mesh, mesh_key) -> None:
    a = process_mesh.start("vm-a", mesh_key=mesh_key, extra=["--name", "vm"])
    b = process_mesh.start("vm-b", mesh_key=mesh_key, extra=["--name", "vm"],
                           peers=[f"127.0.0.1:{a.port}"])
    wait_for(lambda: b.node_id in a.authenticated_peers(), 30, "the two vms to link")
    shown = {p["id"]: p["name"] for p in a.status()["peers"]}
    theirs = shown[b.node_id]
    assert theirs.startswith("vm#") and a.status()["node"]["name"].startswith("vm#")

    def run(peer: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(a.state.path),
             "--peer", peer, "--", "sh", "-c", 'echo "$GLEAM_CUDA_PEER"'],
            capture_output=True, text=True, timeout=60, env={**os.environ})

    refused = run("vm")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert theirs in refused.stderr and a.status()["node"]["name"] in refused.stderr
    chosen = run(theirs)  # the display name the view shows is accepted
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.strip() == b.node_id
