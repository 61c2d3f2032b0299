"""First sightings survive beyond RAM probation, on disk (docs/cache.md, issue 13).

Weights several times larger than the RAM tier are written to the disk tier's
probation segment on their first run, so their second run sends almost
nothing; one-off payloads still never push out protected blobs, in RAM or on
disk; a restarted server serves from disk. End to end with real agents, then
the store's own rules.
"""

from __future__ import annotations

from pathlib import Path

from gleam.peer.bench.calls import _run_example
from gleam.peer.cache.blobs import content_digest
from gleam.peer.cache.probation_log import PAGE
from gleam.peer.cache.store import PREFIX, BlobStore
from gleam.peer.localmesh import LocalMesh, wait_for

MIB = 1 << 20
WEIGHTS = 8 * MIB  # eight 1 MiB copy chunks
# RAM 4 MiB (the weights are twice that; protected 3 MiB, probation the rest); disk
# 20 MiB (protected 15 MiB; probation at least 5 MiB and what protected does not use).
SERVER_ENV = {"GLEAM_CACHE_RAM_MB": "4", "GLEAM_CACHE_DISK_MB": "20"}


def _upload(client, binary: Path, seed: int = 0) -> dict:
    """WEIGHTS bytes host to device (other bytes for another seed); the session's record."""
    seen = len(client.request("cuda_sessions")["finished"])
    result = _run_example(binary, client.state.path,
                          ["h2d", str(WEIGHTS), str(2 * MIB), str(seed)], timeout=120)
    assert result["bytes"] == WEIGHTS
    finished = wait_for(
        lambda: (f := client.request("cuda_sessions")["finished"])[seen:] and f, 10,
        "the session to be accounted")
    return finished[seen]


def _start_server(mesh: LocalMesh, client=None):
    peers = [f"127.0.0.1:{client.port}"] if client is not None else []
    return mesh.start("server", extra=["--backend", "host"], env=SERVER_ENV, peers=peers)


def test_weights_larger_than_ram_are_cached_from_their_second_run(tmp_path, bench_calls):
    mesh = LocalMesh(tmp_path)
    try:
        server = _start_server(mesh)
        client = mesh.start("client", mesh_key=server.state.mesh_key(),
                            peers=[f"127.0.0.1:{server.port}"], extra=["--backend", "none"])
        wait_for(lambda: server.node_id in client.authenticated_peers(), 20, "the link")
        cold = _upload(client, bench_calls)
        assert cold["h2d_sent"] == WEIGHTS
        store = wait_for(lambda: (s := server.request("cache")["store"])["write_backlog"] == 0
                         and s, 10, "the disk writes")
        assert store["entries"]["disk_probation"] == 8 and store["entries"]["disk"] == 0
        warm = _upload(client, bench_calls)
        print("h2d bytes sent: cold", cold["h2d_sent"], "warm", warm["h2d_sent"])
        assert warm["h2d_sent"] < WEIGHTS / 100 and warm["ref_misses"] == 0, warm
        assert warm["bytes_saved"] == WEIGHTS
        # The second sightings are copied out of probation by the writer.
        store = wait_for(lambda: (s := server.request("cache")["store"])["write_backlog"] == 0
                         and s, 10, "the copy-outs")
        assert store["entries"]["disk"] == 8 and store["entries"]["disk_probation"] == 0
        assert store["hits_disk"] >= 4  # what RAM could not hold came from disk probation

        # One-off uploads of six times the RAM tier and twice disk probation's room:
        # they cycle through both probation segments only.
        for seed in (1, 2, 3):
            assert _upload(client, bench_calls, seed)["h2d_sent"] == WEIGHTS
        wait_for(lambda: server.request("cache")["store"]["write_backlog"] == 0, 10,
                 "the disk writes")
        store = server.request("cache")["store"]
        assert store["entries"]["disk"] == 8 and store["bytes"]["disk_probation"] <= 12 * MIB
        assert store["evicted"] > 0
        again = _upload(client, bench_calls)
        assert again["h2d_sent"] < WEIGHTS / 100 and again["ref_misses"] == 0, again

        # A restart: the weights come from the protected segment on disk.
        mesh.stop(server)
        server = _start_server(mesh, client)
        wait_for(lambda: server.node_id in client.authenticated_peers(), 20, "the relink")
        store = wait_for(lambda: server.request("cache")["store"], 20, "the store to open")
        assert store["entries"]["disk"] == 8
        after = _upload(client, bench_calls)
        assert after["h2d_sent"] < WEIGHTS / 100 and after["ref_misses"] == 0, after
        assert server.request("cache")["store"]["hits_disk"] >= 8
    finally:
        mesh.close()


# ------------------------------------------------------------ the store


def _blob(n: int, seed: int) -> tuple[bytes, bytes]:
    data = seed.to_bytes(4, "little") * (n // 4)
    return content_digest(data), data


def _store(root: Path | None, **kw) -> BlobStore:
    # RAM protected 75 kB, probation 25 kB and what protected does not use; disk
    # protected 300 kB, probation 100 kB and what protected does not use.
    return BlobStore(root, ram_cap=kw.pop("ram_cap", 100_000),
                     disk_cap=kw.pop("disk_cap", 400_000), **kw)


def test_a_first_sighting_larger_than_ram_probation_is_held_on_disk(tmp_path):
    store = _store(tmp_path / "b", ram_cap=30_000)
    weights = [_blob(20_000, i) for i in range(4)]  # 80 kB: over twice the whole RAM tier
    for d, b in weights:
        store.offer(d, b)
    # Announced, and served, even before the writer had them on disk.
    summary = store.summary()
    assert all(d[:PREFIX] in summary for d, _ in weights)
    assert all(store.get(d, len(b)) == b for d, b in weights[:2])
    store.flush()
    stats = store.stats()
    assert stats["entries"]["disk"] == 2 and stats["entries"]["disk_probation"] == 2
    assert all(store.get(d, len(b)) == b for d, b in weights[2:])  # from disk: promoted
    store.flush()  # the writer copies them out of their probation log
    stats = store.stats()
    assert stats["entries"]["disk"] == 4 and stats["entries"]["disk_probation"] == 0
    assert stats["hits_disk"] >= 1
    for d, b in weights:  # each in a protected file of its own now
        assert (tmp_path / "b" / d.hex()[:2] / d.hex()).read_bytes() == b
    store.close()


def test_one_off_payloads_never_push_out_protected_blobs_on_disk(tmp_path):
    store = _store(tmp_path / "b")
    weights = [_blob(20_000, i) for i in range(10)]  # 200 kB: protected on disk only
    for d, b in weights:
        store.offer(d, b)
        store.offer(d, b)  # second sighting
    store.flush()
    for i in range(100, 160):  # 1.2 MB of activations: three disk caps, twelve RAM caps
        store.offer(*_blob(20_000, i))
    store.flush()
    stats = store.stats()
    assert stats["entries"]["disk"] == 10
    # Each probation segment kept to the room its protected segment left.
    assert stats["bytes"]["disk_probation"] <= 400_000 - 200_000
    assert stats["bytes"]["probation"] <= 100_000 - stats["bytes"]["protected"]
    assert all(store.get(d, len(b)) == b for d, b in weights)
    assert stats["evicted"] > 0
    store.close()


def test_both_disk_segments_survive_a_restart(tmp_path):
    root = tmp_path / "b"
    store = _store(root, ram_cap=20_000)  # nothing of 30 kB fits in RAM: reads go to files
    once, twice = _blob(30_000, 1), _blob(30_000, 2)
    store.offer(*once)
    store.offer(*twice)
    store.offer(*twice)
    store.close()
    again = _store(root, ram_cap=20_000)
    stats = again.stats()
    assert stats["entries"]["disk_probation"] == 1 and stats["entries"]["disk"] == 1
    assert once[0][:PREFIX] in again.summary() and twice[0][:PREFIX] in again.summary()
    assert again.get(once[0], len(once[1])) == once[1]  # the second sighting: promoted
    again.flush()
    assert again.stats()["entries"]["disk"] == 2
    # A torn probation record is dropped, never served.
    torn_d, torn_b = _blob(30_000, 3)
    again.offer(torn_d, torn_b)
    again.flush()
    where = again._disk._records[torn_d]
    with open(where.log.path, "r+b") as f:
        f.seek(where.offset + PAGE + 1000)
        f.write(b"torn")
    assert again.get(torn_d, len(torn_b)) is None
    assert again.stats()["torn"] == 1 and not again.has(torn_d)
    again.close()


def test_a_second_sighting_during_the_write_ends_in_the_protected_segment(tmp_path):
    store = _store(tmp_path / "b", ram_cap=0)  # nothing in RAM: only the queue and the disk
    blobs = [_blob(30_000, i) for i in range(3)]
    for d, b in blobs:
        store.offer(d, b)
        # Served from the writer's queue or from disk probation, whichever holds it now.
        assert store.get(d, len(b)) == b
    store.flush()
    stats = store.stats()
    assert stats["entries"]["disk"] == 3 and stats["entries"]["disk_probation"] == 0
    assert stats["write_backlog"] == 0
    store.close()


def test_concurrent_sightings_keep_every_index_true_to_the_files(tmp_path):
    """Sessions offering, referencing and resending the same blobs at once, while
    the writer writes, renames and evicts: afterwards every index matches the files."""
    import random
    import threading

    from gleam.peer.cache.disktier import FORMAT_FILE, PROBATION_DIR, SPARE_FILES, TMP_DIR
    from gleam.peer.cache.probation_log import FREE_LOGS, log_bytes_for

    root = tmp_path / "b"
    store = _store(root, ram_cap=120_000, disk_cap=300_000)
    blobs = [_blob(10_000 + 97 * i, i) for i in range(60)]  # 600 kB: twice the disk cap
    wrong: list[bytes] = []

    def session(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            d, b = rng.choice(blobs)
            action = rng.random()
            if action < 0.4:
                store.offer(d, b, image=rng.random() < 0.05)
            elif action < 0.9:
                got = store.get(d, len(b))
                if got is not None and got != b:
                    wrong.append(d)
            else:
                store.put_verified(d, b)

    # Twice: the second round also reads what the first left on disk while it is
    # promoted, renamed and evicted under it.
    for round_ in range(2):
        threads = [threading.Thread(target=session, args=(4 * round_ + s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        store.flush()
    assert not wrong
    stats = store.stats()
    assert stats["write_backlog"] == 0 and stats["evicted"] > 0
    assert stats["bytes"]["protected"] <= 90_000
    assert stats["bytes"]["probation"] + stats["bytes"]["protected"] <= 120_000
    assert stats["bytes"]["disk"] + stats["bytes"]["disk_probation"] <= 300_000
    indexed = {}
    for row in store.entries():
        for tier in row["tiers"]:
            if tier.startswith("disk"):
                indexed[row["digest"]] = tier
    on_disk = {}
    spares = [f for f in root.rglob("spare.*") if f.parent.name == TMP_DIR]
    assert len(spares) == stats["disk_spare_files"] <= SPARE_FILES
    logs = set(store._disk.logs.paths())
    for f in root.rglob("*"):
        if f.is_file() and f not in spares and f not in logs and f.name != FORMAT_FILE:
            assert f.parent.name not in (TMP_DIR, PROBATION_DIR), f"a file was left: {f}"
            assert content_digest(f.read_bytes()).hex() == f.name
            on_disk[f.name] = "disk"
    # Every probation record the index holds reads back true from its log.
    by_digest = dict(blobs)
    for d, tier in indexed.items():
        if tier == "disk_probation":
            blob = by_digest[bytes.fromhex(d)]
            assert store._disk.read(bytes.fromhex(d), tier, len(blob)) == blob
            on_disk[d] = tier
    assert on_disk == indexed
    assert len(logs) <= 300_000 // log_bytes_for(300_000) + 1 + FREE_LOGS  # and tail, free
    sizes = {d.hex(): len(b) for d, b in blobs}
    for segment in ("disk", "disk_probation"):
        assert stats["bytes"][segment] == sum(
            sizes[d] for d, t in indexed.items() if t == segment)
    store.close()
    assert not any((root / TMP_DIR).iterdir()), "closing leaves no spare file behind"


def test_a_writer_behind_loses_no_first_sighting_ram_still_holds(tmp_path):
    """A link faster than the disk overruns the writer's backlog: a chunk RAM kept
    is queued again when RAM probation drops it, so it still reaches disk."""
    store = _store(tmp_path / "b", ram_cap=200_000, disk_cap=1_000_000,
                   write_backlog=20_000)  # room for one 20 kB write at a time
    first = [_blob(20_000, i) for i in range(10)]
    for d, b in first:  # a burst: most find the backlog full and stay in RAM only
        store.offer(d, b)
    store.flush()
    for d, b in [_blob(20_000, 100 + i) for i in range(10)]:
        store.offer(d, b)  # pushes one of the first out of RAM probation...
        store.flush()  # ...whose write then finds the backlog empty
    assert all(store.has(d) for d, _ in first)
    on_disk = {row["digest"] for row in store.entries() if "disk_probation" in row["tiers"]}
    assert {d.hex() for d, _ in first} <= on_disk
    assert store.stats()["writes_dropped"] == 0  # none lost for good
    store.close()
