"""What changed in the view, for the status view's event list."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Died",
    "Joined",
    "MembershipEvent",
    "Refuted",
    "Rejoined",
    "Suspected",
    "Updated",
]


@dataclass(frozen=True)
class MembershipEvent:
    node_id: str
    at: float

    @property
    def kind(self) -> str:
        return type(self).__name__.lower()


@dataclass(frozen=True)
class Joined(MembershipEvent):
    """A node we did not know is now a member."""


@dataclass(frozen=True)
class Updated(MembershipEvent):
    """A member published a new record; ``fields`` names what changed."""

    fields: tuple[str, ...]


@dataclass(frozen=True)
class Suspected(MembershipEvent):
    """A member stopped answering (our link dropped, or another peer said so)."""

    incarnation: int


@dataclass(frozen=True)
class Refuted(MembershipEvent):
    """A suspect proved it is alive with a higher incarnation (also: we refuted)."""

    incarnation: int


@dataclass(frozen=True)
class Died(MembershipEvent):
    """A member was declared dead and left the view."""

    incarnation: int


@dataclass(frozen=True)
class Rejoined(MembershipEvent):
    """A node declared dead came back with a higher incarnation."""

    incarnation: int
