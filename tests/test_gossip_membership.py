"""Membership: convergence, SWIM failure detection, refusals, bounds; all on a virtual clock."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable

import pytest

from gleam.peer.gossip import (
    Died,
    GossipConfig,
    GossipMessage,
    GossipRecords,
    GossipRumor,
    GossipSync,
    GossipWant,
    GpuInfo,
    InvalidRecord,
    Joined,
    Link,
    LinkReport,
    Membership,
    PeerRecord,
    Refuted,
    Rejoined,
    Suspected,
    Updated,
    encode_record,
)
from gleam.peer.gossip.detector import Deadlines, supersedes
from gleam.peer.gossip.messages import ALIVE, DEAD, KIND_LINKS, KIND_PEER, SUSPECT
from gleam.peer.protocol import decode_message, encode_message

CONFIG = GossipConfig(interval=1.0, suspect_timeout=3.0, dead_retention=20.0, sync_interval=5.0)


def record(node_id: str, **changes: object) -> PeerRecord:
    fields: dict[str, object] = {
        "name": f"box-{node_id}", "address": "10.0.0.1", "port": 7420,
        "gpus": (GpuInfo("RTX 4090", "cuda", (8, 9), 24 << 30, 0, 0.0),),
    }
    fields.update(changes)
    return PeerRecord(node_id, **fields)  # type: ignore[arg-type]


class Mesh:
    """Memberships wired through a virtual network: every message is encoded and decoded."""

    def __init__(self, names: Iterable[str], config: GossipConfig = CONFIG, seed: int = 0) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.now = 0.0
        self.members: dict[str, Membership] = {}
        self.links: set[frozenset[str]] = set()
        self.trace: list[tuple[str, str, bytes]] = []
        self.dropped: set[str] = set()  # nodes whose incoming gossip is lost
        for name in names:
            self.add(name)

    def add(self, name: str, incarnation: int = 0) -> Membership:
        rng = random.Random(self.rng.getrandbits(64))
        member = Membership(record(name, incarnation=incarnation), config=self.config, rng=rng)
        self.members[name] = member
        return member

    def connect(self, a: str, b: str) -> None:
        # Both ends see the link authenticated before anything crosses it.
        self.links.add(frozenset((a, b)))
        out_a = self.members[a].link_up(b, self.now)
        out_b = self.members[b].link_up(a, self.now)
        self.deliver(a, out_a)
        self.deliver(b, out_b)

    def connect_all(self) -> None:
        names = list(self.members)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                self.connect(a, b)

    def disconnect(self, a: str, b: str) -> None:
        self.links.discard(frozenset((a, b)))
        self.deliver(a, self.members[a].link_down(b, self.now))
        self.deliver(b, self.members[b].link_down(a, self.now))

    def kill(self, name: str) -> None:
        """SIGKILL: its connections drop at once on every peer."""
        self.members.pop(name)
        for link in [link for link in self.links if name in link]:
            self.links.discard(link)
            (other,) = link - {name}
            self.deliver(other, self.members[other].link_down(name, self.now))

    def deliver(self, source: str, out: list[tuple[str, GossipMessage]]) -> None:
        queue = [(source, target, message) for target, message in out]
        while queue:
            source, target, message = queue.pop(0)
            data = encode_message(message)
            self.trace.append((source, target, data))
            if target not in self.members or frozenset((source, target)) not in self.links:
                continue
            if target in self.dropped:
                continue
            decoded = decode_message(data)
            assert decoded == message
            replies = self.members[target].receive(source, decoded, self.now)  # type: ignore[arg-type]
            queue.extend((target, t, m) for t, m in replies)

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now += self.config.interval
            for name in list(self.members):
                if name in self.members:
                    self.deliver(name, self.members[name].tick(self.now))

    def run_until(self, condition, limit: float = 60.0) -> float:  # type: ignore[no-untyped-def]
        start = self.now
        while not condition():
            assert self.now - start < limit, "condition not reached on the virtual clock"
            self.run(self.config.interval)
        return self.now - start

    def everyone_sees(self, name: str, predicate=lambda m: True) -> bool:  # type: ignore[no-untyped-def]
        return all(
            name in m.view() and predicate(m.view()[name])
            for other, m in self.members.items()
            if other != name
        )


# ---------------------------------------------------------------- convergence


def test_small_mesh_converges_from_nothing() -> None:
    mesh = Mesh(f"n{i}" for i in range(8))
    mesh.connect_all()
    mesh.run_until(lambda: all(len(m.view()) == 8 for m in mesh.members.values()), limit=10)
    for member in mesh.members.values():
        assert {m.status for m in member.view().values()} == {"alive"}
        assert member.view()["n3"].record.name == "box-n3"
    events = mesh.members["n0"].drain_events()
    assert sorted(e.node_id for e in events if isinstance(e, Joined)) == [
        f"n{i}" for i in range(1, 8)
    ]


def test_a_change_reaches_every_view_within_a_few_rounds() -> None:
    mesh = Mesh(f"n{i}" for i in range(12))
    mesh.connect_all()
    mesh.run(5)
    mesh.members["n4"].update_local(mesh.now, extra={"flavour": "new"})
    took = mesh.run_until(
        lambda: mesh.everyone_sees("n4", lambda m: m.record.extra.get("flavour") == "new")
    )
    assert took <= 4 * CONFIG.interval
    updated = [e for e in mesh.members["n0"].drain_events() if isinstance(e, Updated)]
    assert any(e.node_id == "n4" and "extra" in e.fields for e in updated)


def test_links_travel_as_their_own_record() -> None:
    mesh = Mesh(["a", "b", "c"])
    mesh.connect_all()
    links = [Link("b", 0.4, 0.35, 0.9, 1.1e8, 1.7e9), Link("c", 0.2, 0.2, 0.3)]
    mesh.members["a"].update_local(mesh.now, links=links)
    mesh.run_until(lambda: mesh.everyone_sees("a", lambda m: len(m.links) == 2))
    seen = mesh.members["c"].view()["a"].links
    assert [link.peer for link in seen] == ["c", "b"]  # lowest RTT first
    assert seen[1].bandwidth == 1.1e8


def test_anti_entropy_repairs_what_rumors_missed() -> None:
    config = dataclasses.replace(CONFIG, push_pull=False)
    mesh = Mesh(["a", "b", "c"], config=config)
    mesh.connect_all()
    mesh.run(3)
    mesh.dropped.add("c")  # c misses the rumor entirely
    mesh.members["a"].update_local(mesh.now, name="renamed")
    mesh.run(3)
    assert mesh.members["c"].view()["a"].record.name == "box-a"
    mesh.dropped.clear()
    took = mesh.run_until(lambda: mesh.everyone_sees("a", lambda m: m.record.name == "renamed"))
    assert took <= 1.5 * config.sync_interval + config.interval
    assert any(isinstance(decode_message(d), GossipSync) for _, t, d in mesh.trace if t == "c")


# ---------------------------------------------------------------- failure detection


def test_killed_peer_is_suspected_then_removed_from_every_view() -> None:
    mesh = Mesh(f"n{i}" for i in range(6))
    mesh.connect_all()
    mesh.run(3)
    for m in mesh.members.values():
        m.drain_events()
    mesh.kill("n5")
    assert all(m.view()["n5"].status == "suspect" for m in mesh.members.values())
    mesh.run(CONFIG.suspect_timeout - CONFIG.interval)
    assert all("n5" in m.view() for m in mesh.members.values())
    took = mesh.run_until(lambda: all("n5" not in m.view() for m in mesh.members.values()))
    assert took <= 2 * CONFIG.interval  # removed within suspect_timeout + one round
    for m in mesh.members.values():
        kinds = [type(e) for e in m.drain_events() if e.node_id == "n5"]
        assert kinds == [Suspected, Died]
        assert m.dead() == ["n5"]
    mesh.run(CONFIG.dead_retention + CONFIG.interval)
    assert all(m.dead() == [] for m in mesh.members.values())


def test_suspected_peer_refutes_with_a_higher_incarnation() -> None:
    mesh = Mesh(["a", "b", "c", "d"])
    mesh.connect_all()
    mesh.run(3)
    assert mesh.members["b"].incarnation == 0
    mesh.disconnect("a", "b")  # only this link fails; b is fine
    assert mesh.members["a"].view()["b"].status == "suspect"
    mesh.run_until(lambda: mesh.members["a"].view()["b"].status == "alive", limit=2)
    assert mesh.members["b"].incarnation == 1
    assert mesh.members["b"].stats.refutations == 1
    mesh.run(CONFIG.suspect_timeout + 2)
    assert mesh.everyone_sees("b", lambda m: m.status == "alive" and m.incarnation == 1)
    assert any(isinstance(e, Refuted) for e in mesh.members["a"].drain_events())


def test_restarted_peer_rejoins_above_its_old_incarnation() -> None:
    mesh = Mesh(["a", "b", "c"])
    mesh.connect_all()
    mesh.run(2)
    mesh.kill("c")
    mesh.run(CONFIG.suspect_timeout + 2)
    assert all("c" not in m.view() and m.dead() == ["c"] for m in mesh.members.values())
    for m in mesh.members.values():
        m.drain_events()
    fresh = mesh.add("c")  # a new process: it remembers nothing, incarnation 0
    mesh.connect("c", "a")
    mesh.connect("c", "b")
    mesh.run_until(lambda: mesh.everyone_sees("c") and len(fresh.view()) == 3, limit=5)
    assert fresh.incarnation >= 1
    for name in ("a", "b"):
        assert mesh.members[name].dead() == []
        assert [type(e) for e in mesh.members[name].drain_events()] == [Rejoined]


def test_stale_records_of_a_dead_peer_are_refused() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    a.link_up("c", 0.0)
    old = encode_record(record("c", incarnation=2, version=5))
    a.receive("b", GossipRecords((old,)), 0.0)
    assert a.view()["c"].incarnation == 2
    a.receive("b", GossipRumor((("c", DEAD, 2, -1, -1),)), 1.0)
    assert "c" not in a.view()
    replies = a.receive("b", GossipRecords((old,)), 2.0)
    assert "c" not in a.view() and a.stats.refused_records == 1
    # The sender is told that c is dead, so it stops relaying the old record.
    assert replies == [("b", GossipRumor((("c", DEAD, 2, -1, -1),)))]
    newer = encode_record(record("c", incarnation=3, version=0))
    a.receive("b", GossipRecords((newer,)), 3.0)
    assert a.view()["c"].incarnation == 3 and a.view()["c"].status == "alive"


def test_swim_precedence() -> None:
    assert supersedes(SUSPECT, 3, ALIVE, 3)
    assert not supersedes(ALIVE, 3, SUSPECT, 3)
    assert supersedes(ALIVE, 4, SUSPECT, 3)
    assert supersedes(DEAD, 3, SUSPECT, 3)
    assert not supersedes(DEAD, 2, ALIVE, 3)
    assert supersedes(ALIVE, 4, DEAD, 3)
    assert not supersedes(SUSPECT, 3, SUSPECT, 3)


def test_deadlines_expire_in_order() -> None:
    deadlines = Deadlines()
    deadlines.set("b", 2.0)
    deadlines.set("a", 1.0)
    deadlines.set("c", 5.0)
    assert deadlines.expired(3.0) == ["a", "b"]
    deadlines.cancel("c")
    assert deadlines.expired(10.0) == [] and len(deadlines) == 0


# ---------------------------------------------------------------- refusals


def test_gossip_from_a_node_without_a_link_is_refused() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    blob = encode_record(record("x"))
    assert a.receive("x", GossipRecords((blob,)), 0.0) == []
    assert a.receive("x", GossipRumor((("x", ALIVE, 0, 0, -1),)), 0.0) == []
    assert "x" not in a.view() and a.stats.refused_messages == 2
    a.link_up("x", 1.0)
    a.link_down("x", 2.0)
    assert a.receive("x", GossipRecords((blob,)), 3.0) == []
    assert "x" not in a.view()


def test_records_about_ourselves_are_never_stored() -> None:
    a = Membership(record("a", incarnation=4, version=1), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    a.receive("b", GossipRecords((encode_record(record("a", incarnation=4, name="forged")),)), 0)
    assert a.view()["a"].record.name == "box-a" and a.incarnation == 4
    # A newer one is a past life of ours that the mesh still remembers: rise above it.
    a.receive("b", GossipRecords((encode_record(record("a", incarnation=9)),)), 1.0)
    assert a.incarnation == 10 and a.view()["a"].record.name == "box-a"


def test_absurd_incarnation_jump_is_refused() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    a.receive("b", GossipRecords((encode_record(record("c", incarnation=1)),)), 0.0)
    jump = encode_record(record("c", incarnation=2**40))
    a.receive("b", GossipRecords((jump,)), 1.0)
    assert a.view()["c"].incarnation == 1 and a.stats.refused_records == 1


def test_bad_record_is_dropped_alone() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    good = encode_record(record("c"))
    a.receive("b", GossipRecords((b"\xa1garbage", good)), 0.0)
    assert "c" in a.view() and a.stats.invalid_records == 1


def test_view_size_is_bounded() -> None:
    config = dataclasses.replace(CONFIG, max_members=4)
    a = Membership(record("a"), config=config, rng=random.Random(1))
    a.link_up("b", 0.0)
    blobs = tuple(encode_record(record(f"x{i}")) for i in range(10))
    a.receive("b", GossipRecords(blobs), 0.0)
    assert len(a.view()) == 4 and a.stats.refused_records == 7


def test_update_local_validates() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    with pytest.raises(TypeError, match="unknown fields"):
        a.update_local(0.0, incarnation=5)
    with pytest.raises(InvalidRecord):
        a.update_local(0.0, sessions=-1)
    with pytest.raises(InvalidRecord):
        a.update_local(0.0, links=[Link("b", 1, 1, 1), Link("b", 2, 2, 2)])
    assert a.view()["a"].record.version == 0


# ---------------------------------------------------------------- bandwidth


def test_load_refreshes_are_rate_limited_but_inventory_changes_are_not() -> None:
    config = dataclasses.replace(CONFIG, refresh_interval=10.0)
    a = Membership(record("a"), config=config, rng=random.Random(1))
    gpu = record("a").gpus[0]
    published = []
    for second in range(40):
        load = dataclasses.replace(gpu, utilization=float(second % 100))
        a.update_local(float(second), gpus=[load])
        published.append(a.view()["a"].record.version)
    refreshes = len(set(published)) - 1
    assert 2 <= refreshes <= 8  # every 10 s ± 50 %, not every second
    a.update_local(40.5, gpus=[gpu, GpuInfo("host", "host", None, 1 << 30, 0, 0.0, 50.0)])
    assert len(a.view()["a"].record.gpus) == 2  # inventory: at once


def refreshes_in_a_minute(peers: int) -> int:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    blobs = tuple(encode_record(record(f"x{i:03}")) for i in range(peers))
    a.receive("b", GossipRecords(blobs), 0.0)
    gpu = record("a").gpus[0]
    versions = set()
    for second in range(60):
        a.update_local(float(second), gpus=[dataclasses.replace(gpu, utilization=second)])
        versions.add(a.view()["a"].record.version)
    return len(versions) - 1


def test_refresh_period_grows_with_the_mesh() -> None:
    # Alone: every refresh_interval (2 s). Among 200 peers that share the
    # budget: about every 27 s.
    assert refreshes_in_a_minute(0) >= 20
    assert refreshes_in_a_minute(200) <= 4


def test_messages_stay_bounded() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    big = [Link(f"peer-{i:02}-" + "x" * 50, 1.0, 1.0, 1.0, 1e8, 1e9) for i in range(32)]
    blobs = tuple(
        encode_record(LinkReport(f"x{i:03}", 0, 0, tuple(big))) for i in range(150)
    ) + tuple(encode_record(record(f"x{i:03}")) for i in range(150))
    a.receive("b", GossipRecords(blobs[:200]), 0.0)
    a.receive("b", GossipRecords(blobs[200:]), 0.0)
    wanted = tuple((f"x{i:03}", kind) for i in range(150) for kind in (KIND_PEER, KIND_LINKS))
    replies = a.receive("b", GossipWant(wanted), 1.0)
    assert len(replies) > 1
    assert sum(len(m.records) for _, m in replies) == 300  # type: ignore[union-attr]
    assert all(len(encode_message(m)) <= 80_000 for _, m in replies)
    # Rumors carry at most max_rumor_summaries, newest first.
    for i in range(150):
        a.receive("b", GossipRumor(((f"x{i:03}", SUSPECT, 0, 0, 0),)), 2.0)
    rumors = [m for _, m in a.tick(3.0) if isinstance(m, GossipRumor)]
    assert rumors and all(len(m.summaries) <= CONFIG.max_rumor_summaries for m in rumors)


# ---------------------------------------------------------------- determinism


def run_trace(seed: int) -> list[tuple[str, str, bytes]]:
    mesh = Mesh((f"n{i}" for i in range(6)), seed=seed)
    mesh.connect_all()
    mesh.run(4)
    mesh.members["n2"].update_local(mesh.now, sessions=3)
    mesh.kill("n4")
    mesh.run(6)
    return mesh.trace


def test_same_seed_same_conversation() -> None:
    assert run_trace(7) == run_trace(7)
    assert run_trace(7) != run_trace(8)


def test_plugin_values_ride_with_load_but_new_plugin_fields_go_at_once() -> None:
    config = dataclasses.replace(CONFIG, refresh_interval=30.0)
    a = Membership(record("a", extra={"cache": 1}), config=config, rng=random.Random(3))
    a.update_local(0.0)
    start = a.view()["a"].record.version
    for second in range(1, 6):
        a.update_local(float(second), extra={"cache": second})
    churned = a.view()["a"].record.version - start
    a.update_local(6.0, extra={"cache": 6, "model": "llama"})
    assert churned <= 1
    assert a.view()["a"].record.extra == {"cache": 6, "model": "llama"}


def test_absurd_incarnation_in_a_summary_is_ignored() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    a.receive("b", GossipRecords((encode_record(record("c", incarnation=1)),)), 0.0)
    a.receive("b", GossipRumor((("c", DEAD, 2**40, -1, -1),)), 1.0)
    assert a.view()["c"].status == "alive" and a.view()["c"].incarnation == 1


def test_a_want_is_answered_once_per_record() -> None:
    a = Membership(record("a"), config=CONFIG, rng=random.Random(1))
    a.link_up("b", 0.0)
    replies = a.receive("b", GossipWant((("a", KIND_PEER),) * 50), 0.0)
    assert [len(m.records) for _, m in replies] == [1]  # type: ignore[union-attr]


def test_newcomer_with_one_link_learns_the_mesh_and_the_mesh_learns_it() -> None:
    mesh = Mesh(f"n{i}" for i in range(6))
    mesh.connect_all()
    mesh.run(3)
    newcomer = mesh.add("late")
    mesh.connect("late", "n2")  # its only link: everything else comes by gossip
    took = mesh.run_until(lambda: len(newcomer.view()) == 7 and mesh.everyone_sees("late"))
    assert took <= 3 * CONFIG.interval


def test_peers_without_a_link_to_the_dead_learn_it_by_gossip() -> None:
    mesh = Mesh(f"n{i}" for i in range(6))
    for i in range(5):  # n5 is linked to n0 only; n0..n4 all linked together
        for j in range(i + 1, 5):
            mesh.connect(f"n{i}", f"n{j}")
    mesh.connect("n0", "n5")
    mesh.run_until(lambda: mesh.everyone_sees("n5"))
    mesh.kill("n5")
    assert mesh.members["n3"].view()["n5"].status == "alive"  # n3 never had a link to it
    took = mesh.run_until(lambda: all("n5" not in m.view() for m in mesh.members.values()))
    assert took <= CONFIG.suspect_timeout + 2 * CONFIG.interval


def test_a_graceful_leave_needs_no_suspicion_period() -> None:
    mesh = Mesh(["a", "b", "c", "d"])
    mesh.connect("a", "b")
    mesh.connect("a", "c")
    mesh.connect("c", "d")  # d hears of b only through gossip
    mesh.run(3)
    assert mesh.everyone_sees("b", lambda m: m.status == "alive")
    # b says goodbye to its only neighbour as it shuts down.
    mesh.members.pop("b")
    mesh.deliver("a", mesh.members["a"].left("b", mesh.now))
    assert "b" not in mesh.members["a"].view() and "b" in mesh.members["a"].dead()
    # The news outruns the suspect timeout everywhere.
    mesh.run(CONFIG.suspect_timeout / 2)
    assert all("b" not in m.view() for m in mesh.members.values())
