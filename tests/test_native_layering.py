"""The native core's layering: every ``#include "..."`` of cffi_build against the table of
which part may include which (cffi_build/native_parts.py, the core's architecture)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "cffi_build"
sys.path.insert(0, str(BUILD))
from gen_cuda import generate  # noqa: E402
from native_parts import CLIENTS, EXCEPTIONS, PARTS, folder_map  # noqa: E402

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# The shared contract (gl_*.h): named bare from anywhere.
CONTRACT = ("include", "generated")
# Folders whose bare names may also be another folder's: the generated stubs
# (gl_stubs.c) are the interposer's code, built with its folder on the path.
BARE_FROM = {"generated": ("interposer",)}
# The only files of cffi_build/src outside a part: the umbrella header Python's
# module includes, and the ABI number compiled from the cdef.
SRC_ROOT_FILES = {"gleam_native.h", "abi.c"}


class Include(NamedTuple):
    file: str  # relative to cffi_build
    line: int
    header: str  # as written between the quotes


def owner(file: str) -> str:
    """The part (a folder of src) or the client folder (interposer, ...) a file belongs to."""
    top, *rest = file.split("/")
    return rest[0] if top == "src" and len(rest) > 1 else top


def sources(build: Path, generated: Path) -> Iterator[tuple[str, Path]]:
    """(name relative to cffi_build, path) of every C file that may include the core's headers."""
    for folder in CLIENTS:
        if folder == "generated":
            for path in sorted(generated.glob("*.[ch]")):
                yield f"generated/{path.name}", path
        else:
            for path in sorted((build / folder).rglob("*.[ch]")):
                yield str(path.relative_to(build)), path


def includes(build: Path, generated: Path) -> Iterator[tuple[Include, Path]]:
    for name, path in sources(build, generated):
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if match := _INCLUDE.match(text):
                yield Include(name, number, match.group(1)), path


def uses(folder: str) -> tuple[str, ...]:
    return PARTS[folder].uses if folder in PARTS else CLIENTS[folder]


def known(inc: Include) -> bool:
    return any(e.file == inc.file and e.header == inc.header for e in EXCEPTIONS)


def fault(inc: Include, path: Path, build: Path, generated: Path) -> str | None:
    """Why an include breaks the rules (native_parts.py's docstring), or None."""
    folder = owner(inc.file)
    part, slash, name = inc.header.partition("/")
    if not slash:
        places = [path.parent, build / "include", generated,
                  *(build / other for other in BARE_FROM.get(folder, ()))]
        if any((place / inc.header).is_file() for place in places):
            return None
        return (f"{inc.header} is neither in the file's folder nor in include/ or generated/;"
                " name another part's header as part/name.h")
    if part not in PARTS or not (build / "src" / inc.header).is_file():
        return f"no cffi_build/src/{inc.header}"
    if part == folder:
        return f"a header of its own folder is named bare ({name})"
    if part in uses(folder) or known(inc):
        return None
    return f"{folder} may not include {part} (cffi_build/native_parts.py)"


def breaks(build: Path, generated: Path) -> list[str]:
    return [f"cffi_build/{inc.file}:{inc.line}: #include \"{inc.header}\": {why}"
            for inc, path in includes(build, generated)
            if (why := fault(inc, path, build, generated)) is not None]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("generated")
    generate(out)
    return out


def test_every_include_follows_the_table(generated: Path) -> None:
    found = breaks(BUILD, generated)
    assert not found, "\n".join(found)


def test_every_known_exception_is_still_there_and_still_needed(generated: Path) -> None:
    present = {(inc.file, inc.header) for inc, _ in includes(BUILD, generated)}
    for e in EXCEPTIONS:
        assert (e.file, e.header) in present, f"{e.file} no longer includes {e.header}: drop it"
        assert e.header.partition("/")[0] not in uses(owner(e.file)), \
            f"{e.file}: {e.header} is allowed by the table; the exception is not needed"


def test_every_folder_of_src_is_a_part_of_the_table() -> None:
    src = BUILD / "src"
    assert {p.name for p in src.iterdir() if p.is_dir()} == set(PARTS)
    assert {p.name for p in src.iterdir() if p.is_file()} == SRC_ROOT_FILES


def test_the_parts_use_each_other_without_a_cycle() -> None:
    done: set[str] = set()

    def visit(part: str, path: tuple[str, ...]) -> None:
        assert part not in path, f"cycle: {' -> '.join((*path, part))}"
        if part not in done:
            for used in PARTS[part].uses:
                assert used in PARTS, f"{part} uses {used}, which is not a part"
                visit(used, (*path, part))
            done.add(part)

    for part in PARTS:
        visit(part, ())


def test_architecture_doc_has_the_tables_folder_map() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert folder_map() in text, \
        "docs/architecture.md's folder map differs: paste `python cffi_build/native_parts.py`"


def test_a_break_names_its_file_and_line(tmp_path: Path) -> None:
    for folder in (*CLIENTS, *CONTRACT):
        (tmp_path / folder).mkdir(exist_ok=True)
    for part in ("ptx", "ptxc", "wire"):
        (tmp_path / "src" / part).mkdir()
    (tmp_path / "src" / "ptxc" / "ptxc.h").write_text("")
    (tmp_path / "src" / "wire" / "records.h").write_text("")
    (tmp_path / "src" / "ptx" / "ptx.h").write_text("")
    (tmp_path / "src" / "ptx" / "ptx_exec.c").write_text(
        '#include "ptx.h"\n#include "ptxc/ptxc.h"\n#include "records.h"\n#include "ptx/ptx.h"\n')
    (tmp_path / "src" / "ptxc" / "ptxc_emit.c").write_text('#include "ptx/ptx.h"\n')
    found = breaks(tmp_path, tmp_path / "generated")
    assert found == [
        'cffi_build/src/ptx/ptx_exec.c:2: #include "ptxc/ptxc.h": '
        "ptx may not include ptxc (cffi_build/native_parts.py)",
        'cffi_build/src/ptx/ptx_exec.c:3: #include "records.h": records.h is neither in the'
        " file's folder nor in include/ or generated/; name another part's header as part/name.h",
        'cffi_build/src/ptx/ptx_exec.c:4: #include "ptx/ptx.h": '
        "a header of its own folder is named bare (ptx.h)",
    ]
