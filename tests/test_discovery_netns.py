"""Discovery over real multicast between network namespaces (Linux, root only).

The test builds its own little LAN: a hub namespace holding a Linux bridge and three
node namespaces, each wired to the bridge by a veth pair whose node end is called
``eth0``, with private 10.231.x.y addresses. Nothing is created in the machine's own
network namespace, so nothing is multicast on its real interfaces. One discovery probe
(``python -m gleam.discovery.probe``) runs in each node namespace with the default
interface rule, and each must find the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="network namespaces are Linux only"),
    pytest.mark.skipif(
        hasattr(os, "geteuid") and os.geteuid() != 0,
        reason="needs root to create network namespaces (run the suite as root to include it)",
    ),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs the iproute2 'ip' command"),
]

NODES = 3


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def in_netns(namespace: str, *command: str) -> None:
    subprocess.run(["ip", "netns", "exec", namespace, *command], check=True, capture_output=True,
                   timeout=10)


def eth0_index(namespace: str) -> int:
    shown = ip("-n", namespace, "-j", "link", "show", "eth0")
    return int(json.loads(shown.stdout)[0]["ifindex"])


def _remove_namespace(namespace: str) -> None:
    # Processes keep a namespace alive after 'ip netns del'; ours are the only ones in it.
    listed = ip("netns", "pids", namespace, check=False)
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    ip("netns", "del", namespace, check=False)


@pytest.fixture
def lan() -> Iterator[list[tuple[str, str]]]:
    """Three node namespaces on one bridge; yields (namespace, IPv4 address) pairs."""
    suffix = secrets.token_hex(3)
    hub = f"glhub-{suffix}"
    subnet = f"10.231.{secrets.randbelow(256)}"
    created: list[str] = []
    try:
        added = ip("netns", "add", hub, check=False)
        if added.returncode != 0:
            pytest.skip(f"cannot create network namespaces here: {added.stderr.strip()}")
        created.append(hub)
        ip("-n", hub, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        ip("-n", hub, "link", "set", "br0", "up")
        nodes = []
        for i in range(NODES):
            namespace = f"glnode{i}-{suffix}"
            ip("netns", "add", namespace)
            created.append(namespace)
            # No duplicate address detection: link-local IPv6 is usable at once.
            in_netns(namespace, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0",
                     "net.ipv6.conf.all.accept_dad=0")
            ip("-n", hub, "link", "add", f"port{i}", "type", "veth",
               "peer", "name", "eth0", "netns", namespace)
            ip("-n", hub, "link", "set", f"port{i}", "master", "br0", "up")
            address = f"{subnet}.{i + 1}"
            ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            ip("-n", namespace, "link", "set", "eth0", "up")
            ip("-n", namespace, "link", "set", "lo", "up")
            nodes.append((namespace, address))
        yield nodes
    finally:
        for namespace in reversed(created):
            _remove_namespace(namespace)


class Probe:
    """A discovery probe in a namespace, read one JSON line at a time."""

    def __init__(self, process: trio.Process, stderr: Path) -> None:
        self.process = process
        self.stderr = stderr
        self.records: list[dict[str, Any]] = []
        self._buffer = b""

    async def _next(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(65536)
            if not chunk:
                raise AssertionError(f"probe exited; its stderr:\n{self.stderr.read_text()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 15.0
    ) -> dict[str, Any]:
        for record in self.records:
            if predicate(record):
                return record
        with trio.fail_after(timeout):
            while True:
                record = await self._next()
                self.records.append(record)
                if predicate(record):
                    return record

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            with trio.move_on_after(5):
                await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


def found(node_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["event"] == "found" and r["advert"]["node_id"] == node_id


async def test_probes_in_namespaces_find_each_other(
    lan: list[tuple[str, str]], tmp_path: Path
) -> None:
    ids = [secrets.token_hex(16) for _ in lan]
    meshes = ["ab" * 8, "ab" * 8, "cd" * 8]  # the third node belongs to another mesh
    probes: list[Probe] = []
    try:
        for i, (namespace, _) in enumerate(lan):
            stderr = tmp_path / f"node{i}.err"
            with stderr.open("wb") as err:
                process = await trio.lowlevel.open_process(
                    ["ip", "netns", "exec", namespace, sys.executable, "-m",
                     "gleam.discovery.probe", "--name", f"node{i}", "--node-id", ids[i],
                     "--mesh-id", meshes[i], "--port", str(47470 + i), "--rescan", "1"],
                    stdout=subprocess.PIPE,
                    stderr=err,
                )
            probes.append(Probe(process, stderr))

        for probe, (_, address) in zip(probes, lan, strict=True):
            ready = await probe.wait_for(lambda r: r["event"] == "ready")
            # Default rule: the LAN interface, not loopback.
            assert ready["interfaces"] == ["eth0"]
            assert ready["addresses"][0] == address

        for i, probe in enumerate(probes):
            for j, (_, address) in enumerate(lan):
                if i == j:
                    continue
                advert = (await probe.wait_for(found(ids[j])))["advert"]
                assert advert["instance"] == f"node{j}"
                assert advert["port"] == 47470 + j
                assert advert["addresses"][0] == address
                # Link-local IPv6 comes with its scope: eth0, the only IPv6 interface.
                scoped = f"%{eth0_index(lan[i][0])}"
                link_local = [a for a in advert["addresses"] if a.startswith("fe80:")]
                assert link_local and all(a.endswith(scoped) for a in link_local)
                assert advert["foreign"] == (meshes[i] != meshes[j])
            assert not any(
                r.get("advert", {}).get("node_id") == ids[i] for r in probe.records
            ), "a probe reported its own advert"

        # A clean exit says goodbye on the wire.
        await probes[0].stop()
        assert probes[0].process.returncode == 0, probes[0].stderr.read_text()
        for probe in probes[1:]:
            await probe.wait_for(lambda r: r["event"] == "gone" and r["node_id"] == ids[0])
    finally:
        with trio.CancelScope(shield=True):
            for probe in probes:
                await probe.stop()
