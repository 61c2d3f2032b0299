"""The plugin system: built-ins by entry point, a real third-party package, blocking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer import control
from gleam.peer.plugin_manager import blocked_plugins, describe_plugins, make_plugin_manager

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "plugin-hello"


@pytest.fixture(scope="module")
def hello_site(tmp_path_factory) -> Path:
    """The example plugin installed by pip, as a user would install it."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(EXAMPLE)],
        check=True, capture_output=True,
    )
    assert list(target.glob("gleam_hello_plugin-1.0.0.dist-info/entry_points.txt"))
    return target


def _plugins_cli(site: Path | None, **env: str) -> dict:
    environ = {**os.environ, **env}
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "plugins", "--json"],
        check=True, capture_output=True, text=True, env=environ,
    )
    return json.loads(out.stdout)


def test_builtins_load_through_entry_points():
    pm = make_plugin_manager(disabled=())
    names = {p.name: p for p in describe_plugins(pm)}
    assert {"core-status", "wire-bench"} <= set(names)
    assert names["core-status"].builtin
    assert names["core-status"].project == "gleam"
    assert "gleam_control_request" in names["core-status"].hooks


def test_disable_env_blocks_plugins(monkeypatch):
    monkeypatch.setenv("GLEAM_DISABLE_PLUGINS", "wire-bench, nonexistent")
    pm = make_plugin_manager()
    names = {p.name for p in describe_plugins(pm)}
    assert "wire-bench" not in names
    assert "core-status" in names
    assert "wire-bench" in blocked_plugins(pm)


def test_third_party_plugin_is_listed(hello_site):
    doc = _plugins_cli(hello_site)
    hello = next(p for p in doc["plugins"] if p["name"] == "hello")
    assert hello == {
        "name": "hello",
        "project": "gleam-hello-plugin",
        "version": "1.0.0",
        "hooks": ["gleam_capabilities", "gleam_control_request", "gleam_status"],
        "builtin": False,
    }
    blocked = _plugins_cli(hello_site, GLEAM_DISABLE_PLUGINS="hello")
    assert "hello" not in {p["name"] for p in blocked["plugins"]}
    assert blocked["blocked"] == ["hello"]


def test_third_party_hooks_are_called_by_a_running_agent(hello_site, process_mesh, mesh_key):
    os.environ["PYTHONPATH"] = str(hello_site)
    try:
        agent = process_mesh.start("hello-host", mesh_key=mesh_key)
    finally:
        del os.environ["PYTHONPATH"]
    reply = agent.request("hello", {"who": "tester"})
    assert reply == {"greeting": "hello tester from hello-host"}
    status = agent.status()
    assert status["hello"] == {"peers_seen": 0}
    assert "hello" in {p["name"] for p in status["plugins"]}
    with pytest.raises(control.ControlError, match="unknown operation"):
        agent.request("no-such-op")


def test_misspelt_hook_is_reported():
    class Broken:
        from gleam.peer.hookspecs import hookimpl

        @hookimpl
        def gleam_capabilitiez(self):  # typo on purpose
            return []

    from pluggy import PluginValidationError

    with pytest.raises(PluginValidationError):
        make_plugin_manager(disabled=(), extra=[("broken", Broken())])
