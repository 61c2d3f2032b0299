"""What scheduling reads of the agent: a small Protocol, not the Agent.

The lease service, the rebalancer and the cost model's inputs see the agent's
name, its links, the gossip view and its components (where the lease service
itself is found), and nothing else; the agent satisfies this by what it is,
without importing scheduling (tests/test_package_layering.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gleam.peer.components import Components
    from gleam.peer.gossip import Member
    from gleam.peer.link import PeerLink


class Named(Protocol):
    @property
    def name(self) -> str: ...


class Members(Protocol):
    def members(self) -> Mapping[str, Member]: ...


class SchedAgent(Protocol):
    """The agent as scheduling reads it."""

    @property
    def config(self) -> Named: ...
    @property
    def mesh(self) -> Members: ...
    @property
    def links(self) -> Mapping[str, PeerLink]: ...
    @property
    def components(self) -> Components: ...
