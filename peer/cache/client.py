"""The client agent's side of the blob cache: what each server holds, and one
session's references that the server has not yet confirmed.

``ServerKnowledge`` (one per serving node, shared by every session to it)
starts from the summary the server sends at session open and grows with each
cacheable payload sent to it. ``SessionBlobs`` runs on the session's reader
thread: it hashes each cacheable payload (in C), sends the ones the server is
known to hold as references, and keeps their bytes (the envelope the program
sent) until a later reply proves the server ran the batch. A server that
misses a reference asks for it (``cuda_blob_want``) and gets the bytes back
in a BLOB envelope; the program never sees it.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import Any

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy
from gleam.peer.cache.store import PREFIX
from gleam.peer.cuda import envelope

PENDING_CAP = 256 << 20  # bytes held for unconfirmed references, per session

# A fault knob for tests (docs/cache.md): the first N resends of this agent
# carry one flipped byte, which the server must refuse.
_corrupt_left = [int(os.environ.get("GLEAM_FAULT_CORRUPT_RESENDS", "0") or 0)]


class ServerKnowledge:
    """Digest prefixes one server is believed to hold. Thread-safe."""

    def __init__(self) -> None:
        self._prefixes: set[bytes] = set()
        self._lock = threading.Lock()

    def reset(self, summary: bytes) -> None:
        fresh = {summary[i:i + PREFIX] for i in range(0, len(summary) - PREFIX + 1, PREFIX)}
        with self._lock:
            self._prefixes = fresh

    def knows(self, digest: bytes) -> bool:
        return digest[:PREFIX] in self._prefixes

    def add(self, digest: bytes) -> None:
        with self._lock:
            self._prefixes.add(digest[:PREFIX])

    def forget(self, digest: bytes) -> None:
        with self._lock:
            self._prefixes.discard(digest[:PREFIX])

    def __len__(self) -> int:
        return len(self._prefixes)


class SessionBlobs:
    """One client session's references: substitution, confirmation, resends."""

    def __init__(self, session: int, knowledge: ServerKnowledge, policy: CachePolicy,
                 pending_cap: int = PENDING_CAP) -> None:
        self.session = session
        self.knowledge = knowledge
        self.policy = policy
        self.pending_cap = pending_cap
        self._pending: dict[bytes, tuple[memoryview, int]] = {}
        self._pending_bytes = 0
        self._sent = 0  # envelopes forwarded
        self._waiting: collections.deque[int] = collections.deque()  # their indexes
        self._lock = threading.Lock()
        self.h2d_sent = 0       # host-to-device payload bytes that went as bytes
        self.candidate_bytes = 0
        self.saved = 0          # payload bytes replaced by references
        self.refs = 0
        self.misses = 0
        self.resent = 0

    def outgoing(self, buf: memoryview) -> memoryview | bytearray:
        """The envelope to forward in place of ``buf`` (the reader thread)."""
        scan = BatchBlobs(buf[envelope.HEADER_SIZE:], self.policy, hash_inline=True)
        with self._lock:
            self._sent += 1
            index = self._sent
            if scan.waits:
                self._waiting.append(index)
        self.h2d_sent += scan.h2d_inline
        substitute = []
        for i, seen in enumerate(scan.items):
            if seen.is_ref:
                continue
            self.candidate_bytes += seen.length
            if self.knowledge.knows(seen.digest) and self._hold(seen.digest, buf, seen, index):
                substitute.append(i)
            else:
                self.knowledge.add(seen.digest)  # the server keeps what it receives
        if not substitute:
            return buf
        out = scan.rewrite(substitute, headroom=envelope.HEADER_SIZE)
        for i in substitute:
            seen = scan.items[i]
            self.refs += 1
            self.saved += seen.length
            if seen.call_id == _H2D:
                self.h2d_sent -= seen.length
        envelope.write_header(out, envelope.BATCH, 0, len(out) - envelope.HEADER_SIZE)
        return out

    def _hold(self, digest: bytes, buf: memoryview, seen: Any, index: int) -> bool:
        start = envelope.HEADER_SIZE + seen.offset
        with self._lock:
            old = self._pending.get(digest)
            if old is None and self._pending_bytes + seen.length > self.pending_cap:
                return False
            if old is None:
                self._pending_bytes += seen.length
            self._pending[digest] = (buf[start:start + seen.length], index)
        return True

    def awaiting_reply(self) -> bool:
        """Whether a reply would confirm blobs (so replies must come through Python)."""
        return bool(self._waiting)

    def replied(self) -> None:
        """A reply came back: the server ran every batch up to the oldest waiting one."""
        with self._lock:
            if not self._waiting:
                return
            done = self._waiting.popleft()
            for digest in [d for d, (_b, i) in self._pending.items() if i <= done]:
                data, _i = self._pending.pop(digest)
                self._pending_bytes -= len(data)

    def resend(self, digest: bytes) -> bytes | None:
        """A BLOB envelope with the bytes of a reference the server missed."""
        with self._lock:
            held = self._pending.get(digest)
        if held is None:
            return None
        data: bytes | memoryview = held[0]
        with self._lock:
            corrupt = _corrupt_left[0] > 0
            if corrupt:
                _corrupt_left[0] -= 1
        if corrupt and len(data):
            data = bytes([data[0] ^ 0xFF]) + bytes(data[1:])
        self.misses += 1
        self.resent += len(data)
        self.knowledge.add(digest)
        return blob_envelope(self.session, digest, data)

    def row(self) -> dict[str, Any]:
        return {
            "h2d_sent": self.h2d_sent, "bytes_saved": self.saved, "refs": self.refs,
            "ref_misses": self.misses, "bytes_resent": self.resent,
            "hit_rate": self.saved / self.candidate_bytes if self.candidate_bytes else None,
        }


def blob_envelope(session: int, digest: bytes, data: bytes | memoryview) -> bytes:
    """BLOB: ``digest(32) | bytes``, data plane, client agent to server."""
    body_len = len(digest) + len(data)
    return envelope.pack_header(envelope.BLOB, session, body_len) + digest + bytes(data)


def _h2d_id() -> int:
    from gleam.peer.cuda.native import call_ids

    return call_ids()["glMemcpyHtoD"]


_H2D = _h2d_id()
