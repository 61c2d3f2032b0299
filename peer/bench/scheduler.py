"""``gleam-peer bench scheduler``: placement policies on the same workloads.

``--sim`` runs the discrete-event simulation (gleam.peer.sched.sim) of the
workloads in gleam.peer.sched.workload: 8 sessions from 2 client hosts onto 3
servers of different speeds and links, over ``--seeds`` seeds, for the
built-in scheduler, random, round-robin, least-loaded, nearest-RTT and the
best assignment found by trying all of them; then ``--clients`` sessions onto
``--servers`` servers, where trying all is out of reach. Throughput is the
total over the seeds: sessions finished per minute of the runs' makespans
added up, so one easy seed cannot carry the others; random placement counts
``RANDOM_DRAWS`` draws per seed.

Without ``--sim`` the same workloads run on real agents in the LAN lab
(``run_lab``, gleam.peer.bench.sched_lab; root only): real CUDA programs
through ``gleam-peer run``, the built-in scheduler in the agents (ranking by
the demand they learned from a warm-up run of each session), the other
policies and the offline best computed on the lab's measured inputs and
pinned with ``--peer``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gleam.peer.bench.plot import bar_chart_svg
from gleam.peer.bench.report import Row, note_file, positive_int, print_report
from gleam.peer.sched.policies import POLICIES, SIMPLE, offline_best, results, run_policy
from gleam.peer.sched.sim import SimResult
from gleam.peer.sched.workload import Scenario, scaled_scenario, small_scenario

HELP = "placement policies: the scheduler against random, round-robin, ... (--sim)"
DESCRIPTION = (
    "Place client sessions on servers of different speeds and links with the built-in "
    "scheduler, random, round-robin, least-loaded and nearest-RTT placement (and, for the "
    "small case, the best assignment by exhaustive search) and compare total throughput and "
    "mean completion time. --sim: a discrete-event simulation with the scheduler's cost model."
)
RANDOM_TARGET = 1.79
SIMPLE_TARGET = 1.2
OFFLINE_TARGET = 0.90
OFFLINE = "offline best"
# Random placement is a distribution, not one draw: its figure is the total over
# this many draws per seed (one lucky or unlucky draw would decide the ratio).
RANDOM_DRAWS = 20


@dataclass
class Totals:
    """One policy's runs over the seeds, added up."""

    sessions: int = 0
    makespan: float = 0.0
    completion: float = 0.0
    per_seed: list[dict[str, float]] = field(default_factory=list)

    def add(self, seed: int, result: SimResult) -> None:
        self.sessions += len(result.finish)
        self.makespan += result.makespan
        self.completion += sum(result.finish)
        self.per_seed.append({"seed": seed, "throughput": result.throughput,
                              "mean_completion_s": result.mean_completion,
                              "makespan_s": result.makespan})

    @property
    def throughput(self) -> float:
        return 60.0 * self.sessions / self.makespan if self.makespan > 0 else 0.0

    @property
    def mean_completion(self) -> float:
        return self.completion / self.sessions if self.sessions else 0.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sim", action="store_true",
                        help="simulate instead of running the LAN lab (which needs root)")
    parser.add_argument("--quick", action="store_true",
                        help="lab mode: one seed, smaller sessions (a smoke run)")
    parser.add_argument("--seeds", type=positive_int, default=3, help="seeds (3)")
    parser.add_argument("--clients", type=positive_int, default=100,
                        help="sessions of the scaled run (100)")
    parser.add_argument("--servers", type=positive_int, default=30,
                        help="servers of the scaled run (30)")
    parser.add_argument("--svg", type=Path, metavar="PATH",
                        help="also write the throughputs as a bar chart (SVG)")


def simulate_all(scenarios: list[Scenario], *, exhaustive: bool) -> dict[str, Totals]:
    """Every policy (and the offline best, when asked) over the scenarios, one per seed."""
    totals = {name: Totals() for name in POLICIES}
    if exhaustive:
        totals[OFFLINE] = Totals()
    for seed, scenario in enumerate(scenarios):
        for name, result in results(scenario, seed, [n for n in POLICIES if n != "random"]).items():
            totals[name].add(seed, result)
        for draw in range(RANDOM_DRAWS):
            totals["random"].add(seed, run_policy(scenario, "random", seed * RANDOM_DRAWS + draw))
        if exhaustive:
            totals[OFFLINE].add(seed, offline_best(scenario)[1])
    return totals


def _policy_rows(case: str, totals: dict[str, Totals], reference: str) -> list[Row]:
    ref = totals[reference]
    rows = []
    for name in POLICIES:
        t = totals[name]
        rows.append(Row(f"{case}: {name} throughput", t.throughput, reference,
                        ref.throughput, "sessions/min"))
        rows.append(Row(f"{case}: {name} mean completion", t.mean_completion, reference,
                        ref.mean_completion, "s"))
    return rows


def _target_rows(case: str, totals: dict[str, Totals]) -> list[Row]:
    ours = totals["scheduler"].throughput
    simple = max(SIMPLE, key=lambda n: totals[n].throughput)

    def row(reference: str, target: float) -> Row:
        theirs = totals[reference].throughput
        return Row(f"{case}: scheduler throughput / {reference}", ours, reference, theirs,
                   "sessions/min", f">= {target:.2f}x",
                   met=theirs > 0 and ours / theirs >= target)

    rows = [row("random", RANDOM_TARGET)]
    rows.append(Row(f"{case}: scheduler throughput / best simple ({simple})", ours, simple,
                    totals[simple].throughput, "sessions/min", f">= {SIMPLE_TARGET:.2f}x",
                    met=ours >= SIMPLE_TARGET * totals[simple].throughput))
    if OFFLINE in totals:
        rows.append(row(OFFLINE, OFFLINE_TARGET))
    return rows


def run_sim(seeds: int, clients: int, servers: int, svg: Path | None = None
            ) -> tuple[list[Row], dict[str, Any]]:
    small = simulate_all([small_scenario(s) for s in range(seeds)], exhaustive=True)
    scaled = simulate_all([scaled_scenario(s, clients, servers) for s in range(seeds)],
                          exhaustive=False)
    if svg is not None:
        groups = {f"8 sessions, 3 servers ({seeds} seeds)":
                  {n: t.throughput for n, t in small.items()},
                  f"{clients} sessions, {servers} servers ({seeds} seeds)":
                  {n: t.throughput for n, t in scaled.items()}}
        svg.write_text(bar_chart_svg(groups, "bench scheduler --sim: total throughput",
                                     "sessions/min"))
    rows = [*_target_rows("8x3", small), *_policy_rows("8x3", small, OFFLINE),
            *_target_rows(f"{clients}x{servers}", scaled),
            *_policy_rows(f"{clients}x{servers}", scaled, "random")]
    meta = {
        "mode": "sim", "seeds": seeds,
        "small": {"sessions": 8, "hosts": 2, "servers": 3,
                  "per_seed": {n: t.per_seed for n, t in small.items()}},
        "scaled": {"sessions": clients, "servers": servers,
                   "per_seed": {n: t.per_seed for n, t in scaled.items()}},
    }
    return rows, meta


# What limits the lab's figures, said beside any target they miss.
LAB_LIMITS = (
    "every agent, delay line and program shares this machine's {cores} cores: a server's "
    "speed factor holds only while the CPU is not saturated, and the shared CPU slows "
    "every server together (provisional figures when the cores are shared)",
    "the agents rank by each program's demand learned from its earlier runs (the seed's "
    "warm-up and the policies before), whose compute counts all the session's time the "
    "link does not explain, the programs' and agents' own CPU work too, which a faster "
    "server does not shorten",
    "each session's time includes gleam-peer run's start (a Python process), the same for "
    "every policy, which compresses every ratio towards 1",
)


def _lab_limits(rows: list[Row]) -> list[str]:
    if all(r.met for r in rows if r.met is not None):
        return []
    return [text.format(cores=os.cpu_count()) for text in LAB_LIMITS]


def run_lab(seeds: int, quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    """The same workloads on real agents in the LAN lab (gleam.peer.bench.sched_lab)."""
    from gleam.peer.bench.sched_lab import LabRunError, run_lab_policies
    from gleam.peer.lab.netns import LabError, lab_unavailable_reason

    reason = lab_unavailable_reason()
    if reason is not None:
        raise NotImplementedError(f"the lab mode needs the LAN lab: {reason}; "
                                  "or run `gleam-peer bench scheduler --sim`")
    try:
        results, lab_meta = run_lab_policies(1 if quick else seeds, quick)
    except (LabRunError, LabError) as exc:
        raise NotImplementedError(str(exc)) from exc
    totals = {name: Totals() for name in results}
    for name, runs in results.items():
        for seed, result in runs:
            totals[name].add(seed, result)
    case = "lab 8x3"
    rows = [*_target_rows(case, totals), *_policy_rows(case, totals, OFFLINE)]
    sessions = [s for doc in lab_meta["seeds_run"] for p in doc["policies"].values()
                for s in p["sessions"]]
    meta = {"mode": "lab", "quick": quick, "seeds": len(lab_meta["seeds_run"]),
            "sessions_run": len(sessions),
            "all_verified": all(s["verified"] for s in sessions),
            "cores": os.cpu_count(), "limits": _lab_limits(rows),
            "per_seed": {n: t.per_seed for n, t in totals.items()}, **lab_meta}
    return rows, meta


def main(args: argparse.Namespace) -> int:
    try:
        rows, meta = (run_sim(args.seeds, args.clients, args.servers, args.svg) if args.sim
                      else run_lab(args.seeds, args.quick))
    except NotImplementedError as exc:
        print(f"gleam-peer bench scheduler: {exc}", file=sys.stderr)
        return 2
    print_report("scheduler", rows, meta, as_json=args.json)
    if args.sim and args.svg is not None:
        note_file("chart", args.svg, as_json=args.json)
    if not args.json and meta.get("limits"):
        print("targets not met; what limits them:")
        for text in meta["limits"]:
            print(f"  - {text}")
    if meta.get("all_verified") is False:
        print("gleam-peer bench scheduler: some sessions failed or computed wrong results "
              "(see `sessions` in --json)", file=sys.stderr)
        return 1
    return 0
