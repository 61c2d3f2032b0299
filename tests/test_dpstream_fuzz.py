"""Property tests of the sealed stream's receiver on untrusted bytes.

Whatever arrives on a data connection, gl_stream_recv must never crash, never
hand out a frame that did not authenticate, and stop with a clean error. The
property is stronger than that: the C receiver must agree exactly, frame by
frame and in how it stops, with the model of the format in
tests/dpstream_frames.py (which reads the doc, not the C).
"""

from __future__ import annotations

import secrets
import socket
import struct
import threading

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.wire.stream import (
    E_AUTH,
    E_TOO_BIG,
    E_TRUNCATED,
    TO_CLIENT,
    TO_SERVER,
    SealedStream,
    StreamError,
)
from tests.dpstream_frames import model_receive, seal

FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEY = secrets.token_bytes(32)
OUTCOMES = {E_AUTH: "auth", E_TOO_BIG: "too_big", E_TRUNCATED: "truncated"}
# Limits on either side of the frames drawn below, so both refusals are reached.
max_frames = st.sampled_from([1, 16, 64, 300, 4096])


def c_receive(
    wire: bytes, max_frame: int, chunks: list[int] | None = None
) -> tuple[list[bytes], str]:
    """What the C receiver makes of ``wire``: written all at once into the
    socket before it reads (a deterministic read-ahead), or by a thread in
    ``chunks`` so frames arrive in pieces."""
    raw, b = socket.socketpair()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    s = SealedStream(b.fileno(), secrets.token_bytes(32), TO_CLIENT, KEY, TO_SERVER, max_frame)

    def write() -> None:
        pos = 0
        for n in chunks or [len(wire)]:
            raw.sendall(wire[pos : pos + n])
            pos += n
        raw.sendall(wire[pos:])
        raw.shutdown(socket.SHUT_WR)

    writer = threading.Thread(target=write)
    writer.start()
    frames: list[bytes] = []
    try:
        while True:
            try:
                frame = s.recv()
            except StreamError as exc:
                # Untrusted bytes may only cause these three; IO, CRYPTO,
                # NOMEM or CLOSED would be a receiver bug.
                assert exc.code in OUTCOMES, exc
                return frames, OUTCOMES[exc.code]
            if frame is None:
                return frames, "end"
            frames.append(frame)
    finally:
        writer.join()
        s.close()
        raw.close()
        b.close()


def assert_agrees_with_model(wire: bytes, max_frame: int, chunks: list[int] | None = None) -> None:
    got = c_receive(wire, max_frame, chunks)
    want = model_receive(KEY, TO_SERVER, wire, max_frame)
    event(f"{len(want[0])} frames, then {want[1]}")
    assert got == want


@st.composite
def streams(draw: st.DrawFn, max_size: int = 300) -> bytes:
    texts = draw(st.lists(st.binary(min_size=1, max_size=max_size), max_size=5))
    return b"".join(seal(KEY, TO_SERVER, i, t) for i, t in enumerate(texts))


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(streams()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "splice", "insert", "delete", "set",
                                   "replay"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif op == "splice":
            other = draw(streams())
            cut_a, cut_b = draw(st.integers(0, len(data))), draw(st.integers(0, len(other)))
            data = data[:cut_a] + other[cut_b:]
        elif op == "insert":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and data:
            at = draw(st.integers(0, len(data) - 1))
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "set" and len(data) >= 4:
            # A length field (at offset 0, or anywhere) set to an edge value.
            at = draw(st.sampled_from([0, draw(st.integers(0, len(data) - 4))]))
            value = draw(st.sampled_from([0, 1, 15, 16, 300, 4096, 4097, 0x7FFFFFFF, 0xFFFFFFFF]))
            data[at : at + 4] = struct.pack("<I", value)
        elif op == "replay" and len(data) >= 4:
            # A valid frame sent again (its own bytes, a later counter).
            (n,) = struct.unpack_from("<I", data)
            data += data[: 4 + n + 16]
    return bytes(data)


@FUZZ
@given(st.binary(max_size=512), max_frames)
def test_arbitrary_bytes_agree_with_the_model(wire: bytes, max_frame: int) -> None:
    assert_agrees_with_model(wire, max_frame)


@FUZZ
@given(streams(), max_frames)
def test_valid_streams_agree_with_the_model(wire: bytes, max_frame: int) -> None:
    assert_agrees_with_model(wire, max_frame)


@FUZZ
@given(mutated_streams(), max_frames)
def test_mutated_streams_agree_with_the_model(wire: bytes, max_frame: int) -> None:
    assert_agrees_with_model(wire, max_frame)


@settings(FUZZ, max_examples=100)
@given(st.one_of(streams(max_size=300_000), mutated_streams()),
       st.lists(st.integers(1, 200_000), max_size=6))
def test_frames_arriving_in_pieces_agree_with_the_model(wire: bytes, chunks: list[int]) -> None:
    """Large frames written in pieces exercise the piecewise body reads and the
    read-ahead across frame boundaries."""
    assert_agrees_with_model(wire, 1 << 20, chunks)
