"""The train meter: bandwidth from frame arrivals, with a virtual clock."""

import pytest

from gleam.peer.bandwidth import (
    MAX_PROBE_FRAMES,
    MIN_FRAME,
    PROBE_FRAME,
    PROBE_FRAMES,
    PROBE_SECONDS,
    TRAIN_GAP,
    BandwidthEstimate,
    BandwidthProbe,
    BandwidthSample,
    TrainMeter,
    is_long,
    probe_count,
    probe_frames,
)


def feed(meter: TrainMeter, frames: int, size: int, rate: float, start: float = 0.0):
    samples = []
    for i in range(frames):
        sample = meter.observe(size, start + i * size / rate)
        if sample:
            samples.append(sample)
    return samples


def test_a_train_measures_its_rate_excluding_the_first_frame():
    meter = TrainMeter()
    assert feed(meter, 9, 256 * 1024, rate=12.5e6) == []  # 100 Mbit/s
    sample = meter.flush(now=10.0)
    assert sample is not None
    assert sample.nbytes == 8 * 256 * 1024
    assert sample.bytes_per_s == pytest.approx(12.5e6)


def test_small_frames_and_short_trains_say_nothing():
    meter = TrainMeter()
    assert feed(meter, 100, MIN_FRAME - 1, rate=1e9) == []
    assert meter.flush(10.0) is None
    assert feed(meter, 3, 256 * 1024, rate=1e9) == []  # 512 KiB after the first: too little
    assert meter.flush(20.0) is None


def test_a_pause_ends_one_train_and_starts_another():
    meter = TrainMeter()
    feed(meter, 9, 256 * 1024, rate=1e8)
    samples = feed(meter, 9, 256 * 1024, rate=5e7, start=1.0 + TRAIN_GAP)
    assert len(samples) == 1 and samples[0].bytes_per_s == pytest.approx(1e8)
    assert meter.flush(100.0).bytes_per_s == pytest.approx(5e7)


def test_probe_frames_are_bounded_and_validated():
    frames = probe_frames(7)
    assert [f.index for f in frames] == list(range(len(frames)))
    with pytest.raises(ValueError):
        BandwidthProbe(probe=1, index=5, count=5, pad=b"")
    with pytest.raises(ValueError):
        BandwidthProbe(probe=1, index=0, count=1000, pad=b"")


def sample(rate: float) -> BandwidthSample:
    return BandwidthSample(rate, 2 << 20, 0.0)


def test_the_estimate_is_the_largest_recent_sample():
    # A train slowed by other traffic or a descheduled reader must not drag the
    # link's capacity down; a slower link shows once faster samples age out.
    estimate = BandwidthEstimate()
    assert estimate.bytes_per_s is None
    for rate in (12.0e6, 3.0e6, 11.9e6):
        estimate.add(sample(rate))
    assert estimate.bytes_per_s == 12.0e6
    for _ in range(BandwidthEstimate.WINDOW_SAMPLES):
        estimate.add(sample(6.0e6))
    assert estimate.bytes_per_s == 6.0e6


def test_probe_trains_last_long_enough_at_the_estimated_rate():
    assert probe_count(None) == PROBE_FRAMES
    assert probe_count(12.5e6) == PROBE_FRAMES  # 100 Mbit/s: 2 MiB is 170 ms already
    at_gigabit = probe_count(125e6)
    assert at_gigabit * PROBE_FRAME >= 125e6 * PROBE_SECONDS
    assert probe_count(1e12) == MAX_PROBE_FRAMES


def test_short_trains_count_only_until_a_long_one_is_measured():
    # 2 MiB at 1 Gbit/s is a 17 ms train: a first frame read 2 ms late makes it
    # 12 % fast. Once a train of 50 ms or more exists, short ones are ignored.
    estimate = BandwidthEstimate()
    estimate.add(BandwidthSample(140e6, 2 << 20, 0.0))
    assert not estimate.settled and estimate.bytes_per_s == 140e6
    estimate.add(BandwidthSample(121e6, 24 * PROBE_FRAME, 0.0))
    assert estimate.settled and estimate.bytes_per_s == 121e6
    estimate.add(BandwidthSample(150e6, 2 << 20, 0.0))  # a short outlier after
    assert estimate.bytes_per_s == 121e6
    # The longest probe a peer serves counts as long even on a very fast link.
    assert is_long(BandwidthSample(1.25e9, (MAX_PROBE_FRAMES - 1) * PROBE_FRAME, 0.0))
