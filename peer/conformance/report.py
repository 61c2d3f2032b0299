"""The conformance run's result: a JSON document, and tables for people.

The document (``report(...)``) is what ``--json`` prints and what the run
writes to ``--report``; the tables are drawn from the document alone, so what
a person reads and what a machine reads cannot disagree.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from gleam.peer.conformance.causes import OTHER, fixed_by
from gleam.peer.conformance.numba import FAILING, PASSING, TestOutcome, counts
from gleam.peer.conformance.run import Outcome
from gleam.peer.conformance.samples import Sample

SAMPLES_TARGET = 95.0   # percent of the samples that pass (issue 25)
NUMBA_TARGET = 97.0     # percent of the numba-cuda tests that run (skips excluded)
STATUSES = ("pass", "fail", "waived", "timeout", "crash", "build-failure")


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def samples_section(samples: Sequence[Sample], outcomes: dict[str, Outcome], checkout: str,
                    commit: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for sample in samples:
        o = outcomes.get(sample.name)
        if o is None:
            continue
        rows.append({"name": sample.name, "path": sample.path, "args": list(sample.args),
                     "status": o.status, "seconds": round(o.seconds, 2), "cause": o.group,
                     "first_error": o.cause, "exit": o.exit, "tail": o.tail})
    passed = sum(1 for r in rows if r["status"] == "pass")
    by_cause: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r["status"] != "pass":
            by_cause[r["cause"] if r["cause"] != OTHER else f"other: {r['first_error']}"] \
                .append(r["name"])
    causes = [{"cause": c, "count": len(names), "samples": names,
               "fixed_by": fixed_by(c)}
              for c, names in sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return {
        "checkout": checkout, "commit": commit, "total": len(rows), "passed": passed,
        "percent": _percent(passed, len(rows)), "target_percent": SAMPLES_TARGET,
        "met": _percent(passed, len(rows)) >= SAMPLES_TARGET and bool(rows),
        "statuses": dict(Counter(r["status"] for r in rows)),
        "causes": causes, "results": rows,
    }


_VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\b\d+\b")


def _message_key(message: str) -> str:
    """A first error line with its addresses and numbers blanked, for grouping."""
    return _VOLATILE.sub("N", message)[:160]


def numba_section(results: Sequence[TestOutcome], version: str, modules: int,
                  complete: bool, seconds: float) -> dict[str, Any]:
    tally = counts(results)
    passed = sum(tally[k] for k in PASSING)
    failing = [r for r in results if r.outcome in FAILING]
    groups: dict[str, list[TestOutcome]] = defaultdict(list)
    for r in failing:
        key = r.group if r.group and r.group != OTHER else f"other: {_message_key(r.message)}"
        groups[key].append(r)
    causes = [{"cause": key, "tests": len(members), "example": members[0].id,
               "first_error": members[0].message, "fixed_by": fixed_by(key)}
              for key, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    per_module: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        per_module[r.module.removeprefix("numba.cuda.tests.")][r.outcome] += 1
    return {
        "version": version, "modules": modules, "complete": complete,
        "seconds": round(seconds, 1), "counts": tally, "passed": passed,
        "percent": _percent(passed, tally["run"]), "target_percent": NUMBA_TARGET,
        "met": complete and tally["run"] > 0 and _percent(passed, tally["run"]) >= NUMBA_TARGET,
        "causes": causes,
        "per_module": {m: dict(c) for m, c in sorted(per_module.items())},
        "failures": [r.as_dict() for r in failing],
    }


def print_tables(doc: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    if "samples" in doc:
        _print_samples(console, doc["samples"])
    if "numba" in doc:
        _print_numba(console, doc["numba"])
    console.print(f"wall time {doc['wall_seconds']:.0f} s; JSON: {doc.get('report_file', '-')}")


def _print_samples(console: Any, s: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"cuda-samples {s['commit'][:12]} through gleam (host device)")
    for column in ("sample", "result", "s", "cause", "first error line"):
        table.add_column(column, overflow="fold")
    for r in s["results"]:
        table.add_row(r["name"], r["status"].upper() if r["status"] != "pass" else "pass",
                      f"{r['seconds']:.1f}", r["cause"], r["first_error"])
    console.print(table)
    causes = Table(title="cuda-samples: failures by cause")
    for column in ("cause", "n", "samples", "fixed by"):
        causes.add_column(column, overflow="fold")
    for c in s["causes"]:
        causes.add_row(c["cause"], str(c["count"]), ", ".join(c["samples"]), c["fixed_by"])
    console.print(causes)
    console.print(f"cuda-samples: {s['passed']}/{s['total']} passed ({s['percent']}%; "
                  f"target {s['target_percent']}%: {'met' if s['met'] else 'NOT met'}); "
                  + ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items())))


def _print_numba(console: Any, n: dict[str, Any]) -> None:
    from rich.table import Table

    c = n["counts"]
    causes = Table(title=f"numba-cuda {n['version']} tests through gleam: failures by cause")
    for column in ("cause", "tests", "example", "fixed by"):
        causes.add_column(column, overflow="fold")
    for row in n["causes"]:
        causes.add_row(row["cause"], str(row["tests"]),
                       f"{row['example']}\n{row['first_error']}", row["fixed_by"])
    console.print(causes)
    console.print(
        f"numba-cuda: {n['passed']}/{c['run']} of the tests that ran passed ({n['percent']}%; "
        f"target {n['target_percent']}%: {'met' if n['met'] else 'NOT met'}); "
        f"passed {c['passed']}, xfailed {c['xfailed']}, failed {c['failed']}, "
        f"error {c['error']}, timeout {c['timeout']}, crash {c['crash']}, "
        f"skipped {c['skipped']} (not counted); {n['modules']} modules"
        + ("" if n["complete"] else " (PARTIAL: interrupted; --resume carries on)"))
