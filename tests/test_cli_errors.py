"""Every command fails in front of its user with one line and a documented exit status.

Each command runs as a real ``gleam-peer`` process against a state directory with no
agent, one whose agent was killed (its control socket left behind), one on a full
file system and one on a read-only file system. Each case checks the exit status
(gleam.peer.failures), that stderr is one line and no traceback, and that no
temporary file is left behind. The full and read-only directories are tmpfs mounts,
so those cases need root (skipped otherwise, saying so).
"""

from __future__ import annotations

import contextlib
import os
import pty
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gleam.peer.failures import BUG, FAILED, NO_AGENT
from gleam.peer.joincode import encode_join_code
from gleam.peer.localmesh import LocalMesh, wait_for
from gleam.peer.state import StateDir

# Commands that talk to the agent: with none there, each says so (NO_AGENT).
AGENT_COMMANDS = [
    ("status",), ("status", "--json"), ("status", "--watch"),
    ("cache",), ("cache", "--json"), ("cache", "--entries"), ("cache", "clear"),
    ("migrate", "0123", "--to", "elsewhere"),
    ("run", "--", "true"), ("run", "--peer", "elsewhere", "--", "true"),
    ("train", "--print-env"),
]
CODE = encode_join_code(bytes(range(32)))
UP = ("up", "--no-mdns", "--port", "0", "--host", "127.0.0.1")


def gleam(*args: str, state: Path, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``gleam-peer ARGS`` with ``state`` as its state directory (GLEAM_STATE_DIR)."""
    return subprocess.run(
        [sys.executable, "-m", "gleam.peer", *args], capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=timeout,
        env={**os.environ, "GLEAM_STATE_DIR": str(state), **(env or {})},
    )


def assert_one_line(result: subprocess.CompletedProcess[str], status: int,
                    *words: str) -> str:
    """The command failed with ``status`` and said so in one line holding ``words``."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gleam-peer"), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert result.returncode == status, result.stderr
    return lines[0]


def leftovers(root: Path) -> list[Path]:
    """Temporary files anywhere under ``root`` (``.mesh.key.NNN.tmp``, ``lab.tmp``...)."""
    return [Path(d) / f for d, _, files in os.walk(root) for f in files
            if f.endswith(".tmp")]


# ---------------------------------------------------------------- conditions


@pytest.fixture(scope="module")
def dead_agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The state directory of an agent killed with SIGKILL: its control socket stays."""
    mesh = LocalMesh(tmp_path_factory.mktemp("dead"))
    try:
        agent = mesh.start("killed")
        mesh.stop(agent, signal.SIGKILL)
    finally:
        mesh.close()
    assert agent.state.control_socket.is_socket()
    return agent.state.path


def _mount_tmpfs(path: Path, options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("a full or read-only state directory is a tmpfs mount: needs root")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def _fill(root: Path, *, inodes: bool) -> None:
    """Take every block of ``root``'s file system, and with ``inodes`` every inode."""
    with contextlib.suppress(OSError), open(root / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    if inodes:
        with contextlib.suppress(OSError):
            for i in range(100_000):
                (root / f"inode{i}").touch()


def _identity(state: Path) -> None:
    """A node that ran before: its node.json and mesh key exist."""
    StateDir(state).node_identity()
    StateDir(state).mesh_key()


@contextlib.contextmanager
def tmpfs(root: Path, *, prepare: Callable[[Path], None] | None = None,
          full: bool = False, inodes: bool = False, read_only: bool = False
          ) -> Iterator[Path]:
    """A small tmpfs at ``root`` with a state directory ``root/state`` (``prepare``d),
    then filled or made read-only; unmounted at the end."""
    _mount_tmpfs(root, "size=256k,nr_inodes=64,mode=0700")
    try:
        state = root / "state"
        state.mkdir()
        if prepare is not None:
            prepare(state)
        if full:
            _fill(root, inodes=inodes)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        yield state
    finally:
        if subprocess.run(["umount", str(root)]).returncode != 0:
            subprocess.run(["umount", "-l", str(root)], check=True)


# ---------------------------------------------------------------- no agent, dead agent


@pytest.mark.parametrize("command", AGENT_COMMANDS, ids=" ".join)
def test_without_an_agent_each_command_says_so(tmp_path: Path, command: tuple[str, ...]) -> None:
    result = gleam(*command, state=tmp_path)
    assert_one_line(result, NO_AGENT, "no agent is running", "gleam-peer up")
    assert list(tmp_path.iterdir()) == []  # asking wrote nothing


@pytest.mark.parametrize("command", AGENT_COMMANDS, ids=" ".join)
def test_a_killed_agent_is_no_agent(dead_agent: Path, command: tuple[str, ...]) -> None:
    result = gleam(*command, state=dead_agent)
    assert_one_line(result, NO_AGENT, "no agent is running", "gleam-peer up")


def _read_until(fd: int, marker: bytes, seen: threading.Event) -> None:
    """Drain a pty (so the child never blocks on it), noting when ``marker`` came."""
    data = b""
    with contextlib.suppress(OSError):  # EIO once the child closed its end
        while chunk := os.read(fd, 65536):
            data = (data + chunk)[-65536:]
            if marker in data:
                seen.set()


def test_watch_says_when_its_agent_is_killed(tmp_path: Path) -> None:
    """`status --watch` on a terminal; the agent is SIGKILLed under it: one line, NO_AGENT."""
    with contextlib.closing(LocalMesh(tmp_path)) as mesh:
        agent = mesh.start("watched")
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gleam.peer", "status", "--watch", "--interval", "0.1",
             "--state-dir", str(agent.state.path)],
            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"},
        )
        os.close(slave)
        drawn = threading.Event()
        reader = threading.Thread(target=_read_until, args=(master, b"watched", drawn))
        reader.start()
        try:
            assert drawn.wait(60), "the view was never drawn"
            mesh.stop(agent, signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(10)
            os.close(master)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    assert_one_line(result, NO_AGENT, "stopped", "gleam-peer up")


# ---------------------------------------------------------------- a full disk


def test_up_on_a_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", full=True) as state:
        result = gleam(*UP, state=state)
        assert_one_line(result, FAILED, "node.json", "No space left")
        assert leftovers(tmp_path / "fs") == []


def test_up_whose_control_socket_finds_no_room(tmp_path: Path) -> None:
    """Identity and key exist; no inode is left for the control socket."""
    with tmpfs(tmp_path / "fs", prepare=_identity, full=True, inodes=True) as state:
        result = gleam(*UP, state=state)
        assert_one_line(result, FAILED, "control socket", "No space left")
        assert "ExceptionGroup" not in result.stderr


@pytest.mark.parametrize("command", [("mesh", "show"), ("mesh", "import", CODE)], ids=" ".join)
def test_the_mesh_key_on_a_full_disk(tmp_path: Path, command: tuple[str, ...]) -> None:
    with tmpfs(tmp_path / "fs", full=True) as state:
        assert_one_line(gleam(*command, state=state), FAILED, "mesh key", "No space left")
        assert leftovers(tmp_path / "fs") == []
        assert not (state / "mesh.key").exists()


def test_import_on_a_full_disk_keeps_the_old_key(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", prepare=_identity, full=True, inodes=True) as state:
        old = (state / "mesh.key").read_bytes()
        assert_one_line(gleam("mesh", "import", CODE, state=state), FAILED, "No space left")
        assert (state / "mesh.key").read_bytes() == old
        assert leftovers(tmp_path / "fs") == []


# ---------------------------------------------------------------- a read-only state directory


def test_up_in_a_read_only_directory(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", read_only=True) as state:
        result = gleam(*UP, state=state)
        assert_one_line(result, FAILED, "node.json", "Read-only")


def test_up_in_a_read_only_directory_that_ran_before(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", prepare=_identity, read_only=True) as state:
        result = gleam(*UP, state=state)
        assert_one_line(result, FAILED, "control socket", "Read-only")


def test_mesh_commands_in_a_read_only_directory(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", read_only=True) as state:
        assert_one_line(gleam("mesh", "show", state=state), FAILED, "mesh key", "Read-only")
        assert_one_line(gleam("mesh", "import", CODE, state=state), FAILED, "Read-only")
    with tmpfs(tmp_path / "fs2", prepare=_identity, read_only=True) as state:
        shown = gleam("mesh", "show", state=state)  # reading the key needs no write
        assert shown.returncode == 0 and shown.stdout.startswith("gleam1-"), shown.stderr


# ---------------------------------------------------------------- both


BROKEN = {"full": {"full": True, "inodes": True}, "read-only": {"read_only": True}}


@pytest.mark.parametrize("broken", BROKEN)
@pytest.mark.parametrize("command", AGENT_COMMANDS, ids=" ".join)
def test_agent_commands_on_a_broken_disk(tmp_path: Path, command: tuple[str, ...],
                                         broken: str) -> None:
    with tmpfs(tmp_path / "fs", prepare=_identity, **BROKEN[broken]) as state:
        assert_one_line(gleam(*command, state=state), NO_AGENT, "no agent is running")


@pytest.mark.parametrize("broken, words", [
    ("full", ("lab record", "No space left")),  # room for its folder, none for its record
    ("read-only", ("lab's directory", "Read-only")),
])
def test_lab_up_on_a_broken_disk(tmp_path: Path, broken: str, words: tuple[str, ...]) -> None:
    with tmpfs(tmp_path / "fs", full=broken == "full", read_only=broken == "read-only") as state:
        result = gleam("lab", "up", "--hosts", "2", "--no-agents", state=state,
                       env={"GLEAM_LAB_DIR": str(state / "labs")})
        assert_one_line(result, FAILED, *words, "GLEAM_LAB_DIR")
        assert leftovers(tmp_path / "fs") == []
        if broken == "full":
            assert list((state / "labs").iterdir()) == []  # the lab's directory went too


def test_a_read_only_blob_cache_leaves_the_agent_serving(tmp_path: Path) -> None:
    """The state directory is writable but its blob cache is not: the agent starts,
    keeps blobs in RAM only and says so once."""
    state = tmp_path / "mesh" / "server"
    with tmpfs(state / "blobs", read_only=True), contextlib.closing(
            LocalMesh(tmp_path / "mesh")) as mesh:
        server = mesh.start("server", extra=["--backend", "host"])
        cache = wait_for(lambda: (server.status().get("cuda") or {}).get("cache"), 30,
                         "the host backend's cache")
        assert cache["disk_cap"] == 0
        log = server.log_text()
        assert "keeps no copies on disk" in log and "Read-only" in log
        assert "Traceback" not in log
        mesh.stop(server)


# ---------------------------------------------------------------- a bug stays visible


def test_an_unexpected_exception_is_a_traceback_and_says_it_is_a_bug(monkeypatch, capsys):
    from gleam.peer import cli

    def broken(args: object) -> int:
        raise RuntimeError("a genuine bug")

    monkeypatch.setattr(cli, "cmd_plugins", broken)
    assert cli.main(["plugins"]) == BUG
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a genuine bug" in err
    assert err.strip().splitlines()[-1].startswith("gleam-peer: this is a bug in gleam")


def test_a_user_error_inside_an_exception_group_is_one_line(monkeypatch, capsys):
    """Trio's nurseries wrap a start-up failure in a group; the user sees the failure."""
    from gleam.peer import cli
    from gleam.peer.state import StateError

    def grouped(args: object) -> int:
        raise ExceptionGroup("nursery", [StateError("the disk is full; free some space")])

    monkeypatch.setattr(cli, "cmd_plugins", grouped)
    assert cli.main(["plugins"]) == FAILED
    assert capsys.readouterr().err == "gleam-peer: the disk is full; free some space\n"


def test_no_temporary_file_survives_a_failed_write(tmp_path: Path, monkeypatch) -> None:
    """Whatever stops a write half way (here fsync), the temporary file goes."""
    from gleam.peer import state as state_module

    def no_room(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(state_module.os, "fsync", no_room)
    with pytest.raises(state_module.StateError, match="mesh key"):
        StateDir(tmp_path).store_mesh_key(secrets.token_bytes(32))
    assert list(tmp_path.iterdir()) == []
