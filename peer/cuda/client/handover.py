"""The hand-over ring: a session's program writes its large envelopes (host-to-device
copies) into memory its client agent maps, instead of through the Unix socket.

The ring is a sealed memfd the agent creates for each session and passes to the
program with the HELLO (``SCM_RIGHTS``); the uplink (``cffi_build/src/lanes/pump.c``)
maps it and copies each envelope out into its journal block. The layout and
why are in ``cffi_build/include/gl_ring.h``; docs/architecture.md has the path.

``GLEAM_HANDOVER_MIB`` sets its size per session (default 8 MiB; 0: no ring, the
socket carries everything, as for a program built before the ring).
"""

from __future__ import annotations

import array
import contextlib
import logging
import os
import socket

import trio

from gleam.peer.nativelib import lib

log = logging.getLogger("gleam.cuda.client")

ENV = "GLEAM_HANDOVER_MIB"
DEFAULT_MIB = 8
_MIB = 1024 * 1024
_LARGEST_MIB = 1024


def ring_bytes() -> int:
    """The ring's data size from ``GLEAM_HANDOVER_MIB`` (whole MiB, 0..1024): 0 is off.
    A value that is not such a number is refused with the reason."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_MIB * _MIB
    try:
        mib = int(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r} is not a whole number of MiB") from None
    if not 0 <= mib <= _LARGEST_MIB:
        raise ValueError(f"{ENV}={mib} is outside 0..{_LARGEST_MIB} MiB")
    return mib * _MIB


def create() -> int | None:
    """A new ring's descriptor (the caller closes it), or None: off, or the
    kernel refused (the session then uses its socket alone, and the log says why)."""
    size = ring_bytes()
    if size == 0:
        return None
    fd = int(lib.gl_handover_create(size))  # (1 MiB and up: above GL_RING_SMALLEST)
    if fd < 0:
        log.warning("no hand-over ring for a session: %s", os.strerror(-fd))
        return None
    return fd


async def send_with_ring(stream: trio.SocketStream, data: bytes, ring: int | None) -> None:
    """Sends data (the HELLO) on the program's socket, the ring's descriptor with
    its first byte."""
    if ring is None:
        await stream.send_all(data)
        return
    rights = array.array("i", [ring]).tobytes()
    sent = await stream.socket.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
    if sent < len(data):
        await stream.send_all(data[sent:])


def close(ring: int | None) -> None:
    """Lets go of this process's descriptor (the mappings keep the memory)."""
    if ring is not None:
        with contextlib.suppress(OSError):
            os.close(ring)
