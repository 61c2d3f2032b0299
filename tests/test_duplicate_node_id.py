"""A copied state directory: two agents start with the same node id; the younger
regenerates its id with a warning, and the two then meet as distinct peers."""

from __future__ import annotations

import shutil
import time

from gleam.peer.localmesh import wait_for
from gleam.peer.state import StateDir


def test_the_younger_of_two_clones_takes_a_new_id(process_mesh, mesh_key):
    old = process_mesh.start("original", mesh_key=mesh_key, mdns=True)
    original_id = old.node_id
    clone_dir = process_mesh.root / "clone"
    clone_dir.mkdir()
    for name in ("node.json", "mesh.key"):
        shutil.copy2(old.state.path / name, clone_dir / name)
    assert StateDir(clone_dir).node_identity().node_id == original_id
    time.sleep(0.05)  # the clone must start measurably later than the original
    clone = process_mesh.start("clone", mdns=True)

    wait_for(lambda: clone.node_id != original_id, 30, "the clone to regenerate its node id")
    assert old.node_id == original_id  # the older one keeps its id
    assert "takes a new id" in clone.log_text()
    wait_for(lambda: clone.node_id in old.authenticated_peers()
             and original_id in clone.authenticated_peers(), 30,
             "the two to meet as distinct peers")
