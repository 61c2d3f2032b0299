"""A lab of hosts in Linux network namespaces joined by a bridge.

Everything lives in namespaces the lab creates: the bridge sits in a
"switch" namespace of its own, each host is a namespace with one veth to
it, so the machine's own interfaces and routes are never touched. Names
carry a random tag, and ``close`` removes exactly what this lab made (by
those names, recorded as they were created), also after a failure. Needs
root and iproute2; link shaping uses the ``htb`` qdisc (``netem`` and
``tbf`` are not available on every kernel, so delay is not offered here).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class LabError(Exception):
    pass


def lab_unavailable_reason() -> str | None:
    """Why a lab cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) is not installed"
    probe = f"glprobe{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise LabError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")


@dataclass
class LabHost:
    name: str
    netns: str
    address: str
    ifname: str = "eth0"
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(argv), **kwargs)

    def start(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process in this host; the lab stops it on close."""
        proc = subprocess.Popen(self.command(argv), **kwargs)
        self.processes.append(proc)
        return proc


class NetLab:
    """Hosts on one Ethernet segment, addresses 10.231.N.x/24 (N random)."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.subnet = 1 + secrets.randbelow(250)
        self.switch = f"glsw-{self.tag}"
        self.hosts: list[LabHost] = []
        self._namespaces: list[str] = []
        _run("ip", "netns", "add", self.switch)
        self._namespaces.append(self.switch)
        self._in(self.switch, "ip", "link", "set", "lo", "up")
        self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.switch, "ip", "link", "set", "br0", "up")

    def _in(self, netns: str, *argv: str) -> None:
        _run("ip", "netns", "exec", netns, *argv)

    def add_host(self, name: str) -> LabHost:
        index = len(self.hosts) + 1
        netns = f"gl-{self.tag}-{name}"
        _run("ip", "netns", "add", netns)
        self._namespaces.append(netns)
        # Both veth ends are created inside the switch namespace, then one is
        # moved into the host: no interface ever appears in the root namespace.
        port, peer = f"p{index}", f"h{index}"
        self._in(self.switch, "ip", "link", "add", port, "type", "veth", "peer", "name", peer)
        self._in(self.switch, "ip", "link", "set", peer, "netns", netns)
        self._in(self.switch, "ip", "link", "set", port, "master", "br0")
        self._in(self.switch, "ip", "link", "set", port, "up")
        address = f"10.231.{self.subnet}.{index}"
        self._in(netns, "ip", "link", "set", peer, "name", "eth0")
        self._in(netns, "ip", "link", "set", "lo", "up")
        self._in(netns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        self._in(netns, "ip", "link", "set", "eth0", "up")
        # Multicast (mDNS) leaves through eth0 like everything else.
        self._in(netns, "ip", "route", "add", "224.0.0.0/4", "dev", "eth0")
        host = LabHost(name, netns, address)
        self.hosts.append(host)
        return host

    def shape(self, host: LabHost, rate_mbit: int, burst: str = "256k") -> None:
        """Limit what ``host`` sends (and, on the switch side, receives) to ``rate_mbit``."""
        index = self.hosts.index(host) + 1
        for netns, dev in ((host.netns, "eth0"), (self.switch, f"p{index}")):
            self._in(netns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:",
                     "htb", "default", "10")
            self._in(netns, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10",
                     "htb", "rate", f"{rate_mbit}mbit", "ceil", f"{rate_mbit}mbit",
                     "burst", burst, "cburst", burst)

    def close(self) -> None:
        for host in self.hosts:
            for proc in host.processes:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in host.processes:
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        for netns in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        self._namespaces.clear()

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
