"""The kernel's RTT estimate: the documented struct layout, short structs, odd bytes,
and a real socket."""

import socket
import struct

from hypothesis import given
from hypothesis import strategies as st

from gleam.peer.tcpinfo import parse_tcp_info, read_tcp_rtt


def tcp_info(size: int, rtt_us: int, rttvar_us: int, min_rtt_us: int = 0,
             delivery: int = 0) -> bytes:
    raw = bytearray(232)  # sizeof(struct tcp_info) in linux 6.x headers
    struct.pack_into("=II", raw, 68, rtt_us, rttvar_us)
    struct.pack_into("=I", raw, 148, min_rtt_us)
    struct.pack_into("=Q", raw, 160, delivery)
    return bytes(raw[:size])


def test_fields_are_read_at_their_documented_offsets():
    reading = parse_tcp_info(tcp_info(232, 3512, 401, 3017, 12_500_000))
    assert reading is not None
    assert (reading.srtt_ms, reading.rttvar_ms, reading.min_rtt_ms) == (3.512, 0.401, 3.017)
    assert reading.delivery_rate == 12_500_000
    assert reading.rtt_ms == 3.017  # the propagation RTT is the link's RTT


def test_an_older_kernels_shorter_struct_falls_back_to_the_smoothed_rtt():
    # Linux 4.9 and older stop before tcpi_min_rtt (offset 148).
    reading = parse_tcp_info(tcp_info(104, 2000, 500, 1500))
    assert reading is not None
    assert reading.min_rtt_ms is None and reading.delivery_rate is None
    assert reading.rtt_ms == 2.0


def test_no_sample_yet_or_a_truncated_struct_is_none():
    assert parse_tcp_info(tcp_info(232, 0, 0)) is None
    assert parse_tcp_info(tcp_info(70, 2000, 500)) is None
    assert parse_tcp_info(b"") is None


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(raw):
    reading = parse_tcp_info(raw)
    assert reading is None or reading.srtt_ms > 0


def test_a_connected_socket_has_a_kernel_rtt():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        for _ in range(5):
            client.sendall(b"x")
            peer.recv(1)
            peer.sendall(b"y")
            client.recv(1)
        reading = read_tcp_rtt(client)
        assert reading is not None and reading.min_rtt_ms is not None
        # The windowed minimum never exceeds the smoothed figure's samples.
        assert 0 < reading.min_rtt_ms <= reading.srtt_ms + reading.rttvar_ms * 4
        assert reading.rtt_ms == reading.min_rtt_ms
    finally:
        for s in (client, peer, server):
            s.close()
    assert read_tcp_rtt(client) is None  # closed: no reading, no exception


def test_a_udp_socket_has_none():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert read_tcp_rtt(udp) is None
