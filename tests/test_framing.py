"""Length-prefixed framing: frame() and FrameBuffer."""

from __future__ import annotations

import struct

import pytest

from gleam.peer.protocol import DEFAULT_MAX_FRAME, FrameBuffer, FrameTooLarge, ProtocolError, frame


def drain(buf: FrameBuffer) -> list[bytes]:
    out = []
    while (body := buf.next_frame()) is not None:
        out.append(body)
    return out


def test_frame_layout_is_big_endian_length_then_body() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(memoryview(b"xy")) == b"\x00\x00\x00\x02xy"


def test_frame_counts_bytes_of_a_wide_memoryview() -> None:
    words = memoryview(struct.pack("<4I", 1, 2, 3, 4)).cast("I")
    assert frame(words)[:4] == b"\x00\x00\x00\x10"


def test_default_limit_is_16_mib() -> None:
    assert DEFAULT_MAX_FRAME == 16 * 1024 * 1024
    assert FrameBuffer().max_frame == DEFAULT_MAX_FRAME


def test_whole_frames_in_one_feed() -> None:
    buf = FrameBuffer()
    buf.feed(frame(b"one") + frame(b"") + frame(b"three"))
    assert drain(buf) == [b"one", b"", b"three"]
    assert buf.pending() == 0


def test_frames_fed_byte_by_byte() -> None:
    buf = FrameBuffer()
    wire = frame(b"hello") + frame(b"world!")
    got = []
    for i in range(len(wire)):
        buf.feed(wire[i : i + 1])
        got.extend(drain(buf))
    assert got == [b"hello", b"world!"]


def test_incomplete_frame_waits_and_counts_as_pending() -> None:
    buf = FrameBuffer()
    buf.feed(frame(b"abcdef")[:7])
    assert buf.next_frame() is None
    assert buf.pending() == 7
    buf.feed(b"def")
    assert buf.next_frame() == b"abcdef"
    assert buf.pending() == 0


def test_accepts_bytearray_and_memoryview() -> None:
    buf = FrameBuffer()
    wire = frame(b"payload")
    buf.feed(bytearray(wire[:5]))
    buf.feed(memoryview(wire)[5:])
    assert buf.next_frame() == b"payload"


def test_oversized_header_fails_before_the_body_arrives() -> None:
    buf = FrameBuffer(max_frame=100)
    buf.feed(struct.pack(">I", 101))  # only the header
    with pytest.raises(FrameTooLarge) as info:
        buf.next_frame()
    assert isinstance(info.value, ProtocolError)
    assert "101" in info.value.reason and "100" in info.value.reason


def test_frame_at_the_limit_is_accepted() -> None:
    buf = FrameBuffer(max_frame=100)
    buf.feed(frame(bytes(100)))
    assert buf.next_frame() == bytes(100)


def test_frames_before_an_oversized_one_are_delivered() -> None:
    buf = FrameBuffer(max_frame=10)
    buf.feed(frame(b"ok") + struct.pack(">I", 11))
    assert buf.next_frame() == b"ok"
    with pytest.raises(FrameTooLarge):
        buf.next_frame()


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        FrameBuffer(max_frame=0)
    with pytest.raises(ValueError):
        FrameBuffer(max_frame=2**32)


def test_next_frame_with_gives_a_view_and_consumes_even_on_error() -> None:
    buf = FrameBuffer()
    buf.feed(frame(b"first") + frame(b"second"))

    def explode(view: memoryview) -> None:
        assert bytes(view) == b"first"
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        buf.next_frame_with(explode)
    assert buf.next_frame_with(bytes) == b"second"
    buf.feed(frame(b"third"))  # the buffer is not left locked by a view
    assert buf.next_frame() == b"third"


def test_bulk_frames_in_odd_chunks_survive_compaction_and_growth() -> None:
    bodies = [bytes([i]) * size for i, size in enumerate([1 << 20, 3, 700_000, 0, 1 << 20, 5])]
    wire = b"".join(frame(b) for b in bodies)
    buf = FrameBuffer()
    got: list[bytes] = []
    chunk = 65_537
    for i in range(0, len(wire), chunk):
        buf.feed(wire[i : i + chunk])
        got.extend(drain(buf))
    assert got == bodies
    assert buf.pending() == 0


def test_storage_is_reused_between_frames() -> None:
    buf = FrameBuffer()
    body = bytes(1 << 20)
    buf.feed(frame(body))
    assert buf.next_frame() == body
    storage = buf._buf
    for _ in range(3):
        buf.feed(frame(body))
        assert buf.next_frame() == body
    assert buf._buf is storage


def test_many_small_frames_cost_linear_time() -> None:
    # A quadratic buffer (re-slicing the whole tail per frame) would take
    # minutes here; this checks the behaviour, not a wall-clock bound.
    count = 200_000
    wire = frame(b"x") * count
    buf = FrameBuffer()
    buf.feed(wire)
    seen = 0
    while buf.next_frame() is not None:
        seen += 1
    assert seen == count


def test_reading_into_writable_space_equals_feeding() -> None:
    wire = b"".join(frame(bytes([i]) * (i * 1000)) for i in range(1, 40))
    fed, direct = FrameBuffer(), FrameBuffer()
    fed.feed(wire)
    pos = 0
    while pos < len(wire):
        space = direct.writable(777)
        piece = wire[pos : pos + 777]
        space[: len(piece)] = piece
        space.release()
        direct.commit(len(piece))
        pos += len(piece)
    assert drain(direct) == drain(fed)


def test_commit_beyond_the_space_handed_out_is_refused() -> None:
    buf = FrameBuffer()
    space = buf.writable(10)
    with pytest.raises(ValueError):
        buf.commit(len(space) + 1_000_000)
    with pytest.raises(ValueError):
        buf.writable(0)
