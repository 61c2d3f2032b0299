"""What a run through gleam cost on the wire (scripts/gpu-check.sh).

``stats.py --state-dir DIR [--program NAME] --out FILE`` asks the client agent
for its sessions (the ``cuda_sessions`` control request, whose rows are the
status view's session rows, kept after a session ends) and writes the newest
ended session (of that program): calls, waiting calls, bytes sent to the server
and received, round trips (one per waiting call: each is one reply).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--state-dir", required=True, type=Path, help="the client agent's")
    p.add_argument("--program", help="the program name the session carries (default: any)")
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def session_figures(doc: dict[str, Any], program: str | None) -> dict[str, Any] | None:
    """The newest ended session (of program, if given) in a cuda_sessions answer."""
    rows = [r for r in doc.get("finished", []) if program in (None, r.get("program"))]
    if not rows:
        return None
    row = max(rows, key=lambda r: r.get("ended") or 0)
    return {"session": row.get("id"), "calls": row.get("calls"), "waiting": row.get("waiting"),
            "round_trips": row.get("waiting"), "bytes_sent": row.get("bytes_to_server"),
            "bytes_received": row.get("bytes_from_server"), "batches": row.get("batches")}


def main(argv: list[str] | None = None) -> int:
    from gleam.peer import control
    from gleam.peer.state import StateDir

    args = parse_args(argv)
    doc = control.request(StateDir(args.state_dir).control_socket, "cuda_sessions", {},
                          timeout=10)
    figures = session_figures(doc, args.program)
    with open(args.out, "w") as f:
        json.dump(figures, f)
    print(json.dumps(figures))
    return 0 if figures is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
