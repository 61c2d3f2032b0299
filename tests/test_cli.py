"""The command line as a user meets it: help, version, errors as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gleam.peer.cli import build_parser


def run(*args: str, state=None, check=False, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"GLEAM_STATE_DIR": str(state)} if state else {})}
    return subprocess.run(
        [sys.executable, "-m", "gleam.peer", *args], capture_output=True, text=True,
        env=env, check=check, timeout=60, **kw,
    )


def _commands():
    parser = build_parser()
    yield ()
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        yield (name,)
        for action in sub._actions:
            if getattr(action, "choices", None) and isinstance(action.choices, dict):
                for child in action.choices:
                    yield (name, child)


@pytest.mark.parametrize("command", list(_commands()), ids=lambda c: " ".join(c) or "top")
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: gleam-peer" in out


def test_version():
    result = run("--version", check=True)
    assert result.stdout.startswith("gleam-peer ")


def test_status_without_agent_is_one_clear_line(tmp_path):
    result = run("status", state=tmp_path)
    assert result.returncode == 3  # NO_AGENT (gleam.peer.failures)
    assert result.stderr.strip().startswith("gleam-peer: no agent is running")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (("up", "--peer", "host:notaport"), "--peer"),
        (("up", "--name", "x" * 65), "--name"),
        (("mesh", "import", "not-a-code"), "join code starts with"),
    ],
)
def test_user_errors(tmp_path, args, message):
    result = run(*args, state=tmp_path)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_port_is_a_usage_error(tmp_path):
    result = run("up", "--port", "70000", state=tmp_path)
    assert result.returncode == 2
    assert "outside 0-65535" in result.stderr


def test_mesh_show_and_import(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    shown = json.loads(run("mesh", "show", "--json", state=first, check=True).stdout)
    run("mesh", "show", state=second, check=True)  # second node gets its own key
    result = run("mesh", "import", shown["join_code"], state=second, check=True)
    assert f"joined mesh {shown['mesh_id']}" in result.stdout
    assert (second / "mesh.key.previous").exists()
    again = json.loads(run("mesh", "show", "--json", state=second, check=True).stdout)
    assert again == shown
    assert "already in mesh" in run("mesh", "import", shown["join_code"], state=second).stdout


def test_port_in_use_is_reported(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = run("up", "--no-tui", "--no-mdns", "--host", "127.0.0.1", "--port", str(port),
                     state=tmp_path)
    assert result.returncode == 1
    assert "already in use" in result.stderr
    assert "Traceback" not in result.stderr
