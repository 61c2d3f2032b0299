"""The NCF example trains the same with and without the sketch hook.

Two ranks on loopback run a few steps of examples/train_ncf.py twice, with
DDP's default allreduce and with the hook, from the same seeds: the loss
curves must agree to fp32 noise, and the hook must actually have sketched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_ncf.py"


@pytest.mark.slow
def test_ncf_loss_curve_is_the_same_with_the_hook():
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--local", "2", "--steps", "4", "--tiny", "--json"],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["steps"] == 4 and summary["world"] == 2
    assert summary["max_rel_loss_diff"] < 1e-6
    assert summary["loss_plain"][-1] < summary["loss_plain"][0]  # it does learn
    assert summary["compression"]["blocks_sketch"] > 0
    assert summary["compression"]["ratio"] > 1.5
