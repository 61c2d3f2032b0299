"""``gleam-peer lab``: a LAN of agents in network namespaces on this machine (root only).

``lab up`` builds the hosts, shapes their links, starts an agent in each and
returns, leaving a record (``state.py``) that ``lab status``, ``lab exec`` and
``lab down`` read from any shell. See docs/lab.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from typing import Any

from gleam.peer.lab.spec import SpecError, host_names, parse_links, parse_speeds
from gleam.peer.lab.state import LabRecord, existing_namespaces, find_labs, lab_root, remove

HELP = "build a LAN of agents in network namespaces (root only)"
DESCRIPTION = (
    "A lab of N hosts on one Linux bridge, each a network namespace with its own agent, "
    "links shaped to a rate (htb) and an RTT (netem where the kernel has it, else gleam's "
    "userspace delay line). Everything lives in namespaces the lab creates; `lab down` "
    "removes it, also after `lab up` crashed. Needs root. Labs are recorded under "
    "$GLEAM_LAB_DIR (default /run/gleam-lab)."
)


class LabUsageError(Exception):
    """A mistake the user can fix; printed as one line."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lab_command", metavar="ACTION")
    sub.required = True
    up = sub.add_parser(
        "up", help="build the hosts and start an agent in each",
        description="Build N hosts (h1..hN) as namespaces on a bridge, shape each host's "
        "link, start an agent with the host backend in each, wait until every agent has "
        "linked every other, print the lab and return. A host's RTT is between it and "
        "the switch: two shaped hosts see the sum of their RTTs.")
    up.add_argument("--hosts", type=int, required=True, metavar="N", help="number of hosts")
    up.add_argument("--link", action="append", default=[], metavar="NAME=RATE/RTT",
                    help="shape host NAME's link (NAME 'all' for every host): RATE in kbit, "
                    "mbit or gbit, RTT in us, ms or s, e.g. h1=100mbit/3ms, all=1gbit/500us, "
                    "h2=100mbit, h3=/2ms (repeatable)")
    up.add_argument("--speed", action="append", default=[], metavar="NAME=FACTOR",
                    help="make host NAME's device FACTOR times slower than this CPU "
                    "(the agent's --host-slowdown; repeatable)")
    up.add_argument("--probe-interval", type=float, default=30.0, metavar="SECONDS",
                    help="the agents' bandwidth probe period when no bulk transfer was "
                    "measured (their --probe-interval; default 30)")
    up.add_argument("--no-agents", action="store_true", help="build the network only")
    sub.add_parser(
        "status", help="show the lab's hosts, links and agents",
        description="Show each host's namespace, address, link shaping, whether its agent "
        "is alive and which peers it has linked (with the kernel's RTT and the measured "
        "bandwidth), and how late the delay line sends.").add_argument(
        "--json", action="store_true", help="machine-readable output")
    ex = sub.add_parser(
        "exec", help="run a command in a host's namespace",
        description="Run CMD inside host HOST's network namespace, with GLEAM_STATE_DIR "
        "set to that host's agent (so `gleam-peer status` there shows it). "
        "Example: gleam-peer lab exec h1 -- gleam-peer status")
    ex.add_argument("host", metavar="HOST")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    down = sub.add_parser(
        "down", help="remove everything the lab created",
        description="Stop the lab's agents and delay lines, delete its namespaces (and with "
        "them its links) and its files, by the names and process ids it recorded; works "
        "after `lab up` crashed or was killed.")
    down.add_argument("--all", action="store_true", help="every recorded lab")
    for one in (sub.choices["status"], ex, down):
        one.add_argument("--lab", metavar="TAG", help="which lab (default: the only one)")


def main(args: argparse.Namespace) -> int:
    try:
        if os.geteuid() != 0:
            raise LabUsageError("the lab needs root (network namespaces); run it with sudo")
        action = {"up": _up, "status": _status, "exec": _exec, "down": _down}
        return action[args.lab_command](args)
    except (LabUsageError, SpecError) as exc:
        print(f"gleam-peer lab: {exc}", file=sys.stderr)
        return 1


# ---------------------------------------------------------------- choosing a lab


def _records(args: argparse.Namespace) -> list[LabRecord]:
    labs = [LabRecord.load(p) for p in find_labs()]
    if getattr(args, "all", False):
        return labs
    if args.lab:
        chosen = [r for r in labs if r.tag == args.lab]
        if not chosen:
            raise LabUsageError(f"no lab {args.lab!r} under {lab_root()}")
        return chosen
    if not labs:
        raise LabUsageError(f"no lab under {lab_root()}; start one with `gleam-peer lab up`")
    if len(labs) > 1:
        tags = ", ".join(r.tag for r in labs)
        raise LabUsageError(f"several labs ({tags}): choose one with --lab TAG")
    return labs


# ---------------------------------------------------------------- up


def _up(args: argparse.Namespace) -> int:
    from gleam.peer.lab.agents import describe
    from gleam.peer.lab.build import build_lab
    from gleam.peer.lab.netns import LabError, lab_unavailable_reason

    names = host_names(args.hosts)
    links = parse_links(args.link, names)
    speeds = parse_speeds(args.speed, names)
    reason = lab_unavailable_reason()
    if reason is not None:
        raise LabUsageError(f"cannot build a lab here: {reason}")
    try:
        record = build_lab(names, links, speeds, agents=not args.no_agents,
                           probe_interval=args.probe_interval)
    except (LabError, TimeoutError) as exc:
        raise LabUsageError(f"lab up failed and removed what it made: {exc}") from exc
    _print_status(describe(record))
    return 0


# ---------------------------------------------------------------- status


def _status(args: argparse.Namespace) -> int:
    from gleam.peer.lab.agents import describe

    doc = describe(_records(args)[0])
    if args.json:
        json.dump(doc, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        _print_status(doc)
    return 0


def _print_status(doc: dict[str, Any]) -> None:
    print(f"lab {doc['tag']}  ({doc['directory']}; delay by {doc['delay'] or 'nothing'}"
          f"{'' if doc['complete'] else '; INCOMPLETE: lab up did not finish'})")
    print(f"{'host':6} {'address':15} {'link':18} {'speed':>6} {'agent':>12}  "
          "peers (rtt ms, Mbit/s)")
    for host in doc["hosts"]:
        rate = f"{host['rate_mbit']:g}mbit" if host["rate_mbit"] else "-"
        rtt = f"/{host['rtt_ms']:g}ms" if host["rtt_ms"] else ""
        agent = f"pid {host['agent_pid']}" if host["agent_alive"] else "down"
        peers = ", ".join(
            f"{p['name']} ({_fmt(p['rtt_ms'], 3)}, {_fmt(p['bandwidth_mbit'], 0)})"
            for p in host["peers"])
        print(f"{host['name']:6} {host['address']:15} {rate + rtt:18} {host['speed']:>6g} "
              f"{agent:>12}  {peers or '-'}")
        line = host.get("delay_line")
        if line:
            print(f"{'':6} delay line: {line}")


def _fmt(value: float | None, digits: int) -> str:
    return "?" if value is None else f"{value:.{digits}f}"


# ---------------------------------------------------------------- exec, down


def _exec(args: argparse.Namespace) -> int:
    record = _records(args)[0]
    try:
        host = record.host(args.host)
    except LookupError as exc:
        raise LabUsageError(str(exc)) from None
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise LabUsageError("nothing to run: lab exec HOST -- CMD ...")
    if host.netns not in existing_namespaces():
        raise LabUsageError(f"host {host.name}'s namespace is gone; `lab down` and up again")
    env = {**os.environ, "GLEAM_STATE_DIR": host.state_dir} if host.state_dir else None
    sys.stdout.flush()
    return subprocess.run(["ip", "netns", "exec", host.netns, *cmd], env=env).returncode


def _down(args: argparse.Namespace) -> int:
    status = 0
    for record in _records(args):
        left = remove(record)
        for what in left:
            print(f"gleam-peer lab: could not remove {what}", file=sys.stderr)
            status = 1
        print(f"lab {record.tag}: removed {len(record.namespaces)} namespaces and "
              f"{len(record.processes)} processes" + (" (some left, above)" if left else ""))
    with contextlib.suppress(OSError):
        lab_root().rmdir()  # only if empty: other labs keep it
    return status
