"""What the client side reads of the agent and of a session this agent serves.

Small Protocols instead of the Agent and the server's ``ServedSession``, so the
client side imports neither (tests/test_package_layering.py): the forwarding
component, which holds both sides, hands them in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from gleam.peer.cuda.client.choose import ChoosingAgent

if TYPE_CHECKING:
    from gleam.peer.state import StateDir


class ClientConfig(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def state(self) -> StateDir: ...


class ClientAgent(ChoosingAgent, Protocol):
    """The agent as the client side reads it: what choosing a server reads, its
    name for the peers it opens sessions on, and its state folder (learned demand)."""

    @property
    def config(self) -> ClientConfig: ...


class VaRange(Protocol):
    @property
    def va_base(self) -> int: ...
    @property
    def va_size(self) -> int: ...


class LocalServed(Protocol):
    """A session this agent serves for its own program, as the client side uses it
    (the server side's ``ServedSession`` is one)."""

    end_reason: str | None
    stats: dict[str, Any]  # the executor's counters, for the session's status row

    @property
    def exec(self) -> VaRange:
        """The session's executor: the address range it keeps (what HELLO tells the program)."""
        ...

    def attach_data(self, conn: Any) -> None:
        """Serve from ``conn`` (the server's end of the session's local data connection)."""
        ...

    def stop(self, reason: str) -> None:
        """Ask the session to end; never blocks."""
        ...
