"""The session check of the interposer's calls comes from the API table's ``ready`` flag.

gen_cuda.py writes gli_<name> of every ``ready`` row (gl_ready(), then the
hand-written gls_<name>); no hand-written function repeats that prologue.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "cffi_build"
sys.path.insert(0, str(BUILD))
import gen_cuda  # noqa: E402
from cuda_api import ONEWAY, ROWS, Row, s  # noqa: E402

CUDA_ERROR_NOT_INITIALIZED = 3
READY = [r for r in ROWS if r.ready]


# A macro that writes functions by pasting a name: #define M(Kind, ...) ... gls_X##Kind##Y
PASTING_MACRO = re.compile(r"^#define (\w+)\(([^)]*)\)((?:.*\\\n)*.*)$", re.M)


def expanded(text: str) -> str:
    """``text`` with each use of a name-pasting macro written out (its functions'
    bodies as the compiler sees them, one statement a line)."""
    for macro in PASTING_MACRO.finditer(text):
        params = [p.strip() for p in macro[2].split(",")]
        body = re.sub(r"\s*\\\n", "\n", macro[3])
        if "gls_" not in body or "##" not in body:
            continue
        for use in re.finditer(rf"^{macro[1]}\(([^)]*)\)$", text, re.M):
            args = dict(zip(params, (a.strip() for a in use[1].split(",")), strict=True))
            out = re.sub(r"\s*##\s*", "", re.sub(r"\b\w+\b",
                                               lambda w, a=args: a.get(w[0], w[0]), body))
            # One function a definition, as the pattern below reads them.
            out = re.sub(r"\)\s*\{", ")\n{", out)
            text += "\n" + re.sub(r"^\s*\}\s*$", "}", out, flags=re.M) + "\n"
    return text


def hand_written() -> dict[str, str]:
    """Every function the interposer's C defines, by name: its body."""
    bodies = {}
    for path in sorted((BUILD / "interposer").glob("*.c")):
        for m in re.finditer(r"^\s*\w[^\n;]*?\b(\w+)\([^;{]*\)\n\{\n(.*?)^\}",
                             expanded(path.read_text()), re.S | re.M):
            bodies[m.group(1)] = m.group(2)
    return bodies


def test_ready_rows_have_a_hand_written_body_without_the_session_check():
    bodies = hand_written()
    assert len(READY) > 20
    for r in READY:
        assert f"gls_{r.name}" in bodies, f"{r.name} is ready: write gls_{r.name}"
        assert f"gli_{r.name}" not in bodies, f"gli_{r.name} is generated for a ready row"
        assert "gl_ready()" not in bodies[f"gls_{r.name}"]


def test_no_hand_written_client_function_starts_with_the_session_check():
    prologue = re.compile(r"\A(?:[^;]*;\n)*?\s*CUresult r = gl_ready\(\);")
    repeated = sorted(name for name, body in hand_written().items()
                      if name.startswith(("gli_", "gls_")) and prologue.search(body))
    assert not repeated, f"set ready=True on these rows instead: {repeated}"


def test_the_generator_refuses_ready_where_the_emitter_checks_already():
    row = Row("cuX", "CUstream h", ONEWAY, (s("cuX", 1),), {"h": "h:stream"}, ready=True)
    with pytest.raises(SystemExit, match="ready is for hand-written clients"):
        gen_cuda.check_rows((*ROWS, row))


def test_every_ready_call_answers_not_initialized_before_cuinit():
    from gleam.peer.cuda.examples import interposer_dir

    lib = interposer_dir() / "libcuda.so.1"
    if not lib.exists():
        pytest.fail(f"the interposer was not built: {lib}")
    calls = {gen_cuda.exported(r)[0][0]: len(gen_cuda.parse(r)) for r in READY}
    # Zero for every argument: the check runs before any argument is looked at.
    # In a child, so that the interposer's state never meets this process's.
    script = (
        "import ctypes, json, sys\n"
        f"lib = ctypes.CDLL({str(lib)!r})\n"
        "out = {}\n"
        "for name, n in json.loads(sys.argv[1]).items():\n"
        "    fn = getattr(lib, name)\n"
        "    fn.restype = ctypes.c_int\n"
        "    out[name] = fn(*[ctypes.c_uint64(0)] * n)\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, json.dumps(calls)], capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    wrong = {name: rc for name, rc in answers.items() if rc != CUDA_ERROR_NOT_INITIALIZED}
    assert not wrong, f"answered before cuInit: {wrong}"
