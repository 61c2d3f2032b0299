"""Which package may import which: the forwarding code's sides and the packages below them.

``test_import_graph.py`` finds cycles between modules; this test keeps whole
packages in layers (docs/architecture.md, "Components and the way their imports
point"), so that a cycle cannot even start: the two sides of a forwarded session
share only ``cuda.wire``, the blob cache reaches the session's bytes only through
it, and scheduling knows nothing of forwarding. Imports under ``TYPE_CHECKING``
or inside a function count as much as any.
"""

from __future__ import annotations

import pytest

from tests.test_import_graph import import_graph

CUDA = "gleam.peer.cuda"
WIRE, CLIENT, SERVER = f"{CUDA}.wire", f"{CUDA}.client", f"{CUDA}.server"
CACHE, SCHED, AGENT = "gleam.peer.cache", "gleam.peer.sched", "gleam.peer.agent"

# Package -> what of the layered packages (and the agent) it may import. A package
# not named here as a target is not layered by this table. ``CUDA`` alone means its
# own top modules (forwarding, finished, ...): the component that ties both sides.
MAY_IMPORT: dict[str, frozenset[str]] = {
    SCHED: frozenset(),
    WIRE: frozenset(),
    CACHE: frozenset({WIRE}),
    CLIENT: frozenset({WIRE, CACHE, SCHED}),
    SERVER: frozenset({WIRE, CACHE, SCHED}),
    CUDA: frozenset({WIRE, CLIENT, SERVER, CACHE, SCHED, AGENT}),
}
LAYERED = (WIRE, CLIENT, SERVER, CACHE, SCHED, AGENT, CUDA)  # most specific first


def package_of(module: str) -> str | None:
    """The layered package a module belongs to (None: not layered)."""
    for package in LAYERED:
        if module == package or module.startswith(package + "."):
            return package
    return None


def breaks(graph: dict[str, set[str]]) -> list[str]:
    """Every import that crosses the table the wrong way, as 'module -> target'."""
    found = []
    for module, targets in sorted(graph.items()):
        own = package_of(module)
        if own not in MAY_IMPORT:
            continue
        for target in sorted(targets):
            other = package_of(target)
            if other is not None and other != own and other not in MAY_IMPORT[own]:
                found.append(f"{module} -> {target}")
    return found


def test_every_package_keeps_its_layer() -> None:
    found = breaks(import_graph())
    assert found == [], "imports against the layers:\n" + "\n".join(found)


def test_the_table_names_packages_that_exist() -> None:
    graph = import_graph()
    for package in LAYERED:
        assert any(package_of(m) == package for m in graph), f"no module in {package}"


@pytest.mark.parametrize(("module", "target"), [
    (f"{CLIENT}.opening", f"{SERVER}.sessions"),
    (f"{SERVER}.sessions", f"{CLIENT}.session"),
    (f"{WIRE}.envelope", f"{CLIENT}.journal"),
    (f"{CACHE}.client", f"{CLIENT}.journal"),
    (f"{SCHED}.leasing", f"{CLIENT}.choose"),
])
def test_a_wrong_way_import_is_named(module: str, target: str) -> None:
    # The check itself can fail: each of these edges, added, is reported.
    assert breaks({module: {target}, target: set()}) == [f"{module} -> {target}"]
