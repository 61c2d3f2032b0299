"""Python's handle on a client session's native lanes (``cffi_build/src/lanes/pump.c``).

The session's counters, its held flag and its two locks live in the native
``gl_pump`` struct, because the fast lanes update them without Python; the
session reads and writes them through the descriptors and locks here.
"""

from __future__ import annotations

import os
from typing import Any

from gleam.peer.cuda.wire import envelope
from gleam.peer.nativelib import ffi, lib


class PumpField:
    """An attribute of a ClientSession that is a field of its ``gl_pump``."""

    def __init__(self, field: str, kind: type = int) -> None:
        self.field = field
        self.kind = kind

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return self.kind(getattr(obj._p, self.field))

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj._p, self.field, int(value))


class PumpLock:
    """One of the pump's mutexes as a context manager (blocking in C, GIL released)."""

    def __init__(self, pump: Any, lock: Any, unlock: Any) -> None:
        self._pump = pump
        self._lock = lock
        self._unlock = unlock

    def __enter__(self) -> None:
        self._lock(self._pump)

    def __exit__(self, *exc: object) -> None:
        self._unlock(self._pump)


def new_pump(fd: int, session: int, journal: Any, buffered: bytes, h2d_call: int,
             ring: int | None = None) -> Any:
    """A ``gl_pump`` (freed when collected) reading the program's socket ``fd``, and
    its hand-over ring when the program has one (handover.py)."""
    pump = lib.gl_pump_new(fd, session, envelope.MAX_BODY, journal)
    if pump == ffi.NULL:
        raise MemoryError("no memory for a session")
    pump = ffi.gc(pump, lib.gl_pump_free)
    if buffered and lib.gl_pump_prefill(pump, buffered, len(buffered)) != 0:
        raise MemoryError("no memory for a session")
    pump.h2d_call = h2d_call
    if ring is not None and (err := lib.gl_pump_ring(pump, ring)) != 0:
        raise OSError(-err, f"cannot map the hand-over ring: {os.strerror(-err)}")
    return pump


def uplink_error(pump: Any, rc: int) -> Exception:
    """What a failed ``gl_pump_uplink`` means, as the Python reader raised it."""
    detail = int(pump.err)
    if rc == lib.GL_PUMP_E_KIND:
        name = envelope.TYPE_NAMES.get(detail, f"type {detail}")
        return envelope.EnvelopeError(f"the program sent a {name}")
    if rc == lib.GL_PUMP_E_SIZE:
        return envelope.EnvelopeError(f"envelope of {detail} bytes is too large")
    if rc == lib.GL_PUMP_E_HEADER:
        return envelope.EnvelopeError("envelope flags or reserved bits set, or an unknown type")
    if rc == lib.GL_PUMP_E_RING:
        return envelope.EnvelopeError(
            "a hand-over note names no envelope of the ring, or not a batch")
    if rc == lib.GL_PUMP_E_TRUNCATED:
        return ConnectionError("the program closed its connection mid-envelope")
    if rc == lib.GL_PUMP_E_NOMEM:
        return MemoryError("no memory for the program's envelope")
    return OSError(detail, f"reading the program's socket failed: errno {detail}")
