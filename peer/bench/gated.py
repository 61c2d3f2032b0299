"""A program run through ``gleam-peer run`` one step at a time.

The ``accumulate`` example reads a line from stdin between steps; whoever
drives it (a test, ``gleam-peer bench consistency``) kills or moves the server
between two known steps, or while a step waits on the server.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

LINE_WAIT = 60.0


class GatedRun:
    """``binary KERNELS STEPS gate [extra ...]`` through ``gleam-peer run --peer PEER``."""

    def __init__(self, state_dir: Path, binary: Path, kernels: Path, steps: int, peer: str,
                 *extra: str) -> None:
        self.steps_total = steps
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(state_dir),
             "--peer", peer, "--", str(binary), str(kernels), str(steps), "gate", *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.started = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")

    def line(self) -> str:
        """The next line the program prints (empty at its end)."""
        try:
            return self.lines.get(timeout=LINE_WAIT)
        except queue.Empty:
            self.proc.kill()
            raise TimeoutError(f"the program printed nothing for {LINE_WAIT:.0f} s") from None

    def steps(self, count: int) -> list[str]:
        """Let ``count`` more steps run (the first step needs no line); their lines."""
        out = []
        for _ in range(count):
            if self.started:
                self.release()
            self.started = True
            out.append(self.line())
        return out

    def release(self) -> None:
        """Open the gate for one step."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 120) -> tuple[int, list[str], str]:
        """Release every remaining step; (exit status, the lines not read yet, stderr)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # the program may have stopped already
            for _ in range(self.steps_total):
                self.release()
            self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
        self._reader.join(10)
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        rest = []
        while not self.lines.empty():
            line = self.lines.get()
            if line:
                rest.append(line)
        return self.proc.returncode, rest, err


def verdict(lines: list[str]) -> dict[str, Any]:
    """The JSON verdict an example prints last ({} when there is none)."""
    found = [json.loads(line) for line in lines if line.startswith("{")]
    return found[-1] if found else {}
