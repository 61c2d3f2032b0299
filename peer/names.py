"""Node names: the one a node gives itself, and the unique one every view shows.

A node's name is chosen at its first ``up`` and kept in ``node.json``, so it is the
same after every restart: ``--name`` when given (it stays until another ``--name``),
else the host name for the agent of the built-in state directory
(``~/.local/state/gleam``), else the host name and the state directory's last
component (``vm-g1`` for ``--state-dir /tmp/g1``), so that two agents of one machine
do not share a name.

Nothing stops two machines from both being ``vm``. Wherever gleam prints a node (the
status view and its JSON, logs, session moves) it prints the node's display name: its
name when no other node this agent knows has it, else the name and the shortest
prefix of its node id that tells it apart, four hex digits at least (``vm#93f2``).
``--peer`` and ``migrate --to`` take a display name, a name only one node has, or a
node id prefix; a name several nodes share is refused with the candidates.
docs/discovery.md ("Names") has the rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

MAX_NAME = 64
SEPARATOR = "#"
MIN_ID_DIGITS = 4
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class PeerNotFound(LookupError):
    """No known node has that name or node id prefix."""


class AmbiguousPeer(LookupError):
    """Several known nodes answer to that name or prefix; ``candidates`` are their display names."""

    def __init__(self, wanted: str, candidates: list[str]) -> None:
        self.candidates = sorted(candidates)
        super().__init__(
            f"{wanted!r} could be {len(candidates)} peers: {', '.join(self.candidates)}; "
            "name one of them (or give a longer node id prefix)"
        )


def default_name(hostname: str, state_dir: Path, builtin_dir: Path, node_id: str) -> str:
    """The name a node takes at its first start when ``--name`` is not given."""
    host = hostname or "gleam"
    if _same_dir(state_dir, builtin_dir):
        return host[:MAX_NAME]
    # The directory's own name tells the user which agent is which; a directory
    # whose name has nothing usable falls back to the node id.
    suffix = _UNSAFE.sub("-", state_dir.name).strip("-.") or node_id[:6]
    return f"{host[:MAX_NAME - len(suffix) - 1]}-{suffix}"[:MAX_NAME]


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.expanduser().resolve() == b.expanduser().resolve()
    except OSError:
        return a == b


def display_names(names: Mapping[str, str]) -> dict[str, str]:
    """``{node_id: name}`` to ``{node_id: display name}``, unique across ``names``."""
    holders: dict[str, list[str]] = {}
    for node_id, name in names.items():
        holders.setdefault(name, []).append(node_id)
    shown: dict[str, str] = {}
    for name, ids in holders.items():
        if len(ids) == 1:
            shown[ids[0]] = name
            continue
        width = _distinct_width(ids)
        for node_id in ids:
            shown[node_id] = f"{name}{SEPARATOR}{node_id[:width]}"
    return shown


def _distinct_width(node_ids: list[str]) -> int:
    width, longest = MIN_ID_DIGITS, max(len(i) for i in node_ids)
    while width < longest and len({i[:width] for i in node_ids}) < len(node_ids):
        width += 1
    return width


def resolve(wanted: str, names: Mapping[str, str]) -> str:
    """The node id that ``wanted`` names among ``names`` (``{node_id: name}``).

    A display name first, then a name, then a node id prefix. Raises AmbiguousPeer
    or PeerNotFound.
    """
    shown = display_names(names)
    for matches in (
        [n for n, label in shown.items() if label == wanted],
        [n for n, name in names.items() if name == wanted],
        [n for n in names if wanted and n.startswith(wanted.lower())],
    ):
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousPeer(wanted, [shown[n] for n in matches])
    raise PeerNotFound(f"no peer {wanted!r} in the mesh")


class PeerNames:
    """The display names of the nodes an agent knows.

    Computed when asked from ``known()`` (``{node_id: name}``, the agent itself
    included): who shares a name changes as peers come and go.
    """

    def __init__(self, known: Callable[[], Mapping[str, str]]) -> None:
        self._known = known

    def shown(self) -> dict[str, str]:
        return display_names(self._known())

    def of(self, node_id: str, name: str) -> str:
        """``node_id``'s display name; ``name`` if this agent does not know it (yet)."""
        return self.shown().get(node_id, name)

    def resolve(self, wanted: str) -> str:
        """The node id ``wanted`` names; raises AmbiguousPeer or PeerNotFound."""
        return resolve(wanted, self._known())
