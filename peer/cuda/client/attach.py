"""``cuda_attach``: an interposer's control connection becomes a session.

The agent chooses a server, opens the session there (or on its own backend),
answers with a HELLO envelope (or FAIL, with the reason) and then hands the
socket to a ``ClientSession`` reader thread: from then on the connection
carries envelopes only.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
from typing import TYPE_CHECKING, Any

import trio

from gleam.peer.control import Handoff
from gleam.peer.cuda.client import handover
from gleam.peer.cuda.client.choose import NoServer, choose
from gleam.peer.cuda.client.demand import ProgramDemand
from gleam.peer.cuda.client.hello import Hello, HelloDevice, pack_hello
from gleam.peer.cuda.client.opening import OpenFailed, open_local, open_remote
from gleam.peer.cuda.client.program_key import peer_pid, program_key
from gleam.peer.cuda.client.route import Route, SessionManager
from gleam.peer.cuda.client.runs import MAX_RUN_ID, link_words, open_line, why_chosen
from gleam.peer.cuda.client.session import ClientSession
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.channel import LinkChannel
from gleam.peer.cuda.wire.messages import MAX_PROGRAM, CudaClose, CudaOpened
from gleam.peer.sched.choice import Choice
from gleam.peer.sched.leasing import leased

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink

log = logging.getLogger("gleam.cuda")

BACKEND_WAIT = 30.0
# A program started right after its agent may come before the servers' gossip
# records; it waits this long for a server to appear before it is refused.
SERVER_WAIT = 5.0


class AttachFailed(Exception):
    """The session could not open; the message goes to the program in a FAIL."""


def _text(args: dict[str, Any], key: str, limit: int) -> str:
    value = args.get(key, "")
    if not isinstance(value, str):
        raise AttachFailed(f"cuda_attach: {key!r} must be text")
    return value[:limit]


class Attach(Handoff):
    def __init__(self, fw: SessionManager, args: dict[str, Any]) -> None:
        self.fw = fw
        self.args = args
        self.reason = ""
        # What the cost model estimated for the chosen server, for the session's row.
        self.estimate: dict[str, Any] | None = None
        self.where: Choice | None = None  # the server chosen, and why
        self.run = ""  # `gleam-peer run`'s id for the program's sessions (cuda/client/runs.py)
        self.va_base = self.va_size = 0
        self.program = ProgramDemand("")  # what the session is ranked by (cuda/client/demand.py)

    async def take(self, stream: trio.SocketStream, buffered: bytes) -> None:
        try:
            await self._attach(stream, buffered)
        except AttachFailed as exc:
            log.info("cuda_attach refused: %s", exc)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await stream.send_all(envelope.fail_envelope(str(exc)))

    async def _attach(self, stream: trio.SocketStream, buffered: bytes) -> None:
        fw = self.fw
        try:  # the agent's hand-over setting, checked before anything opens
            handover.ring_bytes()
        except ValueError as exc:  # wrong: the program hears why
            raise AttachFailed(str(exc)) from None
        peer = _text(self.args, "peer", 64)
        program = _text(self.args, "program", MAX_PROGRAM)
        self.run = _text(self.args, "run", MAX_RUN_ID)
        pid = self.args.get("pid", 0)
        pid = pid if isinstance(pid, int) and 0 <= pid < 2**31 else 0
        # The kernel's word for who connected beats the request's (program_key.py).
        pid = peer_pid(stream.socket) or pid
        self.program = fw.demands.for_program(program_key(pid, program))
        with trio.move_on_after(BACKEND_WAIT):
            await fw.ready.wait()
        deadline = trio.current_time() + SERVER_WAIT
        while True:
            try:
                where = choose(fw.agent, peer, fw.backend_name, demand=self.program.demand,
                               demand_note=self.program.note)
                break
            except NoServer as exc:
                if trio.current_time() >= deadline:
                    raise AttachFailed(str(exc)) from None
                await trio.sleep(0.2)
        session = fw.new_session_id()
        self.where = where
        if where.link is None:
            self.reason = where.reason
            await self._local(stream, buffered, session, program, pid)
            return
        try:  # a lease on the ranked server or a fallback (docs/scheduler.md, "Leases")
            async with leased(fw.agent, where) as where:
                self.reason = where.reason
                self.where = where
                assert where.link is not None
                self.estimate = _estimate(where, where.link.node_id, self.program.note)
                await self._remote(stream, buffered, where.link, session, program, pid)
        except NoServer as exc:
            raise AttachFailed(str(exc)) from None

    # ------------------------------------------------------------ local backend

    async def _local(self, stream: trio.SocketStream, buffered: bytes, session: int,
                     program: str, pid: int) -> None:
        fw = self.fw
        try:
            served, channel, data = await open_local(fw, session, program)
        except OpenFailed as exc:
            raise AttachFailed(str(exc)) from None
        hello = self._hello_of(fw.opened(session, served), None)
        self.va_base, self.va_size = hello.va_base, hello.va_size
        client: ClientSession | None = None
        ring = handover.create()
        try:
            if await _send_hello(stream, hello, ring):
                client = self._client(stream, buffered, session, channel, program, pid,
                                      hello.backend, ring)
        finally:  # cancelled or failed: the started session must not outlive its program
            handover.close(ring)
            if client is None:
                served.stop("the program went away")
                data.close()
        if client is None:
            return
        channel.client = client
        client.use_data(data, fw.data_lost)  # the native lanes, as for a peer's server
        fw.add_route(session, Route(client, None, served))
        client.start()

    # ------------------------------------------------------------ remote server

    async def _remote(self, stream: trio.SocketStream, buffered: bytes, link: PeerLink,
                      session: int, program: str, pid: int) -> None:
        fw = self.fw
        try:
            answer = await open_remote(fw, link, session, program)
        except OpenFailed as exc:
            raise AttachFailed(str(exc)) from None
        try:
            data = await dataconn.open_client(link, session, answer)
        except OSError as exc:  # no session goes without one: it fails, saying why
            link.io.submit(CudaClose(session=session, reason="no data connection"))
            raise AttachFailed(f"cannot open the data connection to {link.name}: {exc}"
                               ) from None
        hello = self._hello_of(answer, link)
        self.va_base, self.va_size = hello.va_base, hello.va_size
        client: ClientSession | None = None
        ring = handover.create()
        try:
            if await _send_hello(stream, hello, ring) and not link.closed:
                client = self._client(stream, buffered, session, LinkChannel(link), program,
                                      pid, hello.backend, ring)
        finally:  # cancelled or failed: the server's session must not outlive the program
            handover.close(ring)
            if client is None:
                link.io.submit(CudaClose(session=session, reason="the program went away"))
                data.close()
        if client is None:
            if link.closed:
                raise AttachFailed(f"lost the link to {link.name}")
            return
        client.blobs = fw.session_blobs(link, session, answer)
        client.use_data(data, fw.data_lost)
        fw.add_route(session, Route(client, link, None))
        fw.demands.opened(session, self.program, link.node_id)
        client.start()

    def _client(self, stream: trio.SocketStream, buffered: bytes, session: int, channel: Any,
                program: str, pid: int, backend: str, ring: int | None) -> ClientSession:
        # The socket leaves Trio: its reader is an OS thread from now on.
        sock = socket.socket(fileno=stream.socket.detach())
        sock.settimeout(None)
        client = ClientSession(
            session, sock, channel, self.fw.client_ended,
            program=program, pid=pid, backend=backend, buffered=buffered, reason=self.reason,
            va=(self.va_base, self.va_size), estimate=self.estimate, ring=ring,
        )
        client.pinned = bool(_text(self.args, "peer", 64))
        client.run = self.run
        return client

    def _hello_of(self, opened: CudaOpened, link: PeerLink | None) -> Hello:
        """The HELLO for an opened session, with the line saying where it runs and why."""
        device = opened.devices[0].name if opened.devices else f"{opened.backend} backend"
        # The display name (peer/names.py): the interposer prints it before the
        # server's own reasons too, so two nodes called alike are told apart there.
        server = (link.name if link is not None else self.fw.agent.display_name)[:63]
        why = why_chosen(self.where, self.program.note) if self.where is not None \
            else self.reason
        return Hello(
            session=opened.session, va_base=opened.va_base, va_size=opened.va_size,
            driver_version=opened.driver_version, server=server,
            backend=opened.backend,
            devices=[HelloDevice(d.name, d.total_mem, d.uuid, dict(d.attrs))
                     for d in opened.devices],
            line=open_line(server, device, why, link_words(link)),
        )


def _estimate(choice: Choice, node_id: str, note: str) -> dict[str, Any] | None:
    """The ranking's estimate for the server the session got, and what its demand
    rests on (None: not ranked by the cost model, or an estimate with no end)."""
    found = choice.ranking.estimate_of(node_id) if choice.ranking is not None else None
    if found is None or not math.isfinite(found.total):
        return None
    return {"total_s": found.total, "transfer_s": found.transfer, "waiting_s": found.waiting,
            "compute_s": found.compute, "demand": note}


async def _send_hello(stream: trio.SocketStream, hello: Hello, ring: int | None) -> bool:
    body = pack_hello(hello)
    head = envelope.pack_header(envelope.HELLO, hello.session, len(body))
    try:
        await handover.send_with_ring(stream, head + body, ring)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return False
    return True
