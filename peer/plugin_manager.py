"""Loading gleam's plugins: built-in and third-party alike, by entry point."""

from __future__ import annotations

import os
from collections.abc import Iterable

import pluggy

from gleam.peer import hookspecs

# Describing what is loaded lives apart (the status document needs it without
# the hook specifications); its names stay importable from here.
from gleam.peer.plugin_info import PROJECT, PluginInfo, blocked_plugins, describe_plugins

__all__ = [
    "DISABLE_ENV", "PROJECT", "PluginInfo", "blocked_plugins", "describe_plugins",
    "disabled_from_env", "make_plugin_manager",
]

DISABLE_ENV = "GLEAM_DISABLE_PLUGINS"


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
