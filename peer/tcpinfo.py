"""The kernel's own round-trip estimate for a TCP socket (``TCP_INFO``).

The application's ping measures the network plus both agents' scheduling
(Trio, the link's threads, the GIL): milliseconds on a link that answers in a
fraction of one. The kernel times its segments against their ACKs, so its
figures are the network's. ``struct tcp_info`` (linux/tcp.h) only grows at the
end and ``getsockopt`` returns as much of it as the kernel has, so a field is
read only when the returned bytes reach it; ``tcpi_min_rtt`` came in Linux
4.10, ``tcpi_rtt``/``tcpi_rttvar`` are in every version.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

# Byte offsets of the fields we read, from linux/tcp.h (stable ABI, checked
# against the header with offsetof): u32 microseconds each.
_RTT = 68
_RTTVAR = 72
_MIN_RTT = 148
_TOTAL_RETRANS = 100
# tcpi_delivery_rate (u64, bytes/s) follows the four u32 from 148.
_DELIVERY_RATE = 160
# Ask for more than any current kernel returns; the kernel copies what it has.
_ASK = 256
# SOL_TCP option number, in the socket module from Python 3.6 on Linux only.
TCP_INFO = getattr(socket, "TCP_INFO", 11)
# The kernel reports "no sample yet" as ~0U.
_NONE_U32 = 0xFFFFFFFF


@dataclass(frozen=True)
class TcpRtt:
    """One reading of the kernel's estimate, in milliseconds.

    ``srtt_ms`` is the smoothed RTT (RFC 6298), ``rttvar_ms`` its mean
    deviation, ``min_rtt_ms`` the windowed minimum (the propagation delay:
    the kernel leaves out ACKs it suspects were delayed), None on kernels
    older than 4.10. ``delivery_rate`` is bytes/s of the last data burst,
    None where absent or not yet sampled.
    """

    srtt_ms: float
    rttvar_ms: float
    min_rtt_ms: float | None
    retransmits: int | None
    delivery_rate: int | None

    @property
    def rtt_ms(self) -> float:
        """The link's RTT for decisions: the propagation delay where the kernel
        keeps one, else the smoothed RTT."""
        return self.min_rtt_ms if self.min_rtt_ms is not None else self.srtt_ms


def _u32(raw: bytes, offset: int) -> int | None:
    if len(raw) < offset + 4:
        return None
    value: int = struct.unpack_from("=I", raw, offset)[0]
    return value


def parse_tcp_info(raw: bytes) -> TcpRtt | None:
    """Parse the bytes ``getsockopt(TCP_INFO)`` returned; None when they are too
    short to hold an RTT or hold no sample yet. Never raises on odd input."""
    srtt, rttvar = _u32(raw, _RTT), _u32(raw, _RTTVAR)
    if srtt is None or rttvar is None or srtt == 0:
        return None
    min_rtt = _u32(raw, _MIN_RTT)
    if min_rtt in (0, _NONE_U32):
        min_rtt = None
    rate = None
    if len(raw) >= _DELIVERY_RATE + 8:
        rate = struct.unpack_from("=Q", raw, _DELIVERY_RATE)[0] or None
    return TcpRtt(
        srtt_ms=srtt / 1000, rttvar_ms=rttvar / 1000,
        min_rtt_ms=None if min_rtt is None else min_rtt / 1000,
        retransmits=_u32(raw, _TOTAL_RETRANS), delivery_rate=rate,
    )


def read_tcp_rtt(sock: socket.socket) -> TcpRtt | None:
    """The kernel's estimate for ``sock`` now, or None (not TCP, closed, no
    sample yet, or a platform without ``TCP_INFO``)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, _ASK)
    except (OSError, ValueError):
        return None
    return parse_tcp_info(raw)
