"""Tensor maps (Hopper's TMA descriptors) on the server: the executor's checks, the host
device's rules and layout, and the cuda backend's unpacking (a stand-in driver), through
real batches. ``examples/cuda/tensor_maps.py`` runs them end to end
(tests/test_cuda_bindings.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native

from .cuda_session import Session, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session

INVALID_VALUE, NOT_SUPPORTED = 1, 801
TILED, IM2COL, WIDE, REPLACE = 1, 2, 3, 4
FLOAT32, FLOAT16, UINT32 = 7, 6, 2
MAGIC = 0x4D544C47
# gl_tmap_request (cffi_build/include/gl_tensormap.h): no padding, 312 bytes.
REQUEST = struct.Struct("<8IQ5Q4Q5I5I3i3i2I128s")
assert REQUEST.size == 312


def request(kind: int = TILED, dtype: int = FLOAT32, address: int = 0,
            dims: tuple[int, ...] = (64, 32), strides: tuple[int, ...] = (256,),
            box: tuple[int, ...] = (16, 16), estrides: tuple[int, ...] | None = None,
            interleave: int = 0, swizzle: int = 0, l2: int = 0, oob: int = 0, mode: int = 0,
            lower: tuple[int, ...] = (), upper: tuple[int, ...] = (), channels: int = 0,
            pixels: int = 0, tmap: bytes = b"", rank: int | None = None) -> bytes:
    def pad(values: tuple[int, ...], n: int) -> list[int]:
        return [*values, *[0] * (n - len(values))]

    rank = len(dims) if rank is None else rank
    estrides = (1,) * len(dims) if estrides is None else estrides
    return REQUEST.pack(kind, dtype, rank, interleave, swizzle, l2, oob, mode, address,
                        *pad(dims, 5), *pad(strides, 4), *pad(box, 5), *pad(estrides, 5),
                        *pad(lower, 3), *pad(upper, 3), channels, pixels, tmap)


def encode(s: Session, payload: bytes) -> tuple[int, bytes]:
    r = s.run(rec("glTensorMapEncode", len(payload), payload=payload))
    assert r is not None
    return r[0], r[3]


@pytest.fixture
def s():
    be = native.HostBackend({}, memory_limit=1 << 26)
    sess = Session(be)
    sess.context()
    yield sess
    sess.close()
    be.close()


def test_the_host_device_writes_its_own_layout(s):
    d = s.alloc(1 << 16)
    err, tmap = encode(s, request(address=d))
    assert err == 0 and len(tmap) == 128
    magic, kind, dtype, rank = struct.unpack_from("<I3B", tmap)
    assert (magic, kind, dtype, rank) == (MAGIC, TILED, FLOAT32, 2)
    assert struct.unpack_from("<Q", tmap, 16)[0] == d
    assert struct.unpack_from("<2I", tmap, 24) == (64, 32)
    assert struct.unpack_from("<Q", tmap, 48)[0] == 256
    assert struct.unpack_from("<2H", tmap, 80) == (16, 16)


def test_replacing_an_address_keeps_the_rest_of_the_map(s):
    d = s.alloc(1 << 16)
    _, tmap = encode(s, request(address=d))
    err, moved = encode(s, request(REPLACE, address=d + 4096, tmap=tmap))
    assert err == 0 and struct.unpack_from("<Q", moved, 16)[0] == d + 4096
    assert moved[:16] == tmap[:16] and moved[24:] == tmap[24:]
    forged = b"\0" * 128
    assert encode(s, request(REPLACE, address=d, tmap=forged))[0] == INVALID_VALUE
    assert encode(s, request(REPLACE, address=d + 8, tmap=tmap))[0] == INVALID_VALUE
    outside = s.x.va_base + (1 << 29)
    assert encode(s, request(REPLACE, address=outside, tmap=tmap))[0] == INVALID_VALUE
    # The whole tensor (8 KiB) must fit at the new start, not only its first byte.
    assert encode(s, request(REPLACE, address=d + (1 << 16) - 4096, tmap=tmap))[0] \
        == INVALID_VALUE


def test_rules_that_depend_on_the_type_the_form_or_the_interleave(s):
    d = s.alloc(1 << 16)
    packed = dict(address=d, dtype=15, dims=(128, 32), strides=(256,), box=(128, 16))
    assert encode(s, request(swizzle=3, **packed))[0] == 0
    assert encode(s, request(swizzle=5, **packed))[0] == INVALID_VALUE  # not for 16U6
    # The two ALIGN16B types take a byte per element: 256 of them need 256 bytes.
    assert encode(s, request(**{**packed, "dims": (256, 1), "strides": (256,),
                                "box": (128, 1), "address": d + (1 << 16) - 224}))[0] \
        == INVALID_VALUE
    # Without interleave the first element stride is ignored, as TMA has none there.
    assert encode(s, request(address=d, estrides=(0, 1)))[0] == 0
    wide = dict(address=d, dtype=FLOAT16, dims=(32, 8, 8, 2), strides=(64, 512, 4096), box=(),
                channels=32, pixels=64, lower=(-1,), upper=(-1,))
    assert encode(s, request(WIDE, swizzle=2, **wide))[0] == 0
    assert encode(s, request(WIDE, swizzle=0, **wide))[0] == INVALID_VALUE  # 64B and up only
    # W128 mode ignores the pixels per column; W mode needs 1 to 1024.
    assert encode(s, request(WIDE, swizzle=2, mode=1, **{**wide, "pixels": 0}))[0] == 0
    assert encode(s, request(WIDE, swizzle=2, mode=0, **{**wide, "pixels": 0}))[0] \
        == INVALID_VALUE


def test_im2col_and_its_wide_form(s):
    d = s.alloc(1 << 16)
    nhwc = dict(dtype=FLOAT16, address=d, dims=(64, 8, 8, 2), strides=(128, 1024, 8192), box=(),
                swizzle=3, channels=64, pixels=64)
    assert encode(s, request(IM2COL, lower=(-1, -1), upper=(-1, -1), **nhwc))[0] == 0
    assert encode(s, request(IM2COL, lower=(-129, -1), upper=(-1, -1), **nhwc))[0] \
        == INVALID_VALUE
    assert encode(s, request(WIDE, lower=(-1,), upper=(-1,), **nhwc))[0] == 0
    assert encode(s, request(WIDE, lower=(-1,), upper=(-1,), mode=2, **nhwc))[0] == INVALID_VALUE
    assert encode(s, request(IM2COL, **{**nhwc, "channels": 257}))[0] == INVALID_VALUE
    assert encode(s, request(IM2COL, **{**nhwc, "pixels": 1025}))[0] == INVALID_VALUE
    flat = dict(nhwc, dims=(64, 8), strides=(128,))
    assert encode(s, request(IM2COL, **flat))[0] == INVALID_VALUE  # im2col needs rank 3+


# One of NVIDIA's rules broken each (cuda.h, CUDA 13.0), from a tiled request that passes.
BROKEN = {
    "unaligned start": dict(address_offset=8),
    "type past the last": dict(dtype=16),
    "rank 0": dict(rank=0),
    "rank 6": dict(rank=6),
    "zero dimension": dict(dims=(64, 0)),
    "stride not a multiple of 16": dict(strides=(200,)),
    "stride of 2^40": dict(strides=(1 << 40,)),
    "box of 257": dict(box=(16, 257)),
    "box of 0": dict(box=(16, 0)),
    "box row not 16 bytes": dict(box=(2, 16)),
    "element stride 9": dict(estrides=(1, 9)),
    "element stride 0": dict(estrides=(1, 0)),
    "interleave past the last": dict(interleave=3),
    "interleave on rank 2": dict(interleave=1),
    "swizzle past the last": dict(swizzle=7),
    "swizzle span below the box row": dict(swizzle=1),
    "L2 promotion past the last": dict(l2=4),
    "NaN fill of integers": dict(dtype=UINT32, oob=1),
    "fill past the last": dict(oob=2),
    "32-byte interleave without its swizzle": dict(
        dims=(8, 8, 8), strides=(32, 256), box=(8, 8, 8), interleave=2),
    "packed type with a dimension not of 128": dict(dtype=15, box=(128, 16), strides=(256,)),
}


@pytest.mark.parametrize("case", BROKEN)
def test_each_rule_broken_is_invalid_value(s, case):
    d = s.alloc(1 << 16)
    args = dict(BROKEN[case])
    offset = args.pop("address_offset", 0)
    assert encode(s, request(address=d))[0] == 0
    assert encode(s, request(address=d + offset, **args))[0] == INVALID_VALUE


def test_the_memory_a_map_names_must_be_the_sessions(s):
    d = s.alloc(1 << 13)  # 8 KiB: 32 rows of 256 bytes fit, 33 do not
    assert encode(s, request(address=d))[0] == 0
    assert encode(s, request(address=d, dims=(64, 33)))[0] == INVALID_VALUE
    assert encode(s, request(address=s.x.va_base + (1 << 29)))[0] == INVALID_VALUE
    # Dimensions whose extent wraps 64 bits are refused, not wrapped past the check.
    huge = request(address=d, dims=(64, 1 << 32, 1 << 32), strides=(256, (1 << 40) - 16),
                   box=(16, 16, 16))
    assert encode(s, huge)[0] == INVALID_VALUE


def test_malformed_requests(s):
    d = s.alloc(1 << 16)
    good = request(address=d)
    assert encode(s, good[:-1])[0] == INVALID_VALUE
    assert encode(s, good + b"\0")[0] == INVALID_VALUE
    for kind in (0, 5, 0xFFFFFFFF):
        assert encode(s, request(kind, address=d))[0] == INVALID_VALUE


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=REQUEST.size, max_size=REQUEST.size), reach=st.booleans())
def test_fuzzed_requests_never_crash(s, data, reach):
    if not hasattr(s, "fuzz_base"):
        s.fuzz_base = s.alloc(1 << 20)
    fields = list(REQUEST.unpack(data))
    if reach:  # a known kind, a small rank and the session's memory: the rules are reached
        fields[0], fields[2] = 1 + fields[0] % 4, fields[2] % 7
        fields[8] = s.fuzz_base + fields[8] % (1 << 20)
    err, tmap = encode(s, REQUEST.pack(*fields))
    assert err in (0, INVALID_VALUE)
    assert len(tmap) == (128 if err == 0 else 0)


# The stand-in driver writes what it was given into the map, so the test reads back how
# the cuda backend unpacked the request; and it refuses a map that is not 64-byte aligned,
# as NVIDIA documents.
TENSORMAP_DRIVER = r"""
static int tm_check(void *m) { return ((uintptr_t)m % 64) ? 1 : 0; }
CUresult cuTensorMapEncodeTiled(uint64_t *m, int dt, unsigned rank, void *a, const uint64_t *dim,
                                const uint64_t *st, const unsigned *box, const unsigned *es,
                                int il, int sw, int l2, int oob) {
    if (tm_check(m)) return 1;
    memset(m, 0, 128);
    m[0] = (uint64_t)(uintptr_t)a;
    m[1] = dt | rank << 8 | il << 16 | sw << 20 | l2 << 24 | (uint64_t)oob << 28;
    for (unsigned i = 0; i < rank; i++) {
        m[2 + i] = dim[i];
        m[7 + i] = box[i] | (uint64_t)es[i] << 32;
    }
    for (unsigned i = 0; i + 1 < rank; i++) m[12 + i] = st[i];
    return 0;
}
CUresult cuTensorMapEncodeIm2col(uint64_t *m, int dt, unsigned rank, void *a, const uint64_t *dim,
                                 const uint64_t *st, const int *lo, const int *up, unsigned c,
                                 unsigned p, const unsigned *es, int il, int sw, int l2, int oob) {
    if (tm_check(m)) return 1;
    memset(m, 0, 128);
    m[0] = (uint64_t)(uintptr_t)a;
    m[1] = (uint64_t)(uint32_t)lo[rank - 3] | (uint64_t)(uint32_t)up[0] << 32;
    m[2] = c | (uint64_t)p << 32;
    return 0;
}
CUresult cuTensorMapReplaceAddress(uint64_t *m, void *a) {
    if (tm_check(m)) return 1;
    m[0] = (uint64_t)(uintptr_t)a;
    return 0;
}
"""


@needs_gcc
def test_the_cuda_backend_hands_the_driver_every_argument(tmp_path):
    so, _ = build_stand_in(tmp_path, TENSORMAP_DRIVER, "")
    with stand_in_session(so) as s:
        unpacks_each_kind(s)


def unpacks_each_kind(s: Session) -> None:
    d = s.x.va_base
    s.run(rec("glMemAlloc", d, 1 << 16))
    err, tmap = encode(s, request(address=d, dims=(64, 32, 4), strides=(256, 8192),
                                  box=(16, 8, 2), estrides=(1, 2, 1), swizzle=2, l2=3, oob=1))
    words = struct.unpack("<16Q", tmap)
    assert err == 0 and words[0] == d
    assert words[1] == FLOAT32 | 3 << 8 | 2 << 20 | 3 << 24 | 1 << 28
    assert words[2:5] == (64, 32, 4) and words[12:14] == (256, 8192)
    assert words[7:10] == (16 | 1 << 32, 8 | 2 << 32, 2 | 1 << 32)
    err, tmap = encode(s, request(IM2COL, address=d, dims=(64, 8, 8, 2), strides=(128, 1024, 8192),
                                  lower=(-1, -3), upper=(-2, -1), channels=64, pixels=32,
                                  dtype=FLOAT16))
    words = struct.unpack("<16Q", tmap)
    assert err == 0 and words[1] == (-3 & 0xFFFFFFFF) | (-2 & 0xFFFFFFFF) << 32
    assert words[2] == 64 | 32 << 32
    err, moved = encode(s, request(REPLACE, address=d + 256, tmap=tmap))
    assert err == 0 and moved[8:] == tmap[8:] and struct.unpack_from("<Q", moved)[0] == d + 256
    # The stand-in lacks the wide form: the call is not supported, nothing else breaks.
    wide = request(WIDE, address=d, dims=(64, 8, 8, 2), strides=(128, 1024, 8192), channels=64,
                   pixels=32, dtype=FLOAT16)
    assert encode(s, wide)[0] == NOT_SUPPORTED
    assert encode(s, request(address=d + (1 << 16)))[0] == INVALID_VALUE  # checked first
