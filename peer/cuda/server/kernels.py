"""The host backend's built-in kernels: the example kernels of examples/cuda/kernels.cu in numpy.

The host backend does not execute PTX; a launch of an entry runs the host kernel registered
under the same name (docs/cuda-forwarding.md, "Host kernels"). Each implementation honours
the grid the way the GPU would: a thread past the end of the data does nothing, and data
past the last thread stays untouched, so a program that launches too small a grid sees the
same wrong answer it would see on a GPU.

numpy is an optional dependency (``pip install gleam[host]``), so it is imported inside the
kernels; this module itself imports without it.

An implementation receives a *launch* object (``gleam.peer.cuda.server.launch``) with ``grid``,
``block``, ``shared``, ``params``, ``arg(i, fmt)``, ``threads(axis)`` and
``array(ptr, dtype, count)`` (a writeable view of session memory that raises outside it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gleam.peer.cuda.server.launch import param_layout

Launch = Any  # the launch object described above; typed loosely to avoid an import cycle

PTR, I32, F32 = 8, 4, 4  # parameter sizes, as in the kernels' PTX .param declarations


@dataclass(frozen=True)
class HostKernel:
    """One kernel entry the host backend can run.

    ``params`` are the byte sizes of the parameters in order (each aligned to its size when
    that is 1, 2, 4 or 8, else to 8 — the layout ``cuLaunchKernel`` packs). ``run`` is a
    Python implementation, ``native`` the name of a C builtin of the native core that runs
    without calling into Python (used for ``gleam_empty`` so the call rate measures gleam,
    not the interpreter).
    """

    name: str
    params: tuple[int, ...]
    run: Callable[[Launch], None] | None = None
    native: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a host kernel needs a name")
        if self.run is None and self.native is None:
            raise ValueError(f"host kernel {self.name!r} has neither run nor native")
        if any(not isinstance(s, int) or s <= 0 for s in self.params):
            raise ValueError(f"host kernel {self.name!r}: parameter sizes must be positive ints")

    def layout(self) -> tuple[tuple[int, ...], int]:
        """The byte offset of each parameter and the packed buffer's total size."""
        return param_layout(self.params)

    def origin(self) -> str:
        """Where the implementation comes from, for messages."""
        if self.run is not None:
            run = self.run
            return f"{getattr(run, '__module__', '?')}.{getattr(run, '__qualname__', run)}"
        return f"native {self.native}"


def registry(kernels: Iterable[HostKernel]) -> dict[str, HostKernel]:
    """Kernels by entry name; two kernels of one name are a configuration error."""
    table: dict[str, HostKernel] = {}
    for kernel in kernels:
        other = table.get(kernel.name)
        if other is not None:
            raise ValueError(
                f"host kernel {kernel.name!r} is defined twice: "
                f"{other.origin()} and {kernel.origin()}"
            )
        table[kernel.name] = kernel
    return table


# ---------------------------------------------------------------- the kernels


def _covered(n: int, threads: int) -> int:
    """How many elements a 1-D grid of ``threads`` threads touches of ``n``."""
    return max(0, min(n, threads))


def _vector_add(launch: Launch) -> None:
    import numpy as np

    n = _covered(launch.arg(3, "i"), launch.threads(0))
    if n == 0:
        return
    a = launch.array(launch.arg(0, "Q"), np.float32, n)
    b = launch.array(launch.arg(1, "Q"), np.float32, n)
    c = launch.array(launch.arg(2, "Q"), np.float32, n)
    np.add(a, b, out=c)


def _saxpy(launch: Launch) -> None:
    import numpy as np

    n = _covered(launch.arg(3, "i"), launch.threads(0))
    if n == 0:
        return
    a = np.float32(launch.arg(0, "f"))
    x = launch.array(launch.arg(1, "Q"), np.float32, n)
    y = launch.array(launch.arg(2, "Q"), np.float32, n)
    y += a * x


def _sgemm(launch: Launch) -> None:
    import numpy as np

    m, n, k = launch.arg(3, "i"), launch.arg(4, "i"), launch.arg(5, "i")
    rows = _covered(m, launch.threads(1))  # y runs over rows
    cols = _covered(n, launch.threads(0))  # x runs over columns
    if rows == 0 or cols == 0:
        return
    c = launch.array(launch.arg(2, "Q"), np.float32, rows * n).reshape(rows, n)
    if k <= 0:
        c[:, :cols] = 0.0  # an empty sum, as the CUDA loop leaves it
        return
    a = launch.array(launch.arg(0, "Q"), np.float32, rows * k).reshape(rows, k)
    b = launch.array(launch.arg(1, "Q"), np.float32, k * n).reshape(k, n)
    if cols == n:
        np.matmul(a, b, out=c)  # BLAS straight into device memory
    else:
        c[:, :cols] = a @ b[:, :cols]


def _bias_relu(launch: Launch) -> None:
    import numpy as np

    rows, cols = launch.arg(2, "i"), launch.arg(3, "i")
    if rows <= 0 or cols <= 0:
        return
    total = _covered(rows * cols, launch.threads(0))
    if total == 0:
        return
    x = launch.array(launch.arg(0, "Q"), np.float32, total)
    bias = launch.array(launch.arg(1, "Q"), np.float32, min(cols, total))
    full = total // cols  # whole rows first, then the part of a row the grid reaches
    if full:
        head = x[: full * cols].reshape(full, cols)
        np.add(head, bias, out=head)
    rest = total - full * cols
    if rest:
        x[full * cols :] += bias[:rest]
    np.fmax(x, np.float32(0.0), out=x)  # fmax, like `v > 0 ? v : 0`, turns NaN into 0


def _softmax_rows(launch: Launch) -> None:
    import numpy as np

    rows = _covered(launch.arg(2, "i"), launch.threads(0))  # one thread per row
    cols = launch.arg(3, "i")
    if rows == 0 or cols <= 0:
        return
    x = launch.array(launch.arg(0, "Q"), np.float32, rows * cols).reshape(rows, cols)
    y = launch.array(launch.arg(1, "Q"), np.float32, rows * cols).reshape(rows, cols)
    peak = x.max(axis=1, keepdims=True)  # taken before y is written: x and y may alias
    np.subtract(x, peak, out=y)
    np.exp(y, out=y)
    y /= y.sum(axis=1, keepdims=True)


BUILTIN_KERNELS: tuple[HostKernel, ...] = (
    HostKernel("gleam_empty", (), native="gleam_empty", doc="does nothing (call-rate probe)"),
    HostKernel("vector_add", (PTR, PTR, PTR, I32), _vector_add, doc="c = a + b"),
    HostKernel("saxpy", (F32, PTR, PTR, I32), _saxpy, doc="y = a*x + y"),
    HostKernel("sgemm", (PTR, PTR, PTR, I32, I32, I32), _sgemm, doc="C = A.B, row-major, via BLAS"),
    HostKernel("bias_relu", (PTR, PTR, I32, I32), _bias_relu, doc="x = max(0, x + bias[col])"),
    HostKernel("softmax_rows", (PTR, PTR, I32, I32), _softmax_rows, doc="row-wise softmax"),
)
