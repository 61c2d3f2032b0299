"""A command ended by SIGTERM or SIGHUP stops what it started, as on ^C (peer/ending.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gleam.peer.ending import signals_interrupt

from .processes import running


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` that are agents (``gleam.peer ... up``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"up" in cmdline and b"gleam.peer" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_killed_demo_stops_its_agents(tmp_path: Path, sig: int) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    demo = subprocess.Popen(
        [sys.executable, "-m", "gleam.peer", "demo", "--no-live", "--runs", "50",
         "--repeats", "1000"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    agents: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(agents) < 3 and demo.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            agents = _children(demo.pid)
        assert len(agents) == 3, f"the demo did not start its three agents: {agents}"
        demo.send_signal(sig)  # the demo alone, as `kill PID` does
        status = demo.wait(60)
        assert status != 0
        deadline = time.monotonic() + 30
        while any(running(a) for a in agents) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [a for a in agents if running(a)] == [], "agents left running"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for pid in agents:  # (a failure must not leave them either)
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_handlers_are_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with signals_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs between bytecodes, before this ends
    assert signal.getsignal(signal.SIGTERM) is before
