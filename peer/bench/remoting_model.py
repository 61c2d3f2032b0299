"""The figures of ``bench remoting``: each cell's physical limit, speedups, targets.

A cell is one workload over one link in one mode. Its physical limit is what no
remoting system can beat on that link (docs/benchmarks.md, "bench remoting"):

    limit = local compute + unique bytes that must cross / link rate + unavoidable waits x RTT

* local compute: the same program's timed part in mode ``local`` (the backend on
  the client's own agent, no network), the fastest of its runs;
* unique bytes: what the program reports it moves (static_h2d: the same in every
  run, weights or the transfer's data; dynamic_h2d: new in every run, the inputs;
  d2h: what it downloads). Static bytes already on the server (``gleam-warm``,
  a second run) need not cross, so a warm cell's limit leaves them out;
* link rate and RTT: the lab's configured htb rate and path RTT;
* unavoidable waits: the waiting calls the program itself makes and whose result
  it needs (its synchronizes and downloads), as it counts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gleam.peer.bench.report import Row

LINKS = {"wifi": (100.0, 3.0), "gbe": (1000.0, 0.5)}  # name: (Mbit/s, path RTT in ms)
MODES = ("local", "sync", "gleam-cold", "gleam-warm")
GLEAM_MODES = ("gleam-cold", "gleam-warm")
WORKLOADS = ("mlp-infer", "launch-storm", "transfer")
LIMIT_FACTOR = 1.25
# (workload, link): the speedup over sync each gleam mode must reach (the targets:
# gleam-warm on mlp-infer over wifi; launch-storm over gbe, a workload with no cacheable bytes,
# so both gleam modes).
SPEEDUP_TARGETS = {("mlp-infer", "wifi", "gleam-warm"): 24.2,
                   ("launch-storm", "gbe", "gleam-cold"): 6.0,
                   ("launch-storm", "gbe", "gleam-warm"): 6.0}


@dataclass
class Cell:
    """One run of one workload: the program's own report plus where it ran."""

    workload: str
    link: str | None  # None: local
    mode: str
    result: dict[str, Any]
    session: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return float(self.result["seconds"])

    def crossing_bytes(self) -> int:
        """Bytes that must cross the link in this mode (warm: the static ones are there)."""
        r = self.result
        static = 0 if self.mode == "gleam-warm" else int(r["static_h2d"])
        return static + int(r["dynamic_h2d"]) + int(r["d2h"])


def limit_terms(cell: Cell, local_seconds: float) -> dict[str, float]:
    """The physical limit of ``cell`` and its three terms, in seconds."""
    assert cell.link is not None
    rate_mbit, rtt_ms = LINKS[cell.link]
    transfer = cell.crossing_bytes() * 8 / (rate_mbit * 1e6)
    waits = int(cell.result["waits"]) * rtt_ms / 1000
    return {"compute_s": local_seconds, "bytes": float(cell.crossing_bytes()),
            "bytes_s": transfer, "waits": float(cell.result["waits"]), "waits_s": waits,
            "limit_s": local_seconds + transfer + waits}


def limited_by(cell: Cell, terms: dict[str, float]) -> str:
    """What a cell's time is made of, largest share first: why a target is not met."""
    parts = {"local compute": terms["compute_s"], "bytes over the link": terms["bytes_s"],
             "waits x RTT": terms["waits_s"],
             "overhead beyond the limit": max(cell.seconds - terms["limit_s"], 0.0)}
    ordered = sorted(parts.items(), key=lambda kv: -kv[1])
    why = ", ".join(f"{name} {value:.3f} s ({value / cell.seconds:.0%})"
                    for name, value in ordered if value > 0)
    # The client agent's count of what it really sent: static bytes the limit assumed on
    # the server but that crossed again (the cache did not hold them all).
    sent = cell.session.get("h2d_sent")
    expected = terms["bytes"] - int(cell.result["d2h"])
    if isinstance(sent, int) and sent > expected:
        why += (f"; {sent - expected:,.0f} B sent host to device beyond the limit's "
                f"{expected:,.0f} B (not in the server's cache)")
    return why


def summarize(cells: list[Cell]) -> tuple[list[Row], list[dict[str, Any]]]:
    """Rows for the table and one JSON record per cell."""
    local = {c.workload: c.seconds for c in cells if c.mode == "local"}
    sync = {(c.workload, c.link): c.seconds for c in cells if c.mode == "sync"}
    rows: list[Row] = []
    records: list[dict[str, Any]] = []
    for c in cells:
        record: dict[str, Any] = {"workload": c.workload, "link": c.link, "mode": c.mode,
                                  "seconds": c.seconds, "verified": bool(c.result.get("ok")),
                                  "program": c.result, "session": c.session}
        records.append(record)
        if c.link is None:
            rows.append(Row(f"{c.workload}: local (no network)", c.seconds, "itself",
                            c.seconds, "s"))
            continue
        terms = limit_terms(c, local[c.workload])
        record["limit"] = terms
        name = f"{c.workload} / {c.link}: {c.mode}"
        if c.mode in GLEAM_MODES:
            met = c.seconds <= LIMIT_FACTOR * terms["limit_s"]
            record["limit_met"] = met
            if not met:
                record["limited_by"] = limited_by(c, terms)
            rows.append(Row(name, c.seconds, "physical limit", terms["limit_s"], "s",
                            f"<= {LIMIT_FACTOR}x limit", met))
            reference = sync.get((c.workload, c.link))
            if reference is not None:
                speedup = reference / c.seconds
                target = SPEEDUP_TARGETS.get((c.workload, c.link, c.mode))
                sped = None if target is None else speedup >= target
                record["speedup_vs_sync"] = speedup
                # The most any system could reach here: sync beside this cell's limit.
                record["speedup_at_limit"] = reference / terms["limit_s"]
                if target is not None:
                    record["speedup_target"] = target
                    record["speedup_met"] = sped
                    if not sped:
                        record["limited_by"] = limited_by(c, terms)
                rows.append(Row(f"{name} speedup over sync", speedup, "sync (x1)", 1.0, "x",
                                f">= {target}x" if target else "", sped))
        else:
            rows.append(Row(name, c.seconds, "physical limit", terms["limit_s"], "s"))
    return rows, records


def chart_groups(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seconds per mode for each (workload, link), with the warm cell's limit beside them."""
    local = {r["workload"]: r["seconds"] for r in records if r["link"] is None}
    groups: dict[str, dict[str, float]] = {}
    for r in records:
        if r["link"] is None:
            continue
        bars = groups.setdefault(f"{r['workload']} / {r['link']}",
                                 {"local": local.get(r["workload"], 0.0)})
        bars[r["mode"]] = r["seconds"]
        if r["mode"] == "gleam-warm":
            bars["limit (warm)"] = r["limit"]["limit_s"]
    return groups
