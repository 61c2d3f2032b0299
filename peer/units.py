"""How measured figures read wherever a user sees them: the status view, the lines
``gleam-peer run`` prints. Each keeps the precision its size needs."""

from __future__ import annotations


def rtt_text(ms: float | None) -> str:
    """A round trip: loopback and LAN links measure in microseconds, so those are
    µs, and a measured RTT never reads as 0; ``-`` while none is measured."""
    if ms is None:
        return "-"
    if ms >= 9.995:
        return f"{ms:.1f} ms"
    if ms >= 0.9995:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.0f} µs" if ms >= 0.001 else "<1 µs"


def bits_text(bits_per_s: float | None) -> str:
    """A link's rate in bits per second; ``-`` while none is measured."""
    if bits_per_s is None:
        return "-"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:.1f} {unit}"
    return f"{bits_per_s:.0f} bit/s"


def bytes_text(n: float | None) -> str:
    """A byte count in binary units."""
    if not n:
        return "0 B"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
