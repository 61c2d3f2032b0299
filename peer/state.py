"""The agent's state directory: node identity, mesh key, control socket.

Every command finds the agent through the same directory: ``--state-dir``,
else ``GLEAM_STATE_DIR``, else ``$XDG_STATE_HOME/gleam`` (``~/.local/state/gleam``).
Files that hold secrets are created 0600 before a byte is written to them.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

NODE_FILE = "node.json"
MESH_KEY_FILE = "mesh.key"
CONTROL_SOCKET = "control.sock"
MESH_KEY_BYTES = 32


class StateError(Exception):
    """The state directory cannot be used; the message says what to do."""


def default_state_dir() -> Path:
    env = os.environ.get("GLEAM_STATE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "gleam"


@dataclass(frozen=True)
class NodeIdentity:
    node_id: str
    created: float


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600 from the start."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


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
            raise StateError(f"cannot create state directory {self.path}: {exc.strerror}") from exc
        if not os.access(self.path, os.W_OK):
            raise StateError(f"state directory {self.path} is not writable")

    def node_identity(self) -> NodeIdentity:
        """The persistent node id, created on first use."""
        self.ensure()
        path = self.path / NODE_FILE
        if path.exists():
            try:
                raw = json.loads(path.read_text())
                node_id = str(raw["node_id"])
                if len(node_id) != 32 or any(c not in "0123456789abcdef" for c in node_id):
                    raise ValueError(node_id)
                return NodeIdentity(node_id, float(raw.get("created", 0.0)))
            except (ValueError, KeyError, TypeError) as exc:
                raise StateError(
                    f"{path} is damaged ({exc!r}); delete it to give this node a new id"
                ) from exc
        return self.regenerate_node_id()

    def regenerate_node_id(self) -> NodeIdentity:
        ident = NodeIdentity(secrets.token_hex(16), time.time())
        body = json.dumps({"node_id": ident.node_id, "created": ident.created}).encode()
        _write_private(self.path / NODE_FILE, body)
        return ident

    def has_mesh_key(self) -> bool:
        return (self.path / MESH_KEY_FILE).exists()

    def mesh_key(self) -> bytes:
        """The mesh key, created (32 random bytes, mode 0600) on first use."""
        self.ensure()
        path = self.path / MESH_KEY_FILE
        if not path.exists():
            key = secrets.token_bytes(MESH_KEY_BYTES)
            _write_private(path, key)
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

    def store_mesh_key(self, key: bytes) -> None:
        if len(key) != MESH_KEY_BYTES:
            raise StateError(f"a mesh key is {MESH_KEY_BYTES} bytes, got {len(key)}")
        self.ensure()
        _write_private(self.path / MESH_KEY_FILE, key)
