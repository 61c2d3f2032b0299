"""How accurate the delay line is: ``python -m gleam.peer.lab.accuracy`` (root).

Builds a two-host lab with one shaped link, runs a bulk TCP transfer each way
through it, and prints what the kernel's TCP estimate saw (minimum and
smoothed RTT) beside the configured RTT, the goodput beside the rate, and the
delay line's own lateness counters. The figures in docs/lab.md come from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from gleam.peer.lab.delayline import DIRECTIONS, LATE_EDGES_US
from gleam.peer.lab.netns import NetLab
from gleam.peer.lab.spec import host_names, parse_links

PORT = 9107
# Run inside the hosts: a sink, and a source that reports the kernel's view.
SINK = f"""
import socket
server = socket.create_server(("0.0.0.0", {PORT}))
conn, _ = server.accept()
while conn.recv(1 << 20):
    pass
"""
SOURCE = f"""
import json, socket, sys, time
from gleam.peer.tcpinfo import read_tcp_rtt
conn = socket.create_connection((sys.argv[1], {PORT}))
buf, sent, start = bytes(1 << 20), 0, time.monotonic()
while time.monotonic() - start < float(sys.argv[2]):
    conn.sendall(buf)
    sent += len(buf)
elapsed = time.monotonic() - start
info = read_tcp_rtt(conn)
print(json.dumps({{"mbit": sent * 8 / elapsed / 1e6, "min_rtt_ms": info and info.min_rtt_ms,
                  "srtt_ms": info and info.srtt_ms}}))
"""


def _transfer(lab: NetLab, src: int, dst: int, seconds: float) -> dict[str, Any]:
    sink = lab.hosts[dst].start([sys.executable, "-c", SINK])
    time.sleep(0.3)  # the sink's listen() (a refused connect would say so below)
    done = lab.hosts[src].run([sys.executable, "-c", SOURCE, lab.hosts[dst].address,
                               str(seconds)], capture_output=True, text=True, timeout=60)
    sink.wait(10)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure(link: str, seconds: float) -> dict[str, Any]:
    spec = parse_links([f"h1={link}"], host_names(2))["h1"]
    with TemporaryDirectory() as tmp, NetLab() as lab:
        stats = Path(tmp) / "delay.json"
        h1 = lab.add_host("h1", delay_s=spec.rtt_ms / 1000, stats=stats)
        lab.add_host("h2")
        if spec.rate_mbit is not None:
            lab.shape(h1, spec.rate_mbit, burst="64k")
        else:
            lab.delay(h1)
        out: dict[str, Any] = {
            "link": link, "delay": "netem" if lab.use_netem else "delay line",
            "up": _transfer(lab, 0, 1, seconds), "down": _transfer(lab, 1, 0, seconds)}
        time.sleep(1.2)  # the line rewrites its statistics every second
        out["line"] = json.loads(stats.read_text()) if stats.exists() else None
    return out


def _shares(hist: list[int]) -> str:
    total = max(1, sum(hist))
    under_10 = 100 * hist[0] / total
    over_100 = 100 * sum(hist[LATE_EDGES_US.index(100) + 1:]) / total
    over_1000 = 100 * hist[-1] / total
    return f"{under_10:.1f} % / {over_100:.2f} % / {over_1000:.2f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gleam.peer.lab.accuracy",
                                     description=__doc__)
    parser.add_argument("--link", action="append", metavar="RATE/RTT",
                        help="h1's link (repeatable; default 100mbit/3ms and 1gbit/500us)")
    parser.add_argument("--seconds", type=float, default=5.0, help="each transfer's length")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = [measure(link, args.seconds) for link in args.link or ["100mbit/3ms", "1gbit/500us"]]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("link            dir   sent Mbit/s  min RTT ms  srtt ms   "
          "frames the line sent late by <10us / >100us / >1ms (that direction, both runs)")
    for r in results:
        for way, direction in zip(("up", "down"), DIRECTIONS, strict=True):
            t = r[way]
            hist = r["line"][direction]["late_hist"] if r["line"] else None
            print(f"{r['link']:15} {way:5} {t['mbit']:11.0f}  {t['min_rtt_ms']:10.3f}  "
                  f"{t['srtt_ms']:7.2f}   {_shares(hist) if hist else r['delay']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
