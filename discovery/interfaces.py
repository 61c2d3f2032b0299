"""Which network interfaces discovery uses.

By default every interface with an address, except the bridges and tunnels that
containers, virtual machines and VPNs create: a GPU peer is found on the LAN, not
inside a docker network or across a tailnet. Loopback is used only when nothing else
is up, so that agents on an offline machine still see each other. Naming interfaces
(``--interface eth0``, ``--interface 192.168.1.20``) replaces the default, and a named
interface is used even when its name matches a skipped pattern.

The selection is a pure function of the adapter list that ``ifaddr`` reports, so it is
tested with made-up adapters.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import ifaddr

# Interfaces that exist on many laptops and desktops but lead to containers, virtual
# machines or an overlay network rather than to the LAN.
SKIPPED_BY_DEFAULT: tuple[str, ...] = (
    "docker*",  # docker's default bridge
    "br-*",  # docker/podman user-defined bridges
    "veth*",  # one end of every container's virtual cable
    "virbr*",  # libvirt
    "lxcbr*",  # LXC
    "lxdbr*",  # LXD
    "podman*",
    "cni*",  # Kubernetes CNI bridges
    "flannel*",
    "cali*",  # Calico
    "vboxnet*",  # VirtualBox host-only
    "vmnet*",  # VMware
    "tailscale*",
    "utun*",  # macOS VPN tunnels
    "tun*",  # OpenVPN and friends
    "wg*",  # WireGuard
    "zt*",  # ZeroTier
)


class InterfaceError(ValueError):
    """A requested interface does not exist; the message lists the ones that do."""


@dataclass(frozen=True)
class SelectedInterface:
    """One interface discovery runs on, with the addresses it uses there."""

    name: str
    index: int | None
    ipv4: tuple[str, ...]
    ipv6: tuple[str, ...]  # without scope; the interface is the scope
    loopback: bool

    @property
    def addresses(self) -> tuple[str, ...]:
        return self.ipv4 + self.ipv6


def select_interfaces(
    requested: Sequence[str] = (), adapters: Iterable[ifaddr.Adapter] | None = None
) -> list[SelectedInterface]:
    """The interfaces to use: ``requested`` names or addresses, else the default rule.

    ``adapters`` defaults to what ``ifaddr`` reports now. Raises :class:`InterfaceError`
    for a requested name or address that no adapter has. A requested interface that
    exists but has no address yet is returned with empty address lists.
    """
    adapters = list(ifaddr.get_adapters() if adapters is None else adapters)
    found = [_view(adapter) for adapter in adapters]
    if requested:
        # On Windows the name is a GUID and the nice name is what people type.
        aliases = {
            view.name: {adapter.name, adapter.nice_name}
            for adapter, view in zip(adapters, found, strict=True)
        }
        return _explicit(requested, found, aliases)
    usable = [iface for iface in found if iface.addresses and not _skipped(iface.name)]
    outside = [iface for iface in usable if not iface.loopback]
    return outside or usable


def zeroconf_interfaces(selection: Iterable[SelectedInterface]) -> list[str | int]:
    """The ``interfaces`` argument for ``zeroconf.Zeroconf``.

    IPv4 multicast is joined per address, IPv6 per interface index.
    """
    result: list[str | int] = []
    for iface in selection:
        result.extend(a for a in iface.ipv4 if a not in result)
    for iface in selection:
        if iface.ipv6 and iface.index is not None and iface.index not in result:
            result.append(iface.index)
    return result


def advertised_addresses(selection: Iterable[SelectedInterface]) -> tuple[str, ...]:
    """The addresses our A/AAAA records carry.

    Loopback addresses are advertised only when loopback is all we run on: a peer on
    another machine must never be told to dial 127.0.0.1.
    """
    selection = list(selection)
    outside = [a for iface in selection if not iface.loopback for a in iface.addresses]
    inside = [a for iface in selection if iface.loopback for a in iface.addresses]
    return tuple(dict.fromkeys(outside or inside))


def describe(selection: Iterable[SelectedInterface]) -> str:
    parts = [f"{iface.name} ({', '.join(iface.addresses) or 'no address'})" for iface in selection]
    return ", ".join(parts) or "none"


def _skipped(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in SKIPPED_BY_DEFAULT)


def _view(adapter: ifaddr.Adapter) -> SelectedInterface:
    ipv4: list[str] = []
    ipv6: list[str] = []
    loopback = True
    for entry in adapter.ips:
        text = entry.ip[0] if isinstance(entry.ip, tuple) else entry.ip
        try:
            ip = ipaddress.ip_address(str(text).partition("%")[0])
        except ValueError:
            continue
        if ip.is_unspecified or ip.is_multicast:
            continue
        loopback = loopback and ip.is_loopback
        (ipv4 if ip.version == 4 else ipv6).append(str(ip))
    loopback = loopback and bool(ipv4 or ipv6)
    if loopback:
        # python-zeroconf cannot use IPv6 multicast on ::1.
        ipv6 = []
    return SelectedInterface(adapter.name, adapter.index, tuple(ipv4), tuple(ipv6), loopback)


def _explicit(
    requested: Sequence[str], found: list[SelectedInterface], aliases: dict[str, set[str]]
) -> list[SelectedInterface]:
    whole: set[str] = set()  # interfaces named as such
    picked: dict[str, set[str]] = {}  # interface -> addresses named one by one
    for text in requested:
        text = text.strip()
        named = next((i for i in found if text and text in aliases[i.name]), None)
        if named is not None:
            whole.add(named.name)
            continue
        address = _parse_address(text, found)
        owner = next((i for i in found if address in i.addresses), None)
        if owner is None:
            raise InterfaceError(
                f"no network interface is named {text!r} or holds that address; "
                f"choose from: {describe(found)}"
            )
        picked.setdefault(owner.name, set()).add(address)
    selection = []
    for iface in found:
        if iface.name not in whole and iface.name not in picked:
            continue
        if iface.name not in whole:
            addresses = picked[iface.name]
            iface = SelectedInterface(
                iface.name,
                iface.index,
                tuple(a for a in iface.ipv4 if a in addresses),
                tuple(a for a in iface.ipv6 if a in addresses),
                iface.loopback,
            )
        selection.append(iface)
    return selection


def _parse_address(text: str, found: list[SelectedInterface]) -> str:
    try:
        ip = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        raise InterfaceError(
            f"{text!r} is neither a network interface nor an IP address; "
            f"choose from: {describe(found)}"
        ) from None
    if ip.is_loopback and ip.version == 6:
        raise InterfaceError("mDNS cannot run over IPv6 loopback (::1); use 127.0.0.1 or lo")
    return str(ip)
