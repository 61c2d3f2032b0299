"""Bucketed hashes of a view, for cheap anti-entropy.

Nodes fall into buckets by a hash of their id; a bucket's hash is the XOR of
its entries' hashes, so two peers compare ``buckets`` numbers instead of whole
views, and exchange summaries only for the buckets that differ. Dead nodes are
left out of the hashes: tombstones expire at different times on different
peers and would otherwise keep views "different" with nothing to repair.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable

from gleam.peer.gossip.messages import HASH_SIZE, MAX_BUCKETS

__all__ = [
    "bucket_count",
    "bucket_hashes",
    "bucket_of",
    "node_key",
    "pack_hashes",
    "summary_hash",
    "unpack_hashes",
]


def node_key(node_id: str) -> int:
    """A stable 32-bit number for ``node_id`` that picks its bucket at any bucket count."""
    return zlib.crc32(node_id.encode())


def bucket_of(key: int, buckets: int) -> int:
    return key & (buckets - 1)


def summary_hash(summary: tuple[str, int, int, int, int]) -> int:
    """A 64-bit hash of one summary. Cryptographic on purpose: XOR-ing linear
    hashes (CRCs) lets two different views cancel out to the same bucket hash."""
    node_id, status, incarnation, peer_version, links_version = summary
    data = b"%s|%d|%d|%d|%d" % (
        node_id.encode(), status, incarnation, peer_version, links_version
    )
    return int.from_bytes(hashlib.blake2b(data, digest_size=HASH_SIZE).digest(), "big")


def bucket_count(members: int) -> int:
    """About 16 nodes a bucket, as a power of two: 1 bucket up to 16 nodes, 64 at 1000."""
    buckets = 1
    while buckets * 16 < members and buckets < MAX_BUCKETS:
        buckets *= 2
    return buckets


def bucket_hashes(entries: Iterable[tuple[int, int]], buckets: int) -> list[int]:
    """XOR of entry hashes per bucket, from (node_key, summary_hash) pairs."""
    out = [0] * buckets
    mask = buckets - 1
    for key, digest in entries:
        out[key & mask] ^= digest
    return out


def pack_hashes(hashes: list[int]) -> bytes:
    return b"".join(h.to_bytes(HASH_SIZE, "big") for h in hashes)


def unpack_hashes(data: bytes) -> list[int]:
    return [
        int.from_bytes(data[i : i + HASH_SIZE], "big") for i in range(0, len(data), HASH_SIZE)
    ]
