"""A lab of hosts in Linux network namespaces joined by a bridge.

Everything lives in namespaces the lab creates: the bridge sits in a
"switch" namespace of its own, each host is a namespace with one veth to
it, so the machine's own interfaces and routes are never touched. Names
carry a random tag, and ``close`` removes exactly what this lab made (by
those names, recorded as they were created), also after a failure. Needs
root and iproute2; link shaping uses the ``htb`` qdisc for rate, and for
delay ``netem`` where the kernel has it, else the lab's userspace delay line
(``delayline.py``; docs/lab.md).

A host without delay hangs on the bridge by one veth pair (``eth0`` in the
host, ``p<i>`` on the bridge). A host with a delay line has two: ``eth0`` to
``p<i>`` (a plain port in the switch namespace), and ``q<i>`` to ``b<i>``
(on the bridge); the delay line forwards between ``p<i>`` and ``q<i>``. Either
way the host's rate is shaped on ``eth0`` (what it sends) and on ``p<i>``
(what it receives).

``journal(kind, value)``, when given, is told of every namespace before it
is created and of every process as soon as it is started, so that a caller
can remove them after a crash (``state.py``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    delay_s: float = 0.0

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(argv), **kwargs)

    journal: Callable[[str, Any], None] | None = None

    def start(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process in this host; the lab stops it on close.

        ``ip netns exec`` execs the command, so the PID is the command's."""
        proc = subprocess.Popen(self.command(argv), **kwargs)
        self.processes.append(proc)
        if self.journal is not None:
            self.journal("process", proc.pid)
        return proc


_netem: bool | None = None


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (probed once, in a scratch namespace)."""
    global _netem
    if _netem is None:
        probe = f"glnetem{secrets.token_hex(3)}"
        _run("ip", "netns", "add", probe)
        try:
            done = subprocess.run(["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev",
                                   "lo", "root", "netem", "delay", "1ms"], capture_output=True)
            _netem = done.returncode == 0
        finally:
            subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return _netem


class NetLab:
    """Hosts on one Ethernet segment, addresses 10.231.N.x/24 (N random)."""

    def __init__(self, journal: Callable[[str, Any], None] | None = None,
                 tag: str | None = None, *, use_netem: bool | None = None) -> None:
        self.tag = tag or secrets.token_hex(3)
        self.subnet = 1 + secrets.randbelow(250)
        self.switch = f"glsw-{self.tag}"
        self.hosts: list[LabHost] = []
        self.journal = journal
        self.use_netem = netem_available() if use_netem is None else use_netem
        self._namespaces: list[str] = []
        self._add_netns(self.switch)
        self.switch_host = LabHost("switch", self.switch, "", journal=journal)
        self._in(self.switch, "ip", "link", "set", "lo", "up")
        self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.switch, "ip", "link", "set", "br0", "up")

    def _in(self, netns: str, *argv: str) -> None:
        _run("ip", "netns", "exec", netns, *argv)

    def _add_netns(self, netns: str) -> None:
        if self.journal is not None:
            self.journal("netns", netns)  # before: a crash in between leaves it known
        _run("ip", "netns", "add", netns)
        self._namespaces.append(netns)

    def _veth(self, a: str, b: str) -> None:
        self._in(self.switch, "ip", "link", "add", a, "type", "veth", "peer", "name", b)

    def add_host(self, name: str, delay_s: float = 0.0, stats: Path | None = None) -> LabHost:
        """A host on the bridge; ``delay_s`` is its link's RTT (half each way)."""
        index = len(self.hosts) + 1
        netns = f"gl-{self.tag}-{name}"
        self._add_netns(netns)
        # Both veth ends are created inside the switch namespace, then one is
        # moved into the host: no interface ever appears in the root namespace.
        port, peer = f"p{index}", f"h{index}"
        self._veth(port, peer)
        self._in(self.switch, "ip", "link", "set", peer, "netns", netns)
        line = delay_s > 0 and not self.use_netem
        if line:
            self._veth(f"q{index}", f"b{index}")
            self._in(self.switch, "ip", "link", "set", f"b{index}", "master", "br0")
            # The line's two ends are wires, not hosts: without this the switch
            # would send its own IPv6 link-local chatter down them.
            for dev in (port, f"q{index}"):
                self._in(self.switch, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
            for dev in (f"q{index}", f"b{index}"):
                self._in(self.switch, "ip", "link", "set", dev, "up")
        else:
            self._in(self.switch, "ip", "link", "set", port, "master", "br0")
        self._in(self.switch, "ip", "link", "set", port, "up")
        address = f"10.231.{self.subnet}.{index}"
        self._in(netns, "ip", "link", "set", peer, "name", "eth0")
        self._in(netns, "ip", "link", "set", "lo", "up")
        self._in(netns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        self._in(netns, "ip", "link", "set", "eth0", "up")
        # Multicast (mDNS) leaves through eth0 like everything else.
        self._in(netns, "ip", "route", "add", "224.0.0.0/4", "dev", "eth0")
        host = LabHost(name, netns, address, journal=self.journal)
        host.delay_s = delay_s
        self.hosts.append(host)
        if line:
            self._start_delay_line(port, f"q{index}", delay_s, stats)
        return host

    def _start_delay_line(self, host_side: str, bridge_side: str, rtt_s: float,
                          stats: Path | None) -> None:
        argv = [sys.executable, "-m", "gleam.peer.lab.delayline", host_side, bridge_side,
                f"{rtt_s / 2 * 1e6:.1f}"]
        if stats is not None:
            argv += ["--stats", str(stats)]
        proc = self.switch_host.start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        # One line once its sockets are open ("ready"), or why it could not.
        assert proc.stdout is not None
        line = proc.stdout.readline().decode(errors="replace").strip()
        proc.stdout.close()
        if line != "ready":
            raise LabError(f"the delay line did not start: {line or 'no output'}")

    def _ends(self, host: LabHost) -> tuple[tuple[str, str], tuple[str, str]]:
        """The devices whose queues carry ``host``'s traffic: (out of it, into it)."""
        return (host.netns, "eth0"), (self.switch, f"p{self.hosts.index(host) + 1}")

    def shape(self, host: LabHost, rate_mbit: float, burst: str = "256k") -> None:
        """Limit what ``host`` sends (and, on the switch side, receives) to ``rate_mbit``;
        with netem, the host's delay (half each way) hangs below the rate class."""
        netem = self.use_netem and host.delay_s > 0
        for netns, dev in self._ends(host):
            self._in(netns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:",
                     "htb", "default", "10")
            self._in(netns, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10",
                     "htb", "rate", f"{rate_mbit}mbit", "ceil", f"{rate_mbit}mbit",
                     "burst", burst, "cburst", burst)
            if netem:
                self._netem(netns, dev, host.delay_s, parent="1:10")

    def delay(self, host: LabHost) -> None:
        """Apply ``host``'s delay with netem on an unshaped link (the delay line needs
        nothing: it runs from ``add_host``)."""
        if self.use_netem and host.delay_s > 0:
            for netns, dev in self._ends(host):
                self._netem(netns, dev, host.delay_s, parent="root")

    def _netem(self, netns: str, dev: str, rtt_s: float, parent: str) -> None:
        where = ["root"] if parent == "root" else ["parent", parent]
        self._in(netns, "tc", "qdisc", "add", "dev", dev, *where, "netem",
                 "delay", f"{rtt_s / 2 * 1e6:.0f}us", "limit", "100000")

    def close(self) -> None:
        for host in [*self.hosts, self.switch_host]:
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
