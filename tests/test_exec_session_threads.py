"""An executor session's memory count read from another thread while the session closes.

The serving agent's inventory sampler asks every session's ``live_bytes`` from a worker
thread while a session's own thread may close it. Reading the executor's pointer and then
calling into it raced with ``gl_exec_free`` (a use after free: the serving agent died with
a segmentation fault in libc during numba-cuda's conformance run, as one session closed).
The session's lock now makes a reader finish before the executor is freed, and a reader
after the close gets 0.
"""

from __future__ import annotations

import threading
import time

from gleam.peer.cuda.server import native

from .cuda_session import Session

ROUNDS = 150


def test_live_bytes_from_another_thread_while_sessions_close():
    backend = native.HostBackend({}, memory_limit=1 << 26)
    stop = threading.Event()
    current: list[native.ExecSession] = []
    reads = [0]
    failures: list[BaseException] = []

    def sample() -> None:
        try:
            while not stop.is_set():
                for session in list(current):
                    assert session.live_bytes() >= 0
                    reads[0] += 1
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for _ in range(ROUNDS):
            s = Session(backend, va_size=1 << 24)
            s.context()
            s.alloc(4096)
            current[:] = [s.x]
            deadline = time.monotonic() + 10
            seen = reads[0]
            while reads[0] == seen and time.monotonic() < deadline:
                time.sleep(0)   # let the sampler read this session at least once
            s.close()
            assert s.x.live_bytes() == 0
    finally:
        stop.set()
        sampler.join(timeout=30)
        backend.close()
    assert not failures, failures
    assert reads[0] >= ROUNDS
