"""Leases over real peer links (Trio thread): a server's desk and a client's requests.

One ``LeaseService`` per agent, the built-in scheduler plugin's component
(``agent.components``, docs/plugins.md "Per-agent state"). The
session-open path calls ``leased(agent, choice)``: it asks the chosen server
for a lease, falls back along the ranking on a deny, and gives the place back
once the session opened (from then on the session itself counts in the
server's load). Peers without the ``scheduler/1`` capability are not asked:
they admit at ``cuda_open`` as before.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import trio

from gleam.peer.sched.choice import Choice, NoServer
from gleam.peer.sched.lease import Capacity, LeaseDesk, LoadBook
from gleam.peer.sched.messages import LeaseDeny, LeaseGrant, LeaseRelease, LeaseRequest

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink
    from gleam.peer.sched.view import SchedAgent

log = logging.getLogger("gleam.sched")

CAPABILITY = "scheduler/1"
ANSWER_TIMEOUT = 5.0
NO_LEASE = 0  # the server does not lease: nothing to give back

@dataclass
class _Wait:
    link: PeerLink
    done: trio.Event
    answer: LeaseGrant | LeaseDeny | str | None = None


@dataclass(frozen=True)
class Leased:
    link: PeerLink
    lease: int
    denials: tuple[str, ...]  # "server: why", for the servers that said no first


class LeaseService:
    def __init__(self, agent: SchedAgent, capacity: Callable[[], Capacity]) -> None:
        self.agent = agent
        self.desk = LeaseDesk(capacity)
        self.book = LoadBook()
        self._waits: dict[int, _Wait] = {}

    # ------------------------------------------------------------ serving side

    def on_request(self, link: PeerLink, msg: LeaseRequest) -> None:
        answer = self.desk.request(link.node_id, msg.lease, msg.memory, trio.current_time())
        if answer.granted:
            link.io.submit(LeaseGrant(lease=msg.lease, ttl=answer.ttl, load=answer.load))
        else:
            log.info("lease for %s denied: %s", link.name, answer.reason)
            link.io.submit(LeaseDeny(lease=msg.lease, reason=answer.reason[:200],
                                     load=answer.load))

    def on_release(self, link: PeerLink, msg: LeaseRelease) -> None:
        self.desk.release(link.node_id, msg.lease)

    def on_peer_lost(self, link: PeerLink, reason: str) -> None:
        self.desk.drop_client(link.node_id)
        for wait in self._waits.values():
            if wait.link is link and wait.answer is None:
                wait.answer = f"lost the link: {reason}"
                wait.done.set()

    # ------------------------------------------------------------ client side

    def on_answer(self, link: PeerLink, msg: LeaseGrant | LeaseDeny) -> None:
        self.book.heard(link.node_id, msg.load, trio.current_time())
        wait = self._waits.get(msg.lease)
        if wait is not None and wait.link is link:
            wait.answer = msg
            wait.done.set()
        elif isinstance(msg, LeaseGrant):  # nobody waits any more: free the place
            link.io.submit(LeaseRelease(lease=msg.lease))

    async def ask(self, link: PeerLink, memory: int = 0) -> LeaseGrant | LeaseDeny | str:
        """One lease request; a text answer says why there was no answer."""
        lease = secrets.randbits(64) or 1
        wait = self._waits[lease] = _Wait(link, trio.Event())
        try:
            link.io.submit(LeaseRequest(lease=lease, memory=memory,
                                        client=self.agent.config.name[:64]))
            with trio.move_on_after(ANSWER_TIMEOUT):
                await wait.done.wait()
        finally:
            del self._waits[lease]
        return wait.answer if wait.answer is not None else \
            f"no answer within {ANSWER_TIMEOUT:.0f} s"

    async def acquire(self, links: Sequence[PeerLink], memory: int = 0) -> Leased:
        """The first server along ``links`` that grants; raises NoServer when none does."""
        denials: list[str] = []
        for link in links:
            if link.closed:
                denials.append(f"{link.name}: link closed")
                continue
            if CAPABILITY not in link.peer.capabilities:
                return Leased(link, NO_LEASE, tuple(denials))
            answer = await self.ask(link, memory)
            if isinstance(answer, LeaseGrant):
                return Leased(link, answer.lease, tuple(denials))
            why = answer.reason if isinstance(answer, LeaseDeny) else answer
            denials.append(f"{link.name}: {why}")
        raise NoServer("every server denied a lease: " + "; ".join(denials))

    def release(self, leased: Leased) -> None:
        """Give the place back: the session opened (it counts as a session from now
        on; a failed open is counted so too, until the next answer or gossip)."""
        if leased.lease != NO_LEASE and not leased.link.closed:
            leased.link.io.submit(LeaseRelease(lease=leased.lease))
            self.book.changed(leased.link.node_id, sessions=1, leases=-1)


def service_of(agent: SchedAgent) -> LeaseService | None:
    """The agent's lease service; None when the scheduler plugin is not loaded."""
    return agent.components.get(LeaseService)


@asynccontextmanager
async def leased(agent: SchedAgent, choice: Choice, memory: int = 0) -> AsyncIterator[Choice]:
    """``choice`` with a lease held on its server (or on a fallback) while the body runs.

    A pinned server (``--peer``) and this agent's own backend are not leased:
    pinning means the program wants that server even when it is busy.
    Raises NoServer when every ranked server denied.
    """
    service = service_of(agent)
    if service is None or choice.link is None or choice.ranking is None:
        yield choice
        return
    got = await service.acquire([choice.link, *choice.fallbacks], memory)
    reason = choice.reason
    if got.denials:
        reason = (f"{got.link.name} leased after "
                  + "; ".join(f"{d} (denied)" for d in got.denials) + f". Ranked: {reason}")
    rest = tuple(link for link in choice.fallbacks if link is not got.link)
    try:
        yield replace(choice, link=got.link, name=got.link.name, reason=reason,
                      fallbacks=rest)
    finally:
        service.release(got)
