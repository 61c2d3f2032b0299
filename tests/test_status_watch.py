"""`status --watch` keeps redrawing the view from another process until interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gleam.peer.localmesh import wait_for


def test_watch_redraws_until_interrupted(process_mesh, mesh_key):
    agent = process_mesh.start("watched", mesh_key=mesh_key)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gleam.peer", "status", "--watch", "--interval", "0.2",
         "--state-dir", str(agent.state.path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "100", "TERM": "dumb"},
    )
    try:
        time.sleep(1.5)  # let it redraw a few times; nothing is asserted about timing
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "gleam watched" in out
    assert "Traceback" not in err


def test_watch_and_json_do_not_mix(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "status", "--watch", "--json",
         "--state-dir", str(tmp_path)], capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 1 and "--watch" in result.stderr


def test_header_says_what_each_backend_serves(process_mesh, mesh_key):
    """`--backend host` and `--backend none`, through real agents and `gleam-peer status`."""
    expected = {"host": "serves CUDA on the host device, CPU ", "none": "serves no CUDA"}
    for backend, words in expected.items():
        agent = process_mesh.start(f"b-{backend}", mesh_key=mesh_key,
                                   extra=["--backend", backend])
        wait_for(lambda a=agent, b=backend: (a.status().get("cuda") or {}).get("backend") == b,
                 timeout=30, what=f"the {backend} backend")
        result = subprocess.run(
            [sys.executable, "-m", "gleam.peer", "status", "--state-dir", str(agent.state.path)],
            capture_output=True, text=True, timeout=30,
            env={**os.environ, "COLUMNS": "200", "TERM": "dumb"},
        )
        header = result.stdout.splitlines()[0]
        assert words in header, header
        assert "backend" not in header
