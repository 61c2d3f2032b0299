"""Built-in plugin: measurement operations behind ``gleam-peer bench wire``.

``bench_ping`` times control round trips over an authenticated link;
``bench_send`` pushes data-plane batches through the encrypted link and
times until the receiving agent has decrypted all of them (a ping sent after
the last batch comes back only once the peer has read everything before it).
The receiving side consumes the batches here, so nothing else sees them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gleam.peer.control import RequestError
from gleam.peer.hookspecs import hookimpl

if TYPE_CHECKING:
    from gleam.peer.agent import Agent
    from gleam.peer.link import PeerLink

BENCH_MAGIC = b"gleam-bench\x00"
MAX_BENCH_BYTES = 64 * 1024**3
MAX_PINGS = 1_000_000


def _link(agent: Agent, args: dict[str, Any]) -> PeerLink:
    peer = args.get("peer")
    if not isinstance(peer, str) or not peer:
        raise RequestError("bench: 'peer' (a node id prefix or name) is required")
    link = agent.link_to(peer)
    if link is None:
        raise RequestError(f"bench: no single authenticated peer matches {peer!r}")
    return link


def _positive_int(args: dict[str, Any], key: str, default: int, limit: int) -> int:
    value = args.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= limit:
        raise RequestError(f"bench: {key!r} must be an integer in 1..{limit}")
    return value


async def _bench_ping(agent: Agent, args: dict[str, Any]) -> dict[str, Any]:
    link = _link(agent, args)
    count = _positive_int(args, "count", 1000, MAX_PINGS)
    start = time.perf_counter()
    for _ in range(count):
        await link.ping()
    elapsed = time.perf_counter() - start
    return {"count": count, "seconds": elapsed}


async def _bench_send(agent: Agent, args: dict[str, Any]) -> dict[str, Any]:
    link = _link(agent, args)
    total = _positive_int(args, "bytes", 1 << 30, MAX_BENCH_BYTES)
    chunk = _positive_int(args, "chunk", 1 << 20, agent.config.max_frame - 1024)
    payload = BENCH_MAGIC + bytes(max(0, chunk - len(BENCH_MAGIC)))
    sent = 0
    start = time.perf_counter()
    while sent < total:
        await link.send_batch(payload)
        sent += len(payload)
    await link.ping(timeout=60.0)
    elapsed = time.perf_counter() - start
    return {"bytes": sent, "seconds": elapsed, "chunk": len(payload)}


@hookimpl
def gleam_capabilities() -> list[str]:
    return ["wire-bench"]


@hookimpl
def gleam_control_request(agent: Agent, op: str, args: dict[str, Any]) -> Any:
    if op == "bench_ping":
        return _bench_ping(agent, args)
    if op == "bench_send":
        return _bench_send(agent, args)
    return None


@hookimpl
def gleam_data_batch(agent: Agent, link: PeerLink, payload: bytes) -> bool | None:
    return True if payload[: len(BENCH_MAGIC)] == BENCH_MAGIC else None
