"""The trailer of a REPLY: what follows its bytes (``gl_session.h``).

Zero or more sections, each ``u8 kind, u8 flags, u16 0, u32 len, bytes[len]``:
the server's notes on an error (``NOTES``, first, at most ``NOTES_MAX`` bytes),
then what the session's kernels printed (``STDOUT``, ``STDERR``: device printf,
a failed device assertion's message), in order, at most ``OUTPUT_MAX`` bytes of
such sections (headers included); ``MORE`` in the last output section's flags
says the server holds more. The interposer (interposer/batch.c) reads the same
bytes; tests read them here. The client agent passes every trailer through as
the server wrote it: a checkpoint's reads are quiet, so none takes what the
program is owed (checkpoint.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gleam.peer.native_layout import wire_struct
from gleam.peer.nativelib import lib

NOTES: int = lib.GL_SECTION_NOTES
STDOUT: int = lib.GL_SECTION_STDOUT
STDERR: int = lib.GL_SECTION_STDERR
MORE: int = lib.GL_SECTION_MORE
NOTES_MAX: int = lib.GL_REPLY_NOTES_MAX
OUTPUT_MAX: int = lib.GL_REPLY_OUTPUT_MAX
HEADER = wire_struct("gl_section_head")


class TrailerError(ValueError):
    """Bytes after a reply that are not well-formed sections."""


@dataclass(frozen=True)
class Section:
    kind: int
    data: bytes
    flags: int = 0


def parse(trailer: bytes | bytearray | memoryview) -> list[Section]:
    """The sections of ``trailer``; raises TrailerError when it is not one."""
    out: list[Section] = []
    view = memoryview(trailer)
    at = 0
    while at < len(view):
        if len(view) - at < HEADER.size:
            raise TrailerError(f"a section header cut short at byte {at}")
        kind, flags, zero, n = HEADER.unpack_from(view, at)
        at += HEADER.size
        if kind not in (NOTES, STDOUT, STDERR) or zero or n > len(view) - at:
            raise TrailerError(f"malformed section (kind {kind}, {n} bytes) at byte {at}")
        out.append(Section(kind, bytes(view[at:at + n]), flags))
        at += n
    return out


def pack(sections: Iterable[Section]) -> bytes:
    return b"".join(HEADER.pack(s.kind, s.flags, 0, len(s.data)) + s.data for s in sections)


def notes_of(sections: Iterable[Section]) -> bytes:
    return b"".join(s.data for s in sections if s.kind == NOTES)


def more_of(sections: Iterable[Section]) -> bool:
    return any(s.flags & MORE for s in sections if s.kind != NOTES)
