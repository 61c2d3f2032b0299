"""Every Python package in the tree is installed by a non-editable build too."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    found = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]) if rel.parts else name)
    assert found <= listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"


def test_the_expected_native_abi_is_the_cdefs():
    import sys

    sys.path.insert(0, str(ROOT / "cffi_build"))
    try:
        from abi_version import abi_version
    finally:
        sys.path.pop(0)
    from gleam.peer.native_abi import EXPECTED_ABI

    current = abi_version()
    assert current == EXPECTED_ABI, (
        "the cdef generated from the headers (cffi_build/cdef.py) changed: set "
        f"EXPECTED_ABI = 0x{current:07x} in peer/native_abi.py"
    )


def test_a_stale_native_build_is_one_line_naming_the_fix(tmp_path):
    """The command line against a native module of another ABI (a stand-in module
    that answers another number): exit 1 and one line, no traceback."""
    import subprocess
    import sys

    stale = (
        "import sys, types\n"
        "fake = types.ModuleType('gleam.peer._native')\n"
        "fake.ffi = None\n"
        "fake.lib = types.SimpleNamespace(gl_native_abi_version=lambda: 0x1234567)\n"
        "sys.modules['gleam.peer._native'] = fake\n"
        "from gleam.peer.cli import main\n"
        f"sys.exit(main(['up', '--state-dir', {str(tmp_path)!r}, '--no-mdns', '--no-tui',\n"
        "                '--host', '127.0.0.1', '--port', '0']))\n"
    )
    result = subprocess.run([sys.executable, "-c", stale], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "ABI 1234567" in lines[0] and "rebuild it with ./scripts/test.sh" in lines[0]
