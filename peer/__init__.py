"""gleam peer agent: discovery, authenticated links, and the control socket."""

from importlib import metadata

try:
    __version__ = metadata.version("gleam")
except metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0+unknown"
