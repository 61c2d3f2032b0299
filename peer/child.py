"""Run a program as a child and pass its fate on to our caller.

``gleam-peer run`` used to replace itself with the program (exec); it now waits
for it, to say afterwards what the program's CUDA sessions did. The caller must
not see a difference: the program's exit status becomes ours, and a program
killed by a signal kills us with the same signal. Signals sent to us (SIGINT,
SIGTERM, SIGHUP, SIGQUIT: ``kill`` of our pid, a supervisor) are passed to the
program. Those the terminal sends (Ctrl-C, Ctrl-\\, a hangup) reach the program
directly, as it is in our foreground process group, so they are not passed a
second time: the kernel marks them ``SI_KERNEL``. A process that signals our
whole process group still reaches the program twice; that cannot be told apart.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FORWARDED = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
# siginfo's si_code for a signal the kernel sent (the terminal's), not a process.
SI_KERNEL = 0x80
# Python ignores these itself; a program must start with the default, as a shell gives.
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)
# Signals whose default action dumps core: our own core would only mislead.
CORE = frozenset({signal.SIGQUIT, signal.SIGILL, signal.SIGTRAP, signal.SIGABRT,
                  signal.SIGBUS, signal.SIGFPE, signal.SIGSEGV, signal.SIGSYS,
                  signal.SIGXCPU, signal.SIGXFSZ})
# A safety net: a child's end is also looked for this often, in case a thread
# without the signals blocked took SIGCHLD (gleam-peer run starts none).
LOOK_EVERY = 1.0


@dataclass(frozen=True)
class Ended:
    """How the program ended: its exit status, or the signal that killed it."""

    status: int = 0
    signal: int | None = None


def run(argv: Sequence[str], env: Mapping[str, str]) -> Ended:
    """Start ``argv`` (looked up on PATH) and wait for it, passing signals on.
    Raises OSError when it cannot be started."""
    waited: set[int] = {*FORWARDED, signal.SIGCHLD}
    # Blocked before the child exists, so no signal falls between; the child
    # starts with our caller's mask, not this one.
    before = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        pid = os.posix_spawnp(argv[0], list(argv), dict(env), setsigmask=before,
                              setsigdef=RESTORED)
        return _wait(pid, waited)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _wait(pid: int, waited: set[int]) -> Ended:
    """Reap ``pid``, passing on the signals sent to us while it runs."""
    while True:
        info = signal.sigtimedwait(waited, LOOK_EVERY)
        if info is not None and info.si_signo in FORWARDED and info.si_code != SI_KERNEL:
            with contextlib.suppress(ProcessLookupError):  # it has just ended: reaped next
                os.kill(pid, info.si_signo)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            if os.WIFSIGNALED(status):
                return Ended(signal=os.WTERMSIG(status))
            return Ended(status=os.waitstatus_to_exitcode(status))


def pass_on(ended: Ended) -> int:
    """Our exit status for the program's end; dies of its signal when it died of one."""
    if ended.signal is None:
        return ended.status
    sys.stdout.flush()
    sys.stderr.flush()
    sig = ended.signal
    if sig in CORE:  # the program dumped its core if the limits let it
        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler to reset
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    return 128 + sig  # a signal whose default is not to end a process (SIGCHLD...)
