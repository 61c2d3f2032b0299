"""Codecs by name, from the ``gleam_compress_*`` hooks (built-in and third-party alike)."""

from __future__ import annotations

from typing import Any

import pluggy

from gleam.peer.compress.aggregation import GradientCodec


class UnknownCodec(LookupError):
    """No plugin provides the requested codec; the message lists those that exist."""


def _plugins(pm: pluggy.PluginManager | None) -> pluggy.PluginManager:
    if pm is not None:
        return pm
    from gleam.peer.plugin_manager import make_plugin_manager

    return make_plugin_manager()


def available_codecs(pm: pluggy.PluginManager | None = None) -> list[str]:
    """Names of every codec the loaded plugins provide, sorted."""
    names = {n for names in _plugins(pm).hook.gleam_compress_codecs() for n in names or ()}
    return sorted(names)


def make_codec(
    name: str = "sketch", pm: pluggy.PluginManager | None = None, **options: Any
) -> GradientCodec:
    """A fresh codec instance (one per training job and process group)."""
    pm = _plugins(pm)
    made: GradientCodec | None = pm.hook.gleam_compress_codec(name=name, options=options)
    if made is None:
        known = ", ".join(available_codecs(pm)) or "none"
        raise UnknownCodec(f"no plugin provides the gradient codec {name!r} (available: {known}); "
                           "is its plugin installed and not blocked by $GLEAM_DISABLE_PLUGINS?")
    return made
