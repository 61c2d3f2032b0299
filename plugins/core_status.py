"""Built-in plugin: the ``status`` and ``ping`` control operations.

The core answers ``gleam-peer status`` through the same hook a third-party
plugin would use to add an operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gleam.peer.hookspecs import hookimpl

if TYPE_CHECKING:
    from gleam.peer.agent import Agent


@hookimpl
def gleam_control_request(agent: Agent, op: str, args: dict[str, Any]) -> dict[str, Any] | None:
    if op == "status":
        return agent.snapshot()
    if op == "ping":
        return {"node": agent.node_id}
    return None
