"""The lab's userspace delay line: both directions of one host's link, delayed.

These kernels have no netem, so a lab host whose link has an RTT gets one of
these processes in the switch namespace, between the veth that leads to the
host (``host_side``) and the veth that leads into the bridge
(``bridge_side``). Each direction is a C thread (``_delayline``: AF_PACKET
sockets, the kernel's receive timestamps, a timed FIFO) that sends every
frame ``delay`` after it arrived: half the link's RTT each way. The process
holds nothing that needs cleaning up, so SIGTERM's default action ends it.

``python -m gleam.peer.lab.delayline HOST_SIDE BRIDGE_SIDE DELAY_US [--stats FILE]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

DIRECTIONS = ("to_bridge", "to_host")
# Upper edges of the lateness buckets in the C (microseconds); the last is open.
LATE_EDGES_US = (10, 50, 100, 200, 500, 1000)


def _load() -> Any:
    from gleam.peer.lab import _delayline  # type: ignore[attr-defined]

    return _delayline


class DelayLine:
    """Forward between two interfaces of this namespace, ``delay_s`` each way."""

    def __init__(self, host_side: str, bridge_side: str, delay_s: float) -> None:
        mod = _load()
        self._ffi, self._lib = mod.ffi, mod.lib
        self.delay_ns = round(delay_s * 1e9)
        self._stats = {d: self._ffi.new("gl_delay_stats *") for d in DIRECTIONS}
        self._ends = {"to_bridge": (host_side, bridge_side), "to_host": (bridge_side, host_side)}
        self.errors: dict[str, str] = {}

    def _open(self, ifname: str, receive: bool) -> int:
        fd: int = self._lib.gl_delay_open(ifname.encode(), int(receive))
        if fd < 0:
            raise OSError(-fd, f"delay line socket on {ifname}: {os.strerror(-fd)}")
        return fd

    def start(self) -> None:
        """Open the sockets (errors raise here) and start both directions."""
        for direction, (rx_if, tx_if) in self._ends.items():
            rx, tx = self._open(rx_if, True), self._open(tx_if, False)
            threading.Thread(target=self._run, args=(direction, rx, tx),
                             name=f"delay-{direction}", daemon=True).start()

    def _run(self, direction: str, rx: int, tx: int) -> None:
        # cffi releases the GIL for the call, which returns only on a socket error.
        rc = self._lib.gl_delay_run(rx, tx, self.delay_ns, self._stats[direction])
        self.errors[direction] = os.strerror(-rc)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"delay_us": self.delay_ns / 1000, "errors": dict(self.errors)}
        for direction, st in self._stats.items():
            sent = max(1, st.forwarded + st.send_errors)
            out[direction] = {
                "forwarded": st.forwarded, "bytes": st.bytes, "dropped": st.dropped,
                "send_errors": st.send_errors,
                "late_mean_us": round(st.late_sum_ns / sent / 1000, 2),
                "late_max_us": round(st.late_max_ns / 1000, 2),
                "late_hist": list(st.late_hist),
            }
        return out


def realtime() -> bool:
    """Run this process (and the threads it starts) at the lowest real-time
    priority: on a busy 2-core machine it cuts the frames sent over 1 ms late
    from about 2 % to about 0.1 % (docs/lab.md). The kernel's RT throttling
    keeps 5 % of each CPU for everyone else; without the privilege the line
    runs at normal priority."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gleam.peer.lab.delayline", description=__doc__)
    parser.add_argument("host_side")
    parser.add_argument("bridge_side")
    parser.add_argument("delay_us", type=float, help="one-way delay, each direction")
    parser.add_argument("--stats", type=Path, help="rewrite this JSON file every second")
    args = parser.parse_args(argv)
    line = DelayLine(args.host_side, args.bridge_side, args.delay_us / 1e6)
    realtime()
    try:
        line.start()
    except OSError as exc:
        print(exc, flush=True)
        return 1
    print("ready", flush=True)  # the lab waits for this line, then closes the pipe
    while len(line.errors) < len(DIRECTIONS):
        if args.stats is not None:
            tmp = args.stats.with_suffix(".tmp")
            tmp.write_text(json.dumps(line.stats()))
            tmp.replace(args.stats)
        time.sleep(1.0)
    with contextlib.suppress(OSError):
        print(f"delay line stopped: {line.errors}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
