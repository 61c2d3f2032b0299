"""mDNS/DNS-SD discovery of gleam peers, run from Trio.

Threading model. python-zeroconf's threaded ``Zeroconf`` runs its own asyncio loop in
a thread, and ``ServiceBrowser`` calls its handlers from one more thread. Here:

- every blocking zeroconf call (open, register, update, unregister, resolve, close) runs
  in a worker thread through ``trio.to_thread.run_sync``;
- a browser handler does nothing but hand ``(generation, name, change)`` to the Trio
  thread with ``TrioToken.run_sync_soon``; all state lives on the Trio thread;
- events reach the agent through an internal queue drained by one task, so neither a
  browser callback nor ``readvertise`` ever waits for the agent to read.

Every Zeroconf instance gets a generation number; callbacks and resolutions that belong
to an instance already replaced are dropped.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Callable, Iterable, Sequence

import ifaddr
import trio
import zeroconf
from zeroconf import (
    DNSQuestionType,
    NonUniqueNameException,
    ServiceBrowser,
    ServiceInfo,
    ServiceStateChange,
    Zeroconf,
)

from gleam.discovery.adverts import (
    SERVICE_TYPE,
    AdvertKind,
    DiscoveryEvent,
    InvalidAdvert,
    LocalAdvert,
    PeerAdvert,
    classify,
    host_name,
    instance_name,
    parse_advert,
    transition,
    txt_properties,
)
from gleam.discovery.interfaces import (
    InterfaceError,
    SelectedInterface,
    advertised_addresses,
    describe,
    select_interfaces,
    zeroconf_interfaces,
)

log = logging.getLogger(__name__)

RESOLVE_TIMEOUT_MS = 3000
# Goodbyes take about a quarter of a second; a hung close must not hang the agent.
SHUTDOWN_TIMEOUT = 3.0
# After Zeroconf is re-created, a peer that does not answer again within this long
# is reported gone. Answers to the new browser's first query come within a second.
RECONFIRM_GRACE = 4.0
MAX_NAME_ATTEMPTS = 32
# How long a candidate instance name is asked for before we claim it (see _name_taken):
# a defender that multicast its records less than a second ago must hold its answer
# back until that second is over (RFC 6762 section 14), then aggregates it for up to
# 120 ms.
NAME_QUERY_TIMEOUT_MS = 1500
# Bound the state a flood of hostile adverts can make us hold.
MAX_TRACKED = 512


class DiscoveryError(Exception):
    """Discovery cannot start; the message says what happened and what to do."""


def _hand_to_trio(
    token: trio.lowlevel.TrioToken,
    note: Callable[[int, str, ServiceStateChange], None],
    generation: int,
    **kwargs: object,
) -> None:
    """ServiceBrowser handler; runs on zeroconf's thread and touches nothing of Trio's
    but the token."""
    name, change = kwargs["name"], kwargs["state_change"]
    if not isinstance(name, str) or not isinstance(change, ServiceStateChange):
        return
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(note, generation, name, change)


def _open_zeroconf(
    interfaces: list[str | int], handler: Callable[..., None]
) -> tuple[Zeroconf, ServiceBrowser]:
    zc = Zeroconf(interfaces=interfaces)
    try:
        browser = ServiceBrowser(zc, SERVICE_TYPE, handlers=[handler])
    except BaseException:
        zc.close()
        raise
    return zc, browser


def _close_zeroconf(zc: Zeroconf, browser: ServiceBrowser | None) -> None:
    try:
        if browser is not None:
            browser.cancel()
        zc.unregister_all_services()  # sends the goodbyes
    except Exception:
        log.warning("mDNS goodbye failed", exc_info=True)
    finally:
        zc.close()


def _resolve(zc: Zeroconf, name: str) -> ServiceInfo | None:
    try:
        return zc.get_service_info(SERVICE_TYPE, name, timeout=RESOLVE_TIMEOUT_MS)
    except Exception as exc:  # a closing Zeroconf, a blocked loop: try again on the next change
        log.debug("resolving %r failed: %r", name, exc)
        return None


def _name_taken(zc: Zeroconf, instance: str) -> bool:
    """Whether some responder on the network already answers for ``instance``.

    Zeroconf's own probes are QU questions, so a defending responder on the same
    host answers by unicast to 127.0.0.1:5353 (or the host's address). When several
    mDNS responders share port 5353 on one machine, the kernel hands such a datagram
    to one socket of the port, chosen by a hash seeded at boot: on some machines the
    defence reaches the prober, on others the defender's own socket, and the conflict
    goes unseen (RFC 6762 section 15.1). A QM question is answered by multicast,
    which every socket of the group receives, so it sees the defence everywhere.
    """
    probe = ServiceInfo(SERVICE_TYPE, f"{instance}.{SERVICE_TYPE}")
    return bool(probe.request(zc, NAME_QUERY_TIMEOUT_MS, question_type=DNSQuestionType.QM))


def _service_info(
    instance: str, local: LocalAdvert, host: str, addresses: Sequence[str]
) -> ServiceInfo:
    return ServiceInfo(
        SERVICE_TYPE,
        f"{instance}.{SERVICE_TYPE}",
        port=local.port,
        properties=txt_properties(local),
        server=host,
        parsed_addresses=list(addresses),
    )


def advert_from_info(
    info: ServiceInfo, instance: str, our_mesh_id: str, link_scope: int | None = None
) -> PeerAdvert:
    """Read a resolved ``ServiceInfo``; raises :class:`InvalidAdvert` if it is not gleam's.

    ``link_scope`` is the interface index for link-local IPv6 addresses that the
    resolver could not scope; pass it only when a single interface carries IPv6.
    """
    try:
        properties = info.properties
        addresses = info.parsed_scoped_addresses()
    except Exception as exc:
        raise InvalidAdvert(f"unreadable records: {exc!r}") from None
    return parse_advert(
        instance=instance,
        host=info.server,
        port=info.port,
        properties=properties,
        addresses=addresses,
        our_mesh_id=our_mesh_id,
        link_scope=link_scope,
    )


class MdnsDiscovery:
    """Advertises this node as ``_gleam._tcp.local.`` and reports the others.

    ``interfaces`` are names (``eth0``, ``lo``) or addresses; empty means the default
    rule of :func:`select_interfaces`. The interfaces are scanned again every
    ``rescan_interval`` seconds (``None`` or 0: never) and, when the usable set
    changed, Zeroconf is re-created on the new set and the service registered again.
    ``adapters`` replaces ``ifaddr.get_adapters`` (tests, embedding).
    """

    def __init__(
        self,
        local: LocalAdvert,
        *,
        interfaces: Sequence[str] = (),
        rescan_interval: float | None = 5.0,
        adapters: Callable[[], Iterable[ifaddr.Adapter]] | None = None,
    ) -> None:
        self._local = local
        self._requested = tuple(interfaces)
        self._rescan_interval = rescan_interval
        self._adapters = adapters
        self._selection: list[SelectedInterface] = []
        self._zc: Zeroconf | None = None
        self._browser: ServiceBrowser | None = None
        self._info: ServiceInfo | None = None
        self._instance: str | None = None
        self._generation = 0
        # (instance, host) pairs this node has registered or is probing for.
        self._own: set[tuple[str, str]] = set()
        self._tracked: dict[str, tuple[AdvertKind, PeerAdvert]] = {}
        self._pending: dict[str, ServiceStateChange] = {}  # by full service name
        self._following: set[str] = set()
        self._unconfirmed: set[str] = set()
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._outbox: trio.MemorySendChannel[DiscoveryEvent] | None = None
        self._running = False
        self._flood_warned = False

    # ------------------------------------------------------------------ public

    @property
    def interfaces(self) -> tuple[str, ...]:
        """Names of the interfaces mDNS runs on now."""
        if self._zc is None:
            return ()
        return tuple(iface.name for iface in self._selection)

    @property
    def addresses(self) -> tuple[str, ...]:
        """The addresses our advert carries now."""
        return advertised_addresses(self._selection) if self._zc is not None else ()

    @property
    def instance(self) -> str | None:
        """Our registered instance name (renamed on a collision), if registered."""
        return self._instance if self._info is not None else None

    @property
    def local(self) -> LocalAdvert:
        return self._local

    async def run(
        self,
        events: trio.MemorySendChannel[DiscoveryEvent],
        *,
        task_status: trio.TaskStatus[str | None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Advertise and browse until cancelled, then say goodbye.

        Reports readiness (with the registered instance name) once the service is
        registered and the browser runs, or at once with ``None`` when no interface
        is usable yet. Raises :class:`InterfaceError` for a requested interface that
        does not exist and :class:`DiscoveryError` when mDNS cannot start.
        """
        if self._running:
            raise RuntimeError("this MdnsDiscovery is already running")
        selection = await trio.to_thread.run_sync(self._scan)
        self._tracked.clear()
        self._unconfirmed.clear()
        outbox, inbox = trio.open_memory_channel[DiscoveryEvent](math.inf)
        async with trio.open_nursery() as nursery:
            self._nursery, self._outbox, self._running = nursery, outbox, True
            nursery.start_soon(self._forward, inbox, events)
            try:
                async with self._lock:
                    await self._start(selection, first=True)
                self._reclassify()
                task_status.started(self.instance)
                await self._watch_interfaces()
            finally:
                self._running = False
                with trio.CancelScope(shield=True, deadline=trio.current_time() + SHUTDOWN_TIMEOUT):
                    await self._stop()
                self._nursery = self._outbox = None
                nursery.cancel_scope.cancel()

    async def readvertise(self, local: LocalAdvert) -> None:
        """Publish changed facts: a new port, version or mesh updates the records in
        place; a new name or node id withdraws the service and registers it afresh."""
        async with self._lock:
            old, self._local = self._local, local
            zc, info = self._zc, self._info
            if zc is not None and info is not None and self._running:
                await self._publish(zc, info, old)
        if self._running:
            self._reclassify()

    async def _publish(self, zc: Zeroconf, info: ServiceInfo, old: LocalAdvert) -> None:
        local = self._local
        if local.name != old.name or local.node_id != old.node_id:
            await trio.to_thread.run_sync(zc.unregister_service, info)
            self._info = None
            await self._register(zc)
        else:
            assert self._instance is not None
            updated = _service_info(self._instance, local, host_name(local.node_id), self.addresses)
            await trio.to_thread.run_sync(zc.update_service, updated)
            self._info = updated

    # --------------------------------------------------------------- lifecycle

    def _scan(self) -> list[SelectedInterface]:
        adapters = self._adapters() if self._adapters is not None else None
        return select_interfaces(self._requested, adapters)

    async def _start(self, selection: list[SelectedInterface], *, first: bool = False) -> None:
        self._generation += 1
        self._selection = selection
        interfaces = zeroconf_interfaces(selection)
        if not interfaces:
            log.warning(
                "mDNS: no usable network interface (%s); peers will be found once one "
                "has an address", describe(selection),
            )
            return
        assert self._nursery is not None
        handler = functools.partial(
            _hand_to_trio, trio.lowlevel.current_trio_token(), self._note_change, self._generation
        )
        try:
            zc, browser = await trio.to_thread.run_sync(_open_zeroconf, interfaces, handler)
        except (OSError, RuntimeError, zeroconf.Error) as exc:
            message = f"cannot start mDNS on {describe(selection)}: {exc}"
            if first:
                raise DiscoveryError(
                    f"{message}; name another interface with --interface, or add peers "
                    "with --peer HOST:PORT"
                ) from exc
            log.warning("%s; retrying at the next interface scan", message)
            self._selection = []  # so that the next scan differs and retries
            return
        self._zc, self._browser = zc, browser
        if first:
            try:
                await self._register(zc)
            except zeroconf.Error as exc:
                raise DiscoveryError(
                    f"cannot register the mDNS service: {exc or repr(exc)}; peers can "
                    "still be added with --peer HOST:PORT"
                ) from exc
        elif not await self._try_register(zc):
            return
        log.info(
            "mDNS on %s: advertising %r at %s port %d",
            describe(selection), self._instance, ", ".join(self.addresses), self._local.port,
        )

    async def _try_register(self, zc: Zeroconf) -> bool:
        """Register, or log why not; browsing goes on and the watcher retries."""
        try:
            await self._register(zc)
        except (zeroconf.Error, DiscoveryError) as exc:
            log.warning("mDNS: cannot register the service: %s", exc or repr(exc))
            return False
        return True

    async def _register(self, zc: Zeroconf) -> None:
        """Register our service, renaming it "name (2)", "name (3)"... while taken."""
        local = self._local
        host = host_name(local.node_id)
        for attempt in range(1, MAX_NAME_ATTEMPTS + 1):
            name = instance_name(local.name, attempt)
            info = _service_info(name, local, host, self.addresses)
            # Known as ours while probing, so our own announcements are never
            # mistaken for a node that copied our id.
            self._own.add((name, host))
            try:
                # Abandoned on cancellation: closing zc makes the thread give up.
                if await trio.to_thread.run_sync(_name_taken, zc, name, abandon_on_cancel=True):
                    raise NonUniqueNameException
                await trio.to_thread.run_sync(zc.register_service, info, abandon_on_cancel=True)
            except NonUniqueNameException:
                self._own.discard((name, host))
                log.info("mDNS: instance name %r is taken on the network; renaming", name)
                continue
            self._info, self._instance = info, name
            return
        raise DiscoveryError(
            f"could not find a free instance name after {MAX_NAME_ATTEMPTS} tries for "
            f"{local.name!r}; choose another name with --name"
        )

    async def _stop(self) -> None:
        zc, browser = self._zc, self._browser
        self._zc = self._browser = self._info = None
        self._generation += 1
        if zc is not None:
            await trio.to_thread.run_sync(
                _close_zeroconf, zc, browser, abandon_on_cancel=True
            )

    async def _watch_interfaces(self) -> None:
        if not self._rescan_interval:
            await trio.sleep_forever()
        assert self._rescan_interval is not None and self._nursery is not None
        warned = False
        while True:
            await trio.sleep(self._rescan_interval)
            try:
                selection = await trio.to_thread.run_sync(self._scan)
                warned = False
            except InterfaceError as exc:
                if not warned:
                    log.warning("mDNS: %s", exc)
                    warned = True
                selection = []
            async with self._lock:
                if selection != self._selection:
                    log.info(
                        "mDNS: interfaces changed from %s to %s; restarting",
                        describe(self._selection), describe(selection),
                    )
                    await self._stop()
                    self._unconfirmed = set(self._tracked)
                    await self._start(selection)
                    self._nursery.start_soon(self._expire_unconfirmed, self._generation)
                elif self._zc is not None and self._info is None:
                    await self._try_register(self._zc)
            self._reclassify()

    async def _expire_unconfirmed(self, generation: int) -> None:
        await trio.sleep(RECONFIRM_GRACE)
        if generation != self._generation:
            return  # another restart took over
        for instance in sorted(self._unconfirmed):
            self._settle(instance, None)
        self._unconfirmed.clear()

    # ----------------------------------------------------------------- browsing

    def _note_change(self, generation: int, name: str, change: ServiceStateChange) -> None:
        """Runs on the Trio thread, called soon after the browser saw a change."""
        if not self._running or generation != self._generation or self._nursery is None:
            return
        if not name.endswith("." + SERVICE_TYPE):
            return
        if (
            name not in self._pending
            and _instance_of(name) not in self._tracked
            and len(self._pending) + len(self._tracked) >= MAX_TRACKED
        ):
            if not self._flood_warned:
                log.warning("mDNS: more than %d gleam adverts; ignoring new ones", MAX_TRACKED)
                self._flood_warned = True
            return
        self._pending[name] = change
        if name not in self._following:
            self._following.add(name)
            self._nursery.start_soon(self._follow, name)

    async def _follow(self, name: str) -> None:
        """Apply the changes of one service, in order, coalescing those that pile up."""
        instance = _instance_of(name)
        try:
            while (change := self._pending.pop(name, None)) is not None:
                if change is ServiceStateChange.Removed:
                    self._settle(instance, None)
                    continue
                generation, zc = self._generation, self._zc
                if zc is None:
                    continue
                info = await trio.to_thread.run_sync(_resolve, zc, name, abandon_on_cancel=True)
                if generation != self._generation or info is None:
                    continue
                try:
                    advert = advert_from_info(
                        info, instance, self._local.mesh_id, self._link_scope()
                    )
                except InvalidAdvert as exc:
                    log.debug("mDNS: ignoring advert %r: %s", instance, exc)
                    self._settle(instance, None)
                    continue
                self._unconfirmed.discard(instance)
                self._settle(instance, advert)
        finally:
            self._following.discard(name)

    def _link_scope(self) -> int | None:
        """The one interface our IPv6 runs on, if there is exactly one."""
        scopes = {i.index for i in self._selection if i.ipv6 and i.index is not None}
        return scopes.pop() if len(scopes) == 1 else None

    def _settle(self, instance: str, advert: PeerAdvert | None) -> None:
        old = self._tracked.get(instance)
        new = classify(advert, self._local, self._own) if advert is not None else None
        if new is None:
            self._tracked.pop(instance, None)
        else:
            self._tracked[instance] = new
        for event in transition(instance, old, new):
            self._emit(event)

    def _reclassify(self) -> None:
        """Judge every known advert again after our own name, id or mesh changed."""
        for instance, (_, advert) in list(self._tracked.items()):
            self._settle(instance, advert)

    def _emit(self, event: DiscoveryEvent) -> None:
        if self._outbox is not None:
            self._outbox.send_nowait(event)

    @staticmethod
    async def _forward(
        inbox: trio.MemoryReceiveChannel[DiscoveryEvent],
        events: trio.MemorySendChannel[DiscoveryEvent],
    ) -> None:
        async for event in inbox:
            await events.send(event)


def _instance_of(name: str) -> str:
    return name[: -len(SERVICE_TYPE) - 1]
