"""The references of ``bench cpu``, each as CPU seconds per GB of the same bytes.

* raw TCP: a sender and a receiver process, plain blocking sockets
  (``tcp_reference``'s ``source`` and ``sink``), each timing the CPU of its own
  transfer (the interpreter's start, which a long-running agent does not pay,
  stays out);
* AES-256-GCM seal and open: the native core's own measure (``gl_crypto_gcm_rate``,
  cffi_build/src/crypto), the stream's per-frame work in the stream's pieces,
  through the libcrypto the agents' data connection loads, in this process;
* the content digest, the cache's hash: ``gl_content_digest`` (BLAKE3) over the bytes
  in copy-chunk pieces (``GL_COPY_CHUNK``, what the cache hashes at a time), this
  thread's CPU time; and SHA-256 (``gl_sha256``, OpenSSL) the same way, the hash the
  cache used before, for comparison;
* memcpy of the same pieces between buffers larger than the caches: what the
  host backend's copy into its device memory costs at least.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from gleam.peer.nativelib import ffi, lib

GB = 1e9
# Source and destination of the in-process measures: larger than any CPU cache, as
# a copy's bytes are.
BUFFER = 64 << 20


def raw_tcp(total: int, chunk: int) -> dict[str, float]:
    """Each side's CPU seconds per GB of raw TCP, sender and receiver."""
    tcp = [sys.executable, "-m", "gleam.peer.bench.tcp_reference"]
    sink = subprocess.Popen([*tcp, "sink", str(total)], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        port = sink.stdout.readline().strip()
        source = subprocess.run([*tcp, "source", "127.0.0.1", port, str(total), str(chunk)],
                                capture_output=True, text=True, check=True, timeout=600)
        received = float(sink.stdout.readline())
        sink.wait(30)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
        if sink.stdout is not None:
            sink.stdout.close()
    sent = float(source.stdout.split()[1])  # after the wall-clock seconds
    return {"sender": sent * GB / total, "receiver": received * GB / total}


def aes_gcm(total: int) -> dict[str, float]:
    """CPU seconds per GB to seal and to open ``total`` bytes in copy-chunk frames."""
    frame = int(lib.GL_COPY_CHUNK)
    seal = float(lib.gl_crypto_gcm_rate(frame, lib.GL_GCM_PIECE, total, 0))
    open_ = float(lib.gl_crypto_gcm_rate(frame, lib.GL_GCM_OPEN_PIECE, total, 1))
    if seal <= 0 or open_ <= 0:
        raise RuntimeError("the native core could not load AES-256-GCM from libcrypto")
    return {"seal": GB / seal, "open": GB / open_}


def _pieces(total: int) -> list[int]:
    piece = int(lib.GL_COPY_CHUNK)
    return [off % BUFFER for off in range(0, total, piece)]


def _hash_cost(total: int, run: Callable[[Any, int, Any], object]) -> float:
    """CPU seconds per GB of RUN(source, length, digest) over ``total`` bytes in
    copy-chunk pieces."""
    src = ffi.from_buffer(os.urandom(BUFFER))
    digest = ffi.new("uint8_t[32]")
    piece = int(lib.GL_COPY_CHUNK)
    offsets = _pieces(total)
    start = time.thread_time()
    for off in offsets:
        if run(src + off, piece, digest):
            raise RuntimeError("a hash failed in the native core")
    return (time.thread_time() - start) * GB / (len(offsets) * piece)


def content_digest(total: int) -> float:
    """CPU seconds per GB of the cache's content digest (BLAKE3)."""
    return _hash_cost(total, lib.gl_content_digest)


def sha256(total: int) -> float:
    """CPU seconds per GB of SHA-256 (OpenSSL), the cache's hash before BLAKE3."""
    return _hash_cost(total, lib.gl_sha256)


def memcpy(total: int) -> float:
    """CPU seconds per GB of memcpy of ``total`` bytes in copy-chunk pieces."""
    src = ffi.from_buffer(os.urandom(BUFFER))
    dst = ffi.new("uint8_t[]", BUFFER)
    # Touched once first: a fresh allocation's page faults are not the copy's cost (the
    # host backend's device memory is touched before the copy is timed, too).
    ffi.memmove(dst, src, BUFFER)
    piece = int(lib.GL_COPY_CHUNK)
    offsets = _pieces(total)
    start = time.thread_time()
    for off in offsets:
        ffi.memmove(dst + off, src + off, piece)
    return (time.thread_time() - start) * GB / (len(offsets) * piece)
