"""Peer discovery: gleam nodes advertise ``_gleam._tcp.local.`` over mDNS/DNS-SD.

See docs/discovery.md for what is advertised and how interfaces are chosen.
"""

from gleam.discovery.adverts import (
    SERVICE_TYPE,
    DiscoveryEvent,
    DuplicateNodeId,
    InvalidAdvert,
    LocalAdvert,
    PeerAdvert,
    PeerFound,
    PeerGone,
    PeerUpdated,
    parse_advert,
)
from gleam.discovery.interfaces import (
    SKIPPED_BY_DEFAULT,
    InterfaceError,
    SelectedInterface,
    select_interfaces,
)
from gleam.discovery.mdns import DiscoveryError, MdnsDiscovery

__all__ = [
    "SERVICE_TYPE",
    "SKIPPED_BY_DEFAULT",
    "DiscoveryError",
    "DiscoveryEvent",
    "DuplicateNodeId",
    "InterfaceError",
    "InvalidAdvert",
    "LocalAdvert",
    "MdnsDiscovery",
    "PeerAdvert",
    "PeerFound",
    "PeerGone",
    "PeerUpdated",
    "SelectedInterface",
    "parse_advert",
    "select_interfaces",
]
