"""One way to print a benchmark: a rich table for people, JSON for machines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One figure beside the reference measured in the same run."""

    measure: str
    value: float
    reference_name: str
    reference: float
    unit: str
    target: str = ""
    met: bool | None = None

    @property
    def ratio(self) -> float:
        return self.value / self.reference if self.reference else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "value": self.value,
            "reference_name": self.reference_name,
            "reference": self.reference,
            "unit": self.unit,
            "ratio": self.ratio,
            "target": self.target,
            "met": self.met,
        }


def print_report(
    title: str, rows: Sequence[Row], meta: dict[str, Any], *, as_json: bool
) -> None:
    """The table for people, or with ``as_json`` the whole document (rows and every
    detail in ``meta``) for machines: never both, so a table stays readable."""
    doc = {"bench": title, **meta, "results": [r.as_dict() for r in rows]}
    if as_json:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gleam-peer bench {title}")
    for column in ("measure", "gleam", "reference", "ratio", "target", "met"):
        table.add_column(column)
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "NO")
        table.add_row(
            r.measure,
            f"{r.value:,.1f} {r.unit}",
            f"{r.reference:,.1f} {r.unit} ({r.reference_name})",
            f"{r.ratio:.2f}",
            r.target,
            met,
        )
    Console().print(table)


def note_file(what: str, path: Path, *, as_json: bool) -> None:
    """One line naming a file the bench wrote; on stderr under ``--json``, whose
    stdout is the document alone."""
    print(f"{what} written to {path}", file=sys.stderr if as_json else sys.stdout)


def positive_int(text: str) -> int:
    """argparse type: a positive integer, with a clear message otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    return value
