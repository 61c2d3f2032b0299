"""How a command fails in front of its user: one line on stderr, a documented exit status.

A failure the user can hit (no agent, a full disk, a read-only state directory, a
refused request) is a :class:`UserError`, or an ``OSError`` of the kinds in
``USER_ERRNOS``, and prints ``gleam-peer: <what happened>; <what to do>``. Anything
else is a bug in gleam: it keeps its traceback, followed by one line saying so.
The statuses are in README.md ("Exit status").
"""

from __future__ import annotations

import errno
import os
import traceback
from typing import TextIO

OK = 0
FAILED = 1        # the command could not do its job; the line says why and what to do
USAGE = 2         # the command line is wrong, or this machine lacks what the command needs
NO_AGENT = 3      # no agent answers on the state directory's control socket (or it stopped)
BUG = 70          # an unexpected exception: a bug in gleam (EX_SOFTWARE)
INTERRUPTED = 130  # Ctrl-C

# What the machine did, not what gleam did: the user frees space, picks another
# directory or fixes a permission. Other OSErrors stay tracebacks (bugs, mostly).
USER_ERRNOS = {
    errno.ENOSPC: "free some space there or choose another directory",
    errno.EDQUOT: "free some space there or choose another directory",
    errno.EROFS: "choose a directory on a writable file system",
    errno.EACCES: "check its permissions or choose another directory",
    errno.EPERM: "check its permissions or choose another directory",
}


class UserError(Exception):
    """A failure the user can fix; its message is the whole line (after ``gleam-peer:``)."""

    status = FAILED

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


def os_error_line(exc: OSError, doing: str = "") -> str | None:
    """One line for an OSError a user can hit (full disk, read-only, no permission);
    None for any other. ``doing`` names what failed ("cannot write the mesh key")."""
    advice = USER_ERRNOS.get(exc.errno or 0)
    if advice is None:
        return None
    where = f" {exc.filename}" if exc.filename else ""
    what = doing or f"cannot use{where}"
    reason = exc.strerror or os.strerror(exc.errno or 0)
    return f"{what}: {reason}; {advice}"


def user_failure(exc: BaseException) -> UserError | None:
    """``exc`` as the UserError the user sees, or None if it is a bug.

    A group (Trio's nurseries raise them) counts when each exception in it does;
    the user sees the first.
    """
    if isinstance(exc, UserError):
        return exc
    if isinstance(exc, OSError):
        line = os_error_line(exc)
        return None if line is None else UserError(line)
    if isinstance(exc, BaseExceptionGroup):
        found = [user_failure(e) for e in exc.exceptions]
        if found and all(f is not None for f in found):
            return found[0]
    return None


def report_bug(stream: TextIO) -> int:
    """Print the exception being handled with a line saying it is a bug; the status."""
    traceback.print_exc(file=stream)
    stream.write("gleam-peer: this is a bug in gleam (the traceback above says where); "
                 "please report it with the command you ran\n")
    return BUG
