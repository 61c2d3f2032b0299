"""The gleam agent: listens, dials, authenticates, keeps links alive, serves control.

One Agent per process. ``run`` owns a nursery holding the TCP listener, the
control socket, a dialer per static peer and a task per link; cancelling it
says goodbye to every peer and removes the control socket.

The agent wires its own parts (not the plugins' ``components``) and is the
only one that knows them all: each declares the small interface it needs of
the agent (``LinkOwner``, ``ControlHandler``, ``DiscoveryHost``,
``GossipHost``, ``StatusInputs``) and the agent hands it that, so their
imports point away from this module
(docs/architecture.md, "Components and the way their imports point"). CUDA
forwarding hands the agent to ``choose`` as a ``ChoosingAgent``; plugins still
receive the whole agent through the hooks.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pluggy
import trio

from gleam.peer import control
from gleam.peer.addresses import DEFAULT_PORT, PeerAddress
from gleam.peer.components import Components
from gleam.peer.discovering import Discovering
from gleam.peer.failures import UserError, os_error_line
from gleam.peer.gossip import GossipConfig, GossipMessage
from gleam.peer.gpus import GpuInventory
from gleam.peer.link import STREAM_ERRORS, HandshakeFailed, PeerLink, establish
from gleam.peer.meshview import LocalFields, MeshGossip
from gleam.peer.names import PeerNames
from gleam.peer.plugin_info import describe_plugins
from gleam.peer.protocol import (
    DEFAULT_MAX_FRAME,
    Connection,
    Hello,
    LocalIdentity,
    Message,
    Role,
    mesh_id,
)
from gleam.peer.refusals import RefusalLog
from gleam.peer.state import StateDir
from gleam.peer.status import StatusInputs, add_plugin_sections, build_status

log = logging.getLogger("gleam.agent")

MAX_CAPABILITIES = 32
DIAL_BACKOFF_MIN = 0.5
DIAL_BACKOFF_MAX = 5.0


class AgentStartError(UserError):
    """The agent cannot start; the message says why and what to do."""


@dataclass
class AgentConfig:
    state: StateDir
    name: str = field(default_factory=socket.gethostname)
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    peers: tuple[PeerAddress, ...] = ()
    ping_interval: float = 1.0
    peer_timeout: float = 5.0
    handshake_timeout: float = 5.0
    probe_interval: float = 30.0
    max_frame: int = DEFAULT_MAX_FRAME
    gossip: GossipConfig = field(default_factory=GossipConfig)
    mdns: bool = False
    interfaces: tuple[str, ...] = ()
    # CUDA forwarding: which backend serves sessions ("auto", "host", "cuda",
    # "none") and how many sessions this agent serves at once.
    backend: str = "auto"
    max_sessions: int = 8
    # The host device's documented speed knob (peer/cuda/server/slowdown.py); 1 = full speed.
    host_slowdown: float = 1.0


@dataclass
class DialTarget:
    """A static peer we keep dialling, and how the last attempt went."""

    address: PeerAddress
    state: str = "connecting"
    error: str | None = None
    node_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class AgentEvent:
    at: float
    kind: str
    text: str


class Agent:
    def __init__(
        self, config: AgentConfig, pm: pluggy.PluginManager,
        inventory: GpuInventory | None = None,
    ) -> None:
        self.config = config
        self.pm = pm
        self.state = config.state
        ident = self.state.node_identity()
        self.node_id = ident.node_id
        self.mesh_key = self.state.mesh_key()
        self.mesh_id = mesh_id(self.mesh_key)
        self.links: dict[str, PeerLink] = {}
        self.targets = [DialTarget(a) for a in config.peers]
        # Unique display names of every node this agent knows, itself included.
        self.names = PeerNames(self._known_names)
        self.events: deque[AgentEvent] = deque(maxlen=50)
        self.refusals = RefusalLog()
        self.listen_port: int | None = None
        self.started_at = time.time()
        self.nursery: trio.Nursery | None = None
        # Plugins' per-agent state (gleam_agent_component; peer/components.py).
        self.components = Components()
        self._links_changed = trio.Event()
        # One inbound bandwidth probe at a time: two trains sharing this host's
        # link would each measure a share of it (peer/link.py, _prober).
        self.probe_lock = trio.Lock()
        self.inventory = inventory if inventory is not None else GpuInventory()
        self.mesh = MeshGossip(
            self, config.gossip, self.inventory, node_id=self.node_id, name=config.name
        )
        self.discovering = Discovering(
            self, self.state, node_id=self.node_id, name=config.name, mesh_id=self.mesh_id,
            started_at=self.started_at, enabled=config.mdns, interfaces=config.interfaces,
        )

    # ------------------------------------------------------------- identity

    def capabilities(self) -> tuple[str, ...]:
        seen: list[str] = []
        for group in self.pm.hook.gleam_capabilities():
            for cap in group or ():
                if isinstance(cap, str) and 0 < len(cap) <= 64 and cap not in seen:
                    seen.append(cap)
        return tuple(seen[:MAX_CAPABILITIES])

    def identity(self) -> LocalIdentity:
        return LocalIdentity(
            node_id=self.node_id,
            name=self.config.name,
            mesh_key=self.mesh_key,
            capabilities=self.capabilities(),
            listen_port=self.listen_port,
        )

    def record(self, kind: str, text: str) -> None:
        self.events.append(AgentEvent(time.time(), kind, text))

    @property
    def display_name(self) -> str:
        """This node's name as views and logs print it (peer/names.py)."""
        return self.names.of(self.node_id, self.config.name)

    def _known_names(self) -> dict[str, str]:
        """Every node this agent knows by name: itself, gossip members, links, static peers."""
        known = {t.node_id: t.name for t in self.targets if t.node_id and t.name}
        known.update((n, m.record.name) for n, m in self.mesh.members().items() if m.record.name)
        known.update((n, link.peer.name) for n, link in self.links.items())
        known[self.node_id] = self.config.name
        return known

    # -------------------------------------------------------------- running

    async def run(self, *, task_status: trio.TaskStatus[Agent] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await self._open_tcp()
        port: int = listeners[0].socket.getsockname()[1]
        self.listen_port = port
        try:
            control_listener = await self._open_control()
        except BaseException:
            for listener in listeners:
                await listener.aclose()
            raise
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                await nursery.start(self.mesh.run)
                # Plugins start before the first connection is accepted: a request
                # or a peer's message that came in the window before would find its
                # plugin without its state ("unknown operation 'cuda_sessions'").
                await self.components.start(
                    self.pm.hook.gleam_agent_component(agent=self), nursery)
                self.pm.hook.gleam_agent_started(agent=self)
                nursery.start_soon(self._serve_tcp, listeners)
                nursery.start_soon(self._serve_control, control_listener)
                nursery.start_soon(self._summarise_refusals)
                for target in self.targets:
                    nursery.start_soon(self._dial_forever, target)
                await nursery.start(self.discovering.run, port)
                log.info(
                    "agent %s (%s) listening on %s:%d, mesh %s",
                    self.display_name, self.node_id[:8], self.config.host,
                    self.listen_port, self.mesh_id,
                )
                self.record("start", f"listening on port {self.listen_port}")
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self._stop()
                await control_listener.aclose()
                self.state.control_socket.unlink(missing_ok=True)

    async def _stop(self) -> None:
        # Links say their own goodbyes as their tasks are cancelled.
        self.pm.hook.gleam_agent_stopping(agent=self)

    async def _open_control(self) -> trio.SocketListener:
        path = self.state.control_socket
        try:
            return await control.open_control_listener(path)
        except control.AgentAlreadyRunning as exc:
            raise AgentStartError(str(exc)) from exc
        except OSError as exc:  # a full disk or a read-only state directory
            line = os_error_line(exc, f"cannot create the control socket {path}")
            if line is None:
                raise
            raise AgentStartError(line) from exc

    async def _open_tcp(self) -> list[trio.SocketListener]:
        host = self.config.host
        try:
            return await trio.open_tcp_listeners(self.config.port, host=host)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AgentStartError(
                    f"port {self.config.port} on {host} is already in use "
                    "(another agent? choose one with --port)"
                ) from exc
            raise AgentStartError(f"cannot listen on {host}:{self.config.port}: {exc}") from exc

    async def _serve_tcp(self, listeners: list[trio.SocketListener]) -> None:
        await trio.serve_listeners(self._accept, listeners)

    async def _serve_control(self, listener: trio.SocketListener) -> None:
        async def handle(stream: trio.SocketStream) -> None:
            with contextlib.suppress(*STREAM_ERRORS):
                await control.serve_control_client(self, stream)

        await trio.serve_listeners(handle, [listener])

    def _new_connection(self, role: Role) -> Connection:
        return Connection(role, self.identity(), max_frame=self.config.max_frame)

    async def _accept(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            return
        conn = self._new_connection(Role.RESPONDER)
        try:
            peer = await establish(stream, conn, self.config.handshake_timeout)
        except HandshakeFailed as exc:
            # Repeats from one host are counted, not logged one by one.
            self._log_refusals(self.refusals.note(host, str(exc), trio.current_time()))
            await stream.aclose()
            return
        # Shown where the peer listens (its hello says), not the port it dialled
        # from: that one is ephemeral and dialling it reaches nobody.
        address = PeerAddress(host, peer.listen_port or port)
        await self._run_link(stream, conn, peer, str(address))

    def _log_refusals(self, lines: list[str]) -> None:
        for line in lines:
            log.warning("%s", line)
            self.record("refused", line)

    async def _summarise_refusals(self) -> None:
        while True:
            await trio.sleep(self.refusals.interval_s)
            self._log_refusals(self.refusals.flush(trio.current_time()))

    async def _run_link(
        self, stream: trio.SocketStream, conn: Connection, peer: Hello, address: str
    ) -> None:
        link = PeerLink(
            stream, conn, peer, address,
            ping_interval=self.config.ping_interval, peer_timeout=self.config.peer_timeout,
            probe_interval=self.config.probe_interval, probe_lock=self.probe_lock,
            display_name=self.names.of,
        )
        if not await self._adopt(link):
            return
        log.info("peer %s (%s) authenticated at %s", link.name, peer.node_id[:8], address)
        self.record("joined", f"{link.name} at {address}")
        self.pm.hook.gleam_peer_authenticated(agent=self, link=link)
        self.mesh.link_up(link)
        try:
            reason = await link.run(self)
        finally:
            if self.links.get(link.node_id) is link:
                del self.links[link.node_id]
                self._links_changed_now()
                self.mesh.link_down(link)
        log.info("link to %s closed: %s", link.name, reason)
        self.record("left", f"{link.name}: {reason}")
        self.pm.hook.gleam_peer_lost(agent=self, link=link, reason=reason)

    def _initiator_of(self, link: PeerLink) -> str:
        return self.node_id if link.role is Role.INITIATOR else link.node_id

    async def _adopt(self, link: PeerLink) -> bool:
        """Make ``link`` the link to its peer, unless a preferred one exists.

        When two peers dial each other at once, both keep the connection
        dialled by the smaller node id, so they agree without talking.
        """
        existing = self.links.get(link.node_id)
        if existing is not None and not existing.closed:
            preferred = min(self.node_id, link.node_id)
            if self._initiator_of(existing) == preferred != self._initiator_of(link):
                await link.close("duplicate connection")
                return False
            await existing.close("replaced by a newer connection")
        self.links[link.node_id] = link
        self._links_changed_now()
        return True

    def on_message(self, link: PeerLink, message: Message) -> None:
        """A control message the link itself does not handle."""
        if isinstance(message, GossipMessage):
            self.mesh.receive(link, message)
            return
        if not self.pm.hook.gleam_control_message(agent=self, link=link, message=message):
            log.debug("no plugin handles %s from %s", type(message).__name__, link.name)

    def on_data_batch(self, link: PeerLink, payload: bytes) -> bool:
        """A data-plane batch (on the link's reader thread): the gleam_data_batch hook."""
        return bool(self.pm.hook.gleam_data_batch(agent=self, link=link, payload=payload))

    def control_request(self, op: str, args: dict[str, Any]) -> object:
        """A control operation's answer: the gleam_control_request hook's."""
        return self.pm.hook.gleam_control_request(agent=self, op=op, args=args)

    def local_fields(self) -> LocalFields:
        """This round's fields of our gossip record, plugins' fields among them."""
        extra: dict[str, Any] = {}
        for fields in self.pm.hook.gleam_gossip_fields(agent=self):
            if isinstance(fields, dict):
                extra.update(fields)
        return LocalFields(port=self.listen_port, sessions=self.session_count(), extra=extra)

    def member_gone(self, node_id: str) -> None:
        """Gossip dropped ``node_id``: its discovered row goes too, unless a link
        still vouches for it (zeroconf keeps a killed peer's advert for its TTL)."""
        if node_id not in self.links:
            self.discovering.forget(node_id)

    def session_count(self) -> int:
        """Sessions this node runs or serves (from the gleam_session_rows hook)."""
        return len(self.session_rows())

    # -------------------------------------------------------------- status

    def link_to(self, wanted: str) -> PeerLink | None:
        """The link to the node ``wanted`` names (display name, name or node id
        prefix; peer/names.py); None if it names no linked node, or several."""
        try:
            return self.links.get(self.names.resolve(wanted))
        except LookupError:  # unknown, or ambiguous
            return None

    def snapshot(self) -> dict[str, Any]:
        """The status document (``gleam-peer status --json``)."""
        doc = build_status(StatusInputs(
            node_id=self.node_id, name=self.config.name, names=self.names.shown(),
            port=self.listen_port,
            mesh_id=self.mesh_id, started_at=self.started_at, state_dir=self.state.path,
            mesh=self.mesh, inventory=self.inventory, links=self.links, targets=self.targets,
            adverts=self.discovered_adverts(), sessions=self.session_rows(),
            plugins=describe_plugins(self.pm), events=self.events,
            finished=[row for rows in self.pm.hook.gleam_finished_sessions(agent=self)
                      for row in rows or ()],
        ))
        return add_plugin_sections(doc, self.pm.hook.gleam_status(agent=self))

    def discovered_adverts(self) -> list[dict[str, Any]]:
        """Peers seen through discovery: id, name, address, foreign."""
        return self.discovering.rows()

    async def dial_discovered(
        self, node_id: str, name: str, addresses: list[PeerAddress]
    ) -> None:
        """Keep a discovered peer linked, trying each advertised address in turn."""
        target = DialTarget(addresses[0], node_id=node_id, name=name)
        backoff = DIAL_BACKOFF_MIN
        while True:
            if node_id in self.links:
                await self._wait_links_change()
                continue
            for address in addresses:
                target.address = address
                if await self._dial_once(target) is None:
                    backoff = DIAL_BACKOFF_MIN
                    break
            else:
                await trio.sleep(backoff)
                backoff = min(DIAL_BACKOFF_MAX, backoff * 2)

    def session_rows(self) -> list[dict[str, Any]]:
        """Local and served sessions for the status view (the gleam_session_rows hook)."""
        return [row for rows in self.pm.hook.gleam_session_rows(agent=self) for row in rows or ()]

    async def _dial_forever(self, target: DialTarget) -> None:
        backoff = DIAL_BACKOFF_MIN
        while True:
            if target.node_id and target.node_id in self.links:
                # Already linked (perhaps the peer dialled us): wait for that to end.
                target.state = "connected"
                await self._wait_links_change()
                continue
            target.state = "connecting"
            reason = await self._dial_once(target)
            if reason is None:
                backoff = DIAL_BACKOFF_MIN
                continue
            await trio.sleep(backoff)
            backoff = min(DIAL_BACKOFF_MAX, backoff * 2)

    async def _dial_once(self, target: DialTarget) -> str | None:
        """One attempt; returns an error reason, or None after a link that served."""
        addr = target.address
        try:
            with trio.fail_after(self.config.handshake_timeout):
                stream = await trio.open_tcp_stream(addr.host, addr.port)
        except (OSError, trio.TooSlowError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            self._dial_failed(target, "unreachable", reason)
            return reason
        conn = self._new_connection(Role.INITIATOR)
        try:
            peer = await establish(stream, conn, self.config.handshake_timeout)
        except HandshakeFailed as exc:
            await stream.aclose()
            self._dial_failed(target, "refused", str(exc))
            return str(exc)
        target.node_id, target.name, target.error = peer.node_id, peer.name, None
        target.state = "connected"
        await self._run_link(stream, conn, peer, str(addr))
        return None

    def _dial_failed(self, target: DialTarget, state: str, reason: str) -> None:
        if target.state != state or target.error != reason:
            log.warning("cannot connect to %s: %s", target.address, reason)
            self.record(state, f"{target.address}: {reason}")
        target.state, target.error = state, reason

    async def _wait_links_change(self) -> None:
        await self._links_changed.wait()

    def _links_changed_now(self) -> None:
        self._links_changed.set()
        self._links_changed = trio.Event()
