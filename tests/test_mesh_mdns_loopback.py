"""Zero-config on one machine: agents on the loopback interface find each other by mDNS."""

from __future__ import annotations

import secrets

from gleam.peer.localmesh import wait_for


def _peers(agent) -> dict[str, dict]:
    return {p["id"]: p for p in (agent.try_status() or {"peers": []})["peers"]}


def test_agents_discover_authenticate_and_show_foreign(process_mesh, mesh_key):
    a = process_mesh.start("alpha", mesh_key=mesh_key, mdns=True)
    b = process_mesh.start("beta", mesh_key=mesh_key, mdns=True)
    x = process_mesh.start("xeno", mesh_key=secrets.token_bytes(32), mdns=True)
    # No --peer anywhere: mDNS on lo is the only way they learn of each other.
    wait_for(lambda: b.node_id in a.authenticated_peers() and a.node_id in b.authenticated_peers(),
             20, "alpha and beta to discover and authenticate each other")

    def xeno_is_foreign() -> bool:
        seen = _peers(a).get(x.node_id)
        return bool(seen and seen["foreign"] and seen["state"] == "foreign")

    wait_for(xeno_is_foreign, 20, "alpha to list xeno as foreign")
    assert x.node_id not in a.authenticated_peers()
    assert not x.authenticated_peers()  # never trusted, never connected beyond discovery
    assert "refused" not in {e["kind"] for e in a.status()["events"]}  # it never even dialled
    entry = _peers(a)[b.node_id]
    assert entry["gpus"] and entry["gpus"][0]["backend"] == "host"
