"""A benchmark's working directory with the example program it runs built in it."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gleam.peer.cuda.examples import ExampleError, build_example


@contextlib.contextmanager
def example_workdir(bench: str, example: str) -> Iterator[tuple[Path, Path | None]]:
    """``(root, binary)`` for ``gleam-peer bench BENCH``: a temporary directory, removed
    afterwards, and ``example`` built under it. ``binary`` is None, with the reason on
    stderr, when it cannot be built (no C compiler, no cuda.h): the bench exits 2."""
    with tempfile.TemporaryDirectory(prefix=f"gleam-bench-{bench}-") as tmp:
        root = Path(tmp)
        try:
            binary: Path | None = build_example(example, root / "bin")
        except ExampleError as exc:
            print(f"gleam-peer bench {bench}: {exc}", file=sys.stderr)
            binary = None
        yield root, binary
