"""Moving a client session to another server: migration (asked for) and failover
(its server was lost). docs/consistency.md has the design.

Both hold the session (the program's batches go into the journal only), open it
on the new server with the same virtual range, replay the journal there (the
replies of calls the program already had answers to are dropped, the reply of
the call in flight reaches it), switch the route and let go. A migration first
waits for a safe point: no waiting call in flight on the old server.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from gleam.peer.cuda.client.choose import Choice, NoServer, choose
from gleam.peer.cuda.client.opening import OpenFailed, open_local, open_remote
from gleam.peer.cuda.client.route import Route, SessionManager
from gleam.peer.cuda.wire import dataconn
from gleam.peer.cuda.wire.channel import Channel, LinkChannel
from gleam.peer.cuda.wire.messages import CudaClose, short_reason

if TYPE_CHECKING:

    from gleam.peer.cuda.client.facts import LocalServed
    from gleam.peer.cuda.client.session import ClientSession
    from gleam.peer.link import PeerLink

log = logging.getLogger("gleam.cuda.move")

# How long a migration waits for the waiting call in flight to be answered.
SETTLE_TIMEOUT = 10.0
_SETTLE_POLL = 0.005


class MoveRefused(Exception):
    """The session cannot move; it stays where it is. The message says why."""


class ReplayFailed(MoveRefused):
    """The new server failed mid-replay: the session is lost, not kept."""


@dataclass
class _Target:
    name: str
    node_id: str
    link: PeerLink | None
    served: LocalServed | None
    channel: Channel
    blobs: Any
    data: Any  # the new server's data connection (dataconn.DataConnection)


def _node_of(fw: SessionManager, route: Route) -> str:
    return route.link.node_id if route.link is not None else fw.agent.node_id


def _chosen_node(fw: SessionManager, choice: Choice) -> str:
    return choice.link.node_id if choice.link is not None else fw.agent.node_id


async def _open(fw: SessionManager, client: ClientSession, choice: Choice) -> _Target:
    """The session's server side on ``choice``, at the session's own range."""
    va = (client.va_base, client.va_size)
    if choice.link is None:
        served, loop, data = await open_local(fw, client.session, client.program, va)
        loop.client = client
        return _Target(choice.name, fw.agent.node_id, None, served, loop, None, data)
    answer = await open_remote(fw, choice.link, client.session, client.program, va)
    try:
        data = await dataconn.open_client(choice.link, client.session, answer)
    except OSError as exc:
        _close(client.session, choice.link, None, "no data connection")
        raise OpenFailed(f"cannot open the data connection to {choice.name}: {exc}") from None
    return _Target(choice.name, choice.link.node_id, choice.link, None,
                   LinkChannel(choice.link),
                   fw.session_blobs(choice.link, client.session, answer), data)


def _close(session: int, link: PeerLink | None, served: LocalServed | None,
           reason: str) -> None:
    """Let go of one server side of ``session`` (the old one, or a half-built new one)."""
    if served is not None:
        served.stop(reason)
    elif link is not None and not link.closed:
        link.io.submit(CudaClose(session=session, reason=short_reason(reason)))


async def _move(fw: SessionManager, client: ClientSession, choice: Choice, kind: str,
                why: str, since: float) -> dict[str, Any]:
    """Rebuild the held session on ``choice`` and switch to it; raises OpenFailed,
    MoveRefused when the session ended meanwhile, ReplayFailed."""
    old = fw.routes.get(client.session)
    if old is None:
        raise MoveRefused("the session has ended")
    old_name = client.channel.name
    target = await _open(fw, client, choice)
    if fw.routes.get(client.session) is not old or client.failed is not None:
        _close(client.session, target.link, target.served, "the session ended meanwhile")
        raise MoveRefused("the session ended while it was moving")
    # Replies of the new server are taken from now on; the old one's are dropped.
    fw.add_route(client.session, Route(client, target.link, target.served))
    try:
        batches = await trio.to_thread.run_sync(
            client.replay_onto, target.channel, target.blobs, target.data,
            fw.data_lost)
    except Exception as exc:
        _close(client.session, target.link, target.served, "the replay failed")
        raise ReplayFailed(f"replaying the journal on {target.name} failed: {exc}") from None
    _close(client.session, old.link, old.served, f"the session moved to {target.name}")
    seconds = time.monotonic() - since
    client.note_move(kind, old_name, target.name, batches, why, seconds)
    log.info("session %016x (%s): %s from %s to %s, %d batches replayed (%s)",
             client.session, client.program, kind, old_name, target.name, batches, why)
    return {"moved": True, "session": f"{client.session:016x}", "from": old_name,
            "to": target.name, "batches": batches, "seconds": seconds}


def find_client(fw: SessionManager, session: str) -> ClientSession:
    """The client session whose id starts with ``session`` (hex); raises MoveRefused."""
    wanted = session.strip().lower()
    found = [r.client for s, r in list(fw.routes.items())
             if wanted and f"{s:016x}".startswith(wanted)]
    if len(found) != 1:
        raise MoveRefused(f"no client session {session!r} on this agent" if not found
                          else f"session {session!r} is ambiguous ({len(found)} match)")
    return found[0]


async def migrate(fw: SessionManager, session: str, to: str) -> dict[str, Any]:
    """Move a running session to node ``to`` at a safe point (the scheduler's entry point).

    Returns ``{"moved": True, ...}``, or ``{"moved": False, "reason": ...}`` with the
    session still running where it was.
    """
    try:
        client = find_client(fw, session)
        if client.moving:
            raise MoveRefused("the session is already moving")
        client.moving = True
        try:
            return await _migrate(fw, client, to)
        finally:
            client.moving = False
    except MoveRefused as exc:
        return {"moved": False, "reason": str(exc)}


async def _migrate(fw: SessionManager, client: ClientSession, to: str) -> dict[str, Any]:
    if client.journal.broken is not None:
        raise MoveRefused(f"the session cannot move: {client.journal.broken}")
    try:
        choice = choose(fw.agent, to, fw.backend_name)
    except NoServer as exc:
        raise MoveRefused(str(exc)) from None
    route = fw.routes.get(client.session)
    if route is None:
        raise MoveRefused("the session has ended")
    if _chosen_node(fw, choice) == _node_of(fw, route):
        raise MoveRefused(f"the session is already served by {choice.name}")
    since = time.monotonic()
    # Off the Trio thread: the forwarding thread may be inside a send to the old server.
    await trio.to_thread.run_sync(client.hold)
    try:
        with trio.move_on_after(SETTLE_TIMEOUT):
            while client.in_flight() > 0 and client.failed is None:
                await trio.sleep(_SETTLE_POLL)
        if client.in_flight() > 0:
            raise MoveRefused(f"a waiting call stayed in flight for {SETTLE_TIMEOUT:.0f} s")
        return await _move(fw, client, choice, "migration", f"asked to move to {to}", since)
    except OpenFailed as exc:
        client.release()
        raise MoveRefused(str(exc)) from None
    except ReplayFailed as exc:
        client.fail(f"the migration to {choice.name} failed: {exc}")
        raise
    except MoveRefused:
        client.release()
        raise


async def failover(fw: SessionManager, client: ClientSession, lost: str, why: str,
                   since: float) -> None:
    """The session's server ``lost`` (node id) is gone since ``since`` (monotonic):
    rebuild it elsewhere, or end it with one line that says why (the program sees
    CUDA_ERROR_DEVICE_UNAVAILABLE)."""
    # A batch forwarded meanwhile is journaled too: the replay sends it again.
    await trio.to_thread.run_sync(client.hold)
    if client.journal.broken is not None:
        client.fail(f"{why}; the session cannot move: {client.journal.broken}")
        return
    try:
        program = fw.demands.of(client.session)  # ranked as at its open
        choice = choose(fw.agent, "", fw.backend_name, exclude=frozenset({lost}),
                        demand=program.demand, demand_note=program.note)
    except NoServer as exc:
        client.fail(f"{why}; no other server to move the session to ({exc})")
        return
    client.moving = True
    try:
        await _move(fw, client, choice, "failover", why, since)
    except (OpenFailed, MoveRefused) as exc:
        client.fail(f"{why}; moving the session to {choice.name} failed: {exc}")
    finally:
        client.moving = False
