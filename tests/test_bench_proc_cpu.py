"""Reading another process's CPU time from the kernel's accounting (peer/bench/proc_cpu.py)."""

from __future__ import annotations

import subprocess
import sys

from gleam.peer.bench.proc_cpu import cpu_time, settle

# Burns about 0.3 s of CPU on a thread that then ends, says so, and idles until stdin closes.
BURN_ON_A_THREAD = """
import sys, threading, time
def burn():
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass
t = threading.Thread(target=burn)
t.start()
t.join()
print("burnt", flush=True)
sys.stdin.read()
"""


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_a_reading_counts_the_work_of_threads_that_have_ended():
    child = _child(BURN_ON_A_THREAD)
    try:
        before = cpu_time(child.pid)
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        used = cpu_time(child.pid) - before
        assert used.total_s >= 0.3
        assert 0 <= used.system_s <= used.total_s
        assert settle([child.pid], deadline_s=5)
    finally:
        child.communicate()


def test_settle_says_when_a_process_stays_busy():
    child = _child("while True: pass")
    try:
        assert not settle([child.pid], deadline_s=0.5)
    finally:
        child.kill()
        child.wait()
