"""CUDA arrays, texture and surface objects on the host device, in-process through the
executor: every sampling mode against values computed by hand (the rules of CUDA's
programming guide, "Texture Fetching", and the PTX ISA), copies to and from arrays,
surfaces with each boundary mode, queries, and the refusals. The kernels are
tests/ptx_textures/textures.cu, run from their committed PTX."""

from __future__ import annotations

import shutil
import struct
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native
from gleam.peer.nativelib import ffi, lib

from .cuda_arrays import (
    ARRAY,
    BORDER,
    CLAMP,
    CUBEMAP,
    FLOAT,
    GATHER,
    HALF,
    LAYERED,
    LINEAR,
    MIPMAP,
    MIRROR,
    NORMALIZED,
    POINT,
    READ_AS_INTEGER,
    RES_ARRAY,
    RES_LINEAR,
    RES_MIPMAP,
    RES_PITCH2D,
    S8,
    S16,
    S32,
    SRGB,
    SURFACE,
    SURFOBJ,
    TEXOBJ,
    TEXTURES_PTX,
    U8,
    U16,
    U32,
    WRAP,
    Textures,
    desc_bytes,
    q,
)
from .cuda_session import Session, mint, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session

INVALID_VALUE, INVALID_HANDLE, NOT_SUPPORTED = 1, 400, 801
ILLEGAL_ADDRESS, MISALIGNED, LAUNCH_FAILED = 700, 716, 719


def tier_stats() -> tuple[int, int]:
    """Blocks run so far in this process: (compiled, interpreted)."""
    st = ffi.new("gl_ptx_tier_stats *")
    lib.gl_ptx_tier_get_stats(st)
    return int(st.blocks_compiled), int(st.blocks_interpreted)


@pytest.fixture(params=["interpreted", "compiled"])
def t(request, monkeypatch):
    """A session on the host device; every test runs on both of its tiers (compiled: each
    kernel compiled before its first launch; lookups run by their handlers there)."""
    if request.param == "compiled":
        monkeypatch.setenv("GLEAM_PTX_JIT", "wait")
        monkeypatch.setenv("GLEAM_PTX_JIT_AFTER", "0")
    be = native.HostBackend({}, memory_limit=1 << 27)
    s = Session(be, 1 << 26)
    s.context()
    yield Textures(s)
    s.close()
    be.close()


def f32(rows: np.ndarray) -> np.ndarray:
    return rows.view(np.float32)


def texture2d(t: Textures, data: np.ndarray, fmt: int = FLOAT, channels: int = 1,
              array_flags: int = 0, **tex: object) -> int:
    """A 2D array holding data (rows of texels) and a texture object over it."""
    h, w = data.shape[:2]
    a, _ = t.array(desc_bytes(w, h, 0, fmt, channels, array_flags))
    t.upload(a, data[None])
    r, value = t.texture({"res_type": RES_ARRAY, "resource": a}, tex)
    assert r == 0
    return value


def texture1d(t: Textures, data: np.ndarray, fmt: int = FLOAT, **tex: object) -> int:
    a, _ = t.array(desc_bytes(data.shape[0], 0, 0, fmt, 1))
    t.upload(a, data[None, None])
    r, value = t.texture({"res_type": RES_ARRAY, "resource": a}, tex)
    assert r == 0
    return value


def quantized(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear filtering's texel pair and weight: xB = x - 0.5 in 1.8 fixed point."""
    fixed = np.rint((np.asarray(x, np.float64) - 0.5) * 256.0)
    i0 = np.floor(fixed / 256.0).astype(np.int64)
    return i0, ((fixed - i0 * 256) / 256.0).astype(np.float32)


# ------------------------------------------------------------------ arrays and copies


def test_the_committed_ptx_is_nvccs():
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    done = subprocess.run([nvcc, "-ptx", "-o", "-", str(TEXTURES_PTX.with_suffix(".cu"))],
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == TEXTURES_PTX.read_bytes(), "rebuild tests/ptx_textures/textures.ptx"


def test_copies_in_and_out_of_a_3d_array_by_slices_and_boxes(t):
    data = np.arange(5 * 4 * 6, dtype=np.float32).reshape(5, 4, 6)  # depth, height, width
    a, storage = t.array(desc_bytes(6, 4, 5, FLOAT))
    t.upload(a, data)
    # the host layout: dense rows and slices at the storage
    assert np.array_equal(np.frombuffer(t.s.dtoh(storage, data.nbytes), np.float32),
                          data.ravel())
    # a box: x 2..5 (bytes 8..20), rows 1..3 of slice 4
    r, got = t.download(a, 12, 2, x=8, y=1, z=4)
    assert r == 0 and np.array_equal(np.frombuffer(got, np.float32).reshape(2, 3),
                                     data[4, 1:3, 2:5])
    # device <-> array with a device pitch, and array -> array
    dev = t.s.alloc(64 * 4)
    assert t.s.run(rec("glMemcpyAtoD", dev, 64, a, 4, 0, 2, 16, 4, 0)) is None
    rows = np.frombuffer(t.s.dtoh(dev, 64 * 4), np.uint8).reshape(4, 64)[:, :16]
    assert np.array_equal(rows.copy().view(np.float32), data[2, :, 1:5])
    b, _ = t.array(desc_bytes(6, 4, 5, FLOAT))
    assert t.s.run(rec("glMemcpyAtoA", b, 0, 0, 3, a, 0, 0, 1, 24, 4, 0)) is None
    assert t.s.run(rec("glMemcpyDtoA", b, 8, 2, 0, dev, 64, 16, 2, 0)) is None
    r, got = t.download(b, 24, 4, z=3)
    assert r == 0 and np.array_equal(np.frombuffer(got, np.float32).reshape(4, 6), data[1])
    r, got = t.download(b, 16, 2, x=8, y=2, z=0)
    assert r == 0 and np.array_equal(np.frombuffer(got, np.float32).reshape(2, 4),
                                     data[2, 0:2, 1:5])
    assert t.s.sync() == (0, 0)


@pytest.mark.parametrize("box", [
    (0, 0, 0, 28, 1),   # a row wider than the array
    (4, 0, 0, 24, 1),   # x + width past the row
    (0, 3, 0, 24, 2),   # rows past the height
    (0, 0, 5, 24, 1),   # a slice past the depth
])
def test_copies_outside_an_array_are_refused(t, box):
    a, _ = t.array(desc_bytes(6, 4, 5, FLOAT))
    x, y, z, width, height = box
    r, _ = t.download(a, width, height, x=x, y=y, z=z)
    assert r == INVALID_VALUE
    payload = bytes(width * height)
    assert t.s.run(rec("glMemcpyHtoA", a, x, y, z, width, height, 0, payload=payload)) is None
    assert t.s.sync() == (0, INVALID_VALUE)


def test_descriptors_the_server_refuses(t):
    storage = t.s.alloc(4096)
    for desc in (desc_bytes(0, 4), desc_bytes(4, 0, 3),               # no width; 1D with depth
                 desc_bytes(4, 4, 5, flags=CUBEMAP),                   # a cubemap of 5 faces
                 desc_bytes(4, 4, fmt=0x50),                            # a packed format
                 desc_bytes(4, 4, channels=3),                          # three channels
                 desc_bytes(1 << 18, 1),                                # too wide
                 desc_bytes(4, 4, levels=2)):                           # levels for an array
        assert t.s.run(rec("glArrayCreate", mint(ARRAY), len(desc), storage, payload=desc)) is None
        assert t.s.sync() == (0, INVALID_VALUE), desc
    big = desc_bytes(64, 64)  # 16 KiB does not fit the 4 KiB storage
    assert t.s.run(rec("glArrayCreate", mint(ARRAY), len(big), storage, payload=big)) is None
    assert t.s.sync() == (0, INVALID_VALUE)
    bad = desc_bytes(8, 8, levels=5)  # 8x8 has 4 levels
    assert t.s.run(rec("glMipmapCreate", mint(MIPMAP), len(bad), storage, payload=bad)) is None
    assert t.s.sync() == (0, INVALID_VALUE)
    no_storage = desc_bytes(4, 4)  # the host device keeps arrays in session memory
    assert t.s.run(rec("glArrayCreate", mint(ARRAY), len(no_storage), 0,
                       payload=no_storage)) is None
    assert t.s.sync() == (0, INVALID_VALUE)


# ------------------------------------------------------------------------ sampling


def test_plain_lookups_run_compiled_on_the_compiled_tier(t, request):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    tex = texture2d(t, data, address=[CLAMP] * 3, filter=POINT)
    before = tier_stats()
    got = f32(t.lookup("fetch2d", tex, np.array([[1.5, 2.5]], np.float32)))
    compiled, interpreted = (a - b for a, b in zip(tier_stats(), before, strict=True))
    assert got[0, 0] == 9
    if request.node.callspec.params["t"] == "compiled":
        assert compiled > 0 and interpreted == 0
    else:
        assert compiled == 0 and interpreted > 0


def test_point_sampling_with_unnormalized_coordinates_clamps_or_reads_the_border(t):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    clamp = texture2d(t, data, address=[CLAMP] * 3, filter=POINT)
    border = texture2d(t, data, address=[BORDER] * 3, filter=POINT, border=[7.5, 1, 2, 3])
    wrap = texture2d(t, data, address=[WRAP] * 3, filter=POINT)  # unnormalized: as clamp
    coords = np.array([[0.5, 0.5], [1.99, 2.2], [3.9, 1.0], [-1, 7], [4.0, 0.2]], np.float32)
    want = np.array([0, 9, 7, 8, 3], np.float32)
    got = f32(t.lookup("fetch2d", clamp, coords))
    assert np.array_equal(got[:, 0], want)
    assert np.array_equal(got[:, 1:], np.tile([0, 0, 1], (5, 1)))  # missing channels
    assert np.array_equal(f32(t.lookup("fetch2d", wrap, coords))[:, 0], want)
    got = f32(t.lookup("fetch2d", border, coords))
    assert np.array_equal(got[:3, 0], want[:3])
    assert np.array_equal(got[3:], [[7.5, 1, 2, 3]] * 2)


@pytest.mark.parametrize("mode", [WRAP, MIRROR, CLAMP, BORDER])
def test_normalized_coordinates_in_each_address_mode(t, mode):
    n = 8
    data = (np.arange(n, dtype=np.float32) + 1) * 10
    value = texture1d(t, data, address=[mode] * 3, filter=POINT, flags=NORMALIZED)
    x = np.array([0.01, 0.49, 0.99, 1.3, 2.6, -0.2, -1.7, 3.99], np.float32)
    got = f32(t.lookup("fetch1d", value, x))[:, 0]
    if mode == WRAP:  # frac(x)
        u = x - np.floor(x)
    elif mode == MIRROR:  # frac(x) when floor(x) is even, else 1 - frac(x)
        fl = np.floor(x)
        u = np.where(fl % 2 == 0, x - fl, 1 - (x - fl))
    else:
        u = x
    i = np.floor(u * n).astype(int)
    if mode == BORDER:
        want = np.where((i < 0) | (i >= n), 0.0, data[np.clip(i, 0, n - 1)])
    else:
        want = data[np.clip(i, 0, n - 1)]
    assert np.array_equal(got, want.astype(np.float32))


def test_linear_filtering_blends_with_weights_of_eight_fractional_bits(t):
    data = np.array([0.0, 1.0, 3.0, 7.0], np.float32)
    value = texture1d(t, data, address=[CLAMP] * 3, filter=LINEAR)
    x = np.array([0.5, 1.0, 0.8, 1.3004, 2.1234, 3.75, -2.0, 9.0], np.float32)
    i0, a = quantized(x)
    lo, hi = data[np.clip(i0, 0, 3)], data[np.clip(i0 + 1, 0, 3)]
    want = (1 - a) * lo + a * hi
    got = f32(t.lookup("fetch1d", value, x))[:, 0]
    assert np.allclose(got, want, rtol=0, atol=1e-6)
    # xB = 0.8004 is not on the 1/256 grid: the weight is, as on the hardware
    assert got[3] == pytest.approx(round(0.8004 * 256) / 256, abs=1e-6)
    assert got[3] != pytest.approx(0.8004, abs=1e-4)


def test_bilinear_filtering_with_border_and_four_channels(t):
    data = np.random.default_rng(5).random((3, 4, 4), dtype=np.float32)  # h, w, rgba
    value = texture2d(t, data, FLOAT, 4, address=[BORDER] * 3, filter=LINEAR,
                      border=[-1, -2, -3, -4])
    coords = np.array([[1.0, 1.0], [2.3, 1.7], [0.2, 2.9], [3.9, 0.1]], np.float32)
    got = f32(t.lookup("fetch2d", value, coords))
    padded = np.full((5, 6, 4), [-1, -2, -3, -4], np.float32)
    padded[1:4, 1:5] = data
    for k, (x, y) in enumerate(coords):
        (i0,), (a,) = quantized(np.array([x]))
        (j0,), (b,) = quantized(np.array([y]))
        t00, t10 = padded[j0 + 1, i0 + 1], padded[j0 + 1, i0 + 2]
        t01, t11 = padded[j0 + 2, i0 + 1], padded[j0 + 2, i0 + 2]
        want = (1 - a) * (1 - b) * t00 + a * (1 - b) * t10 + (1 - a) * b * t01 + a * b * t11
        assert np.allclose(got[k], want, atol=1e-6)


@pytest.mark.parametrize("fmt,kind,values", [
    (U8, np.uint8, [0, 1, 128, 255]),
    (S8, np.int8, [-128, -127, 0, 127]),
    (U16, np.uint16, [0, 1, 40000, 65535]),
    (S16, np.int16, [-32768, -32767, 5, 32767]),
])
def test_small_integers_read_as_normalized_floats_or_as_integers(t, fmt, kind, values):
    data = np.array([values], kind).reshape(1, 4)
    norm = texture2d(t, data, fmt, 1, address=[CLAMP] * 3, filter=POINT)
    ints = texture2d(t, data, fmt, 1, address=[CLAMP] * 3, filter=POINT, flags=READ_AS_INTEGER)
    coords = np.array([[i + 0.5, 0.5] for i in range(4)], np.float32)
    v = np.array(values, np.float64)
    if np.issubdtype(kind, np.signedinteger):
        scale = float(np.iinfo(kind).max)
        want = np.maximum(v / scale, -1.0)  # (2^(n-1) - 1), clamped at -1
    else:
        want = v / float(np.iinfo(kind).max)  # 2^n - 1
    assert np.allclose(f32(t.lookup("fetch2d", norm, coords))[:, 0], want.astype(np.float32),
                       rtol=0, atol=0)
    got = t.lookup("fetch2d_int", ints, coords)
    assert np.array_equal(got[:, 0].view(np.int32), np.array(values, np.int32))
    assert np.array_equal(got[:, 1:], np.tile([0, 0, 1], (4, 1)))


def test_32_bit_integers_and_halves(t):
    u = np.array([[0, 7, 2**32 - 1, 2**31]], np.uint32)
    s = np.array([[-5, 2**31 - 1, -(2**31), 0]], np.int32)
    h = np.array([[0.5, -2.0, 65504.0, 6.1e-5]], np.float16)
    coords = np.array([[i + 0.5, 0.5] for i in range(4)], np.float32)
    # 32-bit integers are never promoted, with or without READ_AS_INTEGER
    uv = texture2d(t, u, U32, address=[CLAMP] * 3)
    sv = texture2d(t, s, S32, address=[CLAMP] * 3)
    hv = texture2d(t, h, HALF, address=[CLAMP] * 3)
    assert np.array_equal(t.lookup("fetch2d_uint", uv, coords)[:, 0], u[0])
    assert np.array_equal(t.lookup("fetch2d_int", sv, coords)[:, 0].view(np.int32), s[0])
    assert np.array_equal(f32(t.lookup("fetch2d", hv, coords))[:, 0], h[0].astype(np.float32))


def test_two_channel_texels_and_srgb(t):
    rg = np.array([[[10, 20], [30, 40]]], np.uint8)
    value = texture2d(t, rg, U8, 2, address=[CLAMP] * 3)
    got = f32(t.lookup("fetch2d", value, np.array([[1.5, 0.5]], np.float32)))[0]
    assert np.allclose(got, [30 / 255, 40 / 255, 0, 1])
    rgba = np.array([[[0, 10, 128, 255], [200, 3, 40, 77]]], np.uint8)
    srgb = texture2d(t, rgba, U8, 4, address=[CLAMP] * 3, flags=SRGB)
    got = f32(t.lookup("fetch2d", srgb, np.array([[0.5, 0.5], [1.5, 0.5]], np.float32)))

    def linear(c: np.ndarray) -> np.ndarray:
        c = c / 255.0
        return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)

    for k in range(2):  # R, G, B converted, alpha as it is
        assert np.allclose(got[k, :3], linear(rgba[0, k, :3].astype(np.float64)), atol=1e-6)
        assert got[k, 3] == pytest.approx(rgba[0, k, 3] / 255, abs=1e-7)


def test_a_3d_texture_filters_trilinearly(t):
    data = np.random.default_rng(3).random((3, 4, 5), dtype=np.float32)  # d, h, w
    a, _ = t.array(desc_bytes(5, 4, 3, FLOAT))
    t.upload(a, data)
    r, value = t.texture({"res_type": RES_ARRAY, "resource": a},
                         {"address": [CLAMP] * 3, "filter": LINEAR})
    assert r == 0
    c = np.array([[2.2, 1.7, 1.4, 0], [0.5, 0.5, 0.5, 0], [4.9, 3.1, 2.6, 0]], np.float32)
    got = f32(t.lookup("fetch3d", value, c))[:, 0]
    for k, (x, y, z, _) in enumerate(c):
        (i,), (ax,) = quantized(np.array([x]))
        (j,), (ay,) = quantized(np.array([y]))
        (m,), (az,) = quantized(np.array([z]))
        want = 0.0
        for dz, wz in ((0, 1 - az), (1, az)):
            for dy, wy in ((0, 1 - ay), (1, ay)):
                for dx, wx in ((0, 1 - ax), (1, ax)):
                    want += wx * wy * wz * data[np.clip(m + dz, 0, 2), np.clip(j + dy, 0, 3),
                                                np.clip(i + dx, 0, 4)]
        assert got[k] == pytest.approx(want, abs=1e-6)


def test_layered_textures_pick_the_layer_and_clamp_it(t):
    layers = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4)  # layer, h, w
    a, _ = t.array(desc_bytes(4, 2, 3, FLOAT, flags=LAYERED))
    t.upload(a, layers)
    r, v2 = t.texture({"res_type": RES_ARRAY, "resource": a}, {"address": [CLAMP] * 3})
    assert r == 0
    c = np.array([[1.5, 1.5, 0, 0], [3.5, 0.5, 2, 0], [0.5, 0.5, 9, 0]], np.float32)
    got = f32(t.lookup("fetch2d_layered", v2, c))[:, 0]
    assert np.array_equal(got, [layers[0, 1, 1], layers[2, 0, 3], layers[2, 0, 0]])
    line = np.arange(4 * 5, dtype=np.float32).reshape(4, 1, 5)  # 1D layered: 4 layers
    b, _ = t.array(desc_bytes(5, 0, 4, FLOAT, flags=LAYERED))
    t.upload(b, line)
    r, v1 = t.texture({"res_type": RES_ARRAY, "resource": b}, {"address": [CLAMP] * 3})
    assert r == 0
    got = f32(t.lookup("fetch1d_layered", v1, np.array([[4.5, 3], [0.2, 1]], np.float32)))
    assert np.array_equal(got[:, 0], [line[3, 0, 4], line[1, 0, 0]])


# CUDA's cubemap table: the major axis picks the face, (s, t) = (sc/|m| + 1) / 2, (tc/|m| + 1) / 2.
def cube_lookup(faces: np.ndarray, x: float, y: float, z: float) -> float:
    ax, ay, az = abs(x), abs(y), abs(z)
    if ax >= ay and ax >= az:
        face, m, sc, tc = (0, ax, -z, -y) if x >= 0 else (1, ax, z, -y)
    elif ay >= az:
        face, m, sc, tc = (2, ay, x, z) if y >= 0 else (3, ay, x, -z)
    else:
        face, m, sc, tc = (4, az, x, -y) if z >= 0 else (5, az, -x, -y)
    n = faces.shape[-1]
    s, t = (sc / m + 1) / 2, (tc / m + 1) / 2
    return float(faces[face, min(int(t * n), n - 1), min(int(s * n), n - 1)])


def test_cubemaps_pick_the_face_of_the_major_axis(t):
    n = 4
    faces = np.arange(2 * 6 * n * n, dtype=np.float32).reshape(12, n, n)
    a, _ = t.array(desc_bytes(n, n, 6, FLOAT, flags=CUBEMAP))
    t.upload(a, faces[:6])
    r, cube = t.texture({"res_type": RES_ARRAY, "resource": a},
                        {"address": [WRAP] * 3, "flags": NORMALIZED})
    assert r == 0
    dirs = np.array([[1, 0.3, -0.2, 0], [-1, -0.6, 0.7, 0], [0.1, 2, 0.5, 0],
                     [0.4, -3, -0.1, 0], [-0.3, 0.2, 1, 0], [0.9, 0.5, -1.2, 0]], np.float32)
    got = f32(t.lookup("fetch_cube", cube, dirs))[:, 0]
    assert list(got) == [cube_lookup(faces[:6], *d[:3]) for d in dirs]
    b, _ = t.array(desc_bytes(n, n, 12, FLOAT, flags=CUBEMAP | LAYERED))
    t.upload(b, faces)
    r, layered = t.texture({"res_type": RES_ARRAY, "resource": b}, {"flags": NORMALIZED})
    assert r == 0
    dirs[:, 3] = [1, 0, 1, 0, 1, 5]  # the cubemap (5: clamped to the last)
    got = f32(t.lookup("fetch_cube_layered", layered, dirs))[:, 0]
    assert list(got) == [cube_lookup(faces[6 * min(int(d[3]), 1):][:6], *d[:3]) for d in dirs]


def test_a_geometry_the_texture_lacks_reads_inside_it(t):
    """A cube or layered lookup of a plain 2D texture, a 3D lookup of a 1D one: the
    layer or slice is clamped to what the texture has, never read past it."""
    data = np.arange(16, dtype=np.float32).reshape(4, 4) + 100  # no zeros: unused memory
    value = texture2d(t, data, address=[CLAMP] * 3, flags=NORMALIZED)
    dirs = np.array([[-0.2, 0.1, -1, 0], [0.1, -1, 0.2, 0]], np.float32)  # faces 5 and 3
    got = f32(t.lookup("fetch_cube", value, dirs))[:, 0]
    assert set(got) <= set(data.ravel())
    got = f32(t.lookup("fetch2d_layered", value, np.array([[0.5, 0.5, 9, 0]], np.float32)))
    assert got[0, 0] == data[2, 2]
    line = texture1d(t, np.arange(4, dtype=np.float32), address=[BORDER] * 3)
    got = f32(t.lookup("fetch3d", line, np.array([[1.5, 0.5, 7.5, 0]], np.float32)))
    assert list(got[0]) == [0, 0, 0, 0]  # outside in z: the border
    assert t.s.sync() == (0, 0)


def mipmap_texture(t: Textures, levels: int = 3, **tex: object) -> tuple[int, list[np.ndarray]]:
    """An 8x8 mipmapped array, level L filled with 100 * L + texel index."""
    m, _ = t.array(desc_bytes(8, 8, 0, FLOAT, levels=levels), mipmap=True)
    data = []
    for level in range(levels):
        n = 8 >> level
        d = (np.arange(n * n, dtype=np.float32) + 100 * level).reshape(n, n)
        t.upload(t.level(m, level), d[None])
        data.append(d)
    r, value = t.texture({"res_type": RES_MIPMAP, "resource": m},
                         {"flags": NORMALIZED, "address": [CLAMP] * 3, **tex})
    assert r == 0
    return value, data


def test_mip_levels_by_lod_with_bias_and_clamps(t):
    point, data = mipmap_texture(t, max_level=2.0)
    c = np.array([[0.3, 0.6, lod, 0] for lod in (0.0, 0.4, 0.6, 1.2, 2.0, 7.0, -3.0)],
                 np.float32)
    got = f32(t.lookup("fetch2d_lod", point, c))[:, 0]
    nearest = [0, 0, 1, 1, 2, 2, 0]  # the nearest level, within [0, 2]

    def texel(level: int) -> float:
        n = 8 >> level
        return float(data[level][int(0.6 * n), int(0.3 * n)])

    assert list(got) == [texel(lv) for lv in nearest]
    clamped, _ = mipmap_texture(t)  # maxMipmapLevelClamp 0: level 0 always
    assert set(f32(t.lookup("fetch2d_lod", clamped, c))[:, 0]) == {texel(0)}
    biased, _ = mipmap_texture(t, mip_bias=1.0, max_level=2.0, min_level=1.0)
    got = f32(t.lookup("fetch2d_lod", biased, c))[:, 0]
    assert list(got) == [texel(lv) for lv in (1, 1, 2, 2, 2, 2, 1)]
    linear, _ = mipmap_texture(t, mip_filter=LINEAR, max_level=2.0)
    got = f32(t.lookup("fetch2d_lod", linear, np.array([[0.3, 0.6, 0.25, 0]], np.float32)))
    assert got[0, 0] == pytest.approx(0.75 * texel(0) + 0.25 * texel(1), abs=1e-4)


def test_mip_levels_by_gradient(t):
    value, data = mipmap_texture(t, max_level=2.0)
    # |dPdx| * 8 texels: 1 -> level 0, 2 -> 1, 4 -> 2, 64 -> 2 (the last)
    rows = []
    for g in (1 / 8, 2 / 8, 4 / 8, 8.0):
        rows += [[0.3, 0.6, 0, 0], [g, 0, 0, g / 2]]
    c = np.array(rows, np.float32)
    n_out = 4
    cbuf = t.buffer(c.tobytes())
    out = t.s.alloc(16 * n_out)
    t.run("fetch2d_grad", n_out, q(out), q(value), q(cbuf), struct.pack("<i", n_out))
    got = np.frombuffer(t.s.dtoh(out, 16 * n_out), np.float32).reshape(n_out, 4)[:, 0]
    want = [data[lv][int(0.6 * (8 >> lv)), int(0.3 * (8 >> lv))] for lv in (0, 1, 2, 2)]
    assert list(got) == want


def test_gather_returns_the_footprint_counter_clockwise_from_the_lower_left(t):
    rgba = np.arange(3 * 4 * 4, dtype=np.float32).reshape(3, 4, 4)  # h, w, channels
    value = texture2d(t, rgba, FLOAT, 4, array_flags=GATHER, address=[CLAMP] * 3)
    c = np.array([[1.6, 1.4, comp, 0] for comp in range(4)] + [[0.1, 0.1, 0, 0]], np.float32)
    got = f32(t.lookup("gather", value, c))
    for k, (x, y, comp, _) in enumerate(c):
        (i0,), _ = quantized(np.array([x]))
        (j0,), _ = quantized(np.array([y]))

        footprint = [(i0, j0 + 1), (i0 + 1, j0 + 1), (i0 + 1, j0), (i0, j0)]
        want = [float(rgba[np.clip(j, 0, 2), np.clip(i, 0, 3), int(comp)]) for i, j in footprint]
        assert list(got[k]) == want


def test_linear_and_pitched_memory(t):
    vals = np.arange(16, dtype=np.float32)
    mem = t.buffer(vals.tobytes())
    r, lin = t.texture({"res_type": RES_LINEAR, "resource": mem, "format": FLOAT,
                        "channels": 1, "width": 64})
    assert r == 0
    idx = np.array([0, 5, 15, 16, -1, 1000], np.int32)  # outside reads zero
    got = f32(t.lookup("fetch_linear", lin, idx))[:, 0]
    assert list(got) == [0, 5, 15, 0, 0, 0]
    u = t.buffer(np.arange(32, dtype=np.uint32).tobytes())
    r, lin4 = t.texture({"res_type": RES_LINEAR, "resource": u, "format": U32, "channels": 4,
                         "width": 128})
    assert r == 0
    got = t.lookup("fetch_linear_uint", lin4, np.array([2, 7], np.int32))
    assert got.tolist() == [[8, 9, 10, 11], [28, 29, 30, 31]]
    pitch = 64
    img = np.zeros((3, pitch // 4), np.float32)
    img[:, :5] = np.arange(15, dtype=np.float32).reshape(3, 5)
    p2 = t.buffer(img.tobytes())
    r, pv = t.texture({"res_type": RES_PITCH2D, "resource": p2, "format": FLOAT, "channels": 1,
                       "width": 5, "height": 3, "pitch": pitch},
                      {"flags": NORMALIZED, "address": [WRAP, WRAP, WRAP]})
    assert r == 0
    c = np.array([[0.5, 0.5], [1.1, 0.9], [-0.1, 0.1]], np.float32)
    got = f32(t.lookup("fetch2d", pv, c))[:, 0]
    ij = [(int((x - np.floor(x)) * 5), int((y - np.floor(y)) * 3)) for x, y in c]
    assert list(got) == [img[j, i] for i, j in ij]


def test_queries(t):
    m, _ = t.array(desc_bytes(16, 8, 0, FLOAT, levels=3), mipmap=True)
    r, tv = t.texture({"res_type": RES_MIPMAP, "resource": m},
                      {"flags": NORMALIZED, "filter": LINEAR, "address": [MIRROR] * 3})
    assert r == 0
    a, _ = t.array(desc_bytes(12, 5, 0, U8, 4, flags=SURFACE))
    r, sv = t.texture({"res_type": RES_ARRAY, "resource": a}, surface=True)
    assert r == 0
    out = t.s.alloc(64)
    t.run("query", 1, q(out), q(tv), q(sv))
    got = np.frombuffer(t.s.dtoh(out, 48), np.uint32).tolist()
    # width height depth normalized filter addr0 array_size levels level-1 width;
    # suq width height memory_layout
    assert got == [16, 8, 1, 1, LINEAR, MIRROR, 0, 3, 8, 12, 5, 0]


# ------------------------------------------------------------------------ surfaces


def surface2d(t: Textures, w: int = 4, h: int = 3) -> tuple[int, int, np.ndarray]:
    data = np.arange(w * h, dtype=np.uint32).reshape(h, w) + 1000
    a, _ = t.array(desc_bytes(w, h, 0, U32, 1, flags=SURFACE))
    t.upload(a, data[None])
    r, sv = t.texture({"res_type": RES_ARRAY, "resource": a}, surface=True)
    assert r == 0
    return a, sv, data


def surf_read(t: Textures, kernel: str, sv: int, xy: list[tuple[int, int]]) -> list[int]:
    n = len(xy)
    c = t.buffer(np.array(xy, np.int32).tobytes())
    out = t.s.alloc(4 * n)
    t.run(kernel, n, q(out), q(sv), q(c), struct.pack("<i", n))
    return np.frombuffer(t.s.dtoh(out, 4 * n), np.uint32).tolist()


def test_surface_reads_in_each_boundary_mode(t):
    _, sv, data = surface2d(t)
    inside = [(0, 0), (12, 2), (4, 1)]  # x in bytes
    outside = [(16, 0), (-4, 1), (8, 3), (400, -7)]
    assert surf_read(t, "surf_read2d_zero", sv, inside + outside) == [
        data[0, 0], data[2, 3], data[1, 1], 0, 0, 0, 0]
    assert surf_read(t, "surf_read2d_clamp", sv, inside + outside) == [
        data[0, 0], data[2, 3], data[1, 1], data[0, 3], data[1, 0], data[2, 2], data[0, 3]]
    assert surf_read(t, "surf_read2d_trap", sv, inside) == [data[0, 0], data[2, 3], data[1, 1]]
    assert t.s.sync() == (0, 0)


@pytest.mark.parametrize("kernel,xy,fault,said", [
    ("surf_read2d_trap", (16, 0), LAUNCH_FAILED, "trap"),     # .trap out of bounds
    ("surf_read2d_zero", (2, 0), MISALIGNED, "misaligned"),   # x not a multiple of 4
])
def test_surface_faults_lose_the_context(t, kernel, xy, fault, said):
    _, sv, _ = surface2d(t)
    c = t.buffer(np.array([xy], np.int32).tobytes())
    out = t.s.alloc(16)
    t.run(kernel, 1, q(out), q(sv), q(c), struct.pack("<i", 1))
    assert t.s.sync() == (0, fault)
    assert any(said in line for line in t.s.notes)


@pytest.mark.parametrize("mode", ["zero", "clamp"])
def test_surface_writes_drop_or_clamp(t, mode):
    a, sv, data = surface2d(t)
    xy = [(4, 0), (20, 1), (0, -1)]
    vals = [7, 8, 9]
    c = t.buffer(np.array(xy, np.int32).tobytes())
    v = t.buffer(np.array(vals, np.uint32).tobytes())
    t.run(f"surf_write2d_{mode}", 3, q(sv), q(c), q(v), struct.pack("<i", 3))
    want = data.copy()
    want[0, 1] = 7
    if mode == "clamp":
        want[1, 3] = 8
        want[0, 0] = 9
    r, got = t.download(a, 16, 3)
    assert r == 0 and np.array_equal(np.frombuffer(got, np.uint32).reshape(3, 4), want)


def test_vector_surface_accesses_and_the_other_geometries(t):
    w, h = 5, 3
    img = np.random.default_rng(1).integers(0, 255, (h, w, 4), dtype=np.uint8)
    a, _ = t.array(desc_bytes(w, h, 0, U8, 4, flags=SURFACE))
    t.upload(a, img[None])
    r, sv = t.texture({"res_type": RES_ARRAY, "resource": a}, surface=True)
    assert r == 0
    t.s.launch(t.fn("surf_bump_uchar4"), (1, 1, 1), (8, 4, 1),
               q(sv) + struct.pack("<ii", w, h))
    r, got = t.download(a, w * 4, h)
    assert r == 0 and np.array_equal(np.frombuffer(got, np.uint8).reshape(h, w, 4),
                                     (img + 1).astype(np.uint8))
    n = 4
    one = np.arange(n, dtype=np.float32) + 0.5
    s1, _ = t.array(desc_bytes(n, 0, 0, FLOAT, flags=SURFACE))
    t.upload(s1, one[None, None])
    s3, _ = t.array(desc_bytes(n, 2, 3, FLOAT, 2, flags=SURFACE))
    s2l, _ = t.array(desc_bytes(n, 2, 4, S16, flags=SURFACE | LAYERED))
    s1l, _ = t.array(desc_bytes(n, 0, 3, U32, 2, flags=SURFACE | LAYERED))
    values = []
    for arr in (s1, s3, s2l, s1l):
        r, v = t.texture({"res_type": RES_ARRAY, "resource": arr}, surface=True)
        assert r == 0
        values.append(v)
    t.run("surf_layered_3d", n, *(q(v) for v in values), struct.pack("<i", n))
    assert t.s.sync() == (0, 0)
    r, got = t.download(s1, 4 * n, 1)
    assert np.array_equal(np.frombuffer(got, np.float32), one * 2)
    r, got = t.download(s3, 8 * n, 1, y=1, z=2)
    assert np.frombuffer(got, np.float32).reshape(n, 2).tolist() == [[i, -i] for i in range(n)]
    r, got = t.download(s2l, 2 * n, 1, y=1, z=3)
    assert np.frombuffer(got, np.int16).tolist() == [100 + i for i in range(n)]
    r, got = t.download(s1l, 8 * n, 1, z=2)
    assert np.frombuffer(got, np.uint64).tolist() == [1000 + i for i in range(n)]


# -------------------------------------------------------------- handles and refusals


def launch_with_value(t: Textures, value: int) -> tuple[int, int]:
    c = t.buffer(np.array([[0.5, 0.5]], np.float32).tobytes())
    out = t.s.alloc(16)
    t.run("fetch2d", 1, q(out), q(value), q(c), struct.pack("<i", 1))
    return t.s.sync()


@pytest.mark.parametrize("value", [0, 1, 0x670B000000000999, 0x7FFF00001000])
def test_a_value_that_is_no_texture_of_the_session_faults(t, value):
    assert launch_with_value(t, value) == (0, ILLEGAL_ADDRESS)
    assert any("illegal address" in line for line in t.s.notes)


def test_a_destroyed_texture_or_array_faults_instead_of_reading(t):
    value = texture2d(t, np.ones((2, 2), np.float32))
    assert t.s.run(rec("cuTexObjectDestroy", value)) is None
    assert launch_with_value(t, value) == (0, ILLEGAL_ADDRESS)


def test_a_texture_of_a_destroyed_array_faults(t):
    a, _ = t.array(desc_bytes(2, 2, 0, FLOAT))
    r, value = t.texture({"res_type": RES_ARRAY, "resource": a}, {})
    assert r == 0
    assert t.s.run(rec("cuArrayDestroy", a)) is None
    assert launch_with_value(t, value) == (0, ILLEGAL_ADDRESS)


def test_another_sessions_texture_is_unknown(t):
    value = texture2d(t, np.ones((2, 2), np.float32))
    be = native.HostBackend({}, memory_limit=1 << 26)
    other = Session(be, 1 << 24)
    other.context()
    try:
        t2 = Textures(other)
        assert launch_with_value(t2, value) == (0, ILLEGAL_ADDRESS)
    finally:
        other.close()
        be.close()


@pytest.mark.parametrize("res,tex,want", [
    ({}, {"address": [4, 0, 0]}, INVALID_VALUE),                   # no such address mode
    ({}, {"filter": 2}, INVALID_VALUE),                            # no such filter
    ({}, {"flags": 0x80}, INVALID_VALUE),                          # an unknown flag
    ({}, {"flags": 0x40}, INVALID_VALUE),                          # seamless, not a cubemap
    ({"res_flags": 1}, {}, INVALID_VALUE),                         # resource flags not 0
    ({"res_type": 7}, {}, INVALID_VALUE),                          # no such resource
    ({"resource": 0x6709000000000777}, {}, INVALID_HANDLE),        # an unknown array
])
def test_texture_requests_the_server_refuses(t, res, tex, want):
    a, _ = t.array(desc_bytes(2, 2, 0, FLOAT))
    r, _ = t.texture({"res_type": RES_ARRAY, "resource": a, **res}, tex)
    assert r == want


def test_the_rules_of_formats_filters_views_and_surfaces(t):
    ints, _ = t.array(desc_bytes(2, 2, 0, U8))
    r, _ = t.texture({"res_type": RES_ARRAY, "resource": ints},
                     {"filter": LINEAR, "flags": READ_AS_INTEGER})
    assert r == INVALID_VALUE  # linear filtering of integers
    m, _ = t.array(desc_bytes(8, 8, 0, FLOAT, levels=2), mipmap=True)
    r, _ = t.texture({"res_type": RES_MIPMAP, "resource": m}, {})
    assert r == INVALID_VALUE  # a mipmapped array needs normalized coordinates
    r, _ = t.texture({"res_type": RES_MIPMAP, "resource": m}, surface=True)
    assert r == INVALID_VALUE  # a surface is an array's, not a mipmapped array's
    r, _ = t.texture({"res_type": RES_ARRAY, "resource": ints}, surface=True)
    assert r == 0  # without SURFACE_LDST too (documented for surface references only)
    r, _ = t.texture({"res_type": RES_ARRAY, "resource": ints}, {},
                     view={"format": 0x01, "width": 2, "height": 2})
    assert r == NOT_SUPPORTED  # reinterpreting texels
    r, _ = t.texture({"res_type": RES_ARRAY, "resource": ints}, {},
                     view={"width": 3, "height": 2})
    assert r == INVALID_VALUE  # a view of another width
    mem = t.s.alloc(4096)
    r, _ = t.texture({"res_type": RES_LINEAR, "resource": mem + 16, "format": FLOAT,
                      "channels": 1, "width": 64})
    assert r == INVALID_VALUE  # not aligned
    r, _ = t.texture({"res_type": RES_LINEAR, "resource": mem, "format": FLOAT,
                      "channels": 1, "width": 8192})
    assert r == INVALID_VALUE  # past the allocation
    r, _ = t.texture({"res_type": RES_PITCH2D, "resource": mem, "format": FLOAT,
                      "channels": 1, "width": 4, "height": 4, "pitch": 20})
    assert r == INVALID_VALUE  # a pitch under the row
    r, _ = t.texture({"res_type": RES_LINEAR, "resource": mem, "format": FLOAT,
                      "channels": 1, "width": 64}, surface=True)
    assert r == INVALID_VALUE  # surfaces are arrays


def test_a_view_selects_levels_and_layers(t):
    layers = np.arange(4 * 2 * 2, dtype=np.float32).reshape(4, 2, 2)
    a, _ = t.array(desc_bytes(2, 2, 4, FLOAT, flags=LAYERED))
    t.upload(a, layers)
    r, v = t.texture({"res_type": RES_ARRAY, "resource": a}, {"address": [CLAMP] * 3},
                     view={"width": 2, "height": 2, "depth": 4, "first_layer": 1,
                           "last_layer": 2})
    assert r == 0
    c = np.array([[0.5, 0.5, 0, 0], [1.5, 1.5, 1, 0], [0.5, 0.5, 3, 0]], np.float32)
    got = f32(t.lookup("fetch2d_layered", v, c))[:, 0]
    assert list(got) == [layers[1, 0, 0], layers[2, 1, 1], layers[2, 0, 0]]  # layer 3 -> 1
    _, data = mipmap_texture(t)
    mm, _ = t.array(desc_bytes(8, 8, 0, FLOAT, levels=3), mipmap=True)
    for level in range(3):
        t.upload(t.level(mm, level), data[level][None])
    r, vv = t.texture({"res_type": RES_MIPMAP, "resource": mm},
                      {"flags": NORMALIZED, "max_level": 5.0},
                      view={"width": 8, "height": 8, "first_level": 1, "last_level": 2})
    assert r == 0
    got = f32(t.lookup("fetch2d_lod", vv, np.array([[0.3, 0.6, 0, 0], [0.3, 0.6, 4, 0]],
                                                    np.float32)))[:, 0]
    assert list(got) == [data[1][int(0.6 * 4), int(0.3 * 4)], data[2][int(0.6 * 2),
                                                                      int(0.3 * 2)]]


def test_a_level_goes_with_its_mipmapped_array(t):
    m, _ = t.array(desc_bytes(8, 8, 0, FLOAT, levels=2), mipmap=True)
    level = t.level(m, 1)
    assert t.s.run(rec("cuArrayDestroy", level)) is None
    assert t.s.sync() == (0, INVALID_VALUE)  # a level is not destroyed alone
    assert t.s.run(rec("cuMipmappedArrayGetLevel", mint(ARRAY), m, 2)) is None
    assert t.s.sync() == (0, INVALID_VALUE)  # no level 2
    assert t.s.run(rec("cuMipmappedArrayDestroy", m)) is None
    r, _ = t.download(level, 16, 1)
    assert r == INVALID_HANDLE  # its level died with it


# ---------------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(scope="module")
def fz():
    be = native.HostBackend({}, memory_limit=1 << 27)
    s = Session(be, 1 << 26)
    s.context()
    t = Textures(s)
    t.storage = s.alloc(1 << 16)  # type: ignore[attr-defined]
    t.shapes = {}  # type: ignore[attr-defined]
    yield t
    s.close()
    be.close()


def _field(draw: st.DrawFn, small: list[int]) -> int:
    return draw(st.one_of(st.sampled_from(small), st.integers(0, 2**32 - 1)))


@FUZZ
@given(st.data())
def test_fuzzed_array_descriptors_are_made_or_refused(fz, data):
    d = data.draw
    desc = desc_bytes(_field(d, [0, 1, 3, 64, 1 << 17]), _field(d, [0, 1, 6, 32]),
                      _field(d, [0, 1, 6, 12]), _field(d, [U8, S16, HALF, FLOAT, 0x50, 0]),
                      _field(d, [1, 2, 3, 4]), _field(d, [0, LAYERED, CUBEMAP, SURFACE, 0x40]),
                      _field(d, [0, 1, 2, 7]))
    cut = d(st.integers(0, len(desc)))  # a short descriptor too
    name = d(st.sampled_from(["glArrayCreate", "glMipmapCreate"]))
    h = mint(ARRAY if name == "glArrayCreate" else MIPMAP)
    assert fz.s.run(rec(name, h, cut, fz.storage, payload=desc[:cut])) is None
    assert fz.s.sync() in ((0, 0), (0, INVALID_VALUE))


@FUZZ
@given(st.data())
def test_fuzzed_texture_requests_are_made_or_refused_and_sample_safely(fz, data):
    d = data.draw
    if not fz.shapes:
        for name, desc, mip in (("2d", desc_bytes(8, 4, 0, U8, 4, SURFACE), False),
                                ("layered", desc_bytes(4, 4, 3, FLOAT, 1, LAYERED), False),
                                ("cube", desc_bytes(4, 4, 6, HALF, 2, CUBEMAP), False),
                                ("mip", desc_bytes(8, 8, 0, S16, 1, levels=4), True)):
            fz.shapes[name] = fz.array(desc, mipmap=mip)[0]
    res_type = d(st.sampled_from([RES_ARRAY, RES_MIPMAP, RES_LINEAR, RES_PITCH2D, 9]))
    resource = d(st.sampled_from([*fz.shapes.values(), fz.storage, fz.storage + 256,
                                  0x6709000000000777, 0]))
    res = {"res_type": res_type, "resource": resource,
           "format": _field(d, [U8, U32, HALF, FLOAT, 0x50]), "channels": _field(d, [1, 2, 4]),
           "width": _field(d, [0, 4, 64, 1 << 16, 1 << 20]), "height": _field(d, [0, 1, 4]),
           "pitch": _field(d, [0, 32, 64, 100])}
    tex = {"address": [_field(d, [0, 1, 2, 3]) & 0x7FFFFFFF for _ in range(3)],
           "filter": _field(d, [0, 1]) & 0x7FFFFFFF,
           "flags": _field(d, [0, NORMALIZED, READ_AS_INTEGER, SRGB, 0x40]),
           "mip_filter": _field(d, [0, 1]) & 0x7FFFFFFF,
           "max_level": d(st.floats(allow_nan=True, width=32)),
           "mip_bias": d(st.floats(allow_nan=True, width=32))}
    view = d(st.none() | st.fixed_dictionaries({
        "width": st.sampled_from([0, 4, 8]), "height": st.sampled_from([0, 4, 8]),
        "first_level": st.integers(0, 5), "last_level": st.integers(0, 5),
        "first_layer": st.integers(0, 7), "last_layer": st.integers(0, 7)}))
    surface = d(st.booleans())
    r, value = fz.texture(res, tex, view, surface)
    assert r in (0, INVALID_VALUE, INVALID_HANDLE, NOT_SUPPORTED)
    if r != 0 or surface:
        return
    kernel = d(st.sampled_from(["fetch2d", "fetch2d_layered", "fetch_cube", "fetch2d_lod",
                                "gather", "fetch1d"]))
    coords = np.array(d(st.lists(st.floats(width=32), min_size=4, max_size=4)), np.float32)
    fz.lookup(kernel, value, np.tile(coords, (3, 1)))
    assert fz.s.sync() == (0, 0)  # any coordinates sample without a fault


# ------------------------------------------------- the cuda backend, on a stand-in driver

ARRAY_DRIVER = r"""
/* Arrays as the real driver's: an opaque handle to the driver's own object. */
typedef struct { size_t w, h, d; int fmt; unsigned ch, flags; } D3;
typedef struct { D3 d; unsigned elem; char *bytes; int dead; } Arr;
static int arrays_live, texes_live, levels_asked;
static D3 last_desc;
static unsigned long long next_value = 1;
static int last_res_type, last_address0, last_filter;
static unsigned last_flags, last_first_layer;
static void *last_res_array;
static unsigned elem_of(const D3 *d) { return (d->fmt == 0x20 ? 4 : 1) * d->ch; }
CUresult cuArray3DCreate_v2(void **a, const D3 *d) {
    Arr *x = calloc(1, sizeof *x);
    x->d = *d;
    x->elem = elem_of(d);
    x->bytes = calloc(1, x->elem * d->w * (d->h ? d->h : 1) * (d->d ? d->d : 1));
    last_desc = *d;
    arrays_live++;
    *a = x;
    return 0;
}
CUresult cuArrayDestroy(void *a) { ((Arr *)a)->dead = 1; arrays_live--; return 0; }
CUresult cuMipmappedArrayCreate(void **m, const D3 *d, unsigned levels) {
    if (levels < 1) return 1;
    return cuArray3DCreate_v2(m, d);
}
CUresult cuMipmappedArrayGetLevel(void **a, void *m, unsigned level) {
    levels_asked++;
    *a = m; /* level 0's bytes stand for any level here */
    return 0;
}
CUresult cuMipmappedArrayDestroy(void *m) { return cuArrayDestroy(m); }
/* CUDA_MEMCPY3D_v2; memory types: 1 host, 2 device, 3 array. */
typedef struct {
    size_t sx, sy, sz, slod; int st; const void *sh; P sd; void *sa; void *r0; size_t sp, shh;
    size_t dx, dy, dz, dlod; int dt; void *dh; P dd; void *da; void *r1; size_t dp, dhh;
    size_t w, h, depth;
} M3;
static char *at(int type, const void *h, P dev, void *arr, size_t x, size_t y, size_t pitch,
                size_t *rp) {
    if (type == 3) {
        Arr *a = arr;
        *rp = a->elem * a->d.w;
        return a->bytes + y * *rp + x;
    }
    *rp = pitch;
    return (type == 1 ? (char *)h : (char *)(uintptr_t)dev) + y * pitch + x;
}
CUresult cuMemcpy3DAsync_v2(const M3 *c, void *st) {
    size_t sp, dp;
    if (c->depth != 1 || c->sz || c->dz) return 1; /* one slice at the origin's z 0 */
    char *s = at(c->st, c->sh, c->sd, c->sa, c->sx, c->sy, c->sp, &sp);
    char *d = at(c->dt, c->dh, c->dd, c->da, c->dx, c->dy, c->dp, &dp);
    for (size_t y = 0; y < c->h; y++)
        memcpy(d + y * dp, s + y * sp, c->w);
    return 0;
}
typedef struct { int type; int pad; union { void *arr; char r[128]; } u; unsigned flags; } RD;
typedef struct { int addr[3]; int filter; unsigned flags; } TD;
typedef struct { int fmt; size_t w, h, d; unsigned fl, ll, first_layer, ll2; } VD;
CUresult cuTexObjectCreate(unsigned long long *t, const RD *r, const TD *td, const VD *v) {
    last_res_type = r->type;
    last_res_array = r->u.arr;
    last_address0 = td->addr[0];
    last_filter = td->filter;
    last_flags = td->flags;
    last_first_layer = v ? v->first_layer : 99;
    texes_live++;
    *t = next_value++;
    return 0;
}
CUresult cuTexObjectDestroy(unsigned long long t) { texes_live--; return 0; }
CUresult cuSurfObjectCreate(unsigned long long *s, const RD *r) {
    texes_live++;
    *s = next_value++;
    return 0;
}
CUresult cuSurfObjectDestroy(unsigned long long s) { texes_live--; return 0; }
int array_state(int what) {
    switch (what) {
    case 0: return arrays_live;
    case 1: return texes_live;
    case 2: return levels_asked;
    case 3: return (int)last_desc.w * 1000 + (int)last_desc.h * 10 + (int)last_desc.flags;
    case 4: return last_res_type * 100 + last_address0 * 10 + last_filter;
    case 5: return (int)last_flags;
    default: return (int)last_first_layer;
    }
}
void *last_array(void) { return last_res_array; }
"""


@needs_gcc
def test_the_cuda_backend_makes_real_arrays_and_objects(tmp_path):
    so, drv = build_stand_in(tmp_path, ARRAY_DRIVER,
                             "int array_state(int); void *last_array(void);")
    with stand_in_session(so) as s:
        desc = desc_bytes(16, 4, 0, FLOAT, 1, SURFACE)
        a = mint(ARRAY)
        assert s.run(rec("glArrayCreate", a, len(desc), 0, payload=desc)) is None
        assert s.sync() == (0, 0) and drv.array_state(0) == 1
        assert drv.array_state(3) == 16 * 1000 + 4 * 10 + SURFACE  # the descriptor as given
        # a copy in and out through the driver's 3D copy, one slice per record
        rows = np.arange(64, dtype=np.float32).reshape(4, 16)
        assert s.run(rec("glMemcpyHtoA", a, 0, 0, 0, 64, 4, 0, payload=rows.tobytes())) is None
        r = s.run(rec("glMemcpyAtoH", a, 8, 1, 0, 16, 2, 0))
        assert r is not None and r[0] == 0
        assert np.array_equal(np.frombuffer(r[3], np.float32).reshape(2, 4), rows[1:3, 2:6])
        # a texture object: the value is the driver's, and the driver got the real array
        q = ffi.new("gl_tex_request *", {"handle": mint(TEXOBJ), "kind": 1, "res_type": RES_ARRAY,
                                         "resource": a, "has_view": 1})
        q.tex.address = [BORDER, CLAMP, CLAMP]
        q.tex.filter = LINEAR
        q.tex.flags = NORMALIZED
        q.view.first_layer = 0
        payload = bytes(ffi.buffer(q))
        r = s.run(rec("glTexObjectCreate", len(payload), payload=payload))
        assert r is not None and r[0] == 0 and r[2] == [1]  # not the minted handle
        assert drv.array_state(4) == RES_ARRAY * 100 + BORDER * 10 + LINEAR
        assert drv.array_state(5) == NORMALIZED and drv.array_state(6) == 0
        assert drv.last_array() != ffi.NULL
        surf = ffi.new("gl_tex_request *", {"handle": mint(SURFOBJ), "kind": 2,
                                            "res_type": RES_ARRAY,
                                            "resource": a})
        sp = bytes(ffi.buffer(surf))
        r = s.run(rec("glTexObjectCreate", len(sp), payload=sp))
        assert r is not None and r[0] == 0 and r[2] == [2] and drv.array_state(1) == 2
        assert s.run(rec("cuTexObjectDestroy", q.handle)) is None
        assert s.sync() == (0, 0) and drv.array_state(1) == 1
        # a mipmapped array's level is asked of the driver once
        m = mint(MIPMAP)
        md = desc_bytes(8, 8, 0, FLOAT, levels=2)
        assert s.run(rec("glMipmapCreate", m, len(md), 0, payload=md)) is None
        level = mint(ARRAY)
        assert s.run(rec("cuMipmappedArrayGetLevel", level, m, 1),
                     rec("cuMipmappedArrayGetLevel", mint(ARRAY), m, 1)) is None
        assert s.sync() == (0, 0) and drv.array_state(2) == 1
        assert s.run(rec("cuArrayDestroy", level)) is None
        assert s.sync() == (0, INVALID_VALUE)  # a level goes with its mipmapped array
        assert s.run(rec("cuMipmappedArrayDestroy", m)) is None
        r = s.run(rec("glMemcpyAtoH", level, 0, 0, 0, 4, 1, 0))
        assert r is not None and r[0] == INVALID_HANDLE  # dead with its mipmapped array
        # what a session moved here from the host device sends is refused, not misread
        storage = s.x.va_base
        s.run(rec("glMemAlloc", storage, 4096))
        assert s.run(rec("glArrayCreate", mint(ARRAY), len(desc), storage, payload=desc)) is None
        assert s.sync() == (0, INVALID_VALUE)
        moved = ffi.new("gl_tex_request *", {"handle": mint(TEXOBJ), "kind": 1,
                                             "res_type": RES_ARRAY, "resource": a,
                                             "value_is_handle": 1})
        mp = bytes(ffi.buffer(moved))
        r = s.run(rec("glTexObjectCreate", len(mp), payload=mp))
        assert r is not None and r[0] == INVALID_VALUE
        assert any("made for gleam's host device" in line for line in s.notes)
    # the session's close destroyed what the program left: the array and the surface
    assert (drv.array_state(0), drv.array_state(1)) == (0, 0)


@FUZZ
@given(st.data())
def test_fuzzed_array_copies_match_a_model_or_are_refused(fz, data):
    """Random boxes copied host -> array -> array -> device -> host: each either lands
    where numpy says or is refused whole (the array's extents: 32-byte rows, 5 rows,
    3 layers)."""
    d = data.draw
    if "model" not in fz.shapes:
        fz.shapes["model"] = fz.array(desc_bytes(8, 5, 3, U16, 2, LAYERED))[0]
        fz.shapes["other"] = fz.array(desc_bytes(8, 5, 3, U16, 2, LAYERED))[0]
        fz.shapes["dev"] = fz.s.alloc(4096)
    a, b, dev = fz.shapes["model"], fz.shapes["other"], fz.shapes["dev"]
    x, y, z = d(st.integers(0, 40)), d(st.integers(0, 6)), d(st.integers(0, 4))
    width, height = d(st.integers(0, 40)), d(st.integers(0, 6))
    inside = x + width <= 32 and y + height <= 5 and z < 3
    payload = d(st.binary(min_size=width * height, max_size=width * height))
    assert fz.s.run(rec("glMemcpyHtoA", a, x, y, z, width, height, 0, payload=payload)) is None
    assert fz.s.run(rec("glMemcpyAtoA", b, x, y, z, a, x, y, z, width, height, 0)) is None
    assert fz.s.run(rec("glMemcpyAtoD", dev, 64, b, x, y, z, width, height, 0)) is None
    assert fz.s.sync() == (0, 0 if inside else INVALID_VALUE)
    r, got = fz.download(b, width, height, x=x, y=y, z=z)
    assert r == (0 if inside else INVALID_VALUE)
    if inside and width and height:
        assert got == payload
        rows = np.frombuffer(fz.s.dtoh(dev, 64 * height), np.uint8).reshape(height, 64)
        assert rows[:, :width].tobytes() == payload
