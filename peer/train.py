"""``gleam-peer train``: a torch.distributed job's rendezvous, from the mesh.

    gleam-peer train --world 4 -- python train.py      # on each of 4 devices

The local agent already knows the mesh: its authenticated, alive members
and the address each one is reached at. Every device that runs ``train``
asks its own agent, and all reach the same ranks without talking to each
other: the members' node ids are sorted and a node's rank is its place in
that order (the first ``--world`` of them when more are alive). Rank 0
hosts torch's rendezvous store at ``MASTER_PORT``. The command then
replaces itself with CMD, adding ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and
``GLOO_SOCKET_IFNAME`` (the interface that reaches the other members) to its
environment, which is what ``init_process_group(init_method="env://")``
reads. One process per device.

The agents must agree on the membership: start ``train`` once every device
shows the others as alive (``gleam-peer status``), or give ``--world N`` and
each waits until it sees N members.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gleam.peer.failures import UserError

DEFAULT_PORT = 29500  # torch.distributed's usual MASTER_PORT
DEFAULT_WAIT = 60.0

HELP = "run a torch.distributed job with ranks taken from the mesh"
DESCRIPTION = (
    "Give a torch.distributed job its rendezvous from the mesh: the alive, authenticated "
    "members become the ranks (sorted by node id, so every device agrees without talking), "
    "rank 0's address becomes MASTER_ADDR, and CMD runs with RANK, WORLD_SIZE, LOCAL_RANK, "
    "MASTER_ADDR, MASTER_PORT and GLOO_SOCKET_IFNAME set. Run it on every device of the job: "
    "gleam-peer train --world 4 -- python train.py"
)


class TrainError(UserError):
    """The rendezvous cannot be set up; the message says why and what to do."""


@dataclass(frozen=True)
class Member:
    node_id: str
    name: str
    host: str | None  # as this node reaches it; None for this node itself

    @property
    def label(self) -> str:
        return f"{self.name} ({self.node_id[:8]})"


@dataclass(frozen=True)
class Rendezvous:
    rank: int
    members: tuple[Member, ...]
    master_addr: str
    master_port: int
    ifname: str | None

    @property
    def world(self) -> int:
        return len(self.members)

    def env(self) -> dict[str, str]:
        env = {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world),
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "GLEAM_TRAIN_MEMBERS": ",".join(m.node_id for m in self.members),
        }
        if self.ifname:
            env["GLOO_SOCKET_IFNAME"] = self.ifname
        return env


def _host_of(address: str | None) -> str | None:
    """The host part of ``HOST:PORT`` / ``[V6]:PORT`` as the status document writes it."""
    if not address:
        return None
    host, sep, _port = address.rpartition(":")
    if not sep:
        return address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def members_from_status(doc: dict[str, Any]) -> list[Member]:
    """This node and every alive, authenticated member of its mesh, sorted by node id."""
    node = doc.get("node") or {}
    if not isinstance(node.get("id"), str):
        raise TrainError("the agent's status has no node id; is it a gleam agent?")
    members = {node["id"]: Member(node["id"], str(node.get("name") or "this node"), None)}
    for peer in doc.get("peers") or ():
        if (peer.get("state") == "alive" and peer.get("authenticated") and not peer.get("foreign")
                and isinstance(peer.get("id"), str)):
            members.setdefault(peer["id"], Member(peer["id"], str(peer.get("name") or "?"),
                                                  _host_of(peer.get("address"))))
    return [members[k] for k in sorted(members)]


def local_interface_towards(host: str) -> str | None:
    """The name of the interface this machine uses to reach ``host`` (no packet is sent)."""
    import ifaddr

    family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, 9))  # UDP connect only picks the route
        except OSError:
            return None
        local = probe.getsockname()[0]
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            address = ip.ip[0] if isinstance(ip.ip, tuple) else ip.ip
            if address == local:
                return str(adapter.name)
    return None


def plan_rendezvous(
    doc: dict[str, Any],
    *,
    world: int | None,
    port: int,
    interface_towards: Callable[[str], str | None] = local_interface_towards,
) -> Rendezvous:
    """Ranks and addresses from one status document; raises :class:`TrainError`."""
    members = members_from_status(doc)
    me = doc["node"]["id"]
    if world is not None:
        if len(members) < world:
            raise TrainError(
                f"the mesh has {len(members)} alive member(s) counting this node, fewer than "
                f"--world {world}; start `gleam-peer up` on the other devices (same mesh key) "
                "and check `gleam-peer status`"
            )
        members = members[:world]
        if all(m.node_id != me for m in members):
            raise TrainError(
                f"this node is not among the {world} members chosen (the smallest node ids: "
                f"{', '.join(m.label for m in members)}); run the job there, or raise --world"
            )
    rank = next(i for i, m in enumerate(members) if m.node_id == me)
    master = members[0]
    if master.node_id == me:
        master_addr = "127.0.0.1"
    elif master.host is None:
        raise TrainError(f"no address is known for rank 0, {master.label}; "
                         "is it linked to this node? (gleam-peer status)")
    else:
        master_addr = master.host
    # The interface gloo should use: the one that reaches another member.
    others = [m.host for m in members if m.host is not None]
    if len(members) == 1:
        ifname: str | None = "lo"
    else:
        ifname = interface_towards(others[0]) if others else None
    return Rendezvous(rank, tuple(members), master_addr, port, ifname)


def _status(state_dir: str | None) -> dict[str, Any]:
    from gleam.peer import control
    from gleam.peer.state import StateDir

    state = StateDir(state_dir)
    try:
        doc: dict[str, Any] = control.request(state.control_socket, "status", timeout=10)
    except control.ControlError as exc:
        raise TrainError(f"the agent refused the status request: {exc}") from None
    return doc


def rendezvous(
    state_dir: str | None = None, *, world: int | None = None, port: int = DEFAULT_PORT,
    wait: float = DEFAULT_WAIT,
) -> Rendezvous:
    """Ask the local agent and plan the rendezvous, waiting up to ``wait`` s for ``world``."""
    deadline = time.monotonic() + wait
    while True:
        doc = _status(state_dir)
        try:
            return plan_rendezvous(doc, world=world, port=port)
        except TrainError:
            if world is None or time.monotonic() >= deadline:
                raise
        time.sleep(0.5)


def _positive(text: str) -> int:
    from gleam.peer.bench.report import positive_int

    return positive_int(text)


def _port(text: str) -> int:
    from gleam.peer.addresses import parse_port

    try:
        return parse_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", metavar="DIR",
                        help="agent state directory (default $GLEAM_STATE_DIR or "
                        "~/.local/state/gleam)")
    parser.add_argument("--world", type=_positive, metavar="N",
                        help="number of processes; wait until N members are alive and use the "
                        "N smallest node ids (default: every alive member, no waiting)")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT,
                        help=f"MASTER_PORT, the rendezvous port on rank 0 (default {DEFAULT_PORT})")
    parser.add_argument("--wait", type=float, default=DEFAULT_WAIT, metavar="SECONDS",
                        help=f"how long --world waits for members (default {DEFAULT_WAIT:g})")
    parser.add_argument("--print-env", action="store_true",
                        help="print the rendezvous (JSON) instead of running CMD")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                        help="the training command, after --")


def main(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command and not args.print_env:
        print("gleam-peer train: give the command to run after --, e.g. "
              "gleam-peer train -- python train.py", file=sys.stderr)
        return 2
    if args.wait < 0:
        print("gleam-peer train: --wait cannot be negative", file=sys.stderr)
        return 2
    try:
        plan = rendezvous(args.state_dir, world=args.world, port=args.port, wait=args.wait)
    except UserError as exc:  # TrainError, or no agent (exit status 3)
        print(f"gleam-peer train: {exc}", file=sys.stderr)
        return exc.status
    env = plan.env()
    if "GLOO_SOCKET_IFNAME" in os.environ:  # the user's choice wins
        env.pop("GLOO_SOCKET_IFNAME", None)
    if args.print_env:
        json.dump({"env": env, "members": [m.__dict__ for m in plan.members]}, sys.stdout,
                  indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"gleam-peer train: rank {plan.rank} of {plan.world}, rank 0 at "
          f"{plan.master_addr}:{plan.master_port}"
          + (f" via {env['GLOO_SOCKET_IFNAME']}" if "GLOO_SOCKET_IFNAME" in env else ""),
          file=sys.stderr, flush=True)
    try:
        os.execvpe(command[0], command, {**os.environ, **env})
    except OSError as exc:
        print(f"gleam-peer train: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


def _standalone(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gleam-peer train", description=DESCRIPTION)
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(_standalone())
