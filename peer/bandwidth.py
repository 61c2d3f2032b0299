"""Link bandwidth: measured from data as it arrives, probed when none has.

The receiving side of a link knows best how fast bytes come in, so each
agent measures its inbound rate from every peer: passively, from trains of
large frames (bulk transfers, call batches), and, when nothing large has
arrived for a while, from a small bounded probe the sender is asked to
push. A train's first frame only marks the start (its bytes may have sat
in a buffer), so bursts that a shaper lets through at line rate do not
inflate the figure much.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass

from gleam.peer.protocol import Message, register_message

# Frames smaller than this say more about latency than bandwidth.
MIN_FRAME = 64 * 1024
# A pause longer than this ends a train.
TRAIN_GAP = 0.05
# A train must carry at least this much (after its first frame) to count.
MIN_TRAIN_BYTES = 1 << 20
PROBE_FRAME = 256 * 1024
PROBE_FRAMES = 9  # 2 MiB measured, after the first frame that starts the train
MAX_PROBE_FRAMES = 64
# A train should last this long at the rate already estimated: a receiver
# that reads its first frame late (scheduling) then errs by a small fraction.
PROBE_SECONDS = 0.05


@register_message("bw-probe")
@dataclass(frozen=True)
class BandwidthProbe(Message):
    """One frame of a bandwidth probe train; ``pad`` is the measured load."""

    probe: int
    index: int
    count: int
    pad: bytes

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count <= MAX_PROBE_FRAMES:
            raise ValueError("probe index/count out of range")
        if len(self.pad) > 4 * PROBE_FRAME:
            raise ValueError("probe frame too large")


@register_message("bw-probe-request")
@dataclass(frozen=True)
class ProbeRequest(Message):
    """Ask the peer to send a probe train (the receiver measures)."""

    probe: int
    count: int

    def __post_init__(self) -> None:
        if not 0 < self.count <= MAX_PROBE_FRAMES:
            raise ValueError("probe count out of range")


def probe_count(estimate: float | None) -> int:
    """Frames to ask for, given the current estimate (bytes/s) or None."""
    if not estimate:
        return PROBE_FRAMES
    wanted = math.ceil(estimate * PROBE_SECONDS / PROBE_FRAME) + 1
    return max(PROBE_FRAMES, min(MAX_PROBE_FRAMES, wanted))


def probe_frames(probe: int, count: int = PROBE_FRAMES) -> list[BandwidthProbe]:
    pad = bytes(PROBE_FRAME)
    return [BandwidthProbe(probe=probe, index=i, count=count, pad=pad) for i in range(count)]


@dataclass(frozen=True)
class BandwidthSample:
    """One measured train: bytes per second, and how many bytes it rests on."""

    bytes_per_s: float
    nbytes: int
    at: float


class TrainMeter:
    """Turns frame arrivals into bandwidth samples. Used by one thread."""

    def __init__(self) -> None:
        self._start = 0.0
        self._last = -1.0
        self._bytes = 0

    def observe(self, size: int, now: float) -> BandwidthSample | None:
        """Record a frame of ``size`` bytes seen at ``now``; maybe finish a train."""
        if size < MIN_FRAME:
            return None
        sample = None
        if self._last < 0 or now - self._last > TRAIN_GAP:
            sample = self._finish()
            self._start, self._bytes = now, 0  # the first frame only starts the clock
        else:
            self._bytes += size
        self._last = now
        if sample is None and self._bytes >= 16 * MIN_TRAIN_BYTES:
            sample = self._finish()
            self._start, self._bytes = now, 0
        return sample

    def flush(self, now: float) -> BandwidthSample | None:
        """End a train that has gone quiet (call from time to time)."""
        if self._last >= 0 and now - self._last > TRAIN_GAP:
            sample = self._finish()
            self._last = -1.0
            self._bytes = 0
            return sample
        return None

    def _finish(self) -> BandwidthSample | None:
        elapsed = self._last - self._start
        if self._bytes < MIN_TRAIN_BYTES or elapsed <= 0:
            return None
        return BandwidthSample(self._bytes / elapsed, self._bytes, self._last)


def is_long(sample: BandwidthSample) -> bool:
    """Whether a train lasted long enough that a late first read hardly matters:
    ``PROBE_SECONDS``, or the longest probe a peer may be asked for."""
    return (sample.nbytes >= sample.bytes_per_s * PROBE_SECONDS
            or sample.nbytes >= (MAX_PROBE_FRAMES - 1) * PROBE_FRAME)


class BandwidthEstimate:
    """The inbound rate of one link (Trio thread): the largest recent long sample.

    A train can come out slower than the link (other traffic shares it, the
    receiving agent was descheduled, TCP was still opening its window) but,
    with the first frame left out and the lab's shaper holding no large
    bucket, hardly faster. So, as BBR does for its bottleneck bandwidth, the
    estimate is the maximum over a window: the last ``WINDOW_SAMPLES``
    samples no older than ``WINDOW_SECONDS``. A link that gets slower is
    followed once the faster samples leave the window. The one way a train
    comes out faster is a short one whose first frame was read late (2 ms
    late on a 17 ms train: +12 %), so short trains count only until a long
    one has been measured (``settled``).
    """

    WINDOW_SAMPLES = 5
    WINDOW_SECONDS = 300.0

    def __init__(self) -> None:
        self._recent: deque[tuple[float, float, bool]] = deque(maxlen=self.WINDOW_SAMPLES)
        self.measured_at: float | None = None  # time.time() of the last sample
        self.samples = 0

    def add(self, sample: BandwidthSample) -> None:
        self.samples += 1
        self.measured_at = time.time()
        self._recent.append((self.measured_at, sample.bytes_per_s, is_long(sample)))

    def _window(self) -> list[tuple[float, bool]]:
        if not self._recent:
            return []
        newest = self._recent[-1][0]
        return [(rate, long) for at, rate, long in self._recent
                if newest - at <= self.WINDOW_SECONDS]

    @property
    def settled(self) -> bool:
        """Whether a long train is among the recent samples."""
        return any(long for _, long in self._window())

    @property
    def bytes_per_s(self) -> float | None:
        window = self._window()
        if not window:
            return None
        settled = any(long for _, long in window)
        return max(rate for rate, long in window if long or not settled)

    def age(self) -> float | None:
        return None if self.measured_at is None else time.time() - self.measured_at


def frame_size(message: Message) -> int:
    """Rough wire size of a probe frame, for the meter."""
    if isinstance(message, BandwidthProbe):
        return len(message.pad) + 32
    return 0
