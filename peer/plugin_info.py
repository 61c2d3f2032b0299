"""What the loaded plugins are: their names, distributions and hooks.

Apart from ``plugin_manager`` (which loads them) because the status document
lists plugins, and loading needs the hook specifications, which name the
agent: the status module, below the agent, may only know this half.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

PROJECT = "gleam"


@dataclass(frozen=True)
class PluginInfo:
    name: str
    project: str
    version: str
    hooks: tuple[str, ...]
    builtin: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "project": self.project,
            "version": self.version,
            "hooks": list(self.hooks),
            "builtin": self.builtin,
        }


def _own_version() -> str:
    try:
        return metadata.version(PROJECT)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def describe_plugins(pm: pluggy.PluginManager) -> list[PluginInfo]:
    """Loaded plugins with the distribution that provided them and their hooks."""
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    infos = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked
            continue
        dist = dists.get(id(plugin))
        project = dist.project_name if dist is not None else "(registered directly)"
        version = dist.version if dist is not None else _own_version()
        hooks = tuple(sorted(h.name for h in pm.get_hookcallers(plugin) or ()))
        infos.append(PluginInfo(name, project, version, hooks, project == PROJECT))
    return sorted(infos, key=lambda p: (not p.builtin, p.name))


def blocked_plugins(pm: pluggy.PluginManager) -> list[str]:
    return sorted(name for name, plugin in pm.list_name_plugin() if plugin is None)
