"""The CUDA forwarding component of one agent: its backend, client and served sessions.

The agent runs it as a service (``run``, started through the
``gleam_agent_component`` hook): its own nursery holds the backend's opening,
the openings of sessions peers ask for (``cuda_open``), failovers and the
rebalancer, and is cancelled when the agent stops. Every served session opens
through ``open_served``. Stopping never blocks the Trio thread: the sessions'
threads are ended and joined in a worker thread.

Handlers run where the agent calls them: control messages and link loss on
the Trio thread. A session's envelopes never pass through here: they travel
on its data connection, between C threads, and a blob the server missed is
resent there from a worker thread. Session tables are shared between those
threads (and the sessions' own), so they change under a lock and are read by
single dictionary lookups.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from gleam.peer.cache.blobs import CachePolicy
from gleam.peer.cache.client import ServerKnowledge, SessionBlobs
from gleam.peer.cache.env import hold_cap
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.client.choose import advert
from gleam.peer.cuda.client.demand import DemandLearning
from gleam.peer.cuda.client.route import PendingOpen, Route, ServeRefused
from gleam.peer.cuda.client.runs import RunBook
from gleam.peer.cuda.client.session import ClientSession
from gleam.peer.cuda.finished import FinishedSessions, finished_row
from gleam.peer.cuda.server.backend import OpenedBackend, kernel_registry, open_backend
from gleam.peer.cuda.server.sessions import ServedSession, SessionServer
from gleam.peer.cuda.server.slowdown import exclusive_from_env, slowed_kernels
from gleam.peer.cuda.wire import dataconn
from gleam.peer.cuda.wire.channel import Channel, LinkChannel
from gleam.peer.cuda.wire.messages import (
    CudaBlobWant,
    CudaClose,
    CudaOpen,
    CudaOpened,
    CudaRefused,
    DeviceRecord,
    short_reason,
)
from gleam.peer.sched.leasing import service_of

if TYPE_CHECKING:
    from gleam.peer.agent import Agent
    from gleam.peer.cuda.client.facts import LocalServed
    from gleam.peer.link import PeerLink
    from gleam.peer.protocol import Message

log = logging.getLogger("gleam.cuda")

# How long stopping waits for the sessions' threads (a kernel may be running).
STOP_JOIN = 1.0
# How long a session whose data connection ended waits for the link's verdict.
DATA_LOSS_GRACE = 2.0
_DATA_LOSS_POLL = 0.02
# How long a peer's cuda_open waits for the backend to open.
BACKEND_WAIT = 30.0


class CudaForwarding:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.choice = agent.config.backend
        self.backend: OpenedBackend | None = None
        self.note = "opening the backend"
        self.ready = trio.Event()
        self.server = SessionServer(agent.config.max_sessions)
        self.routes: dict[int, Route] = {}
        self.pending: dict[int, PendingOpen] = {}
        # The last client sessions that ended, for `cuda_sessions` (and the demo's summary).
        self.finished: collections.deque[dict[str, Any]] = collections.deque(maxlen=32)
        # The last sessions of either role that ended, for the status view.
        self.ended = FinishedSessions()
        # What the sessions of each `gleam-peer run` did (cuda/client/runs.py), and a
        # wake-up for a run waiting for its sessions' end (Trio thread).
        self.runs = RunBook()
        self._session_ended = trio.Event()
        self.stopped = False
        self._lock = threading.Lock()
        # The blob cache (docs/cache.md): what this agent serves from, and what
        # it believes each server it sends to holds.
        self.policy = CachePolicy.from_env()
        self.store: BlobStore | None = None
        self.knowledge: dict[str, ServerKnowledge] = {}
        # Re-evaluation of running sessions (peer/sched/rebalance.py), set by the plugin.
        self.rebalancer: Any = None
        # Data connections' downlink threads report to Trio through this.
        try:
            self._token: trio.lowlevel.TrioToken | None = trio.lowlevel.current_trio_token()
        except RuntimeError:
            self._token = None
        self.stop_join = STOP_JOIN
        self._nursery: trio.Nursery | None = None
        # Each program's demand, learned from its finished sessions (docs/scheduler.md).
        self.demands = DemandLearning(agent, self.spawn)

    @property
    def backend_name(self) -> str | None:
        backend = self.backend  # read once: stopping sets it to None
        return backend.name if backend is not None else None

    # ------------------------------------------------------------ the service

    async def run(self, *, task_status: trio.TaskStatus[CudaForwarding]
                  = trio.TASK_STATUS_IGNORED) -> None:
        """The component's life: its tasks run in its nursery until the agent stops."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._token = trio.lowlevel.current_trio_token()
                nursery.start_soon(self.open_backend)
                if self.rebalancer is not None:
                    nursery.start_soon(self.rebalancer.run)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self.stop()

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: Any) -> bool:
        """Run ``fn(*args)`` in the component's nursery; False once it has stopped."""
        if self._nursery is None or self.stopped:
            return False
        self._nursery.start_soon(fn, *args)
        return True

    async def open_backend(self) -> None:
        kernels = slowed_kernels(kernel_registry(self.agent.pm),
                                 self.agent.config.host_slowdown, exclusive_from_env())
        backend, self.note = await trio.to_thread.run_sync(open_backend, self.choice, kernels)
        if self.stopped:  # the agent stopped while the backend was opening
            if backend is not None:
                backend.close()
            return
        self.backend = backend
        if backend is not None and backend.name == "host" and backend.devices:
            # The status view and the lease desk then see the device the programs
            # see (its memory limit, what sessions hold), not the machine's memory.
            self.agent.inventory.serve_host(int(backend.devices[0].total_mem),
                                            self.server.live_bytes)
        if backend is not None and self.store is None:
            root = self.agent.config.state.path / "blobs"
            self.store = await trio.to_thread.run_sync(BlobStore, root)
        log.info("%s", self.note)
        self.ready.set()

    async def stop(self) -> None:
        """End every session and free the backend; the blocking part runs in a worker
        thread, so the Trio thread serves on while an executor finishes its kernel."""
        if self.stopped:
            return
        self.stopped = True
        self.ready.set()
        backend, self.backend = self.backend, None
        await trio.to_thread.run_sync(self._shut_down, backend)

    def _shut_down(self, backend: OpenedBackend | None) -> None:
        """``stop``'s worker thread: fail the clients, end and join the executors."""
        for route in list(self.routes.values()):
            route.client.fail("the gleam agent is shutting down")
        ending = self.server.close_all(None, "the serving agent is shutting down")
        deadline = time.monotonic() + self.stop_join
        for served in ending:
            served.join(max(deadline - time.monotonic(), 0.0))
        if self.store is not None:
            self.store.close()
        if backend is not None:
            # Frees the backend now, or when its last session closes.
            backend.close()

    def new_session_id(self) -> int:
        while True:
            session = secrets.randbits(64)
            if session and session not in self.routes and session not in self.pending:
                return session

    # ------------------------------------------------------------ routes

    def add_route(self, session: int, route: Route) -> None:
        with self._lock:
            self.routes[session] = route

    def client_ended(self, client: ClientSession, reason: str) -> None:
        """A client session is over (its reader thread): release the server's side."""
        # The route leaves and the run's tally gains the session in one step: a
        # run's report (Trio thread) must never see the session in neither.
        with self._lock:
            route = self.routes.get(client.session)
            if route is None:
                return
            row = client.row()
            row.update(ended=time.time(), end_reason=reason, failed=client.failed is not None)
            if route.served is not None:
                row["server_stats"] = dict(route.served.stats)
            kept = finished_row(row, ended=row["ended"], reason=reason, failed=row["failed"])
            if client.run:
                self.runs.add(client.run, kept)
            del self.routes[client.session]
        log.info("session %016x (%s) ended: %s", client.session, client.program, reason)
        self.finished.append(row)
        self.ended.add(kept)
        if self._token is not None and not self.stopped:
            server = route.link.node_id if route.link is not None else None
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._learn, client.session, server, row)
        if route.served is not None:
            route.served.stop(reason)
        elif route.link is not None and not route.link.closed and client.failed is None:
            route.link.io.submit(CudaClose(session=client.session, reason=short_reason(reason)))

    def _learn(self, session: int, server: str | None, row: dict[str, Any]) -> None:
        """The Trio thread's part of a session's end: learn its program's demand, and
        take the session out of the load this agent last heard from its server."""
        service = service_of(self.agent)
        if service is not None and server is not None:
            service.book.changed(server, sessions=-1)
        self._session_ended.set()  # a run waiting for its sessions looks again
        self._session_ended = trio.Event()
        sample = self.demands.ended(session, server, row)
        if sample is not None:
            row["measured_demand"] = {"unique_bytes": sample.unique_bytes,
                                      "waits": sample.waits, "compute": sample.compute}

    # ------------------------------------------------------------ runs

    def _ending(self, run: str) -> tuple[int, int, dict[str, Any]]:
        """(sessions of ``run`` whose program is gone but that have not ended yet,
        sessions of it whose program still runs: a child the program left behind,
        the run's tally of ended sessions), all taken at one instant."""
        with self._lock:
            routes = list(self.routes.values())
            report = self.runs.report(run)
        gone = alive = 0
        for route in routes:
            if route.client.run == run:
                if _process_alive(route.client.pid):
                    alive += 1
                else:
                    gone += 1
        return gone, alive, report

    async def run_report(self, run: str, wait: float) -> dict[str, Any]:
        """What the ended sessions of ``run`` did, once every session whose program
        has exited has ended (at most ``wait`` seconds); ``running``: those whose
        program is still alive."""
        with trio.move_on_after(wait):
            while True:
                ended = self._session_ended
                if not run or self._ending(run)[0] == 0:
                    break
                await ended.wait()
        _, alive, report = self._ending(run)
        return {**report, "running": alive if run else 0}

    # ------------------------------------------------------------ data connections

    def data_lost(self, client: ClientSession, reason: str) -> None:
        """A client session's data connection ended under it (its downlink thread)."""
        if self._token is not None and not self.stopped:
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._data_lost_soon, client, reason)

    def _data_lost_soon(self, client: ClientSession, reason: str) -> None:
        self.spawn(self._data_lost, client, reason)

    async def _data_lost(self, client: ClientSession, reason: str) -> None:
        """The session is held (its journal keeps what the program sends) until the
        link says what happened: a lost link fails the session over
        (``on_peer_lost``), a ``cuda_close`` ends it with the server's reason; a
        link that stays up with neither ends it with ``reason``."""
        route = self.routes.get(client.session)
        if route is None or client.moving or client.failed is not None:
            return
        link = route.link
        if link is None:  # this agent serves it: no link will say more
            client.fail(reason)
            return
        await trio.to_thread.run_sync(client.hold)
        with trio.move_on_after(DATA_LOSS_GRACE):
            while (not link.closed and self.routes.get(client.session) is route
                   and client.failed is None and not client.moving):
                await trio.sleep(_DATA_LOSS_POLL)
        if link.closed or client.moving or self.routes.get(client.session) is not route:
            return  # the link's loss (a failover) or a move took the session over
        client.fail(f"{reason} ({link.name})")

    # ------------------------------------------------------------ from links

    def on_message(self, link: PeerLink, message: Message) -> bool | None:
        """A control message (the Trio thread); True when it was ours."""
        if isinstance(message, CudaOpen):
            if not self.spawn(self.serve_open, link, message):
                link.io.submit(CudaRefused(session=message.session,
                                           reason="the serving agent is shutting down"))
        elif isinstance(message, CudaOpened | CudaRefused):
            wait = self.pending.get(message.session)
            if wait is not None and wait.link is link:
                wait.answer = message if isinstance(message, CudaOpened) else message.reason
                wait.done.set()
            elif isinstance(message, CudaOpened):
                # Nobody waits any more (timed out): free the server's side.
                link.io.submit(CudaClose(session=message.session, reason="nobody waits for it"))
        elif isinstance(message, CudaBlobWant):
            self.resend(link, message)
        elif isinstance(message, CudaClose):
            if not self.server.close(link.node_id, message.session, message.reason):
                route = self.routes.get(message.session)
                if route is not None and route.link is link:
                    route.client.fail(f"{link.name} closed the session: {message.reason}")
        else:
            return None
        return True

    def resend(self, link: PeerLink, want: CudaBlobWant) -> None:
        """The server missed references of one of our sessions: send their bytes on
        the session's data connection, from a worker thread (a write may wait for
        the server to read, which it does while it waits for them)."""
        route = self.routes.get(want.session)
        if route is None or route.link is not link or route.client.blobs is None:
            return
        # Abandoned if the agent stops: a write the server no longer reads must not hold it.
        self.spawn(functools.partial(trio.to_thread.run_sync, abandon_on_cancel=True),
                   _resend, route.client, link.name, want.digests)

    def session_blobs(self, link: PeerLink, session: int,
                      opened: CudaOpened) -> SessionBlobs | None:
        """The cache's side of a new client session (None: the server caches nothing)."""
        if opened.cache_min <= 0:
            return None
        knowledge = self.knowledge.setdefault(link.node_id, ServerKnowledge())
        knowledge.reset(opened.cache_summary)
        policy = CachePolicy(h2d_min=max(self.policy.h2d_min, opened.cache_min),
                             image_min=max(self.policy.image_min, opened.cache_image_min))
        return SessionBlobs(session, knowledge, policy, pending_cap=hold_cap())

    def on_peer_lost(self, link: PeerLink, reason: str) -> None:
        from gleam.peer.cuda.client.relocate import failover

        why = f"lost the link to {link.name}: {reason}"
        self.server.close_all(link.node_id, why)
        for route in list(self.routes.values()):
            if route.link is link and route.client.moving:
                route.client.fail(f"{why}; the session was moving")
            elif route.link is link and not self.spawn(
                    failover, self, route.client, link.node_id, why, time.monotonic()):
                # Failover (docs/consistency.md) rebuilds the session on another server
                # from its journal, or ends it with the reason why it cannot be; an
                # agent that is stopping does neither.
                route.client.fail(f"{why}; the agent is shutting down")
        for wait in self.pending.values():
            if wait.link is link and wait.answer is None:
                wait.answer = why
                wait.done.set()

    # ------------------------------------------------------------ serving

    async def open_served(self, session: int, channel: Channel, program: str, client: str,
                          *, cached: bool = False,
                          va: tuple[int, int] = (0, 0)) -> ServedSession:
        """Open and start a served session on this agent's backend; raises ServeRefused.

        The one way a served session opens (a peer's cuda_open, this agent's own
        program, a session moving here): admit it, make its backend session in a
        worker thread, give the place back if that fails, else add it. ``va`` is
        the (base, size) a moving session keeps, (0, 0) to let the backend choose.
        ``cached``: a peer's session (the blob store serves it). Every session
        is served from its data connection, which the caller attaches
        (``served.attach_data``): a peer's over TCP, this agent's own program's
        over an in-process pair. A caller that cannot use the session after all
        stops it (``served.stop``).
        """
        from gleam.peer.cuda.server import native

        refusal = self.refusal(session)
        if refusal is not None:
            raise ServeRefused(refusal)
        backend = self.backend
        assert backend is not None
        try:
            exec_session = await trio.to_thread.run_sync(
                native.ExecSession, backend.backend, va[1] or None, va[0])
        except Exception as exc:  # the backend refused: the caller says why
            self.server.release(session)
            log.warning("cannot open a session for %s: %s", client, exc)
            raise ServeRefused(str(exc)) from None
        if self.stopped:  # the agent stopped meanwhile: nobody would end the session
            self.server.release(session)
            exec_session.close()
            raise ServeRefused(f"{self.agent.config.name} is shutting down")
        # No checkpoint from here to the add: a cancellation cannot lose the session.
        served = ServedSession(
            session=session, channel=channel, program=program, client=client,
            exec=exec_session, reply_capacity=native.REPLY_CAPACITY,
            batch_error=native.BatchError, on_end=self._served_ended,
            store=self.store if cached else None, policy=self.policy,
        )
        self.server.add(served)
        return served

    def _served_ended(self, served: ServedSession, reason: str) -> None:
        self.server.forget(served)
        self.ended.add(finished_row(served.row(), ended=time.time(), reason=reason))
        log.info("served session %016x (%s from %s) ended: %s",
                 served.session, served.program, served.client, reason)

    async def serve_open(self, link: PeerLink, msg: CudaOpen) -> None:
        """Answer a peer's cuda_open with cuda_opened or cuda_refused."""
        with trio.move_on_after(BACKEND_WAIT):
            await self.ready.wait()
        try:
            served = await self.open_served(
                msg.session, LinkChannel(link), msg.program, link.name,
                cached=True, va=(msg.va_base, msg.va_size),
            )
        except ServeRefused as exc:
            link.io.submit(CudaRefused(session=msg.session, reason=short_reason(str(exc))))
            return
        if link.closed:
            served.stop("the client's link closed")
            return
        try:
            listener = dataconn.DataListener(link, msg.session)
        except OSError as exc:
            reason = short_reason(f"cannot offer a data connection: {exc}")
            served.stop(reason)
            link.io.submit(CudaRefused(session=msg.session, reason=reason))
            return
        link.io.submit(self.opened(msg.session, served, cached=True, data=listener))
        # The session's own connection (dataconn.py), offered in the answer: the
        # session's executor starts serving once the client has opened it.
        try:
            conn = await trio.to_thread.run_sync(listener.accept, abandon_on_cancel=True)
        except OSError as exc:
            listener.close()
            reason = short_reason(str(exc))
            log.warning("session %016x for %s: %s", msg.session, link.name, reason)
            served.stop(reason)
            if not link.closed:
                link.io.submit(CudaClose(session=msg.session, reason=reason))
            return
        served.attach_data(conn)

    def refusal(self, session: int) -> str | None:
        """Why this agent cannot serve ``session`` now; None when a place is reserved."""
        if self.stopped:
            return f"{self.agent.config.name} is shutting down"
        if self.backend is None:
            return f"{self.agent.config.name} serves no CUDA ({self.note})"
        return self.server.admit(session)

    def opened(self, session: int, served: LocalServed, cached: bool = False,
               data: dataconn.DataListener | None = None) -> CudaOpened:
        assert self.backend is not None
        devices = tuple(
            DeviceRecord(
                name=str(d.name)[:256], total_mem=int(d.total_mem),
                uuid=bytes(d.uuid[:16]).ljust(16, b"\0"),
                attrs=tuple(sorted((int(k), int(v)) for k, v in d.attrs.items())),
            )
            for d in self.backend.devices[:8]
        )
        return CudaOpened(
            session=session, va_base=served.exec.va_base, va_size=served.exec.va_size,
            driver_version=self.backend.driver_version, backend=self.backend.name,
            server=self.agent.config.name[:64], devices=devices,
            data_port=data.port if data is not None else 0,
            data_salt=data.salt if data is not None else b"",
            **self.cache_offer(cached),
        )

    def cache_offer(self, cached: bool) -> dict[str, Any]:
        """The cache fields of ``cuda_opened``: what this server holds and stores."""
        if not cached or self.store is None:
            return {}
        return {"cache_summary": self.store.summary(), "cache_min": self.policy.h2d_min,
                "cache_image_min": self.policy.image_min}

    # ------------------------------------------------------------ status

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for route in list(self.routes.values()):
            row = route.client.row()
            advice = (self.rebalancer.last.get(route.client.session)
                      if self.rebalancer is not None else None)
            row["reevaluated"] = advice.reason if advice is not None else None
            if route.served is not None:
                row["server_stats"] = dict(route.served.stats)
            rows.append(row)
        return rows + self.server.rows()

    def gossip(self) -> dict[str, Any]:
        name = self.backend_name
        speeds = [g.gflops for g in self.agent.mesh.gpus if g.backend == name and g.gflops]
        return advert(name, self.server.count(), sum(speeds) if speeds else None)

    def cache_status(self, entries: bool = False) -> dict[str, Any]:
        """`gleam-peer cache`: the store's tiers, and what this agent knows of other servers."""
        out: dict[str, Any] = {
            "policy": {"h2d_min": self.policy.h2d_min, "image_min": self.policy.image_min},
            "store": self.store.stats() if self.store is not None else None,
            "known": {node[:12]: len(k) for node, k in self.knowledge.items()},
        }
        if entries and self.store is not None:
            out["entries"] = self.store.entries()
        return out

    def status(self) -> dict[str, Any]:
        return {
            "backend": self.backend_name or "none", "note": self.note,
            "client_sessions": len(self.routes), "served_sessions": self.server.count(),
            "max_sessions": self.server.max_sessions,
            "cache": self.store.stats() if self.store is not None else None,
        }


def _resend(client: ClientSession, server: str, digests: tuple[bytes, ...]) -> None:
    """``CudaForwarding.resend``'s worker thread: each BLOB envelope ``server`` asked for."""
    for digest in digests:
        blob = client.blobs.resend(digest) if client.blobs is not None else None
        if blob is None:
            log.warning("session %016x: %s asked for a blob this agent no longer holds",
                        client.session, server)
            client.fail(f"{server} missed a cached blob that cannot be resent")
            return
        client.resend_blob(blob)


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (the agent runs on the program's host)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
