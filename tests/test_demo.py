"""`gleam-peer demo`: the README's main job, end to end, and that it leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gleam.peer.localmesh import wait_for


def _agents_of(pid: int) -> list[int]:
    """PIDs of gleam agents whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"gleam.peer" in cmd and b"up" in cmd:
            found.append(int(entry))
    return found


def _row(out: str, title: str) -> list[str]:
    """The cells of the summary's row ``title`` (one line: the table is wide enough)."""
    line = next(line for line in out.splitlines() if line.startswith(f"│ {title} "))
    return [cell.strip() for cell in line.split("│")[2:-1]]


def test_demo_runs_the_example_twice_and_summarizes():
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "demo", "--no-live"],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "run 1" in out and "run 2" in out
    assert "desktop (host backend)" in out  # the faster of the two servers
    assert "mini-pc" in out  # named as the runner-up in the reason
    assert out.count("OK: matches the CPU") == 2
    assert "every result matched" in out
    # Each run's estimate beside what was measured, and what the estimate rests on.
    first, second = _row(out, "estimated")
    assert first.endswith("; demand guessed: no earlier run of this program"), first
    assert second.endswith("; demand learned from 1 run"), second
    assert all(" s (send " in cell and "+ compute" in cell for cell in (first, second))
    measured = _row(out, "measured")
    assert all(" s session, " in cell and " s wall (device " in cell for cell in measured)


def test_ctrl_c_stops_every_agent_it_started():
    proc = subprocess.Popen([sys.executable, "-m", "gleam.peer", "demo", "--no-live"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(_agents_of(proc.pid)) == 3, 60, "the demo's three agents")
        agents = _agents_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, out
        assert "interrupted" in out
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{a}") for a in agents):
            time.sleep(0.1)
        assert not any(os.path.exists(f"/proc/{a}") for a in agents)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
