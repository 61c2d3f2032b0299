"""Built-in plugin: lossless homomorphic compression of sparse gradients.

Provides the ``sketch`` codec (``gleam.peer.compress.sketch``) through the
``gleam_compress_*`` hooks, the way a third-party codec would.
"""

from __future__ import annotations

from typing import Any

from gleam.peer.hookspecs import hookimpl

CODEC = "sketch"


@hookimpl
def gleam_compress_codecs() -> list[str]:
    return [CODEC]


@hookimpl
def gleam_compress_codec(name: str, options: dict[str, Any]) -> Any | None:
    if name != CODEC:
        return None
    from gleam.peer.compress.sketch import SketchCodec, SketchConfig

    try:
        config = SketchConfig(**options)
    except TypeError as exc:
        raise ValueError(f"sketch codec: {exc}") from None
    return SketchCodec(config)
