"""Posting the tuner's state to the local agent, and reading back its links.

Each worker of a job runs beside a gleam agent. After every decision the
worker sends ``batch_tuner.report`` on the agent's control socket: the
agent shows the state in its status view and gossips a summary to the mesh,
and answers with its measured links (mean RTT, slowest bandwidth), which
the tuner observes for that worker. No agent running is not an error:
training goes on, the links stay unknown, and one warning is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gleam.peer import control
from gleam.peer.state import StateDir

log = logging.getLogger("gleam.tuning")

REPORT_OP = "batch_tuner.report"


class AgentReporter:
    """Sends one worker's view of a job to the agent of ``state_dir``."""

    def __init__(
        self, job: str, worker: int, state_dir: str | Path | None = None, *,
        peers: Sequence[str] | None = None, timeout: float = 2.0,
    ) -> None:
        # None: $GLEAM_STATE_DIR, else the default, as for the agent itself.
        self.socket = StateDir(state_dir).control_socket
        self.job = job
        self.worker = worker
        self.peers = list(peers) if peers else None
        self.timeout = timeout
        self._warned = False

    def report(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Post ``state`` (``BatchTuner.status()``); the agent's links, or None."""
        args: dict[str, Any] = {"job": self.job, "worker": self.worker, "state": state}
        if self.peers:
            args["peers"] = self.peers
        try:
            reply = control.request(self.socket, REPORT_OP, args, timeout=self.timeout)
        except (control.AgentNotRunning, control.ControlError, OSError) as exc:
            if not self._warned:
                log.warning("batch tuner: cannot report to the local agent (%s); "
                            "training continues without it", exc)
                self._warned = True
            return None
        links = reply.get("links") if isinstance(reply, dict) else None
        return links if isinstance(links, dict) else None
