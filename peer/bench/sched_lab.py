"""The lab mode of ``gleam-peer bench scheduler``: the same workloads on real agents.

One LAN lab (peer/lab) holds the scenario's two client hosts and three
servers; each server's host backend runs at the scenario's relative speed
(``--host-slowdown`` = fastest speed / its speed). The lab shapes one link
per host and a path has the sum of its hosts' RTTs and the slower rate, so
the per-(host, server) links of ``small_scenario`` become ``HOST_LINKS``:
desk-fast and desk-slow are gigabit at 0.5 ms, desk-mid Wi-Fi at 3 ms, and
the laptop reaches everything over Wi-Fi (2.75-5.25 ms).

Every session is a real CUDA program run through ``gleam-peer run`` on its
client host: ``mlp_infer`` (forward passes, ``compute`` of the workload
scaled to passes) for infer, storm and train, ``bench_calls h2d`` (its bytes)
for transfer. A program exits 0 only when its results checked against the
CPU; the report keeps each one's verdict.

The built-in scheduler is the agents' own: the program runs without
``--peer`` and the client agent ranks (``gleam_rank_servers``) and leases,
by each program's demand as the agent learned it from the seed's warm-up
(each session run once, alone, before the measured policies) and from the
policies' runs before it.
Every other policy, and the offline best, is computed by
``gleam.peer.sched.policies`` on the lab's *measured* inputs (link RTT and
bandwidth from the agents, device speed from a calibration run, the
programs' own demand) and the sessions are pinned with ``--peer``. The
offline best is an exhaustive search of the cost model's simulation with
those inputs; its assignment then runs in the lab like the others.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gleam.peer.bench.lab_sessions import Lab, Program
from gleam.peer.cuda.examples import KERNELS_PTX, build_example
from gleam.peer.gpus import measure_host_gflops
from gleam.peer.lab.agents import describe
from gleam.peer.lab.build import running_lab
from gleam.peer.lab.spec import LinkSpec
from gleam.peer.lab.state import LabRecord
from gleam.peer.sched.cost import Demand, LinkEstimate
from gleam.peer.sched.policies import POLICIES, offline_best, place
from gleam.peer.sched.sim import SimResult, simulate
from gleam.peer.sched.workload import Scenario, ServerSpec, SessionSpec, small_scenario

CLIENTS = ("desk", "laptop")
HOST_LINKS: dict[str, LinkSpec] = {
    "desk": LinkSpec(1000.0, 0.25), "laptop": LinkSpec(100.0, 2.5),
    "fast": LinkSpec(1000.0, 0.25), "mid": LinkSpec(100.0, 2.75),
    "slow": LinkSpec(1000.0, 0.25),
}
# TCP goodput of a shaped link: 1448 payload bytes in 1514 on the wire.
GOODPUT = 1448 / 1514
# Lab time = scenario time x SCALE (full run) or QUICK_SCALE (--quick).
SCALE = 0.1
QUICK_SCALE = 0.01
H2D_CHUNK = 1 << 20
MLP_FIXED_BYTES = 4 * (256 * 512 + 512 + 512 * 10 + 10)  # the weights mlp_infer uploads
MLP_PASS_BYTES = 4 * 64 * 256  # one input batch per forward pass
WAITS = 4  # the few waiting calls of either program (synchronize, final copies)
CALIBRATION_PASSES = (4, 204)  # two runs: their difference is the passes' time alone
OFFLINE = "offline best"
# Every server's slowdown is this times its scenario's: the fastest host device then
# sleeps two thirds of its kernels' time, so the three servers together keep under
# one of the machine's cores busy, and the lab measures placements, not the shared
# cores (the calibration measures the fastest server at this factor).
BASE_SLOWDOWN = 3.0


class LabRunError(Exception):
    """The lab run could not be made; the message says why."""


def slowdowns(sc: Scenario) -> dict[str, float]:
    top = max(s.speed for s in sc.servers)
    return {s.name: top / s.speed for s in sc.servers}


def programs(sc: Scenario, scale: float, pass_seconds: float) -> list[Program]:
    """Each session of the scenario as a program sized for the lab.

    Its compute on the fastest server lasts ``scale`` times what the scenario
    says; a transfer's bytes are scaled the same way, so the time of each part
    keeps its share.
    """
    top = max(s.speed for s in sc.servers)
    out = []
    for spec in sc.sessions:
        d = spec.demand
        if spec.kind == "transfer":
            size = max(int(d.unique_bytes * scale), H2D_CHUNK)
            out.append(Program(spec.kind, ("h2d", str(size), str(H2D_CHUNK)), "bench_calls",
                               Demand(unique_bytes=size, waits=WAITS, compute=0.0)))
            continue
        passes = max(1, round(d.compute / top * scale / pass_seconds))
        out.append(Program(spec.kind, (str(KERNELS_PTX), str(passes)), "mlp_infer",
                           Demand(unique_bytes=MLP_FIXED_BYTES + MLP_PASS_BYTES * passes,
                                  waits=WAITS, compute=float(passes))))
    return out


def measured_links(record: LabRecord) -> tuple[dict[tuple[str, str], LinkEstimate],
                                                dict[str, str]]:
    """(host, server) -> the client agent's link estimate, and where each figure came from."""
    doc = describe(record)
    links: dict[tuple[str, str], LinkEstimate] = {}
    sources: dict[str, str] = {}
    for host in doc["hosts"]:
        if host["name"] not in CLIENTS:
            continue
        for peer in host["peers"]:
            server = peer["name"]
            if server in CLIENTS:
                continue
            a, b = HOST_LINKS[host["name"]], HOST_LINKS[server]
            rtt_ms = peer.get("rtt_ms") or (a.rtt_ms + b.rtt_ms)
            mbit = peer.get("bandwidth_mbit")
            src = f"rtt {peer.get('rtt_source') or 'configured'}"
            if not mbit:  # not probed yet: the shaped rate's goodput
                mbit = min(a.rate_mbit or 1e4, b.rate_mbit or 1e4) * GOODPUT
                src += ", bandwidth configured"
            else:
                src += ", bandwidth measured"
            links[(host["name"], server)] = LinkEstimate(rtt_ms / 1e3, mbit * 1e6 / 8)
            sources[f"{host['name']}-{server}"] = src
    return links, sources


def lab_scenario(sc: Scenario, progs: Sequence[Program], pass_seconds: float,
                 links: dict[tuple[str, str], LinkEstimate]) -> Scenario:
    """The scenario in the lab's units: passes/s per server, measured links, programs'
    demands (nothing cached: the lab's programs upload fresh data)."""
    slow = slowdowns(sc)
    servers = tuple(ServerSpec(s.name, 1.0 / pass_seconds / slow[s.name], s.max_sessions)
                    for s in sc.servers)
    sessions = tuple(replace(spec, demand=p.demand) for spec, p in zip(sc.sessions, progs,
                                                                        strict=True))
    return Scenario(servers, sc.hosts, links, sessions)


def calibrate(lab: Lab, sc: Scenario) -> float:
    """Seconds of one forward pass on the fastest server, alone, from the desk."""
    top = max(sc.servers, key=lambda s: s.speed).name
    times = []
    for passes in CALIBRATION_PASSES:
        prog = Program("calibrate", (str(KERNELS_PTX), str(passes)), "mlp_infer",
                       Demand(compute=float(passes)))
        spec = SessionSpec("calibrate", CLIENTS[0], "calibrate", prog.demand)
        [run] = lab.batch([spec], [prog], [top])
        if not run.verified:
            raise LabRunError(f"the calibration run on {top} failed: {run.error}")
        times.append(run.seconds)
    n0, n1 = CALIBRATION_PASSES
    return max((times[1] - times[0]) / (n1 - n0), 1e-4)


def assignment_of(sc: Scenario, policy: str, seed: int) -> list[str | None]:
    """Servers to pin for a policy (None: the agents' own scheduler chooses)."""
    if policy == "scheduler":
        return [None] * len(sc.sessions)
    combo = offline_best(sc)[0] if policy == OFFLINE else place(sc, POLICIES[policy], seed)
    return [sc.servers[j].name for j in combo]


def warm_up(lab: Lab, sc: Scenario, progs: Sequence[Program]) -> list[dict[str, Any]]:
    """Each session's program once, alone and unpinned, before the measured runs.

    The client agents learn a program's demand from its finished sessions
    (docs/scheduler.md, "Learned demand"); this is the user's first run, so
    the built-in scheduler ranks every measured session as it would a second
    run, whichever policy the shuffle puts first. One at a time: a session
    that shares no server measures its compute cleanly."""
    # A failed warm-up run is kept in the report (its verdict), not fatal: the
    # agent then ranks that program by the default demand, as on a first run.
    return [lab.batch([spec], [prog], [None])[0].as_dict()
            for spec, prog in zip(sc.sessions, progs, strict=True)]


def run_lab_policies(seeds: int, quick: bool) -> tuple[dict[str, list[tuple[int, SimResult]]],
                                                        dict[str, Any]]:
    """Every policy on every seed in one lab: lab results per policy, and the record."""
    if os.geteuid() != 0:
        raise LabRunError("the lab mode needs root (network namespaces); run it with sudo, "
                          "or use --sim")
    scale = QUICK_SCALE if quick else SCALE
    # The comparison is of placements made at the start: the lab's agents (which
    # inherit this environment) do not move sessions, unless the caller says so.
    os.environ.setdefault("GLEAM_REEVALUATE_S", "0")
    # The lab's hosts share one machine, so each host device would report the whole
    # machine's load (the other servers' sessions, other work) as its own foreign
    # utilisation; the cost model counts that only on a server without sessions,
    # which made every idle server look 20 times slower than a busy one (the
    # pile-on measured). The lab's servers report none, unless the caller says so.
    os.environ.setdefault("GLEAM_HOST_LOAD", "0")
    # Measured once here, not by five agents at once on shared cores: every server
    # then gossips this speed over its slowdown, the ratios the calibration assumes.
    os.environ.setdefault("GLEAM_HOST_GFLOPS", f"{measure_host_gflops():.3f}")
    # A GPU runs one kernel at a time for every context that shares it: so do the
    # lab's host devices (docs/lab.md, "The speed knob"), or sessions sharing a
    # slowed server would sleep side by side and never slow each other.
    os.environ.setdefault("GLEAM_HOST_EXCLUSIVE", "1")
    base = small_scenario(0)
    names = [*CLIENTS, *(s.name for s in base.servers)]
    policies = [*POLICIES, OFFLINE]
    results: dict[str, list[tuple[int, SimResult]]] = {p: [] for p in policies}
    meta: dict[str, Any] = {"seeds_run": [], "scale": scale, "base_slowdown": BASE_SLOWDOWN,
                            "exclusive_devices": os.environ["GLEAM_HOST_EXCLUSIVE"]}
    with tempfile.TemporaryDirectory(prefix="gleam-schedlab-") as tmp:
        binaries = {n: build_example(n, Path(tmp)) for n in ("mlp_infer", "bench_calls")}
        factors = {name: f * BASE_SLOWDOWN for name, f in slowdowns(base).items()}
        with running_lab(names, HOST_LINKS, factors, probe_interval=5.0,
                         clients=CLIENTS) as record:
            lab = Lab(record, binaries, CLIENTS)
            meta["lab_tag"] = record.tag
            pass_seconds = calibrate(lab, base)
            links, sources = measured_links(record)
            meta.update(pass_seconds=pass_seconds, link_sources=sources,
                        links={f"{h}-{s}": {"rtt_ms": e.rtt * 1e3,
                                            "bandwidth_mbit": e.bandwidth * 8 / 1e6}
                               for (h, s), e in links.items()})
            for seed in range(seeds):
                sc = small_scenario(seed)
                progs = programs(sc, scale, pass_seconds)
                model = lab_scenario(sc, progs, pass_seconds, links)
                order = list(policies)
                random.Random(seed).shuffle(order)  # no policy always runs first
                seed_doc: dict[str, Any] = {"seed": seed, "policies": {},
                                            "warm_up": warm_up(lab, sc, progs)}
                for policy in order:
                    pinned = assignment_of(model, policy, seed)
                    runs = lab.batch(sc.sessions, progs, pinned)
                    result = SimResult(tuple(r.seconds for r in runs))
                    results[policy].append((seed, result))
                    index = {s.name: j for j, s in enumerate(model.servers)}
                    placed = [index.get(r.server or "", -1) for r in runs]
                    predicted = (simulate(model, placed).makespan if min(placed) >= 0
                                 else None)
                    seed_doc["policies"][policy] = {
                        "makespan_s": result.makespan, "model_makespan_s": predicted,
                        "sessions": [r.as_dict() for r in runs]}
                meta["seeds_run"].append(seed_doc)
    return results, meta
