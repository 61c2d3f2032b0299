"""The refusal log: first of a kind in full, repeats counted, bounded memory."""

from __future__ import annotations

from gleam.peer.refusals import OTHER, RefusalLog, reason_class


def test_repeats_from_one_source_become_one_summary() -> None:
    log = RefusalLog(interval_s=60)
    first = log.note("10.0.0.5", "frame of 1073741824 bytes; accepts at most 16777216", now=0)
    assert first == ["refused connection from 10.0.0.5: frame of 1073741824 bytes; "
                     "accepts at most 16777216"]
    for i in range(499):
        assert log.note("10.0.0.5", f"frame of {i} bytes; accepts at most 16777216", now=1) == []
    assert log.flush(now=30) == []  # the interval is not over yet
    assert log.flush(now=61) == [
        "refused 499 more connections from 10.0.0.5 (frame of 1073741824 bytes; accepts at "
        "most 16777216) in the last 61 s"
    ]
    assert log.flush(now=200) == []  # nothing new


def test_each_source_and_reason_is_logged_once_per_interval() -> None:
    log = RefusalLog(interval_s=10)
    assert len(log.note("a", "bad cbor", 0)) == 1
    assert len(log.note("b", "bad cbor", 0)) == 1
    assert len(log.note("a", "authentication failed", 0)) == 1
    assert log.note("a", "bad cbor", 1) == []
    # The next interval starts afresh and first reports the last one.
    lines = log.note("a", "bad cbor", 11)
    assert lines[0].startswith("refused 1 more connection from a (bad cbor)")
    assert lines[1] == "refused connection from a: bad cbor"


def test_the_table_of_sources_is_bounded() -> None:
    log = RefusalLog(interval_s=10, max_sources=4)
    lines = [line for i in range(1000) for line in log.note(f"10.0.{i // 256}.{i % 256}", "x", 0)]
    assert len(lines) == 5 and "more than 4 sources" in lines[-1]
    assert len(log._counts) == 5
    assert log.flush(10) == [f"refused 995 more connections from {OTHER} (x) in the last 10 s"]


def test_numbers_do_not_make_reasons_unique() -> None:
    assert reason_class("got 5 bytes of 17") == reason_class("got 99 bytes of 3")
