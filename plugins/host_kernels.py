"""Built-in plugin: the host backend's kernels (the example kernels, in numpy).

Offered through ``gleam_host_kernels`` like a third-party plugin would offer its own. Without
numpy (the ``host`` extra) only the native ``gleam_empty`` is offered, and the kernels left
out are named once in the log, so a launch of one fails with a reason someone can act on.
"""

from __future__ import annotations

import importlib.util
import logging

from gleam.peer.cuda.server.kernels import BUILTIN_KERNELS, HostKernel
from gleam.peer.hookspecs import hookimpl

log = logging.getLogger(__name__)
_warned = False


def _numpy_present() -> bool:
    return importlib.util.find_spec("numpy") is not None


@hookimpl
def gleam_host_kernels() -> list[HostKernel]:
    global _warned
    if _numpy_present():
        return list(BUILTIN_KERNELS)
    # Only the Python implementations need numpy; native builtins run in the C core.
    offered = [k for k in BUILTIN_KERNELS if k.run is None]
    if not _warned:
        _warned = True
        missing = ", ".join(k.name for k in BUILTIN_KERNELS if k.run is not None)
        log.warning("host kernels %s need numpy: pip install 'gleam[host]'", missing)
    return offered
