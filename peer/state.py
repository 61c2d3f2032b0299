"""The agent's state directory: node identity and name, mesh key, control socket.

Every command finds the agent through the same directory: ``--state-dir``,
else ``GLEAM_STATE_DIR``, else ``$XDG_STATE_HOME/gleam`` (``~/.local/state/gleam``).
Files that hold secrets are created 0600 before a byte is written to them, and
every file is written whole or not at all: a write that fails (a full disk, a
read-only directory) leaves neither a half file nor its temporary behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from gleam.peer.failures import UserError, os_error_line
from gleam.peer.names import default_name

NODE_FILE = "node.json"
MESH_KEY_FILE = "mesh.key"
PREVIOUS_KEY_FILE = "mesh.key.previous"
CONTROL_SOCKET = "control.sock"
MESH_KEY_BYTES = 32


class StateError(UserError):
    """The state directory cannot be used; the message says what to do."""


def builtin_state_dir() -> Path:
    """The state directory when neither ``--state-dir`` nor ``GLEAM_STATE_DIR`` names one."""
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "gleam"


def default_state_dir() -> Path:
    env = os.environ.get("GLEAM_STATE_DIR")
    if env:
        return Path(env).expanduser()
    return builtin_state_dir()


@dataclass(frozen=True)
class NodeIdentity:
    node_id: str
    created: float
    name: str | None = None  # chosen at the first `up` (peer/names.py), kept since


def _write_private(path: Path, data: bytes, what: str) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600 from the start.

    Raises StateError naming ``what`` when the disk is full, read-only or not ours;
    the temporary file is gone either way.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a read-only directory refuses even this
            tmp.unlink(missing_ok=True)
        line = os_error_line(exc, f"cannot write {what} {path}")
        if line is None:
            raise
        raise StateError(line) from exc


class StateDir:
    """One agent's persistent state; cheap to construct, touches disk lazily."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path else default_state_dir()

    @property
    def control_socket(self) -> Path:
        return self.path / CONTROL_SOCKET

    def ensure(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StateError(
                os_error_line(exc, f"cannot create the state directory {self.path}")
                or f"cannot create the state directory {self.path}: {exc.strerror}; "
                "choose another one with --state-dir"
            ) from exc

    def node_identity(self) -> NodeIdentity:
        """The persistent node id, created on first use."""
        path = self.path / NODE_FILE
        if path.exists():
            try:
                raw = json.loads(path.read_text())
                node_id = str(raw["node_id"])
                if len(node_id) != 32 or any(c not in "0123456789abcdef" for c in node_id):
                    raise ValueError(node_id)
                name = raw.get("name")
                if name is not None and not (isinstance(name, str) and 0 < len(name) <= 64):
                    raise ValueError(name)
                return NodeIdentity(node_id, float(raw.get("created", 0.0)), name)
            except (ValueError, KeyError, TypeError) as exc:
                raise StateError(
                    f"{path} is damaged ({exc!r}); delete it to give this node a new id"
                ) from exc
        self.ensure()
        return self._save_identity(NodeIdentity(secrets.token_hex(16), time.time()))

    def regenerate_node_id(self) -> NodeIdentity:
        """A new node id for this node (its id is used elsewhere); the name stays."""
        old = self.node_identity()
        return self._save_identity(NodeIdentity(secrets.token_hex(16), time.time(), old.name))

    def node_name(self, requested: str | None = None) -> str:
        """This node's name (peer/names.py): ``requested``, which is kept from now on,
        else the one kept at an earlier start, else the default, kept from now on."""
        if requested:
            return self.keep_name(requested).name or requested
        ident = self.node_identity()
        if ident.name:
            return ident.name
        name = default_name(socket.gethostname(), self.path, builtin_state_dir(), ident.node_id)
        # Derived the same way at the next start if it cannot be kept now (a full or
        # read-only directory, which then fails at a write the agent cannot skip).
        with contextlib.suppress(StateError):
            self.keep_name(name)
        return name

    def keep_name(self, name: str) -> NodeIdentity:
        """Record ``name`` as this node's name for every later start."""
        ident = self.node_identity()
        if ident.name == name:
            return ident
        return self._save_identity(NodeIdentity(ident.node_id, ident.created, name))

    def _save_identity(self, ident: NodeIdentity) -> NodeIdentity:
        body: dict[str, object] = {"node_id": ident.node_id, "created": ident.created}
        if ident.name is not None:
            body["name"] = ident.name
        _write_private(self.path / NODE_FILE, json.dumps(body).encode(), "the node identity")
        return ident

    def has_mesh_key(self) -> bool:
        return (self.path / MESH_KEY_FILE).exists()

    def mesh_key(self) -> bytes:
        """The mesh key, created (32 random bytes, mode 0600) on first use."""
        path = self.path / MESH_KEY_FILE
        if not path.exists():
            self.ensure()
            key = secrets.token_bytes(MESH_KEY_BYTES)
            _write_private(path, key, "the mesh key")
            return key
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise StateError(
                f"{path} is readable by other users (mode {mode:o}); run `chmod 600 {path}`"
            )
        key = path.read_bytes()
        if len(key) != MESH_KEY_BYTES:
            raise StateError(f"{path} is not a {MESH_KEY_BYTES}-byte mesh key; re-import it")
        return key

    def replace_mesh_key(self, key: bytes) -> Path | None:
        """Store ``key`` as the mesh key, keeping a different old one in
        ``mesh.key.previous`` (importing the wrong code must not lose a mesh);
        returns that file, or None when there was no other key."""
        backup: Path | None = None
        if self.has_mesh_key():
            old = self.mesh_key()
            if old == key:
                return None
            backup = self.path / PREVIOUS_KEY_FILE
            _write_private(backup, old, "the previous mesh key")
        # The old key stays in place until the new one is whole.
        self.store_mesh_key(key)
        return backup

    def store_mesh_key(self, key: bytes) -> None:
        if len(key) != MESH_KEY_BYTES:
            raise StateError(f"a mesh key is {MESH_KEY_BYTES} bytes, got {len(key)}")
        self.ensure()
        _write_private(self.path / MESH_KEY_FILE, key, "the mesh key")
