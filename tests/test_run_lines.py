"""`gleam-peer run` says where the program's CUDA sessions ran and what they did,
and passes the program's output, exit status and signals through unchanged.
Real agents on loopback (a host-backend server and a client), real programs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gleam.peer.cuda.client.runs import RunBook, end_line, run_args
from gleam.peer.failures import NO_AGENT
from gleam.peer.run_cmd import interposer_dir
from tests.cuda_mesh import HOLDER, host_mesh, start_holder


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("run-lines")) as pair:
        yield pair


def _run(client, *argv: str, options: tuple[str, ...] = (), stdin: str = "",
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path),
         *options, "--", *argv],
        input=stdin, capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )


@contextmanager
def _reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc``, killed if a failed test left it running, and always waited for."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _gleam_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gleam:")]


# ---------------------------------------------------------------- the lines


def test_one_line_when_the_session_opens_and_one_at_the_end(mesh):
    client, _ = mesh
    done = _run(client, sys.executable, "-c", HOLDER, stdin="0\n")
    assert done.returncode == 0, done.stderr
    opened, ended = _gleam_lines(done.stderr)
    # Where, on what, why there, over which link.
    assert opened.startswith("gleam: running on server (gleam host device (")
    assert "soonest estimated completion" in opened
    assert "[demand guessed: no earlier run of this program]" in opened
    assert "; link RTT " in opened and "0.00 ms" not in opened
    # Calls (one-way, waiting), round trips, bytes sent and saved, time.
    assert ended.startswith("gleam: ran on server: ")
    for words in (" calls (", " one-way, ", " waiting), ", " round trips, ", " sent, ",
                  " saved by the blob cache; its session lasted ", ", the program "):
        assert words in ended, ended
    # The program's stdout is its own: exactly what it printed.
    assert list(json.loads(done.stdout)) == ["total", "pid"] and done.stdout.count("\n") == 1


def test_quiet_prints_neither_line_but_errors_still_print(mesh, tmp_path):
    client, _ = mesh
    done = _run(client, sys.executable, "-c", HOLDER, options=("--quiet",), stdin="0\n")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    no_agent = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(tmp_path / "none"),
         "--quiet", "--", "true"], capture_output=True, text=True, timeout=60)
    assert no_agent.returncode == NO_AGENT
    assert no_agent.stderr.startswith("gleam-peer: no agent is running")


def test_a_program_without_a_session_is_said_so(mesh):
    client, _ = mesh
    done = _run(client, sys.executable, "-c", "print('hi')")
    assert done.returncode == 0 and done.stdout == "hi\n"
    [line] = done.stderr.splitlines()
    assert line.startswith("gleam: the program opened no CUDA session (it ran ")


def test_several_sessions_are_added_up_in_one_line(mesh):
    client, _ = mesh
    parent = ("import os, subprocess, sys\n"
              "for _ in range(2):\n"
              "    subprocess.run([sys.executable, '-c', os.environ['HOLDER']], input='0\\n',\n"
              "                   text=True, check=True, stdout=subprocess.DEVNULL)\n")
    done = _run(client, sys.executable, "-c", parent, env={"HOLDER": HOLDER})
    assert done.returncode == 0, done.stderr
    lines = _gleam_lines(done.stderr)
    assert len(lines) == 3 and all(line.startswith("gleam: running on server") for line in
                                   lines[:2])
    assert lines[2].startswith("gleam: 2 sessions on server: ")


def test_a_session_left_running_by_the_program_is_said_so_without_waiting_for_it(mesh):
    """The program starts a CUDA child and exits while the child still holds its
    session: run ends with the program and counts the child's session as running."""
    client, _ = mesh
    parent = ("import os, subprocess, sys\n"
              "child = subprocess.Popen([sys.executable, '-c', os.environ['HOLDER']],\n"
              "                         stdout=subprocess.PIPE, text=True)\n"
              "print(child.stdout.readline(), end='', flush=True)\n")
    with _reaped(subprocess.Popen(
            [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path),
             "--", sys.executable, "-c", parent],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "HOLDER": HOLDER})) as run:
        assert "total" in run.stdout.readline()
        assert run.wait(timeout=60) == 0
        run.stdin.write("0\n")  # the child reads the run's stdin: now it may end
        run.stdin.close()
        lines = _gleam_lines(run.stderr.read())
        assert lines[-1].endswith("; 1 session of its children still running"), lines


def test_a_program_run_by_hand_is_silent_unless_asked(mesh):
    client, _ = mesh
    env = {**os.environ, "LD_LIBRARY_PATH": str(interposer_dir()),
           "GLEAM_CUDA_SOCKET": str(client.state.control_socket)}
    env.pop("GLEAM_SESSION_LINE", None)
    by_hand = subprocess.run([sys.executable, "-c", HOLDER], input="0\n", env=env,
                             capture_output=True, text=True, timeout=60)
    assert by_hand.returncode == 0 and by_hand.stderr == ""
    asked = subprocess.run([sys.executable, "-c", HOLDER], input="0\n", capture_output=True,
                           env={**env, "GLEAM_SESSION_LINE": "1"}, text=True, timeout=60)
    assert _gleam_lines(asked.stderr)[0].startswith("gleam: running on server (")


# ---------------------------------------------------------------- exit status and signals


@pytest.mark.parametrize("quiet", [False, True], ids=["lines", "quiet"])
@pytest.mark.parametrize("status", [0, 3, 255])
def test_the_exit_status_is_the_programs(mesh, status, quiet):
    client, _ = mesh
    options = ("--quiet",) if quiet else ()
    done = _run(client, sys.executable, "-c", HOLDER, options=options, stdin=f"{status}\n")
    assert done.returncode == status, done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGSEGV])
def test_a_program_killed_by_a_signal_kills_run_with_it(mesh, sig):
    client, _ = mesh
    done = _run(client, "sh", "-c", f"kill -{int(sig)} $$")
    assert done.returncode == -sig, done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_a_signal_sent_to_run_reaches_the_program(mesh, sig, tmp_path):
    """kill(run's pid) is passed to the program (whose session is open); it dies
    of it, and so does run, as when run was the program itself."""
    client, _ = mesh
    # Under nohup (a detached test run) SIGHUP is ignored, and an ignored signal stays
    # ignored across exec: the program would rightly survive it. Start it as a shell would.
    ignored = signal.getsignal(sig) == signal.SIG_IGN
    if ignored:
        signal.signal(sig, signal.SIG_DFL)
    try:
        holder = start_holder(client)
    finally:
        if ignored:
            signal.signal(sig, signal.SIG_IGN)
    with _reaped(holder) as run:
        program = json.loads(run.stdout.readline())["pid"]  # in its session, waiting
        run.send_signal(sig)
        # stdin stays open until run ends: at its end of file the program would exit 0
        # before the signal reached it (communicate() closes stdin at once)
        run.wait(timeout=60)
        err = run.stderr.read()
        assert run.returncode == -sig, (run.returncode, err)
        # The program got the signal (run did not just die of it): run waited for
        # the program's end and said what its session did.
        assert _gleam_lines(err)[-1].startswith("gleam: ran on server: "), err
        with pytest.raises(ProcessLookupError):
            os.kill(program, 0)


def test_a_program_that_cannot_start_is_127(mesh):
    client, _ = mesh
    done = _run(client, "no-such-program-here")
    assert done.returncode == 127
    assert done.stderr.strip() == ("gleam-peer: cannot run no-such-program-here: "
                                   "No such file or directory")


# ---------------------------------------------------------------- the words (no agents)


FINISHED = {"peer": "desk", "seconds": 0.45, "calls": 178, "oneway": 156, "waiting": 22,
            "bytes_to_server": 640_000, "bytes_saved": 1_250_000, "end_reason": None}


def test_the_end_line_adds_up_a_runs_sessions():
    book = RunBook(kept=2)
    book.add("r1", FINISHED)
    assert end_line({**book.report("r1"), "running": 0}, 0.5) == (
        "ran on desk: 178 calls (156 one-way, 22 waiting), 22 round trips, 625.0 KiB sent, "
        "1.2 MiB saved by the blob cache; its session lasted 450.0 ms, the program 0.50 s")
    book.add("r1", {**FINISHED, "peer": "mini", "end_reason": "lost the link to mini"})
    line = end_line({**book.report("r1"), "running": 1}, 2.0)
    assert line.startswith("2 sessions on desk (1) and mini (1): 356 calls (312 one-way, ")
    assert line.endswith("; 1 ended early: lost the link to mini; "
                         "1 session of its children still running")
    # A bounded book: the oldest run goes first.
    book.add("r2", FINISHED)
    book.add("r3", FINISHED)
    assert book.report("r1")["sessions"] == 0 and book.report("r3")["sessions"] == 1


def test_a_cuda_run_request_is_checked():
    assert run_args({"run": "ab" * 40, "wait": 99}) == ("ab" * 32, 10.0)
    assert run_args({"run": 5, "wait": "soon"}) == ("", 0.0)
    assert run_args({"run": "x", "wait": float("nan")}) == ("x", 0.0)
    assert run_args({"run": "x", "wait": True}) == ("x", 0.0)
