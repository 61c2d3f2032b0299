"""``gleam-peer train``: ranks from the mesh, no addresses typed.

The planning is a pure function of the status document and is tested on
made-up documents; the end-to-end test starts three real agents in network
namespaces (mDNS inside the lab), then ``train`` in each, which must run a
real torch.distributed all_reduce across the three.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gleam.peer import control, train
from gleam.peer.failures import NO_AGENT
from gleam.peer.lab.netns import NetLab, lab_unavailable_reason
from gleam.peer.localmesh import wait_for
from gleam.peer.state import StateDir

ME = "b" * 32


def _peer(node_id: str, address: str | None, state: str = "alive", **extra: object) -> dict:
    return {"id": node_id, "name": f"n-{node_id[:2]}", "address": address, "state": state,
            "authenticated": True, "foreign": False, **extra}


def _doc(*peers: dict) -> dict:
    return {"node": {"id": ME, "name": "me"}, "peers": list(peers)}


def _no_route(host: str) -> str:
    return f"if-to-{host}"


def test_ranks_follow_sorted_node_ids_and_rank0_address():
    doc = _doc(_peer("c" * 32, "10.0.0.3:47470"), _peer("a" * 32, "10.0.0.1:51234"))
    plan = train.plan_rendezvous(doc, world=None, port=29600, interface_towards=_no_route)
    assert [m.node_id for m in plan.members] == ["a" * 32, ME, "c" * 32]
    assert plan.rank == 1
    env = plan.env()
    assert env["RANK"] == "1" and env["WORLD_SIZE"] == "3" and env["LOCAL_RANK"] == "0"
    assert env["MASTER_ADDR"] == "10.0.0.1" and env["MASTER_PORT"] == "29600"
    assert env["GLOO_SOCKET_IFNAME"] == "if-to-10.0.0.1"


def test_rank0_uses_loopback_for_itself_and_v6_addresses_parse():
    doc = _doc(_peer("f" * 32, "[fe80::1]:47470"))
    plan = train.plan_rendezvous(doc, world=2, port=1, interface_towards=_no_route)
    assert plan.rank == 0 and plan.master_addr == "127.0.0.1"
    assert plan.members[1].host == "fe80::1"
    alone = train.plan_rendezvous(_doc(), world=None, port=1, interface_towards=_no_route)
    assert alone.world == 1 and alone.ifname == "lo"


def test_only_alive_authenticated_members_of_this_mesh_count():
    doc = _doc(
        _peer("a" * 32, "10.0.0.1:1", state="suspect"),
        _peer("c" * 32, "10.0.0.3:1", state="discovered"),
        _peer("d" * 32, "10.0.0.4:1", authenticated=False),
        _peer("e" * 32, "10.0.0.5:1", foreign=True),
        _peer("f" * 32, "10.0.0.6:1"),
    )
    plan = train.plan_rendezvous(doc, world=None, port=1, interface_towards=_no_route)
    assert [m.node_id for m in plan.members] == [ME, "f" * 32]


def test_world_errors_say_what_to_do():
    doc = _doc(_peer("a" * 32, "10.0.0.1:1"))
    with pytest.raises(train.TrainError, match="fewer than --world 3"):
        train.plan_rendezvous(doc, world=3, port=1, interface_towards=_no_route)
    with pytest.raises(train.TrainError, match="not among the 1 members chosen"):
        train.plan_rendezvous(doc, world=1, port=1, interface_towards=_no_route)
    with pytest.raises(train.TrainError, match="no address is known for rank 0"):
        train.plan_rendezvous(_doc(_peer("a" * 32, None)), world=None, port=1,
                              interface_towards=_no_route)


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    return parser.parse_args(argv)


def test_main_without_agent_or_command_fails_clearly(tmp_path, capsys):
    assert train.main(_args(["--state-dir", str(tmp_path), "--", "true"])) == NO_AGENT
    assert "no agent is running" in capsys.readouterr().err
    assert train.main(_args(["--state-dir", str(tmp_path)])) == 2
    assert "after --" in capsys.readouterr().err


# ---------------------------------------------------------------- in the lab

ALLREDUCE = textwrap.dedent("""
    import datetime, json, os, torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    print(json.dumps({"rank": rank, "world": dist.get_world_size(), "sum": t.item(),
                      "members": os.environ["GLEAM_TRAIN_MEMBERS"]}), flush=True)
    dist.destroy_process_group()
""")


@pytest.mark.slow
@pytest.mark.skipif(lab_unavailable_reason() is not None,
                    reason=f"network namespace lab unavailable: {lab_unavailable_reason()}")
def test_train_in_the_lab_gives_torch_its_ranks(tmp_path: Path):
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    key = secrets.token_bytes(32)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with NetLab() as lab:
        states, hosts, logs = [], [], []
        for name in ("t1", "t2", "t3"):
            host = lab.add_host(name)
            state = StateDir(tmp_path / name)
            state.ensure()
            state.store_mesh_key(key)
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
            host.start([sys.executable, "-m", "gleam.peer", "up", "--no-tui", "--state-dir",
                        str(state.path), "--name", name, "--probe-interval", "0"],
                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
            states.append(state)
            hosts.append(host)
            logs.append(log)

        def alive_peers(state: StateDir) -> int:
            try:
                doc = control.request(state.control_socket, "status", timeout=5)
            except (control.AgentNotRunning, control.ControlError):
                return 0
            return sum(p.get("state") == "alive" for p in doc["peers"])

        try:
            wait_for(lambda: all(alive_peers(s) == 2 for s in states), 30,
                     "every agent to see the other two alive")
            script = tmp_path / "allreduce.py"
            script.write_text(ALLREDUCE)
            jobs = [host.start([sys.executable, "-m", "gleam.peer.train", "--state-dir",
                                str(state.path), "--world", "3", "--port", "29561", "--",
                                sys.executable, str(script)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                    for host, state in zip(hosts, states, strict=True)]
            results = []
            for job in jobs:
                out, err = job.communicate(timeout=120)
                assert job.returncode == 0, err[-2000:]
                results.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            for log in logs:
                log.close()
        assert sorted(r["rank"] for r in results) == [0, 1, 2]
        assert all(r["world"] == 3 and r["sum"] == 6.0 for r in results)
        ids = [s.node_identity().node_id for s in states]
        assert results[0]["members"].split(",") == sorted(ids)
        for state, result in zip(states, results, strict=True):
            assert result["rank"] == sorted(ids).index(state.node_identity().node_id)
