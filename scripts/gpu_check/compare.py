"""Holds a run through gleam against the same run without it (scripts/gpu-check.sh).

``compare.py DIRECT.json GLEAM.json [--rtol R]`` reads the ``outputs`` of both
(name → list of floats) and passes when every output has the same length and
``max |gleam - direct| <= R * max |direct|`` (relative to the output's scale, so
that values near zero do not dominate; R is 1e-4 by default). It prints one
JSON line: pass, and the relative error of each output.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("direct")
    p.add_argument("gleam")
    p.add_argument("--rtol", type=float, default=1e-4)
    return p.parse_args(argv)


def relative_error(direct: list[float], gleam: list[float]) -> float:
    """max |g - d| / max |d|; inf when the lengths differ or a value is not finite."""
    if len(direct) != len(gleam):
        return math.inf
    scale = max((abs(d) for d in direct), default=0.0)
    worst = max((abs(g - d) for d, g in zip(direct, gleam, strict=True)), default=0.0)
    if not math.isfinite(worst):
        return math.inf
    return worst / scale if scale > 0 else worst


def compare(direct: dict[str, Any], gleam: dict[str, Any], rtol: float) -> dict[str, Any]:
    a, b = direct.get("outputs", {}), gleam.get("outputs", {})
    errors = {name: relative_error(a[name], b.get(name, [])) for name in a}
    passed = bool(a) and set(a) == set(b) and all(e <= rtol for e in errors.values())
    return {"pass": passed, "rtol": rtol,
            "errors": {k: (v if math.isfinite(v) else "inf") for k, v in errors.items()}}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    docs = []
    for path in (args.direct, args.gleam):
        try:
            with open(path) as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as exc:  # the step failed before writing it
            print(json.dumps({"pass": False, "error": f"no result in {path}: {exc}"}))
            return 1
    verdict = compare(docs[0], docs[1], args.rtol)
    print(json.dumps(verdict))
    return 0 if verdict["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
