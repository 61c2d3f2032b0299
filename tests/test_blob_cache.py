"""The content-addressed blob cache (docs/cache.md).

End to end: the mlp_infer example through a client agent and a host-backend
server agent on loopback, run again and again; then the store's own rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy, content_digest, hash_speed
from gleam.peer.cache.store import BlobMismatch, BlobStore
from gleam.peer.cuda.examples import KERNELS_PTX, ExampleError, build_example
from gleam.peer.localmesh import LocalMesh, wait_for
from gleam.peer.records import CallRecord, decode_batch, encode_batch
from tests.cuda_session import IDS

# Small enough that every weight of mlp_infer (and its input) is content-addressed.
CACHE_ENV = {"GLEAM_CACHE_MIN_BYTES": "4096"}
CLASSES = [0, 3, 9, 0, 1, 0, 9, 0]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    try:
        return build_example("mlp_infer", tmp_path_factory.mktemp("bin"))
    except ExampleError as exc:
        pytest.fail(str(exc))


def _pair(mesh: LocalMesh, server_env: dict[str, str] | None = None,
          client_env: dict[str, str] | None = None):
    server = mesh.start("server", extra=["--backend", "host"],
                        env={**CACHE_ENV, **(server_env or {})})
    client = mesh.start("client", mesh_key=server.state.mesh_key(),
                        peers=[f"127.0.0.1:{server.port}"], extra=["--backend", "none"],
                        env={**CACHE_ENV, **(client_env or {})})
    wait_for(lambda: server.node_id in client.authenticated_peers(), 20, "the client to link")
    return client, server


def _run(client, binary: Path) -> dict:
    """Runs mlp_infer once; the client agent's record of the session."""
    seen = len(client.request("cuda_sessions")["finished"])
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path), "--",
         str(binary), str(KERNELS_PTX), "5"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1])
    assert verdict["ok"] and verdict["classes"] == CLASSES, verdict
    finished = wait_for(
        lambda: (f := client.request("cuda_sessions")["finished"])[seen:] and f, 10,
        "the session to be accounted")
    return finished[seen]


def _cli(*argv: object) -> str:
    done = subprocess.run([sys.executable, "-m", "gleam.peer", *map(str, argv)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_second_run_sends_under_one_percent_and_disk_serves_after_restart(tmp_path, mlp):
    mesh = LocalMesh(tmp_path)
    try:
        client, server = _pair(mesh)
        first = _run(client, mlp)
        second = _run(client, mlp)
        # Weights and the input went up once; forward passes 2..5 referenced the input.
        assert first["h2d_sent"] == 612_392 and first["refs"] == 4
        print("h2d bytes sent: first run", first["h2d_sent"], "second run", second["h2d_sent"],
              "saved", second["bytes_saved"])
        assert second["h2d_sent"] < first["h2d_sent"] / 100, (first, second)
        assert second["bytes_saved"] >= 800_000 and second["ref_misses"] == 0
        assert second["hit_rate"] > 0.99
        cache = server.request("cache")
        assert cache["store"]["entries"]["disk"] >= 2  # used twice: on disk
        # The server restarts: the disk tier serves the third run.
        mesh.stop(server)
        server = mesh.start("server", extra=["--backend", "host"], env=CACHE_ENV,
                            peers=[f"127.0.0.1:{client.port}"])
        wait_for(lambda: server.node_id in client.authenticated_peers(), 20, "the relink")
        store = wait_for(lambda: server.request("cache")["store"], 20, "the store to open")
        assert store["entries"]["disk"] >= 2
        third = _run(client, mlp)
        assert third["h2d_sent"] < first["h2d_sent"] / 100, third
        assert third["ref_misses"] == 0
        assert server.request("cache")["store"]["hits_disk"] >= 2
        # The commands.
        shown = _cli("cache", "--json", "--state-dir", server.state.path)
        assert json.loads(shown)["store"]["entries"]["disk"] >= 2
        text = _cli("cache", "--state-dir", server.state.path)
        assert "RAM protected" in text and "buffers reused" in text
        assert "cleared" in _cli("cache", "clear", "--state-dir", server.state.path)
        assert server.request("cache")["store"]["entries"]["disk"] == 0
    finally:
        mesh.close()


def test_the_native_lanes_do_the_cache_work_without_handing_envelopes_to_python(
        tmp_path, mlp):
    """With the data connection on, the cache work runs in the native lanes:
    no envelope of either run went to Python on either side, yet the second
    run's weights went as references (cffi_build/src/cache/blobref.c, serve.c)."""
    mesh = LocalMesh(tmp_path)
    try:
        client, server = _pair(mesh)
        first = _run(client, mlp)
        before = server.request("cache")["store"]
        second = _run(client, mlp)
        after = server.request("cache")["store"]
    finally:
        mesh.close()
    for row in (first, second):
        assert row["data_connection"] is True, row
    assert second["refs"] > first["refs"] and second["bytes_saved"] >= 800_000
    assert second["h2d_sent"] < first["h2d_sent"] / 100 and second["ref_misses"] == 0
    # The serving side too: the first run's payloads reached the store from the
    # serving lane (cffi_build/src/lanes/serve.c), and every reference of the second
    # run was resolved there from the shelf, none by Python.
    assert before["shelf_lane_offers"] >= 2 and before["shelf_offers_dropped"] == 0
    assert after["shelf_lane_hits"] - before["shelf_lane_hits"] == second["refs"]
    assert after["hits_ram"] - before["hits_ram"] == second["refs"]


def test_a_bad_resend_never_enters_the_store_and_the_program_is_right(tmp_path, mlp):
    mesh = LocalMesh(tmp_path)
    try:
        # A server that keeps no first sighting (a fault knob): the references of
        # forward passes 2..5 to the input miss, and the first resend is corrupted.
        client, server = _pair(mesh, server_env={"GLEAM_FAULT_FORGET_FIRST_SIGHTINGS": "1"},
                               client_env={"GLEAM_FAULT_CORRUPT_RESENDS": "1"})
        after = _run(client, mlp)
        assert after["ref_misses"] >= 2 and after["bytes_resent"] > 0
        server.request("cache")  # let the disk writer settle
        store = wait_for(lambda: (d := server.request("cache", {"entries": True}))
                         ["store"]["entries"]["disk"] and d, 10, "the resent input on disk")
        assert store["store"]["refused"] == 1
        root = Path(store["store"]["root"])
        for row in store["entries"]:
            if "disk" in row["tiers"]:
                data = (root / row["digest"][:2] / row["digest"]).read_bytes()
                assert content_digest(data).hex() == row["digest"]
    finally:
        mesh.close()


def test_an_evicted_blob_is_resent_transparently(tmp_path, mlp):
    mesh = LocalMesh(tmp_path)
    try:
        # No room at all: every reference the client makes misses.
        client, server = _pair(mesh, server_env={"GLEAM_CACHE_RAM_MB": "0",
                                                 "GLEAM_CACHE_DISK_MB": "0"})
        first = _run(client, mlp)
        assert first["ref_misses"] >= 4  # the input of forward passes 2..5
        assert server.request("cache")["store"]["entries"] == {
            "probation": 0, "protected": 0, "disk": 0, "disk_probation": 0}
    finally:
        mesh.close()


# ------------------------------------------------------------ native half


def _h2d(payload: bytes) -> CallRecord:
    return CallRecord(IDS["glMemcpyHtoD"], (0x1000, len(payload), 0), payload, oneway=True)


def test_batch_blobs_hash_and_rewrite_to_references():
    big, small = os.urandom(70_000), os.urandom(100)
    sync = CallRecord(IDS["cuCtxSynchronize"], (), None, oneway=False)
    batch = encode_batch([_h2d(small), _h2d(big), sync])
    scan = BatchBlobs(batch, CachePolicy(), hash_inline=True)
    assert scan.waits and scan.h2d_inline == len(big) + len(small)
    assert [s.length for s in scan.items] == [len(big)]
    assert scan.items[0].digest == content_digest(big)
    out = scan.rewrite([0])
    assert len(out) < len(batch) - 69_000
    again = BatchBlobs(out, CachePolicy(), hash_inline=True)
    assert again.items[0].is_ref and again.items[0].digest == content_digest(big)
    records = decode_batch(bytes(out)).records
    assert records[0].payload == small and records[2].call_id == IDS["cuCtxSynchronize"]


def test_the_executor_runs_a_reference_through_the_blob_it_is_given():
    from gleam.peer.cuda.server.native import BatchError, HostBackend
    from tests.cuda_session import Session, rec

    backend = HostBackend({})
    s = Session(backend)
    try:
        s.context()
        p = s.alloc(1 << 17)
        data = os.urandom(1 << 17)
        scan = BatchBlobs(encode_batch([rec("glMemcpyHtoD", p, len(data), 0, payload=data)]),
                          CachePolicy(), hash_inline=True)
        ref_batch = scan.rewrite([0])
        with pytest.raises(BatchError):  # an unresolved reference is refused
            s.x.run(ref_batch, s.reply)
        assert s.x.run(ref_batch, s.reply, [(content_digest(data), data)]) == -1
        assert s.dtoh(p, len(data)) == data
        assert s.x.stats()["refs"] == 1 and s.x.stats()["bytes_ref"] == len(data)
    finally:
        s.close()
        backend.close()


def test_hashing_is_faster_than_a_gigabit_link():
    sha, copy = hash_speed(16 << 20, 3)
    assert sha > 0.125 and copy > 0  # 1 Gbit/s; docs/cache.md has the measured figures


# ------------------------------------------------------------ the store


def _blob(n: int, seed: int) -> tuple[bytes, bytes]:
    data = bytes([seed]) * n
    return content_digest(data), data


def test_one_off_blobs_never_push_out_protected_ones(tmp_path):
    store = BlobStore(None, ram_cap=400_000, probation_share=0.25)
    weight_d, weight = _blob(50_000, 1)
    store.offer(weight_d, weight)
    assert store.get(weight_d, len(weight)) == weight  # second sighting: protected
    for i in range(2, 40):  # activations, each seen once, far more than the RAM cap
        store.offer(*_blob(50_000, i))
    assert store.get(weight_d, len(weight)) == weight
    # Probation borrowed only the room protected does not use.
    assert store.stats()["bytes"]["probation"] <= 400_000 - 50_000


def test_weights_larger_than_probation_are_promoted_at_their_second_sighting():
    store = BlobStore(None, ram_cap=400_000, probation_share=0.25)  # probation: 100 kB or more
    weights = [_blob(50_000, i) for i in range(9)]  # 450 kB: more than the whole RAM tier
    for d, b in weights:
        store.offer(d, b)
    # Probation borrowed the room protected does not use; the first weight became a ghost.
    assert sum(store.has(d) for d, _ in weights) == 8 and not store.has(weights[0][0])
    d, b = weights[0]
    store.offer(d, b)  # the next run sends it again: the ghost promotes it
    assert store.get(d, len(b)) == b
    assert store.stats()["entries"]["protected"] == 1


def test_lru_within_the_protected_cap(tmp_path):
    store = BlobStore(None, ram_cap=400_000, probation_share=0.25)
    blobs = [_blob(100_000, i) for i in range(4)]
    for d, b in blobs:
        store.offer(d, b, image=True)  # images are protected at once
    assert store.get(*[blobs[0][0], 100_000]) is None  # 300 kB protected: the oldest went
    assert all(store.get(d, len(b)) == b for d, b in blobs[1:])


def test_disk_tier_survives_restart_and_never_serves_a_torn_file(tmp_path):
    root = tmp_path / "blobs"
    store = BlobStore(root, ram_cap=1 << 20, disk_cap=1 << 20)
    d1, b1 = _blob(10_000, 1)
    d2, b2 = _blob(10_000, 2)
    store.offer(d1, b1, image=True)
    store.offer(d2, b2, image=True)
    store.close()
    again = BlobStore(root, ram_cap=1 << 20, disk_cap=1 << 20)
    assert again.stats()["entries"]["disk"] == 2
    assert again.get(d1, len(b1)) == b1 and again.stats()["hits_disk"] == 1
    torn = root / d2.hex()[:2] / d2.hex()
    torn.write_bytes(b2[:5000])  # what a crash mid-write without the rename would leave
    assert again.get(d2, len(b2)) is None and not torn.exists()
    assert again.stats()["torn"] == 1
    (root / "tmp" / "leftover").write_bytes(b"x")
    again.close()
    BlobStore(root).close()
    assert not (root / "tmp" / "leftover").exists()


def test_disk_cap_evicts_the_least_recently_used(tmp_path):
    # The protected segment: 25,500 B (the rest of 34,000 is disk probation's).
    store = BlobStore(tmp_path / "b", ram_cap=1 << 20, disk_cap=34_000)
    blobs = [_blob(10_000, i) for i in range(3)]
    for d, b in blobs:
        store.offer(d, b, image=True)
        store.flush()
    assert store.stats()["entries"]["disk"] == 2
    assert not (tmp_path / "b" / blobs[0][0].hex()[:2] / blobs[0][0].hex()).exists()
    store.close()


def test_a_resend_that_does_not_match_its_digest_is_refused():
    store = BlobStore(None)
    d, b = _blob(1000, 7)
    with pytest.raises(BlobMismatch):
        store.put_verified(d, b[:-1] + b"\x00")
    assert not store.has(d) and store.stats()["refused"] == 1
    store.put_verified(d, b)
    assert store.get(d, len(b)) == b


# ------------------------------------------------------------ the client's side


def _envelope(body: bytes) -> memoryview:
    from gleam.peer.cuda.wire import envelope

    return memoryview(envelope.pack_header(envelope.BATCH, 0, len(body)) + body)


def test_client_references_what_the_server_holds_and_keeps_bytes_until_a_reply():
    from gleam.peer.cache.client import ServerKnowledge, SessionBlobs

    data = os.urandom(100_000)
    known = ServerKnowledge()
    blobs = SessionBlobs(7, known, CachePolicy())
    sync = CallRecord(IDS["cuCtxSynchronize"], (), None, oneway=False)
    first = blobs.outgoing(_envelope(encode_batch([_h2d(data), sync])))
    assert len(first) > 100_000 and blobs.h2d_sent == 100_000  # unknown: sent as bytes
    assert known.knows(content_digest(data))
    second = blobs.outgoing(_envelope(encode_batch([_h2d(data), sync])))
    assert len(second) < 200 and blobs.refs == 1 and blobs.saved == 100_000
    assert blobs.resend(content_digest(data))[48:] == data  # held for a resend...
    blobs.replied()  # ...the reply of the first batch does not release it
    assert blobs.resend(content_digest(data)) is not None
    blobs.replied()  # the second batch's reply does
    assert blobs.resend(content_digest(data)) is None


def test_client_sends_bytes_when_its_resend_store_is_full():
    from gleam.peer.cache.client import ServerKnowledge, SessionBlobs

    data = os.urandom(100_000)
    known = ServerKnowledge()
    known.reset(content_digest(data)[:8])
    blobs = SessionBlobs(7, known, CachePolicy(), pending_cap=50_000)
    out = blobs.outgoing(_envelope(encode_batch([_h2d(data)])))
    assert len(out) > 100_000 and blobs.refs == 0
