"""Lease messages between a client's agent and a server's (docs/scheduler.md, "Leases").

The client asks ``lease_request`` before it opens a session; the server
answers ``lease_grant`` or ``lease_deny``, both with its load as it is now, so
a denied client ranks the rest on fresh figures instead of stale gossip. The
client sends ``lease_release`` once the session opened (the session then
counts in the server's load itself) or when it gave up. Registered with the
message registry, as the CUDA session messages are.
"""

from __future__ import annotations

import dataclasses

from gleam.peer.protocol import Message, register_message

MAX_REASON = 200
MAX_CLIENT = 64
_U64 = 2**64 - 1
_COUNT = 1 << 20


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)


def _lease(value: int) -> None:
    _check(0 < value <= _U64, "lease must be a non-zero unsigned 64-bit integer")


@dataclasses.dataclass(frozen=True)
class ServerLoad:
    """A server's load when it answered: what the cost model's Offer needs."""

    sessions: int
    leases: int
    max_sessions: int
    gflops: float
    free_memory: int | None = None

    def __post_init__(self) -> None:
        for name in ("sessions", "leases", "max_sessions"):
            _check(0 <= getattr(self, name) < _COUNT, f"{name} out of range")
        _check(0.0 <= self.gflops < 1e12, "gflops out of range")
        _check(self.free_memory is None or 0 <= self.free_memory <= _U64,
               "free_memory out of range")


@register_message("lease_request")
@dataclasses.dataclass(frozen=True)
class LeaseRequest(Message):
    lease: int
    memory: int = 0  # device bytes the session expects to allocate (0: unknown)
    client: str = ""

    def __post_init__(self) -> None:
        _lease(self.lease)
        _check(0 <= self.memory <= _U64, "memory out of range")
        _check(len(self.client) <= MAX_CLIENT, "client name too long")


@register_message("lease_grant")
@dataclasses.dataclass(frozen=True)
class LeaseGrant(Message):
    lease: int
    ttl: float  # seconds the place is held if the session does not open
    load: ServerLoad

    def __post_init__(self) -> None:
        _lease(self.lease)
        _check(0.0 < self.ttl <= 3600.0, "ttl out of range")


@register_message("lease_deny")
@dataclasses.dataclass(frozen=True)
class LeaseDeny(Message):
    lease: int
    reason: str
    load: ServerLoad

    def __post_init__(self) -> None:
        _lease(self.lease)
        _check(len(self.reason) <= MAX_REASON, "reason too long")


@register_message("lease_release")
@dataclasses.dataclass(frozen=True)
class LeaseRelease(Message):
    lease: int

    def __post_init__(self) -> None:
        _lease(self.lease)
