"""Move a running CUDA session to another server (docs/consistency.md).

`gleam-peer migrate SESSION --to NODE` asks this device's agent, which owns the
session, to move it at a safe point (no waiting call in flight): it opens the
session on NODE with the same virtual address range, replays the session's
journal there, switches the program over and closes the old server's side. The
program notices nothing. SESSION is the id (or a unique prefix of it) that
`gleam-peer status` shows; NODE the server's name as `status` shows it, or a node
id prefix (a name two nodes share is refused with both). If NODE cannot
reserve the range, or the session cannot move (its journal passed its bound, or
it used a call that cannot be replayed), the move is refused with the reason on
stderr and the session stays where it was (exit status 1; 3 when no agent runs).
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "move a running CUDA session to another server"
DESCRIPTION = __doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session id (or a unique prefix), from `status`")
    parser.add_argument("--to", required=True, metavar="NODE",
                        help="the server to move to: its name as `gleam-peer status` shows "
                        "it, or a node id prefix")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="agent state directory; default $GLEAM_STATE_DIR or "
                        "~/.local/state/gleam")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def main(args: argparse.Namespace) -> int:
    from gleam.peer.control import request
    from gleam.peer.state import StateDir

    state = StateDir(args.state_dir)
    doc = request(state.control_socket, "cuda_migrate", {"session": args.session, "to": args.to},
                  timeout=120)
    if args.json:
        print(json.dumps(doc))
    elif doc.get("moved"):
        print(f"moved session {doc['session']} from {doc['from']} to {doc['to']} "
              f"({doc['batches']} batches replayed)")
    else:
        print(f"gleam-peer: not moved: {doc.get('reason')}", file=sys.stderr)
    return 0 if doc.get("moved") else 1
