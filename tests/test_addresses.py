import pytest

from gleam.peer.addresses import DEFAULT_PORT, PeerAddress, parse_peer_address


@pytest.mark.parametrize(
    "text, expected",
    [
        ("10.0.0.2:7000", PeerAddress("10.0.0.2", 7000)),
        ("desk.local", PeerAddress("desk.local", DEFAULT_PORT)),
        ("[::1]:9", PeerAddress("::1", 9)),
        ("[fe80::1]", PeerAddress("fe80::1", DEFAULT_PORT)),
    ],
)
def test_parses(text, expected):
    assert parse_peer_address(text) == expected


@pytest.mark.parametrize("text", ["", "host:", ":80", "h:99999", "h:x", "::1:80", "[::1", "h:0"])
def test_rejects(text):
    with pytest.raises(ValueError):
        parse_peer_address(text)


def test_str_round_trips():
    for text in ("a:1", "[::1]:2"):
        assert str(parse_peer_address(text)) == text
