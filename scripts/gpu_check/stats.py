"""What a run through gleam cost on the wire (scripts/gpu-check.sh).

``stats.py --state-dir DIR [--program NAME] [--since T] --out FILE`` asks the client agent
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
    p.add_argument("--since", type=float, default=0.0,
                   help="only sessions that started at or after this Unix time")
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def session_figures(doc: dict[str, Any], program: str | None,
                    since: float = 0.0) -> dict[str, Any] | None:
    """The newest ended session (of program, if given; started at or after since)."""
    rows = [r for r in doc.get("finished", []) if program in (None, r.get("program"))
            and (r.get("started") or 0) >= since]
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
    figures = session_figures(doc, args.program, args.since)
    with open(args.out, "w") as f:
        json.dump(figures, f)
    print(json.dumps(figures))
    return 0 if figures is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
