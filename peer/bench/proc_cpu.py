"""Another process's CPU time, from the kernel's own accounting.

A process's CPU time counts every thread it has had, the ones that ended
included, so a reading before and after a run holds all the work the process
did in between, wherever it ran it. Two readings of the same account:

* the total from the process's CPU clock (``clock_gettime`` on the clock id
  Linux gives every process, ``CPUCLOCK_SCHED``: the scheduler's runtime, in ns),
  so that a run of a few milliseconds is measured too;
* the split into user and system time from ``/proc/PID/stat`` (utime, stime),
  which the kernel keeps in clock ticks (``SC_CLK_TCK``, 10 ms here): good to
  1 % from a second of CPU on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
# Quiet: each process used at most this much CPU over one settle interval
# (an idle agent's timers cost far less).
QUIET_S = 0.002
SETTLE_INTERVAL_S = 0.1
CPUCLOCK_SCHED = 2


@dataclass(frozen=True)
class CpuTime:
    """CPU seconds of one process (and its children, if any): in all, and the part
    the kernel counted as system time."""

    total_s: float
    user_ticks_s: float
    system_ticks_s: float

    @property
    def system_s(self) -> float:
        """The system share of ``total_s`` (the tick counts' split, applied to it)."""
        ticks = self.user_ticks_s + self.system_ticks_s
        return self.total_s * self.system_ticks_s / ticks if ticks > 0 else 0.0

    def __add__(self, other: CpuTime) -> CpuTime:
        return CpuTime(self.total_s + other.total_s, self.user_ticks_s + other.user_ticks_s,
                       self.system_ticks_s + other.system_ticks_s)

    def __sub__(self, earlier: CpuTime) -> CpuTime:
        return CpuTime(self.total_s - earlier.total_s, self.user_ticks_s - earlier.user_ticks_s,
                       self.system_ticks_s - earlier.system_ticks_s)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except FileNotFoundError:  # ended meanwhile: it has no children left
        pass
    return out


def _own(pid: int) -> CpuTime:
    with open(f"/proc/{pid}/stat") as f:
        # The name (field 2) may hold spaces; the fields after its ')' are plain.
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15.
    clock = ((~pid) << 3) | CPUCLOCK_SCHED  # the process-wide clock (not one thread's)
    return CpuTime(time.clock_gettime(clock), int(fields[11]) * TICK_S,
                   int(fields[12]) * TICK_S)


def cpu_time(pid: int) -> CpuTime:
    """CPU time of ``pid`` and of its living descendants (an agent may start helpers)."""
    total = _own(pid)
    for child in _children(pid):
        try:
            total += cpu_time(child)
        except OSError:  # it ended between the listing and the reading
            continue
    return total


def read_all(pids: Mapping[str, int]) -> dict[str, CpuTime]:
    return {name: cpu_time(pid) for name, pid in pids.items()}


def settle(pids: Sequence[int], deadline_s: float = 10.0) -> bool:
    """Wait until every process in ``pids`` is quiet (work it does after a program's
    last call returned, such as the cache's deferred offers, has ended). False if
    one was still busy at the deadline."""
    end = time.monotonic() + deadline_s
    last = [cpu_time(p).total_s for p in pids]
    while time.monotonic() < end:
        time.sleep(SETTLE_INTERVAL_S)
        now = [cpu_time(p).total_s for p in pids]
        if all(n - b <= QUIET_S for n, b in zip(now, last, strict=True)):
            return True
        last = now
    return False
