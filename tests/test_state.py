import stat

import pytest

from gleam.peer.joincode import JoinCodeError, decode_join_code, encode_join_code
from gleam.peer.state import StateDir, StateError


def test_node_id_is_persistent(tmp_path):
    first = StateDir(tmp_path).node_identity()
    again = StateDir(tmp_path).node_identity()
    assert first == again
    assert len(first.node_id) == 32


def test_mesh_key_created_private_and_stable(tmp_path):
    state = StateDir(tmp_path / "s")
    key = state.mesh_key()
    assert len(key) == 32
    mode = stat.S_IMODE((state.path / "mesh.key").stat().st_mode)
    assert mode == 0o600
    assert StateDir(tmp_path / "s").mesh_key() == key


def test_world_readable_key_is_refused(tmp_path):
    state = StateDir(tmp_path)
    state.mesh_key()
    (tmp_path / "mesh.key").chmod(0o644)
    with pytest.raises(StateError, match="chmod 600"):
        state.mesh_key()


def test_damaged_node_file_says_what_to_do(tmp_path):
    (tmp_path / "node.json").write_text("{not json")
    with pytest.raises(StateError, match="delete it"):
        StateDir(tmp_path).node_identity()


def test_env_selects_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GLEAM_STATE_DIR", str(tmp_path / "env"))
    assert StateDir().path == tmp_path / "env"


def test_join_code_round_trip():
    key = bytes(range(32))
    code = encode_join_code(key)
    assert code.startswith("gleam1-")
    assert decode_join_code(code) == key
    assert decode_join_code("  " + code.upper() + "\n") == key


@pytest.mark.parametrize(
    "mangle, reason",
    [
        (lambda c: c.replace("gleam1-", ""), "starts with"),
        (lambda c: c[:-3], "damaged"),
        (lambda c: c[:10] + ("b" if c[10] != "b" else "c") + c[11:], "damaged"),
        (lambda c: c[:-1] + "1", "base32|damaged"),
    ],
)
def test_bad_join_codes_are_refused(mangle, reason):
    code = encode_join_code(bytes(32))
    with pytest.raises(JoinCodeError, match=reason):
        decode_join_code(mangle(code))
