"""The client agent's native reference state (cffi_build/src/cache/blobref.c, docs/cache.md):
which payloads go as references, how long their bytes are held, and that
nothing a program or a server sends makes it crash."""

from __future__ import annotations

import os
import secrets
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy, content_digest
from gleam.peer.cache.client import ServerKnowledge, SessionBlobs
from gleam.peer.cuda.wire import envelope
from gleam.peer.cuda.wire.blocks import block_view, new_block
from gleam.peer.nativelib import ffi, lib
from gleam.peer.records import CallRecord, decode_batch, encode_batch
from tests.cuda_session import IDS

SYNC = CallRecord(IDS["cuCtxSynchronize"], (), None, oneway=False)


def _h2d(payload: bytes) -> CallRecord:
    return CallRecord(IDS["glMemcpyHtoD"], (0x1000, len(payload), 0), payload, oneway=True)


def _envelope(*records: CallRecord) -> bytes:
    body = encode_batch(list(records))
    return envelope.pack_header(envelope.BATCH, 0, len(body)) + body


def _knowing(*payloads: bytes, cap: int | None = None) -> tuple[ServerKnowledge, SessionBlobs]:
    """A session to a server known to hold ``payloads``."""
    known = ServerKnowledge()
    for payload in payloads:
        known.add(content_digest(payload))
    extra = {} if cap is None else {"pending_cap": cap}
    return known, SessionBlobs(3, known, CachePolicy(), **extra)


def _counts(blobs: SessionBlobs):
    counts = ffi.new("gl_blobref_counts *")
    lib.gl_blobref_get(blobs.native, counts)
    return counts


def _native_out(blobs: SessionBlobs, data: bytes) -> bytes:
    """What the native uplink would send for the envelope ``data`` (through the
    block API it uses, not Python's copy)."""
    block = new_block(data)
    out = ffi.new("gl_jblock **")
    try:
        assert lib.gl_blobref_outgoing(blobs.native, block, out, ffi.NULL, ffi.NULL) == 0
        return bytes(block_view(out[0]))
    finally:
        lib.gl_jblock_unref(block)


def test_only_payloads_the_server_holds_become_references():
    held, fresh = os.urandom(80_000), os.urandom(90_000)
    known = ServerKnowledge()
    known.reset(content_digest(held)[:8])
    blobs = SessionBlobs(3, known, CachePolicy())
    out = _native_out(blobs, _envelope(_h2d(held), _h2d(fresh), SYNC))
    body = out[envelope.HEADER_SIZE:]
    assert int.from_bytes(out[:4], "little") == len(body)  # the header says the new size
    records = decode_batch(body).records
    assert records[0].ref is not None and records[0].ref.digest == content_digest(held)
    assert records[1].payload == fresh and records[2].call_id == IDS["cuCtxSynchronize"]
    assert blobs.refs == 1 and blobs.saved == len(held)
    assert blobs.h2d_sent == len(fresh) and blobs.candidate_bytes == len(held) + len(fresh)
    assert known.knows(content_digest(fresh)) and len(known) == 2  # the server keeps what it got
    assert blobs.row()["hit_rate"] == len(held) / (len(held) + len(fresh))


def test_a_reply_confirms_only_the_batches_up_to_the_one_it_answers():
    data = os.urandom(70_000)
    _known, blobs = _knowing(data)
    lib.gl_blobref_sent(blobs.native, 1)  # a waiting batch of the fast lane went first
    _native_out(blobs, _envelope(_h2d(data), SYNC))
    assert _counts(blobs).pending_bytes == len(data) and _counts(blobs).waiting == 2
    blobs.replied()  # the earlier batch's reply: the reference may still miss
    assert blobs.resend(content_digest(data)) is not None
    blobs.replied()  # its own: the bytes go
    assert blobs.resend(content_digest(data)) is None
    counts = _counts(blobs)
    assert counts.pending == 0 and counts.pending_bytes == 0 and counts.waiting == 0
    blobs.replied()  # a reply with nothing waiting changes nothing
    assert _counts(blobs).waiting == 0


def test_a_payload_carried_again_is_held_until_the_later_batch_is_confirmed():
    data = os.urandom(70_000)
    _known, blobs = _knowing(data)
    _native_out(blobs, _envelope(_h2d(data), SYNC))
    _native_out(blobs, _envelope(_h2d(data), SYNC))
    assert _counts(blobs).pending == 1 and _counts(blobs).pending_bytes == len(data)
    blobs.replied()
    assert blobs.resend(content_digest(data)) is not None
    blobs.replied()
    assert blobs.resend(content_digest(data)) is None


def test_the_cap_on_held_bytes_is_respected():
    a, b = os.urandom(70_000), os.urandom(70_000)
    _known, blobs = _knowing(a, b, cap=100_000)
    out = _native_out(blobs, _envelope(_h2d(a), _h2d(b)))
    records = decode_batch(out[envelope.HEADER_SIZE:]).records
    assert records[0].ref is not None and records[1].payload == b  # b would pass the cap
    assert blobs.refs == 1 and _counts(blobs).pending_bytes == len(a) <= 100_000


def test_a_resend_carries_the_exact_bytes_after_the_program_buffer_is_gone():
    data = os.urandom(100_000)
    _known, blobs = _knowing(data)
    # The session's own copy of the envelope goes at once: the held reference
    # keeps the block alive.
    _native_out(blobs, _envelope(_h2d(data), SYNC))
    blob = blobs.resend(content_digest(data))
    assert blob is not None
    assert blob[:envelope.HEADER_SIZE] == envelope.pack_header(envelope.BLOB, 3, 32 + len(data))
    assert blob[envelope.HEADER_SIZE:envelope.HEADER_SIZE + 32] == content_digest(data)
    assert blob[envelope.HEADER_SIZE + 32:] == data
    assert blobs.misses == 1 and blobs.resent == len(data)


def test_python_and_the_native_uplink_make_the_same_envelope():
    data = os.urandom(70_000)
    env = _envelope(_h2d(data), SYNC)
    outs = []
    for native in (True, False):
        _known, blobs = _knowing(data)
        outs.append(_native_out(blobs, env) if native else bytes(blobs.outgoing(env)))
    assert outs[0] == outs[1] and len(outs[0]) < 200


def test_knowledge_from_a_hostile_summary():
    known = ServerKnowledge()
    known.reset(bytes(8) * 3 + b"\xff" * 8 + b"odd")  # repeats, a zero prefix, a partial one
    assert len(known) == 2 and known.knows(bytes(32)) and known.knows(b"\xff" * 8)
    known.forget(bytes(8))
    assert len(known) == 1 and not known.knows(bytes(32))
    assert not known.knows(b"") and not known.knows(b"\x01")  # short digests: no read past
    known.add(b"\x01")
    assert known.knows(b"\x01" + bytes(7))
    known.reset(os.urandom(8 * 5000))
    assert len(known) == 5000


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.binary(min_size=0, max_size=40), st.integers(0, 200))
def test_garbage_envelopes_and_digests_never_crash(noise, digest, cut):
    data = os.urandom(5000)
    known = ServerKnowledge()
    known.add(content_digest(data))
    known.reset(noise[: len(noise) // 8 * 8] + noise)
    blobs = SessionBlobs(3, known, CachePolicy(h2d_min=4096, image_min=4096))
    good = _envelope(_h2d(data), SYNC)
    for env in (noise, good[:cut], good[:cut] + noise + good[cut:], b"", good[:8]):
        out = _native_out(blobs, env)
        if BatchBlobs(env[envelope.HEADER_SIZE:], CachePolicy(), True).rc != 0:
            assert out == env  # a malformed batch goes as it is
    assert blobs.resend(digest) is None and blobs.resend(noise) is None
    known.forget(digest)
    known.knows(noise)
    blobs.replied()


def _through_pump(sent: list[bytes], known: ServerKnowledge, blobs: SessionBlobs,
                  max_body: int | None = None) -> tuple[list[bytes], Any, Any]:
    """The program's envelopes ``sent`` through a real pump (its hashing thread) onto a
    sealed stream: what the server receives, the pump and its journal."""
    import socket
    import threading

    from gleam.peer.cuda.client.journal import Journal
    from gleam.peer.cuda.client.lanes import new_pump
    from gleam.peer.cuda.wire.stream import TO_CLIENT, TO_SERVER, SealedStream

    program, agent = socket.socketpair()
    a, b = socket.socketpair()
    up, down = secrets.token_bytes(32), secrets.token_bytes(32)
    client = SealedStream(a.fileno(), up, TO_SERVER, down, TO_CLIENT, 1 << 22)
    server = SealedStream(b.fileno(), down, TO_CLIENT, up, TO_SERVER, 1 << 22)
    journal = Journal(1 << 24)
    pump = new_pump(agent.fileno(), 5, journal.native, b"", IDS["glMemcpyHtoD"])
    pump.out, pump.blobref = client.native, blobs.native
    pump.cache_min, pump.h2d_min = 4096, 65536
    if max_body is not None:
        pump.max_body = max_body
    codes: list[int] = []
    uplink = threading.Thread(target=lambda: codes.append(lib.gl_pump_uplink(pump)))
    try:
        uplink.start()
        program.sendall(b"".join(sent))
        program.shutdown(socket.SHUT_WR)
        got = [server.recv() for _ in sent]
        uplink.join(30)
        assert codes == [lib.GL_PUMP_END]
    finally:
        program.close()
        agent.close()
        client.close()
        server.close()
        a.close()
        b.close()
    return got, pump, journal


def test_the_native_uplink_does_the_cache_work_in_order_and_journals_the_originals():
    """A program's envelopes through a real pump onto a sealed stream: the
    cacheable ones are hashed on the pump's hashing thread, the rest pass it,
    and the server receives them in order."""
    data = os.urandom(70_000)
    known, blobs = _knowing()
    sent = [_envelope(_h2d(data), SYNC), _envelope(SYNC), _envelope(_h2d(data), SYNC),
            _envelope(SYNC)] * 3
    got, pump, journal = _through_pump(sent, known, blobs)
    # Unknown to the server: bytes, with the client's digest of them as a claim.
    kind, _session, _n = envelope.parse_header(got[0])
    claims, batch = envelope.split_claimed(got[0][envelope.HEADER_SIZE:])
    assert kind == envelope.CLAIMED
    assert claims == [envelope.Claim(0, len(data), content_digest(data))]
    assert all(envelope.kind_of(env) == envelope.BATCH for env in got[1:])
    records = [decode_batch(batch).records] + [
        decode_batch(env[envelope.HEADER_SIZE:]).records for env in got[1:]]
    assert records[0][0].payload == data
    for i in range(1, len(sent)):
        if i % 2:
            assert list(records[i]) == [SYNC]
        else:  # known from then on: a reference
            ref = records[i][0].ref
            assert ref is not None and ref.digest == content_digest(data)
    assert all(env[8:16] == (5).to_bytes(8, "little") for env in got)
    assert pump.batches == len(sent) and pump.bytes_to_server == sum(map(len, got))
    assert [bytes(e.envelope[16:]) for e in journal.entries] == [s[16:] for s in sent]
    counts = _counts(blobs)
    assert counts.sent == len(sent) and counts.waiting == len(sent) and counts.pending == 1
    for _ in sent:
        blobs.replied()
    assert _counts(blobs).pending_bytes == 0 and blobs.resend(content_digest(data)) is None
    assert blobs.refs == 5 and known.knows(content_digest(data))


def test_claims_that_would_pass_the_frame_limit_are_left_out():
    """A body as large as the pump takes goes as a plain BATCH: with its claims it would
    pass the data connection's frame limit. The server then hashes the payload itself."""
    data = os.urandom(70_000)
    known, blobs = _knowing()
    env = _envelope(_h2d(data), SYNC)
    got, _pump, _journal = _through_pump([env], known, blobs,
                                         max_body=len(env) - envelope.HEADER_SIZE)
    assert envelope.kind_of(got[0]) == envelope.BATCH and bytes(got[0][16:]) == env[16:]
