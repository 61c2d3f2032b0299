"""The native core's cffi cdef, taken from the C headers (cdef_headers.py lists them).

A header exposes declarations to Python by marking them::

    /* cdef: begin */
    ... declarations ...
    /* cdef: end */

A header may hold several marked regions; they do not nest. Inside a struct,
``/* cdef: partial */`` hides the fields from there to the closing brace (cffi
sees ``...;``: the compiler supplies the layout), for fields Python must not
touch or cffi cannot parse (a ``pthread_mutex_t``). Between the
markers stand plain C declarations that cffi can parse (typedefs, structs,
enums, prototypes) and ``#define NAME VALUE`` lines. A define whose value is an
integer literal reaches cffi as it is (so it can size an array further on);
any other value becomes ``#define NAME ...`` and cffi takes it from the
compiler. Any other preprocessor line in a region is an error, since the cdef
cannot follow it.

Comments are dropped and whitespace is collapsed (one declaration a line), so
the ABI number (abi_version.py) changes with what the declarations say, not
with their comments or layout.

    python cffi_build/cdef.py        prints the cdef and its ABI number
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent

_MARKER = re.compile(r"/\*\s*cdef:\s*(\w+)\s*\*/")
# Comments, but not comment-like text inside a string literal.
_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*', re.S)
# The integer literals cffi's own parser accepts as a define's value.
_INT_LITERAL = re.compile(r"-?0?x?[0-9a-f]+[lu]*", re.I)
_DEFINE = re.compile(r"#\s*define\s+(\w+)(\(?)\s*(.*)")


class CdefError(ValueError):
    """A header's marked regions cannot become cdef text."""


def _sibling(name: str) -> ModuleType:
    """A module of cffi_build, loaded by path: this file is also read by
    gleam.peer.native_abi in a checkout, where cffi_build is not on sys.path."""
    spec = importlib.util.spec_from_file_location(f"gleam_cffi_build_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Generated headers by path: their text comes from the generator, not the disk.
GENERATED: dict[str, Callable[[], str]] = {
    "generated/gl_cuda_extra.h":
        lambda: _sibling("gen_cuda_extra").header_text(_sibling("cuda_extra").EXTRAS),
}


def regions(text: str, where: str) -> list[str]:
    """The bodies of a header's marked regions, in order (``cdef: partial`` applied)."""
    bodies: list[str] = []
    body: list[str] | None = None
    at = 0  # where the text not yet taken into body starts
    for m in _MARKER.finditer(text):
        word = m.group(1)
        if word not in ("begin", "end", "partial"):
            raise CdefError(f"{where}: unknown marker 'cdef: {word}' (begin, end or partial)")
        if m.start() < at:
            raise CdefError(f"{where}: 'cdef: {word}' inside the hidden part of a struct")
        if word == "begin":
            if body is not None:
                raise CdefError(f"{where}: 'cdef: begin' inside a region (regions do not nest)")
            body, at = [], m.end()
        elif body is None:
            raise CdefError(f"{where}: 'cdef: {word}' without a 'cdef: begin'")
        elif word == "end":
            bodies.append("".join([*body, text[at:m.start()]]))
            body = None
        else:
            # The fields from here to the closing brace stay hidden from
            # Python (locks, private state): cffi gets "...;" and asks the
            # compiler for the struct's size and the visible fields' offsets.
            close = text.find("}", m.end())
            if close < 0 or "{" in text[m.end():close]:
                raise CdefError(f"{where}: 'cdef: partial' must stand inside a struct, with no "
                                "brace between it and the struct's closing brace")
            body += [text[at:m.start()], " ...; "]
            at = close
    if body is not None:
        raise CdefError(f"{where}: a 'cdef: begin' without its 'cdef: end'")
    return bodies


def _strip_comments(text: str) -> str:
    return _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else " ", text)


def _define(line: str, where: str) -> str:
    m = _DEFINE.fullmatch(line)
    if m is None:
        raise CdefError(f"{where}: only #define may stand in a cdef region, not {line!r}")
    name, paren, value = m.group(1), m.group(2), m.group(3).strip()
    if paren:
        raise CdefError(f"{where}: {name} is a function-like macro; cffi cannot declare it")
    if not value:
        raise CdefError(f"{where}: {name} has no value; cffi needs an integer")
    return f"#define {name} {value if _INT_LITERAL.fullmatch(value) else '...'}"


def declarations(body: str, where: str) -> str:
    """One region's body as cdef text: comments gone, one declaration a line."""
    text = _strip_comments(body.replace("\\\n", " "))
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        chunk = " ".join(" ".join(pending).split())
        if chunk:
            out.append(chunk.replace("; ", ";\n").replace("{ ", "{\n"))
        pending.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            flush()
            out.append(_define(line.strip(), where))
        else:
            pending.append(line)
    flush()
    return "\n".join(out)


def header_text(path: str, root: Path = HERE) -> str:
    """The text of one table entry: a generated header from its generator, else the file."""
    if path in GENERATED:
        return GENERATED[path]()
    return (root / path).read_text()


def cdef_text(headers: tuple[str, ...] | None = None, root: Path = HERE) -> str:
    """The cdef that build_native.py hands to cffi: every table entry's regions."""
    if headers is None:
        headers = _sibling("cdef_headers").HEADERS
    parts: list[str] = []
    for path in headers:
        text = header_text(path, root)
        bodies = [text] if path.endswith(".cdef") else regions(text, path)
        if not bodies:
            raise CdefError(f"{path} is in cdef_headers.py but has no 'cdef: begin' region")
        decls = "\n".join(declarations(b, path) for b in bodies)
        parts.append(f"/* {path} */\n{decls}\n")
    return "".join(parts)


if __name__ == "__main__":
    cdef = cdef_text()
    sys.stdout.write(cdef)
    print(f"/* ABI 0x{_sibling('abi_version').abi_version(cdef):07x} */")
