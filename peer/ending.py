"""How a command ends on a signal: as on ^C, so that its cleanup runs.

Python dies at once on SIGTERM (``kill PID``, a supervisor, ``timeout``) and
SIGHUP (a closed terminal): no ``finally`` runs, and the agents a benchmark,
the demo or ``conformance`` started (peer/localmesh.py) stay running. While a
command runs, both raise KeyboardInterrupt in the main thread instead, which
every command already handles (README, "Exit status"). A command that handles
signals itself (``up`` through Trio, ``run`` forwarding them to its program)
sets its own handlers inside, which win while they are set.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signo: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"ended by {signal.Signals(signo).name}")


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """While inside: SIGTERM and SIGHUP raise KeyboardInterrupt (main thread only;
    elsewhere, where no handler can be set, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _interrupt) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
