"""The native core's cffi cdef comes from the headers' marked regions (cffi_build/cdef.py)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "cffi_build"
sys.path.insert(0, str(BUILD))
import cdef  # noqa: E402
from abi_version import abi_version  # noqa: E402
from cdef_headers import HEADERS  # noqa: E402

# A prototype's name: the identifier right before the parameter list, at the
# start of a declaration (after the previous ';', '}' or the region's start).
_PROTOTYPE = re.compile(r"(?:^|(?<=[;}]))\s*(?:extern\s+)?[\w\s*]*?\b(\w+)\s*\([^()]*\)\s*;", re.S)


def marked_functions(path: str) -> set[str]:
    """The functions a header declares in its marked regions, read from the raw text."""
    names: set[str] = set()
    for body in cdef.regions(cdef.header_text(path), path):
        text = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        names.update(m.group(1) for m in _PROTOTYPE.finditer(text))
    return names


def cdef_functions(text: str) -> set[str]:
    from cffi import FFI

    ffi = FFI()
    ffi.cdef(text)
    declared = ffi._parser._declarations
    return {key.split(" ", 1)[1] for key in declared if key.startswith("function ")}


def test_the_cdef_declares_every_function_the_headers_mark_and_the_module_has_them():
    from gleam.peer._native import lib

    declared = cdef_functions(cdef.cdef_text())
    marked = set().union(*(marked_functions(p) for p in HEADERS if not p.endswith(".cdef")))
    # The reader above finds one-line and wrapped prototypes alike.
    assert {"gl_native_abi_version", "gl_batch_append", "gl_ptx_run"} <= marked
    assert marked <= declared, f"marked but not in the cdef: {sorted(marked - declared)}"
    # The hand file adds only Python callbacks, which cffi does not count as functions.
    assert declared == marked
    missing = sorted(name for name in declared if not hasattr(lib, name))
    assert not missing, f"declared in the cdef but not in the built module: {missing}"


def test_every_header_with_a_marked_region_is_in_the_table():
    marked = {
        str(p.relative_to(BUILD))
        for folder in ("src", "include")
        for p in (BUILD / folder).rglob("*.h")
        if "cdef: begin" in p.read_text()
    }
    listed = set(HEADERS)
    assert marked <= listed, f"marked but not in cdef_headers.py: {sorted(marked - listed)}"


def copy_headers(tmp_path: Path) -> Path:
    for path in HEADERS:
        if not path.startswith("generated/"):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(BUILD / path, tmp_path / path)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_declaration_change_changes_the_abi_number(tmp_path):
    root = copy_headers(tmp_path)
    before = abi_version(cdef.cdef_text(root=root))
    assert before == abi_version()
    edit(root / "src/measure/hostspeed.h", "double min_seconds);",
         "double min_seconds, int threads);")
    assert abi_version(cdef.cdef_text(root=root)) != before


def test_comments_and_layout_do_not_change_the_abi_number(tmp_path):
    root = copy_headers(tmp_path)
    before = abi_version(cdef.cdef_text(root=root))
    edit(root / "src/measure/hostspeed.h",
         "double gl_host_sgemm_gflops(int n, double min_seconds);",
         "/* reworded */ double gl_host_sgemm_gflops(int n,\n        double min_seconds);")
    edit(root / "src/wire/records.h", "#define GL_MAX_ARGS 16", "#define GL_MAX_ARGS 16 /* why */")
    assert abi_version(cdef.cdef_text(root=root)) == before


def test_a_constant_change_changes_the_abi_number(tmp_path):
    root = copy_headers(tmp_path)
    before = abi_version(cdef.cdef_text(root=root))
    edit(root / "src/wire/records.h", "#define GL_MAX_ARGS 16", "#define GL_MAX_ARGS 17")
    assert abi_version(cdef.cdef_text(root=root)) != before


def test_defines_reach_cffi_as_integer_literals_or_as_dots():
    text = cdef.declarations(
        "#define A 16\n#define B 0x31424C47u\n#define C (1u << 20)\n"
        "#define D \\\n    (2 * A)\nint f(int a[A]);\n", "t.h")
    assert text.splitlines() == [
        "#define A 16", "#define B 0x31424C47u", "#define C ...", "#define D ...",
        "int f(int a[A]);",
    ]


def test_a_partial_struct_hides_its_last_fields_from_cffi():
    text = ("/* cdef: begin */\ntypedef struct {\n    int seen;\n    /* cdef: partial */\n"
            "    pthread_mutex_t lock;\n} s;\nint f(s *x);\n/* cdef: end */\n")
    body = cdef.regions(text, "t.h")
    assert cdef.declarations(body[0], "t.h").splitlines() == [
        "typedef struct {", "int seen;", "...;", "} s;", "int f(s *x);",
    ]


def test_partial_structs_python_uses_keep_their_visible_fields():
    from gleam.peer._native import ffi

    assert "h2d_inline" in dict(ffi.typeof("gl_pump").fields)
    assert "route_mu" not in dict(ffi.typeof("gl_pump").fields)
    assert ffi.sizeof("gl_pump") > ffi.offsetof("gl_pump", "err")


@pytest.mark.parametrize(
    ("reader", "text", "message"),
    [
        (cdef.regions, "/* cdef: begin */ /* cdef: begin */ /* cdef: end */", "do not nest"),
        (cdef.regions, "int f(void); /* cdef: end */", "without a 'cdef: begin'"),
        (cdef.regions, "/* cdef: begin */ int f(void);", "without its 'cdef: end'"),
        (cdef.regions, "/* cdef: start */", "unknown marker"),
        (cdef.regions, "/* cdef: partial */", "without a 'cdef: begin'"),
        (cdef.regions, "/* cdef: begin */ int a; /* cdef: partial */ /* cdef: end */",
         "inside a struct"),
        (cdef.regions, "/* cdef: begin */ struct { int a; /* cdef: partial */ struct { int b; } c;"
         " } d; /* cdef: end */", "no brace between"),
        (cdef.regions, "/* cdef: begin */ struct { /* cdef: partial */ /* cdef: end */ } d;",
         "hidden part"),
        # Preprocessor lines that cffi cannot follow.
        (cdef.declarations, '#include "x.h"\n', "only #define"),
        (cdef.declarations, "#ifdef X\n", "only #define"),
        (cdef.declarations, "#define F(x) (x)\n", "function-like"),
        (cdef.declarations, "#define EMPTY\n", "no value"),
    ],
)
def test_what_cannot_become_a_cdef_is_refused_with_the_reason(reader, text, message):
    with pytest.raises(cdef.CdefError, match=message):
        reader(text, "t.h")


def test_a_listed_header_without_a_region_is_refused(tmp_path):
    (tmp_path / "plain.h").write_text("int f(void);\n")
    with pytest.raises(cdef.CdefError, match="no 'cdef: begin' region"):
        cdef.cdef_text(("plain.h",), root=tmp_path)
