"""Per-agent plugin state: the components an agent keeps for its plugins.

A plugin module is loaded once per process, but a process may run several
agents (the tests do). State kept in a module global keyed by agent leaks
between them and outlives them; instead each plugin returns its state from
``gleam_agent_component`` and the agent keeps it here, found again by type
(docs/plugins.md, "Per-agent state"). A component with a ``run`` method is a
Trio service: the agent starts it in its nursery and cancels it on shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import trio

log = logging.getLogger("gleam.agent")

T = TypeVar("T")


class Components:
    """One agent's plugin components, one per type."""

    def __init__(self) -> None:
        self._by_type: dict[type, object] = {}

    def get(self, kind: type[T]) -> T | None:
        """The component of exactly type ``kind``; None before the agent started it."""
        found = self._by_type.get(kind)
        return found if isinstance(found, kind) else None

    def __iter__(self) -> Iterator[object]:
        return iter(list(self._by_type.values()))

    def __len__(self) -> int:
        return len(self._by_type)

    def add(self, component: object) -> bool:
        """Keep ``component``; False (and a log line) when its type is taken already."""
        kind = type(component)
        if kind in self._by_type:
            log.error("two plugins gave a %s component; the later one is ignored",
                      kind.__qualname__)
            return False
        self._by_type[kind] = component
        return True

    async def start(self, given: Iterable[Any], nursery: trio.Nursery) -> None:
        """Keep what ``gleam_agent_component`` gave and start the services among it.

        ``nursery.start`` waits for each service to say it is ready, so a
        request or a peer's message never finds a plugin half started.
        """
        for component in given:
            if component is None or not self.add(component):
                continue
            run = getattr(component, "run", None)
            if callable(run):
                await nursery.start(run)
