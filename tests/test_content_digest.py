"""The blob cache's content digest (cffi_build/src/cache/digest.c) is BLAKE3.

Every implementation this CPU can run (AVX-512, AVX2, portable C) is checked against the
``blake3`` package (the BLAKE3 team's Rust code) at the sizes where the tree changes shape
(blocks, chunks, the vector width, the subtree the lanes hash at once) and at random sizes
and offsets; the disk tier deletes files named by an older digest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.cache.blobs import DIGEST_KINDS, content_digest, digest_kind, digest_using
from gleam.peer.cache.disktier import FORMAT, FORMAT_FILE, DiskTier
from gleam.peer.nativelib import lib

BLOCK, CHUNK = 64, 1024
# A block, a chunk, a vector's chunks (4, 8, 16), a subtree (256 chunks), and past them.
EDGES = sorted({0, 1, BLOCK - 1, BLOCK, BLOCK + 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK,
                2 * CHUNK + 1, 3 * CHUNK, *(n * CHUNK + d for n in (4, 8, 16, 17, 31, 32, 33)
                                            for d in (-1, 0, 1)),
                *(n * CHUNK + d for n in (255, 256, 257, 512, 513) for d in (-1, 0, 1)),
                (1 << 20) + 7})
DATA = os.urandom(max(EDGES) + 64)


@pytest.fixture(params=DIGEST_KINDS)
def kind(request) -> Iterator[str]:
    with digest_using(request.param) as runs:
        if not runs:
            pytest.skip(f"this CPU cannot run the {request.param} digest")
        yield request.param


def test_the_empty_input_has_blake3s_published_digest():
    assert content_digest(b"").hex() == (
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262")


def test_every_implementation_is_blake3_where_the_tree_changes_shape(kind):
    wrong = [n for n in EDGES
             if content_digest(DATA[:n]) != blake3.blake3(DATA[:n]).digest()]
    assert wrong == []


@settings(max_examples=40, deadline=None)
@given(length=st.integers(0, 300 * CHUNK), offset=st.integers(0, 63), seed=st.integers(0, 255))
def test_any_length_at_any_alignment_is_blake3(length, offset, seed):
    data = bytes((seed + i * 131) & 0xFF for i in range(64)) * ((length + offset) // 64 + 1)
    view = memoryview(data)[offset:offset + length]
    for name in DIGEST_KINDS:
        with digest_using(name) as runs:
            if runs:
                assert content_digest(view) == blake3.blake3(view).digest(), name


def test_one_changed_byte_changes_the_digest():
    data = bytearray(DATA[:300 * CHUNK])
    before = content_digest(data)
    data[257 * CHUNK + 3] ^= 1
    assert content_digest(data) != before


def test_an_unknown_or_unsupported_implementation_is_refused_and_nothing_changes():
    before = digest_kind()
    assert lib.gl_content_digest_use(b"sha256") == -1
    assert lib.gl_content_digest_use(b"") == -1
    assert digest_kind() == before


def test_the_widest_implementation_the_cpu_has_is_the_default():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    usable = []
    for k in DIGEST_KINDS:
        with digest_using(k) as runs:
            usable += [k] * runs
    assert usable[-1] == "portable"
    if " avx512f" in flags:
        assert "avx512" in usable
    assert digest_kind() == usable[0]  # the default, restored by digest_using


def test_a_disk_tier_of_sha256_names_is_emptied_and_marked_at_start(tmp_path):
    old = DATA[:5000]
    name = hashlib.sha256(old).hexdigest()
    for base in (tmp_path, tmp_path / "probation"):
        (base / name[:2]).mkdir(parents=True)
        (base / name[:2] / name).write_bytes(old)
    tier = DiskTier(tmp_path, 1 << 20, 0.25)
    assert tier.load() == []
    assert tier.bytes == {"disk_probation": 0, "disk": 0}
    assert not any(p.is_file() for d in (tmp_path, tmp_path / "probation")
                   for p in d.glob("??/*"))
    assert (tmp_path / FORMAT_FILE).read_text() == FORMAT

    # a marker of another format, or of junk, is not this one
    for marker in (b"gleam blob cache: files named by SHA-256\n", b"\xff\xfe\x00junk"):
        (tmp_path / name[:2] / name).write_bytes(old)
        (tmp_path / FORMAT_FILE).write_bytes(marker)
        DiskTier(tmp_path, 1 << 20, 0.25).load()
        assert not (tmp_path / name[:2] / name).exists()
        assert (tmp_path / FORMAT_FILE).read_text() == FORMAT

    # a tier already in this format keeps its files
    digest = content_digest(old).hex()
    (tmp_path / digest[:2]).mkdir(exist_ok=True)
    (tmp_path / digest[:2] / digest).write_bytes(old)
    again = DiskTier(tmp_path, 1 << 20, 0.25)
    again.load()
    assert again.read(bytes.fromhex(digest), "disk", len(old)) == old
