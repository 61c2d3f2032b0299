"""`gleam-peer lab` end to end, as root: real namespaces, the delay line, real agents.

Each test runs the command line as the user would, from another process, and
checks what the lab made against the system itself (`ip netns list`, `ip
link`, /proc) before and after `lab down`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.lab.agents import agent_status
from gleam.peer.lab.build import running_lab
from gleam.peer.lab.netns import NetLab, lab_unavailable_reason
from gleam.peer.lab.spec import LinkSpec, host_names
from gleam.peer.lab.state import LabRecord, existing_namespaces
from gleam.peer.localmesh import MeshError, wait_for

pytestmark = pytest.mark.skipif(
    lab_unavailable_reason() is not None,
    reason=f"network namespace lab unavailable: {lab_unavailable_reason()}",
)


def lab(root: Path, *args: str, check: bool = True, timeout: float = 120,
        **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "lab", *args],
                          env={**os.environ, "GLEAM_LAB_DIR": str(root)}, capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def the_record(root: Path) -> LabRecord:
    (path,) = root.glob("*/lab.json")
    return LabRecord.load(path)


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def assert_nothing_left(root: Path, record: LabRecord, links_before: set[str]) -> None:
    assert not set(record.namespaces) & existing_namespaces()
    for pid, _ in record.processes:
        if pid != os.getpid():  # a lab built in-process records its builder: us
            assert not record.alive(pid), f"process {pid} of the lab still runs"
    # The lab's veths only ever lived in its namespaces: none appeared here.
    assert not {name for name in root_links() - links_before
                if (name[:1] in "pqbh" and name[1:].isdigit()) or name == "br0"}
    assert not Path(record.directory).exists()
    assert not root.exists() or not any(root.iterdir())


def links_of(doc: dict) -> list[dict]:
    return doc.get("links", [])


def converge(sample, within, timeout: float, what: str):
    """Wait until ``sample()`` (None while not ready) gives links that are all
    ``within`` their configured figures. A sample may be off while the machine is
    busy (a probe that ran beside other work); an estimator that is right keeps
    converging to it, one that is wrong never does, and the failure shows the last
    figures seen."""
    last: list = []

    def ok():
        links = sample()
        if links is None:
            return None
        last[:] = links
        return links if all(within(link) for link in links) else None

    try:
        return wait_for(ok, timeout, what)
    except MeshError:
        pytest.fail(f"{what}: the estimates never came within bounds; last seen: "
                    + "; ".join(f"{link.get('name')}: rtt {link.get('rtt_ms')} ms, "
                                f"{(link.get('bandwidth_bps') or 0) / 1e6:.1f} Mbit/s"
                                for link in last))


@pytest.mark.parametrize(("rate_mbit", "rtt_ms"), [(100, 3.0), (1000, 0.5)])
def test_link_estimates_match_the_shaped_link(tmp_path, monkeypatch, rate_mbit, rtt_ms):
    # h1's link is shaped, h2's is not: the path between them is h1's link. Built
    # in-process through the API a benchmark uses (`lab up` is the same code).
    root = tmp_path / "labs"
    monkeypatch.setenv("GLEAM_LAB_DIR", str(root))
    before = root_links()
    with running_lab(host_names(2), {"h1": LinkSpec(rate_mbit, rtt_ms)},
                     probe_interval=2) as record:
        def settled() -> list[dict] | None:
            docs = [agent_status(h) for h in record.hosts]
            links = [link for doc in docs if doc for link in links_of(doc)]
            ready = len(links) == 2 and all(
                link["rtt_source"] == "tcp" and link["ping_samples"] >= 3
                and link["bandwidth_samples"] >= 2 for link in links)
            return links if ready else None

        def within(link: dict) -> bool:
            return (abs(link["rtt_ms"] - rtt_ms) <= 0.1 * rtt_ms + 0.1
                    and abs(link["bandwidth_bps"] - rate_mbit * 1e6) <= 0.1 * rate_mbit * 1e6)

        links = converge(settled, within, 90,
                         "both agents' kernel RTT and bandwidth within 10 % of the link's")
        for link in links:
            print(f"{rate_mbit} Mbit/s {rtt_ms} ms: rtt {link['rtt_ms']} ms "
                  f"(ping {link['ping_ms']} ms), {link['bandwidth_bps'] / 1e6:.0f} Mbit/s")
    assert_nothing_left(root, record, before)


def test_probes_sharing_a_link_do_not_split_it(tmp_path, monkeypatch):
    # h2 and h3 both reach h1 through h1's 100 Mbit/s link. h1 measures one
    # inbound train at a time (measured together they got 65-84 Mbit/s each);
    # h2 and h3 may probe h1's uplink at the same moment, which the estimate's
    # max filter over several samples outlasts.
    monkeypatch.setenv("GLEAM_LAB_DIR", str(tmp_path / "labs"))
    with running_lab(host_names(3), {"h1": LinkSpec(100, 3.0)}, probe_interval=2) as record:
        def settled() -> dict[str, list[dict]] | None:
            docs = {h.name: agent_status(h) for h in record.hosts}
            through_h1 = {name: [link for link in links_of(doc or {})
                                 if "h1" in (name, link["name"])] for name, doc in docs.items()}
            ready = all(len(links) == (2 if name == "h1" else 1) and all(
                link["rtt_source"] == "tcp" and link["bandwidth_samples"] >= 3
                for link in links) for name, links in through_h1.items())
            return through_h1 if ready else None

        def flat() -> list[dict] | None:
            found = settled()
            return [link for links in found.values() for link in links] if found else None

        def within(link: dict) -> bool:
            return abs(link["bandwidth_bps"] - 100e6) <= 10e6 and abs(link["rtt_ms"] - 3.0) <= 0.4

        for link in converge(flat, within, 120,
                             "every link through h1 within 10 % of its 100 Mbit/s"):
            print(f"{link['name']}: {link['bandwidth_bps'] / 1e6:.0f} Mbit/s, "
                  f"rtt {link['rtt_ms']} ms")


def test_lab_up_status_exec_down_leave_nothing_behind(tmp_path):
    root = tmp_path / "labs"
    before = root_links()
    up = lab(root, "up", "--hosts", "3", "--link", "h1=100mbit/3ms", "--speed", "h3=4")
    record = the_record(root)
    try:
        assert record.complete and "h1" in up.stdout
        doc = json.loads(lab(root, "status", "--json").stdout)
        assert [h["name"] for h in doc["hosts"]] == ["h1", "h2", "h3"]
        for host in doc["hosts"]:
            assert host["agent_alive"] and host["agent_answers"]
            assert sorted(p["name"] for p in host["peers"]) == sorted(
                {"h1", "h2", "h3"} - {host["name"]})
        assert doc["hosts"][0]["delay_line"] is not None  # h1 has an RTT: a delay line

        def forwarded() -> dict | None:
            path = Path(record.directory) / "delay-h1.json"
            line = json.loads(path.read_text()) if path.exists() else None
            busy = line and all(line[d]["forwarded"] > 0 for d in ("to_bridge", "to_host"))
            return line if busy else None

        line = wait_for(forwarded, 10, "h1's delay line to report frames both ways")
        assert line["delay_us"] == 1500 and not line["errors"]

        # Addresses exist only in the lab's namespaces.
        h2 = record.host("h2")
        inside = lab(root, "exec", "h2", "--", "ip", "-o", "-4", "addr", "show", "dev", "eth0")
        assert f"{h2.address}/24" in inside.stdout
        here = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        assert f"{h2.address}/" not in here

        # `lab exec` points gleam-peer at that host's agent.
        status = json.loads(lab(root, "exec", "h1", "--", sys.executable, "-m", "gleam.peer",
                                "status", "--json").stdout)
        assert status["node"]["name"] == "h1"
        speeds = {h.name: agent_status(h)["gpus"][0]["gflops"] for h in record.hosts}
        assert speeds["h3"] < speeds["h1"] / 2  # --speed h3=4 slows its device down
    finally:
        down = lab(root, "down")
    assert record.tag in down.stdout
    assert_nothing_left(root, record, before)
    missing = lab(root, "status", check=False)
    assert missing.returncode == 1 and "no lab" in missing.stderr


def test_lab_down_cleans_up_after_lab_up_was_killed_midway(tmp_path):
    root = tmp_path / "labs"
    before = root_links()
    env = {**os.environ, "GLEAM_LAB_DIR": str(root)}
    up = subprocess.Popen([sys.executable, "-m", "gleam.peer", "lab", "up", "--hosts", "4",
                           "--link", "all=100mbit/2ms"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)

    def midway() -> LabRecord | None:
        try:
            record = the_record(root)
        except (ValueError, OSError):  # not written yet
            return None
        return record if len(record.namespaces) >= 3 and record.processes else None

    try:
        wait_for(midway, 60, "lab up to have made some hosts and a delay line")
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()
    record = the_record(root)
    assert not record.complete
    assert set(record.namespaces) <= existing_namespaces()
    lab(root, "down")
    assert_nothing_left(root, record, before)


def test_the_lab_needs_root(tmp_path):
    # Started as root (the interpreter lives under /root), the child gives up its
    # effective ids before it runs the command, as an ordinary user's shell would.
    program = ("import os, sys; from gleam.peer import cli; cli.build_parser(); "
               "os.setegid(65534); os.seteuid(65534); "
               "sys.exit(cli.main(['lab', 'up', '--hosts', '2']))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env={**os.environ, "GLEAM_LAB_DIR": str(tmp_path / "labs")},
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert "needs root" in done.stderr
    assert not (tmp_path / "labs").exists()


def test_a_bad_link_is_refused_before_anything_is_made(tmp_path):
    root = tmp_path / "labs"
    done = lab(root, "up", "--hosts", "2", "--link", "h5=100mbit/3ms", check=False)
    assert done.returncode == 1
    assert "no host 'h5'" in done.stderr and "h1, h2" in done.stderr
    assert not root.exists()


# Inside the lab hosts: a sink that hashes what it receives, a source that sends
# seeded random bytes (the same hash on both sides means every byte arrived, in order).
SINK = """
import hashlib, socket, sys
server = socket.create_server(("0.0.0.0", 9201))
conn, _ = server.accept()
digest = hashlib.sha256()
while data := conn.recv(1 << 20):
    digest.update(data)
print(digest.hexdigest())
"""
SOURCE = """
import hashlib, random, socket, sys
conn = socket.create_connection((sys.argv[1], 9201))
digest, rnd = hashlib.sha256(), random.Random(7)
for _ in range(int(sys.argv[2])):
    block = rnd.randbytes(1 << 20)
    digest.update(block)
    conn.sendall(block)
conn.close()
print(digest.hexdigest())
"""


def test_the_delay_line_passes_every_byte_in_order(tmp_path):
    # 24 MiB through a 20 ms line: the queue never empties during the transfer,
    # so its write offset wraps around the 8 MiB arena twice; GSO frames pass whole.
    stats = tmp_path / "delay.json"
    with NetLab(use_netem=False) as netlab:  # the delay line even where netem exists
        a = netlab.add_host("a", delay_s=0.020, stats=stats)
        b = netlab.add_host("b")
        sink = b.start([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
        wait_for(lambda: "9201" in b.run(["ss", "-ltn"], capture_output=True,
                                         text=True).stdout, 10, "the sink to listen")
        sent = a.run([sys.executable, "-c", SOURCE, b.address, "24"], capture_output=True,
                     text=True, timeout=120)
        received, _ = sink.communicate(timeout=60)
        assert sent.returncode == 0, sent.stderr
        assert received.strip() == sent.stdout.strip()

        def counted() -> dict | None:  # the line rewrites its statistics every second
            line = json.loads(stats.read_text())
            return line if line["to_bridge"]["bytes"] > 24 << 20 else None

        line = wait_for(counted, 10, "the line's statistics to count the transfer")
        assert line["to_bridge"]["dropped"] == line["to_host"]["dropped"] == 0
