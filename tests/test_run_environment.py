"""The environment gleam-peer run gives a program."""

from __future__ import annotations

from pathlib import Path

from gleam.peer.run_cmd import run_environment


def test_interposer_first_agent_socket_and_peer():
    env = run_environment(Path("/lib/gleam"), Path("/s/control.sock"), "desk",
                          {"LD_LIBRARY_PATH": "/usr/local/lib", "GLEAM_CUDA_PEER": "old"})
    assert env["LD_LIBRARY_PATH"] == "/lib/gleam:/usr/local/lib"
    assert env["GLEAM_CUDA_SOCKET"] == "/s/control.sock" and env["GLEAM_CUDA_PEER"] == "desk"
    assert "GLEAM_CUDA_PEER" not in run_environment(Path("/l"), Path("/s"), None,
                                                    {"GLEAM_CUDA_PEER": "old"})


def test_cupy_compiles_to_ptx_unless_the_user_said_otherwise():
    """A session may move to another device or fail over to the host device,
    which runs PTX only; a user's own choice is kept."""
    assert run_environment(Path("/l"), Path("/s"), None, {})["CUPY_COMPILE_WITH_PTX"] == "1"
    kept = run_environment(Path("/l"), Path("/s"), None, {"CUPY_COMPILE_WITH_PTX": "0"})
    assert kept["CUPY_COMPILE_WITH_PTX"] == "0"


def test_the_run_tags_its_sessions_and_asks_for_their_lines_unless_quiet():
    """The interposer prints where a session runs only when asked (GLEAM_SESSION_LINE),
    and tags its sessions with the run's id for the closing line (GLEAM_RUN_ID)."""
    loud = run_environment(Path("/l"), Path("/s"), None, {}, run_id="ab12")
    assert loud["GLEAM_RUN_ID"] == "ab12" and loud["GLEAM_SESSION_LINE"] == "1"
    quiet = run_environment(Path("/l"), Path("/s"), None, {"GLEAM_SESSION_LINE": "1"},
                            run_id="ab12", quiet=True)
    assert quiet["GLEAM_RUN_ID"] == "ab12" and "GLEAM_SESSION_LINE" not in quiet


def test_nvrtcs_wrapper_is_preloaded_first_and_once():
    """A program's NVRTC makes PTX where it asks for a cubin (tests/test_nvrtc_ptx.py);
    the user's own preloads stay, after it."""
    assert run_environment(Path("/l"), Path("/s"), None, {})["LD_PRELOAD"] == \
        "/l/libgleam_nvrtc.so"
    kept = run_environment(Path("/l"), Path("/s"), None,
                           {"LD_PRELOAD": "/a/asan.so:/l/libgleam_nvrtc.so /b/x.so"})
    assert kept["LD_PRELOAD"] == "/l/libgleam_nvrtc.so /a/asan.so /b/x.so"


def test_a_path_that_cannot_be_preloaded_is_left_out():
    """LD_PRELOAD separates its entries with spaces and colons."""
    env = run_environment(Path("/my lib"), Path("/s"), None, {"LD_PRELOAD": "/a/x.so"})
    assert env["LD_PRELOAD"] == "/a/x.so"
