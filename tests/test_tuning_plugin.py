"""The batch-tuner plugin: the report op and status section in a real agent; the hook."""

from __future__ import annotations

import numpy as np
import pytest
import trio

from gleam.peer import control
from gleam.peer.addresses import PeerAddress
from gleam.peer.gossip import GossipConfig
from gleam.peer.hookspecs import hookimpl
from gleam.peer.plugin_manager import describe_plugins, make_plugin_manager
from gleam.peer.tuning import BatchTuner, IterationSample
from gleam.peer.tuning.reporting import AgentReporter

from .conftest import wait_until

FAST = GossipConfig(interval=0.1, suspect_timeout=1.0, refresh_interval=0.2,
                    sync_interval=1.0, links_refresh_interval=0.5)


def _tuner(**kw) -> BatchTuner:
    return BatchTuner([32, 64], max_batch=[512, 256], min_batch=8, interval=2, job="mnist",
                      **kw)


def _feed(tuner: BatchTuner, windows: int) -> list[tuple[int, ...]]:
    """Decisions over ``windows`` windows after the first (which only measures)."""
    rng = np.random.default_rng(0)
    out = []
    for n in range((windows + 1) * tuner.interval):
        means = [rng.normal(size=4) + 1 for _ in range(tuner.workers)]
        result = tuner.observe(IterationSample(
            compute_s=[0.01, 0.02], comm_wait_s=[0.012, 0.002], loss=2.0 - 0.01 * n,
            local_sqr_norms=[float(m @ m) for m in means],
            global_sqr_norm=float(np.mean(means, axis=0) @ np.mean(means, axis=0))))
        if result is not None:
            out.append(result)
    return out[1:]


def test_the_builtin_plugin_is_loaded_by_entry_point():
    pm = make_plugin_manager(disabled=())
    info = {p.name: p for p in describe_plugins(pm)}["batch-tuner"]
    assert info.builtin
    assert {"gleam_tune_batch", "gleam_control_request", "gleam_status",
            "gleam_gossip_fields"} <= set(info.hooks)


def test_a_plugin_replaces_the_builtin_policy():
    class Fixed:
        @hookimpl
        def gleam_tune_batch(self, tuner, observation):
            return list(np.array([100, 1000]))  # numpy integers are fine too

    pm = make_plugin_manager(disabled=(), extra=[("fixed", Fixed())])
    tuner = _tuner(policy="static", plugins=pm)
    assert _feed(tuner, 2) == [(100, 256), (100, 256)]  # clamped to the worker's memory
    assert tuner.decisions[-1].by == "plugin"


def test_a_plugin_that_declines_leaves_the_decision_to_the_builtin():
    class ByName:
        @hookimpl
        def gleam_tune_batch(self, tuner, observation):
            return [8, 8] if tuner.policy_name == "mine" else None

    pm = make_plugin_manager(disabled=(), extra=[("byname", ByName())])
    tuner = _tuner(policy="pollux", plugins=pm)
    decided = _feed(tuner, 1)[0]
    assert decided[0] == decided[1] and tuner.decisions[-1].by == "pollux"


def test_without_any_answer_the_sizes_stay():
    pm = make_plugin_manager(disabled=("batch-tuner",))
    tuner = _tuner(policy="pollux", plugins=pm)
    assert _feed(tuner, 1) == [(32, 64)]
    assert tuner.decisions[-1].by == "none"


async def test_report_op_and_status_section_in_a_real_agent(agents, mesh_key):
    b = await agents.start("b", mesh_key, gossip=FAST)
    a = await agents.start("a", mesh_key, gossip=FAST,
                           peers=[PeerAddress("127.0.0.1", b.listen_port)])
    await wait_until(lambda: a.node_id in b.links and b.node_id in a.links)
    assert "batch_tuner" not in a.snapshot()  # nothing to show before a job reports

    tuner = _tuner(policy="static")
    _feed(tuner, 2)
    reporter = AgentReporter("mnist", 1, a.state.path)
    links = await trio.to_thread.run_sync(reporter.report, tuner.status())
    assert links is not None and links["peers"] in (0, 1)

    section = a.snapshot()["batch_tuner"]
    assert section["job"] == "mnist" and section["policy"] == "static"
    assert section["worker"] == "1 of 2" and section["batch"] == 64
    assert section["global_batch"] == 96 and section["batches"] == [32, 64]
    assert section["decisions"] == 2 and section["last_action"] == "keep"
    assert len(section) <= 12 and all(not isinstance(v, dict) for v in section.values())

    # The mesh learns a compact summary through gossip.
    def seen_by_b():
        peer = next((p for p in b.snapshot()["peers"] if p["id"] == a.node_id), {})
        return (peer.get("extra") or {}).get("batch_tuner")

    await wait_until(seen_by_b, timeout=10)
    assert seen_by_b() == {"job": "mnist", "worker": 1, "batch": 64, "global_batch": 96,
                           "policy": "static"}
    # Once links have an RTT, the reply carries it for the tuner to observe.
    await wait_until(lambda: a.links[b.node_id].rtt.summary().ewma_ms is not None)
    links = await trio.to_thread.run_sync(reporter.report, tuner.status())
    assert links is not None and links["peers"] == 1 and links["rtt_ms"] > 0


@pytest.mark.parametrize("args, message", [
    ({"worker": 0, "state": {}}, "'job'"),
    ({"job": "j", "worker": -1, "state": {}}, "'worker'"),
    ({"job": "j", "worker": 3, "state": {"policy": "ppo", "batches": [8, 8]}}, "'batches'"),
    ({"job": "j", "state": {"policy": "ppo", "batches": [8], "reward": "high"}}, "'reward'"),
    ({"job": "j", "state": {"policy": "ppo", "batches": [8], "lr_gain": float("nan")}},
     "'lr_gain'"),
])
async def test_report_op_refuses_bad_input(agents, mesh_key, args, message):
    a = await agents.start("a", mesh_key)
    with pytest.raises(control.ControlError, match=message):
        await trio.to_thread.run_sync(control.request, a.state.control_socket,
                                      "batch_tuner.report", args)
    assert "batch_tuner" not in a.snapshot()


def test_reporter_without_an_agent_carries_on(tmp_path, caplog):
    reporter = AgentReporter("job", 0, tmp_path)
    assert reporter.report({"policy": "ppo", "batches": [8]}) is None
    assert reporter.report({"policy": "ppo", "batches": [8]}) is None
    assert sum("cannot report" in r.message for r in caplog.records) == 1
