"""The handle table the interposer and the executor share (cffi_build/common/htable.c)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "cffi_build"


def test_the_table_agrees_with_a_model_under_random_puts_and_takes(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    exe = tmp_path / "htable"
    subprocess.run(
        ["gcc", "-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         f"-I{BUILD / 'include'}", str(Path(__file__).parent / "htable" / "harness.c"),
         str(BUILD / "common" / "htable.c"), "-o", str(exe)],
        check=True, capture_output=True, text=True)
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok"

