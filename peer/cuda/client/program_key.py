"""Which program a session belongs to: the key its learned demand is kept under.

The interposer's ``cuda_attach`` names the program only by its 15-character
``comm`` and its pid. The agent runs on the same host, so it reads the rest
from ``/proc``: the executable's path and the arguments, whose digest tells
``mlp_infer 4 passes`` from ``mlp_infer 400 passes``. No change to the
interposer's request is needed, so older interposers are keyed too.

The pid is the connecting process's own (``SO_PEERCRED`` of the control
socket) where the kernel says so, not the one the request claims: a local
process cannot file its runs under another program's key. Without /proc
(another OS, a process already gone) the key is the ``comm`` name alone.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from typing import Protocol

MAX_CMDLINE = 64 * 1024  # bytes of /proc/PID/cmdline read; a longer one is cut
MAX_PATH = 400  # characters of the executable's path kept in the key
_UCRED = struct.Struct("iII")  # pid, uid, gid


class _Socket(Protocol):
    def getsockopt(self, level: int, option: int, size: int, /) -> bytes: ...


def peer_pid(sock: _Socket) -> int | None:
    """The pid of the process at the other end of a Unix socket, if the kernel says."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except (AttributeError, OSError):  # not Linux, or not a Unix socket
        return None
    pid = _UCRED.unpack(raw)[0] if len(raw) == _UCRED.size else 0
    return pid if pid > 0 else None


def _cmdline(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(MAX_CMDLINE)
    except OSError:
        return None
    return raw.rstrip(b"\0").split(b"\0") if raw else None


def program_key(pid: int, comm: str) -> str:
    """``exe-path args-digest`` for a live process, else ``comm:NAME``."""
    argv = _cmdline(pid) if pid > 0 else None
    try:
        exe = os.readlink(f"/proc/{pid}/exe") if argv else ""
    except OSError:
        exe = ""
    if not argv or not exe:
        return f"comm:{comm[:64]}"
    digest = hashlib.sha256(b"\0".join(argv[1:])).hexdigest()[:16]
    if len(exe) > MAX_PATH:  # keep the key bounded; the tail names the program
        exe = "..." + exe[-MAX_PATH:]
    return f"{exe} {digest}"


def program_of(key: str) -> str:
    """The program part of a key: runs with other arguments share it."""
    return key.rsplit(" ", 1)[0] if not key.startswith("comm:") else key
