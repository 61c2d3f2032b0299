"""The cost model's inputs from gossip records: a peer's own fields are untrusted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.gossip.records import GpuInfo, PeerRecord
from gleam.peer.sched.cost import Offer
from gleam.peer.sched.inputs import offer_of

GB = 1 << 30


def record(extra, gpus=(), queue_depth=0) -> PeerRecord:
    return PeerRecord(node_id="n" * 32, name="srv", gpus=gpus, queue_depth=queue_depth,
                      extra=extra)


def test_an_offer_from_the_cuda_and_sched_fields_and_the_inventory():
    gpus = (GpuInfo("gleam host device", backend="host", memory_total=8 * GB,
                    memory_used=2 * GB, utilization=30.0),
            GpuInfo("a real one", backend="cuda", memory_total=GB, memory_used=GB))
    extra = {"cuda": {"backend": "host", "sessions": 2, "gflops": 40.0},
             "sched": {"leases": 1}}
    assert offer_of(record(extra, gpus, queue_depth=3)) == Offer(
        speed=40.0, sessions=2, queue=4, utilisation=0.3, free_memory=6 * GB)


def test_a_peer_that_serves_nothing_is_no_candidate():
    assert offer_of(record({})) is None
    assert offer_of(record({"cuda": {"backend": "none"}})) is None
    assert offer_of(record({"cuda": "host"})) is None


# What a record admits at all (it refuses integers beyond 64 bits and non-finite floats).
ints = st.integers(-(2**63), 2**63 - 1)
junk = st.one_of(st.none(), st.booleans(), ints,
                 st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                 st.lists(ints, max_size=2))


@settings(deadline=None, max_examples=200)
@given(sessions=junk, gflops=junk, leases=junk, sched=st.one_of(junk, st.just({})))
def test_junk_fields_give_a_sane_offer(sessions, gflops, leases, sched):
    extra = {"cuda": {"backend": "host", "sessions": sessions, "gflops": gflops},
             "sched": {"leases": leases} if sched == {} else sched}
    offer = offer_of(record(extra))
    assert offer is not None
    assert offer.speed >= 0 and offer.sessions >= 0 and offer.queue >= 0
    assert offer.speed == offer.speed and offer.speed != float("inf")
