"""Parsing the ``HOST:PORT`` addresses a user types."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PORT = 47470


@dataclass(frozen=True)
class PeerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0-65535")
    return port


def parse_peer_address(text: str) -> PeerAddress:
    """``host:port``, ``[v6]:port``, or a bare host (default port)."""
    text = text.strip()
    if not text:
        raise ValueError("empty peer address; expected HOST:PORT")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise ValueError(f"{text!r}: missing ']' after an IPv6 address")
        if not rest:
            return PeerAddress(host, DEFAULT_PORT)
        if not rest.startswith(":"):
            raise ValueError(f"{text!r}: expected ':PORT' after ']'")
        port = parse_port(rest[1:])
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = parse_port(port_text)
    elif ":" in text:
        raise ValueError(f"{text!r}: write IPv6 addresses as [ADDRESS]:PORT")
    else:
        host, port = text, DEFAULT_PORT
    if not host:
        raise ValueError(f"{text!r}: missing host before ':'")
    if port == 0:
        raise ValueError(f"{text!r}: a peer's port cannot be 0")
    return PeerAddress(host, port)
