"""The compile tier's compiler never outlives the process that started it.

A process (standing in for an agent) launches a corpus kernel on the compiled tier with a
stand-in compiler (``GLEAM_PTX_CC``, a shell script that never finishes) and then ends,
normally or by SIGKILL. The compiler, and on a normal exit everything it started, must be
gone, and so must the compile's temporary folder with the files the compiler put in it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .processes import running

ROOT = Path(__file__).resolve().parents[1]

# A compiler whose compiles never end: it says who it is, leaves a file in its TMPDIR,
# records the pids to watch and waits (in the background, or as the exec'd sleep itself).
COMPILER = """\
#!/bin/sh
case "$1" in --version) echo "stand-in cc 1"; exit 0;; esac
echo dropped > "$TMPDIR/cc-temp.s"
{body}
"""
WITH_A_CHILD = 'sleep 300 &\necho "$$ $!" > "$MARK"\nwait\n'
ALONE = 'echo "$$" > "$MARK"\nexec sleep 300\n'

# The stand-in agent: a launch on the compiled tier in a thread, then its end.
AGENT = textwrap.dedent("""\
    import os, sys, threading, time
    sys.path.insert(0, {root!r})
    from tests.test_ptx_compile import COMPILED, run_case
    from tests.ptx_corpus.cases import CASES
    threading.Thread(target=run_case, args=(CASES[0], COMPILED), daemon=True).start()
    while not os.path.exists(os.environ["MARK"]):
        time.sleep(0.02)
    time.sleep(0.2)
    print("compiling", flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)
    if sys.argv[1] == "fork":  # a copy that exits normally, its exit handlers run
        child = os.fork()
        if child == 0:
            sys.exit(0)
        os.waitpid(child, 0)
        print("forked", flush=True)
    time.sleep(300)
""")


def _gone(pids: list[int], within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(running(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _stand_in(tmp_path: Path, body: str) -> tuple[dict[str, str], Path, Path]:
    """The stand-in compiler with BODY: the environment that uses it, the TMPDIR its
    compiles go under, and the file it writes its marks to."""
    compiler = tmp_path / "cc"
    compiler.write_text(COMPILER.format(body=body))
    compiler.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    mark = tmp_path / "mark"
    env = dict(os.environ, GLEAM_PTX_CC=str(compiler), GLEAM_PTX_CACHE="off",
               TMPDIR=str(temp), MARK=str(mark))
    return env, temp, mark


def _start(tmp_path: Path, body: str, how: str) -> tuple[subprocess.Popen, Path, list[int]]:
    """The stand-in agent, once its compile runs: it, the TMPDIR, the compile's pids."""
    env, temp, mark = _stand_in(tmp_path, body)
    agent = subprocess.Popen([sys.executable, "-c", AGENT.format(root=str(ROOT)), how],
                             env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    line = agent.stdout.readline()
    if line != "compiling\n":
        agent.kill()
        pytest.fail(f"the stand-in agent never reached its compile: {agent.wait()}")
    return agent, temp, [int(p) for p in mark.read_text().split()]


def _cleanup(agent: subprocess.Popen, pids: list[int]) -> None:
    """Whatever a failed test left running: the stand-in agent and its compiler."""
    if agent.poll() is None:
        agent.kill()
        agent.wait()
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def test_an_exiting_process_kills_its_compile_and_removes_its_folder(tmp_path):
    agent, temp, pids = _start(tmp_path, WITH_A_CHILD, "exit")
    try:
        assert agent.wait(timeout=60) == 0
        assert _gone(pids), "the compiler or its child outlived the process"
        assert list(temp.iterdir()) == [], "the compile's folder (or a file in it) stayed"
    finally:
        _cleanup(agent, pids)


def test_a_killed_process_takes_its_compiler_with_it(tmp_path):
    agent, _temp, pids = _start(tmp_path, ALONE, "stay")
    try:
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=60)
        assert _gone(pids), "the compiler outlived the killed process"
    finally:
        _cleanup(agent, pids)


def test_a_forked_copy_that_exits_leaves_the_compile_of_the_process_that_started_it(tmp_path):
    agent, _temp, pids = _start(tmp_path, ALONE, "fork")
    try:
        assert agent.stdout is not None and agent.stdout.readline() == "forked\n"
        assert all(running(p) for p in pids), "the copy's exit killed the compile"
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=60)
        assert _gone(pids)
    finally:
        _cleanup(agent, pids)


def test_the_compilers_temporary_files_go_into_the_compiles_folder(tmp_path):
    env, temp, mark = _stand_in(tmp_path, 'echo "$TMPDIR" > "$MARK"\nexit 1\n')
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from tests.test_ptx_compile import COMPILED, run_case\n"
            "from tests.ptx_corpus.cases import CASES\n"
            "print(run_case(CASES[0], COMPILED).ran)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "failed (status 1)" in out.stderr  # the kernel stays interpreted, and says why
    folder = Path(mark.read_text().strip())
    assert folder.parent == temp and folder.name.startswith("gleam-ptxc-")
    assert list(temp.iterdir()) == [], "the failed compile left files behind"
