"""The agent's components do not import the agent, and nothing they import leads back.

Read from the source with ``ast``, so an import under ``if TYPE_CHECKING:`` or
inside a function counts as much as one at the top: a cycle of annotations is
still a cycle to a reader (docs/architecture.md, "Components and the way their
imports point").
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import gleam.discovery
import gleam.peer
import gleam.plugins

AGENT = "gleam.peer.agent"
# Each gets a small interface from the agent instead of the agent itself.
COMPONENTS = (
    "gleam.peer.link",
    "gleam.peer.control",
    "gleam.peer.discovering",
    "gleam.peer.meshview",
    "gleam.peer.status",
    "gleam.peer.cuda.client.choose",
)
PACKAGES = (gleam.peer, gleam.discovery, gleam.plugins)
# Cycles known and owned elsewhere, which a component may sit on: every module of
# such a cycle is listed, and the agent never is. (None today: choose's went when
# Choice moved to sched/choice.py, which the lease service imports instead.)
KNOWN_CYCLES: dict[str, set[str]] = {}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        root = Path(package.__path__[0])
        for path in root.rglob("*.py"):
            parts = [package.__name__, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from gleam.peer import control`` imports a module, not a name.
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Module -> the gleam modules it imports anywhere in its source."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        targets = {resolve(n) for n in _imported_names(ast.parse(path.read_text()))}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """An import chain from ``start`` to ``goal`` (breadth first), or None."""
    came_from: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for module in frontier:
            for target in sorted(graph.get(module, ())):
                if target in came_from:
                    continue
                came_from[target] = module
                if target == goal:
                    chain = [goal]
                    while (back := came_from[chain[-1]]) is not None:
                        chain.append(back)
                    return chain[::-1]
                nxt.append(target)
        frontier = nxt
    return None


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def cycle_mates(graph: dict[str, set[str]], name: str) -> set[str]:
    """The other modules on some import cycle through ``name`` (its strong component)."""
    reverse: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            reverse.setdefault(target, set()).add(module)
    return (_reachable(graph, name) & _reachable(reverse, name)) - {name}


def test_the_graph_sees_the_known_edges() -> None:
    # A reader that found nothing would pass everything below.
    graph = import_graph()
    assert {"gleam.peer.link", "gleam.peer.status", "gleam.peer.meshview"} <= graph[AGENT]
    assert AGENT in graph["gleam.plugins.core_status"]  # plugins get the whole agent


def test_components_do_not_import_the_agent() -> None:
    graph = import_graph()
    offenders = [name for name in COMPONENTS if AGENT in graph[name]]
    assert offenders == [], f"{offenders} import {AGENT}: give them a Protocol instead"


def test_no_import_cycle_through_the_agent_or_its_components() -> None:
    graph = import_graph()
    for name in (AGENT, *COMPONENTS):
        unknown = sorted(cycle_mates(graph, name) - KNOWN_CYCLES.get(name, set()))
        for mate in unknown:
            cycle = [*(_path(graph, name, mate) or [name]), *(_path(graph, mate, name) or [])[1:]]
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_no_import_cycle_anywhere() -> None:
    # The picture in docs/architecture.md runs one way everywhere, not only through
    # the agent: session helpers take the forwarding component as a Protocol
    # (cuda/client/route.py), batch-size hooks the tuner as one (tuning/view.py).
    graph = import_graph()
    for name in sorted(graph):
        mates = cycle_mates(graph, name)
        if mates:
            mate = min(mates)
            cycle = [*(_path(graph, name, mate) or [name]), *(_path(graph, mate, name) or [])[1:]]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
