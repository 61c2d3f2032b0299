"""Show or clear the running agent's blob cache (docs/cache.md).

`gleam-peer cache` lists the tiers (RAM and disk, each probation and protected), their
sizes and caps, hit rates and the admission counters; `--entries` adds every
blob. `gleam-peer cache clear` drops every cached blob from both tiers.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "show or clear this agent's blob cache"
DESCRIPTION = __doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=["show", "clear"], default="show",
                        help="show (the default) or clear")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="agent state directory; default $GLEAM_STATE_DIR or "
                        "~/.local/state/gleam")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--entries", action="store_true", help="list every cached blob")


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / (1 << 20):.1f} MiB"


def render(doc: dict[str, Any]) -> str:
    store = doc.get("store")
    lines = [f"content-addressed: copies >= {doc['policy']['h2d_min']:,} B, "
             f"images >= {doc['policy']['image_min']:,} B"]
    if store is None:
        lines.append("this agent serves no CUDA, so it stores no blobs")
    else:
        e, b = store["entries"], store["bytes"]
        hit = store["hit_rate"]
        lines += [
            f"RAM probation  {e['probation']:6d} blobs  {_mib(b['probation'])} of "
            f"{_mib(store['probation_room'])}",
            f"RAM protected  {e['protected']:6d} blobs  {_mib(b['protected'])} of "
            f"{_mib(store['ram_cap'] - store['probation_cap'])}",
            f"disk probation {e['disk_probation']:6d} blobs  {_mib(b['disk_probation'])} "
            f"(logs {_mib(store.get('disk_probation_space', 0))}) of "
            f"{_mib(store['disk_probation_room'])}  ({store['root']})",
            f"disk protected {e['disk']:6d} blobs  {_mib(b['disk'])} of "
            f"{_mib(store['disk_protected_cap'])}",
            f"lookups: {store['hits_ram']} RAM hits, {store['hits_disk']} disk hits, "
            f"{store['misses']} misses (hit rate {'-' if hit is None else f'{hit:.0%}'}); "
            f"{store['refused']} refused (bad digest), {store['torn']} torn files dropped, "
            f"{store['evicted']} evicted, {store['writes_dropped']} disk writes dropped "
            f"(writer behind)",
            f"serving lanes: {store.get('shelf_lane_hits', 0)} references resolved natively, "
            f"{store.get('shelf_lane_offers', 0)} payloads offered, "
            f"{store.get('shelf_offers_dropped', 0)} dropped (store behind)",
            f"claims: {store.get('claims_verified', 0)} checked at first use "
            f"({_mib(store.get('claims_verified_bytes', 0))}), "
            f"{store.get('claims_refused', 0)} refused (bytes did not match the claim), "
            f"{store.get('disk_claims_refused', 0)} more found false on disk",
            f"reuse: {store.get('spare_buffers_reused', 0)} buffers reused, "
            f"{store.get('spare_buffers', 0)} spare ({_mib(store.get('spare_bytes', 0))}); "
            f"{store.get('disk_spare_files', 0)} evicted files waiting to be overwritten",
        ]
    for node, n in doc.get("known", {}).items():
        lines.append(f"known to be held by {node}: {n} blobs")
    for row in doc.get("entries", []):
        lines.append(f"  {row['digest'][:16]}  {row['size']:>12,} B  {','.join(row['tiers'])}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from gleam.peer.control import request
    from gleam.peer.state import StateDir

    state = StateDir(args.state_dir)
    if args.action == "clear":
        doc = request(state.control_socket, "cache_clear")
        print(json.dumps(doc) if args.json else f"cleared {doc['cleared']} blobs")
        return 0
    doc = request(state.control_socket, "cache", {"entries": args.entries})
    print(json.dumps(doc, indent=2) if args.json else render(doc))
    return 0
