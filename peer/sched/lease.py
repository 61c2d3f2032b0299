"""Leases without I/O: the server's admission desk and the client's book of fresh loads.

A lease is a place on a server held for a session that is about to open.
The server admits by its own capacity, never by what a client believes:
sessions it serves plus leases it granted stay below its session limit, the
leases waiting to open stay below its queue limit, and the memory leased
stays within its free memory. Every answer carries the load as it is now,
which the client keeps (``LoadBook``) in preference to gossip, which may be
seconds old: stale gossip is what makes concurrent clients pile onto one
server that looked idle to all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gleam.peer.sched.cost import Offer
from gleam.peer.sched.messages import ServerLoad

# How long a granted place waits for its session (the client's session open
# times out after 10 s; a little more covers the release in flight).
LEASE_TTL = 15.0
# How long a load from a lease answer beats the gossip record.
FRESH_FOR = 5.0


@dataclass(frozen=True)
class Capacity:
    """What a server can take now, as its own agent sees it."""

    sessions: int  # sessions it serves
    max_sessions: int
    gflops: float
    free_memory: int | None = None  # None: not known (admit by sessions only)
    serves: bool = True  # False: no backend, deny everything


@dataclass
class _Held:
    client: str
    memory: int
    until: float


@dataclass(frozen=True)
class Answer:
    granted: bool
    load: ServerLoad
    reason: str = ""
    ttl: float = LEASE_TTL


class LeaseDesk:
    """A server's leases. ``capacity`` is read at every request; ``now`` is any clock."""

    def __init__(self, capacity: Callable[[], Capacity], *, max_queue: int | None = None,
                 ttl: float = LEASE_TTL) -> None:
        self._capacity = capacity
        self._max_queue = max_queue
        self._ttl = ttl
        self._held: dict[tuple[str, int], _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def load(self, now: float) -> ServerLoad:
        self.expire(now)
        cap = self._capacity()
        free = cap.free_memory
        if free is not None:
            free = max(free - sum(h.memory for h in self._held.values()), 0)
        return ServerLoad(sessions=min(max(cap.sessions, 0), (1 << 20) - 1),
                          leases=len(self._held),
                          max_sessions=min(max(cap.max_sessions, 0), (1 << 20) - 1),
                          gflops=min(max(cap.gflops, 0.0), 1e11), free_memory=free)

    def request(self, client: str, lease: int, memory: int, now: float) -> Answer:
        """Grant or deny one lease; a repeated request for a held lease is granted again."""
        key = (client, lease)
        self.expire(now)
        if key in self._held:
            self._held[key].until = now + self._ttl
            return Answer(True, self.load(now), ttl=self._ttl)
        cap = self._capacity()
        load = self.load(now)
        why = self._refusal(cap, load, memory)
        if why:
            return Answer(False, load, why)
        self._held[key] = _Held(client, memory, now + self._ttl)
        return Answer(True, self.load(now), ttl=self._ttl)

    def _refusal(self, cap: Capacity, load: ServerLoad, memory: int) -> str:
        if not cap.serves:
            return "serves no CUDA"
        if load.sessions + load.leases >= load.max_sessions:
            return (f"full: {load.sessions} sessions + {load.leases} leases of "
                    f"{load.max_sessions}")
        queue = self._max_queue if self._max_queue is not None else load.max_sessions
        if load.leases >= queue:
            return f"queue full: {load.leases} sessions waiting to open"
        if load.free_memory is not None and memory > load.free_memory:
            return f"too little free memory: {memory} B asked, {load.free_memory} B free"
        return ""

    def release(self, client: str, lease: int) -> bool:
        return self._held.pop((client, lease), None) is not None

    def drop_client(self, client: str) -> int:
        """A client's link went away: its places are free again."""
        gone = [key for key in self._held if key[0] == client]
        for key in gone:
            del self._held[key]
        return len(gone)

    def expire(self, now: float) -> None:
        for key in [k for k, h in self._held.items() if h.until <= now]:
            del self._held[key]


class LoadBook:
    """The loads a client heard in lease answers, fresher than gossip for a while."""

    def __init__(self, fresh_for: float = FRESH_FOR) -> None:
        self._fresh_for = fresh_for
        self._heard: dict[str, tuple[float, ServerLoad]] = {}

    def heard(self, node_id: str, load: ServerLoad, now: float) -> None:
        self._heard[node_id] = (now, load)

    def changed(self, node_id: str, *, sessions: int = 0, leases: int = 0) -> None:
        """This agent's own doing changed a load it heard: its lease became a session
        (``sessions=1, leases=-1``), or its session ended (``sessions=-1``). The answer
        stays as fresh as it was; without this, a program run right after another
        saw the first one's lease and session for seconds and halved its estimate."""
        entry = self._heard.get(node_id)
        if entry is None:
            return
        at, load = entry
        self._heard[node_id] = (at, replace(load, sessions=max(load.sessions + sessions, 0),
                                            leases=max(load.leases + leases, 0)))

    def fresh(self, node_id: str, now: float) -> ServerLoad | None:
        entry = self._heard.get(node_id)
        if entry is None or now - entry[0] > self._fresh_for:
            return None
        return entry[1]

    def apply(self, node_id: str, offer: Offer, now: float) -> Offer:
        """``offer`` (from gossip) with the load of a fresh answer, if one was heard.

        Speed and utilisation stay the gossiped ones: an answer's speed is the
        same measurement, and utilisation it does not carry.
        """
        load = self.fresh(node_id, now)
        if load is None:
            return offer
        memory = load.free_memory if load.free_memory is not None else offer.free_memory
        return replace(offer, sessions=load.sessions, queue=load.leases, free_memory=memory)
