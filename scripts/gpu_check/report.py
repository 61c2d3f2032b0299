"""The end of scripts/gpu-check.sh: PASS/FAIL per step, the comparison table, a JSON summary.

``report.py --work DIR --summary FILE`` reads what the steps left in DIR:
``steps.tsv`` (status, name, seconds, detail per line) and, for every compared
run NAME, ``direct-NAME.json``, ``gleam-NAME.json`` (the step's results, with
``wall_s``), ``stats-NAME.json`` (stats.py's figures of the gleam run) and
``compare-NAME.json`` (compare.py's verdict). Prints the steps, then one row
per run with the wall time of both runs and the gleam run's calls, waiting
calls, bytes sent and round trips; writes everything to FILE.
"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--summary", required=True, type=Path)
    return p.parse_args(argv)


def load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_steps(work: Path) -> list[dict[str, Any]]:
    steps = []
    text = (work / "steps.tsv").read_text() if (work / "steps.tsv").exists() else ""
    for line in text.splitlines():
        status, name, seconds, detail = [*line.split("\t", 3), "", "", ""][:4]
        steps.append({"name": name, "status": status, "seconds": int(seconds or 0),
                      "detail": detail})
    return steps


def read_runs(work: Path) -> dict[str, dict[str, Any]]:
    runs = {}
    for direct in sorted(work.glob("direct-*.json")):
        name = direct.stem.removeprefix("direct-")
        d, g = load(direct) or {}, load(work / f"gleam-{name}.json") or {}
        runs[name] = {"direct_wall_s": d.get("wall_s"), "gleam_wall_s": g.get("wall_s"),
                      "direct_step_s": d.get("step_s"), "gleam_step_s": g.get("step_s"),
                      "stats": load(work / f"stats-{name}.json"),
                      "compare": load(work / f"compare-{name}.json")}
    return runs


def fmt(v: Any, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


def table(runs: dict[str, dict[str, Any]]) -> list[str]:
    head = (f"{'run':<10} {'direct s':>9} {'gleam s':>9} {'calls':>8} {'waiting':>8} "
            f"{'bytes sent':>12} {'round trips':>11} {'max rel err':>11}  result")
    lines = [head]
    for name, r in runs.items():
        s, c = r["stats"] or {}, r["compare"] or {}
        errors = [e for e in (c.get("errors") or {}).values() if isinstance(e, (int, float))]
        worst = max(errors) if errors else None
        lines.append(f"{name:<10} {fmt(r['direct_wall_s'], '9.3f')} "
                     f"{fmt(r['gleam_wall_s'], '9.3f')} "
                     f"{fmt(s.get('calls'), '8d')} {fmt(s.get('waiting'), '8d')} "
                     f"{fmt(s.get('bytes_sent'), '12,d')} {fmt(s.get('round_trips'), '11d')} "
                     f"{fmt(worst, '11.2e')}  {'PASS' if c.get('pass') else 'FAIL'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps, runs = read_steps(args.work), read_runs(args.work)
    passed = bool(steps) and all(s["status"] == "PASS" for s in steps)
    print(f"\n== gleam gpu-check on {socket.gethostname()}")
    for s in steps:
        detail = f": {s['detail']}" if s["detail"] else ""
        print(f"{s['status']:<5} {s['name']} ({s['seconds']} s){detail}")
    if runs:
        print("\n" + "\n".join(table(runs)))
    summary = {"host": socket.gethostname(), "passed": passed, "steps": steps, "runs": runs}
    args.summary.write_text(json.dumps(summary, indent=1))
    print(f"\n{'PASS' if passed else 'FAIL'}; summary: {args.summary}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
