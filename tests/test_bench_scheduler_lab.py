"""`gleam-peer bench scheduler` in the LAN lab, end to end, as root.

The quick mode builds the lab (two client hosts, three servers of different
speeds and links), runs every policy's eight real CUDA programs through
`gleam-peer run`, and removes the lab. The test checks the report's shape,
that every session ran on a server and verified its results, and that the
lab left nothing behind; never how fast anything was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.lab.netns import lab_unavailable_reason
from gleam.peer.lab.state import existing_namespaces
from gleam.peer.sched.policies import POLICIES

POLICY_NAMES = {*POLICIES, "offline best"}
SERVERS = {"fast", "mid", "slow"}


@pytest.mark.skipif(lab_unavailable_reason() is not None,
                    reason=f"network namespace lab unavailable: {lab_unavailable_reason()}")
def test_quick_lab_run_reports_every_policy_with_verified_sessions(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "scheduler", "--quick", "--json"],
        env={**os.environ, "GLEAM_LAB_DIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "scheduler" and doc["mode"] == "lab" and doc["quick"] is True
    assert set(doc["per_seed"]) == POLICY_NAMES
    rows = {row["measure"]: row for row in doc["results"]}
    for policy in POLICIES:
        for what in ("throughput", "mean completion"):
            row = rows[f"lab 8x3: {policy} {what}"]
            assert row["reference_name"] == "offline best" and row["value"] > 0
    targets = [r for r in doc["results"] if r["target"]]
    assert len(targets) == 3 and all(isinstance(r["met"], bool) for r in targets)
    # Every session of every policy: a real program that checked its results,
    # on one of the servers (never a client host), pinned where the policy pins.
    assert doc["all_verified"] is True
    for seed in doc["seeds_run"]:
        assert set(seed["policies"]) == POLICY_NAMES
        for policy, run in seed["policies"].items():
            assert len(run["sessions"]) == 8
            for s in run["sessions"]:
                assert s["verified"] and s["rc"] == 0, (policy, s)
                assert s["server"] in SERVERS, (policy, s)
                if policy != "scheduler":
                    assert s["pinned"] == s["server"]
                else:
                    assert s["pinned"] is None
    assert doc["sessions_run"] == 8 * len(POLICY_NAMES) * doc["seeds"]
    # The lab is gone: no namespace of it (others' labs may come and go meanwhile),
    # no record left in its directory.
    tag = doc["lab_tag"]
    assert not [ns for ns in existing_namespaces() if tag in ns]
    assert not list(tmp_path.glob("*/lab.json"))


def test_without_root_the_lab_mode_says_what_to_do(monkeypatch, capsys) -> None:
    """The lab needs root; an unprivileged user is told so and pointed at --sim. (In
    process with the effective uid of a user: a real unprivileged child could not
    even read a checkout under a root-only temporary directory, as CI's is.)"""
    from gleam.peer.cli import main

    monkeypatch.setattr(os, "geteuid", lambda: 65534)
    assert main(["bench", "scheduler"]) == 2
    err = capsys.readouterr().err
    assert "root" in err and "--sim" in err
