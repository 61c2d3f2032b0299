"""Per-agent plugin state (gleam_agent_component): kept by type, services run and stopped."""

from __future__ import annotations

import logging
from typing import Any

import trio

from gleam.peer.components import Components
from gleam.peer.hookspecs import hookimpl

from .conftest import AgentStarter


class Greeter:
    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.ready = False
        self.cancelled = False

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            self.ready = True
            task_status.started()
            await trio.sleep_forever()
        finally:
            self.cancelled = True


class GreeterPlugin:
    @hookimpl
    def gleam_agent_component(self, agent: Any) -> Greeter:
        return Greeter(agent)


def test_components_are_kept_by_type_and_a_second_of_one_type_is_ignored(caplog):
    kept = Components()
    first, second = Greeter(None), Greeter(None)
    assert kept.add(first)
    with caplog.at_level(logging.ERROR, logger="gleam.agent"):
        assert not kept.add(second)
    assert "two plugins gave a Greeter component" in caplog.text
    assert kept.get(Greeter) is first and kept.get(Components) is None
    assert list(kept) == [first] and len(kept) == 1


async def test_an_agent_starts_its_plugins_services_and_cancels_them(state_factory,
                                                                  mesh_key):
    async with trio.open_nursery() as nursery:
        starter = AgentStarter(nursery, state_factory)
        plugins = (("greeter", GreeterPlugin()),)
        a = await starter.start("a", mesh_key, plugins=plugins)
        b = await starter.start("b", mesh_key, plugins=plugins)
        ga, gb = a.components.get(Greeter), b.components.get(Greeter)
        # Started (and ready) before the agent's start returned, one per agent.
        assert ga is not None and gb is not None and ga is not gb
        assert ga.agent is a and gb.agent is b and ga.ready and gb.ready
        assert not ga.cancelled
        nursery.cancel_scope.cancel()
    assert ga.cancelled and gb.cancelled
