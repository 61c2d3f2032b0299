"""Loading gleam's plugins: built-in and third-party alike, by entry point."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from gleam.peer import hookspecs

PROJECT = "gleam"
DISABLE_ENV = "GLEAM_DISABLE_PLUGINS"


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


def disabled_from_env() -> set[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def make_plugin_manager(
    disabled: Iterable[str] | None = None, extra: Iterable[tuple[str, object]] = ()
) -> pluggy.PluginManager:
    """Create the manager, load every ``gleam`` entry point not disabled.

    ``disabled`` defaults to ``$GLEAM_DISABLE_PLUGINS`` (comma-separated entry
    point names). ``extra`` registers (name, plugin) pairs directly, for
    embedding and tests; they go through the same blocking and validation.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in disabled_from_env() if disabled is None else disabled:
        pm.set_blocked(name)
    pm.load_setuptools_entrypoints(PROJECT)
    for name, plugin in extra:
        if not pm.is_blocked(name):
            pm.register(plugin, name=name)
    # A misspelt hook name in a plugin is a bug we want to hear about at once.
    pm.check_pending()
    return pm


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
