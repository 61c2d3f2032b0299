"""PTX out of nvcc fatbins (cffi_build/src/image/fatbin.c; format notes in docs/fatbin.md).

Committed samples (tests/fatbin_samples, one per nvcc variant below) keep CI without nvcc
checking every compression mode; with nvcc present the samples are rebuilt and compared.
Regenerate them with ``python -m tests.test_fatbin`` from the repository root.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer._native import ffi, lib

SAMPLES = pathlib.Path(__file__).resolve().parent / "fatbin_samples"
SOURCE = SAMPLES / "sample.cu"
MALFORMED, WRAPPER = -1, -5

# name: (nvcc flags, the compute arch of the PTX inside or None, targets carried)
VARIANTS: dict[str, tuple[list[str], int | None, str]] = {
    "default": ([], 75, "sm_75,compute_75"),
    "sm80": (["-arch=sm_80"], 80, "sm_80,compute_80"),
    "ptx80": (["-gencode", "arch=compute_80,code=compute_80"], 80, "compute_80"),
    "sass80": (["-gencode", "arch=compute_80,code=sm_80"], None, "sm_80"),
    "multi": (["-gencode", "arch=compute_75,code=compute_75", "-gencode",
               "arch=compute_80,code=compute_80", "-gencode", "arch=compute_90,code=sm_90"],
              80, "compute_75,compute_80,sm_90"),
    "compress_all": (["-Xfatbin", "-compress-all"], 75, "sm_75,compute_75"),
    "mode_size": (["--compress-mode=size"], 75, "sm_75,compute_75"),
    "mode_speed_lz4": (["--compress-mode=speed"], 75, "sm_75,compute_75"),
    "uncompressed": (["-Xfatbin", "-compress=false"], 75, "sm_75,compute_75"),
}


def extract(image: bytes, targets_len: int = 256) -> tuple[int, str, str | None]:
    """gl_fatbin_ptx: (return code, targets, PTX text or None)."""
    out, length = ffi.new("uint8_t **"), ffi.new("size_t *")
    targets = ffi.new("char[]", max(targets_len, 1))
    rc = lib.gl_fatbin_ptx(image, len(image), out, length, targets, targets_len)
    text = None
    if rc == 1:
        text = ffi.unpack(ffi.cast("char *", out[0]), length[0]).decode(errors="replace")
        lib.gl_fatbin_free(out[0])
    else:
        assert out[0] == ffi.NULL
    return rc, ffi.string(targets).decode(), text


def normalized(ptx: str) -> list[str]:
    """PTX lines without comments or layout: the fatbin copy drops both, nothing else."""
    lines = (" ".join(re.sub(r"//.*", "", line).split()) for line in ptx.splitlines())
    return [line for line in lines if line]


def build(out_dir: pathlib.Path) -> None:
    for name, (flags, _, _) in VARIANTS.items():
        subprocess.run(["nvcc", "-fatbin", "-O3", *flags, "-o", str(out_dir / f"{name}.fatbin"),
                        str(SOURCE)], check=True, capture_output=True)
    for arch in (75, 80):
        subprocess.run(["nvcc", "-ptx", "-O3", f"-arch=compute_{arch}", "-o",
                        str(out_dir / f"compute_{arch}.ptx"), str(SOURCE)], check=True,
                       capture_output=True)


def sample(name: str) -> bytes:
    return (SAMPLES / f"{name}.fatbin").read_bytes()


# ---------------------------------------------------------------- real images
@pytest.mark.parametrize("name", list(VARIANTS))
def test_committed_sample_gives_nvcc_ptx(name):
    _, arch, targets = VARIANTS[name]
    rc, got_targets, text = extract(sample(name))
    assert got_targets == targets
    if arch is None:
        assert (rc, text) == (0, None)
        return
    assert rc == 1
    want = (SAMPLES / f"compute_{arch}.ptx").read_text()
    assert normalized(text) == normalized(want)
    assert ".entry sample_saxpy(" in text and ".entry sample_twice(" in text


def test_samples_use_the_compression_they_claim():
    flags = {}
    for name in VARIANTS:
        image = sample(name)
        off = struct.unpack_from("<H", image, 6)[0]
        while off < len(image):
            kind, ehsize, psize = struct.unpack_from("<HxxIQ", image, off)
            if kind == 1:
                flags[name] = struct.unpack_from("<Q", image, off + 0x28)[0]
            off += ehsize + psize
    assert flags["default"] & 0x8000 and flags["mode_size"] & 0x8000  # zstd
    assert flags["mode_speed_lz4"] & 0x2000 and not flags["mode_speed_lz4"] & 0x8000
    assert not flags["uncompressed"] & 0xA000


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc rebuilds the samples")
def test_fresh_nvcc_images_give_the_same_ptx(tmp_path):
    build(tmp_path)
    for name, (_, arch, targets) in VARIANTS.items():
        rc, got_targets, text = extract((tmp_path / f"{name}.fatbin").read_bytes())
        assert got_targets == targets
        if arch is not None:
            want = (tmp_path / f"compute_{arch}.ptx").read_text()
            assert rc == 1 and normalized(text) == normalized(want), name


@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("objcopy") is None,
                    reason="nvcc and objcopy make a host object")
def test_fatbin_section_of_a_host_object(tmp_path):
    """What a program embeds: .nv_fatbin holds the image __fatBinC_Wrapper_t points to."""
    obj, section = tmp_path / "s.o", tmp_path / "nv_fatbin"
    subprocess.run(["nvcc", "-c", "-O3", "-o", str(obj), str(SOURCE)], check=True,
                   capture_output=True)
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(obj),
                    str(section)], check=True, capture_output=True)
    image = section.read_bytes()
    assert lib.gl_fatbin_size(image, len(image)) == len(image)
    rc, targets, text = extract(image)
    assert rc == 1 and targets == "sm_75,compute_75" and ".entry sample_saxpy(" in text
    # A linked program's section: one container per translation unit, walked by size.
    other = tmp_path / "other.cu"
    other.write_text('extern "C" __global__ void other_kernel() {}\nint main() { return 0; }\n')
    program = tmp_path / "prog"
    subprocess.run(["nvcc", "-O3", "-o", str(program), str(SOURCE), str(other)], check=True,
                   capture_output=True)
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(program),
                    str(section)], check=True, capture_output=True)
    image, entries = section.read_bytes(), ""
    while image.strip(b"\0"):
        size = lib.gl_fatbin_size(image, len(image))
        assert size > 0
        rc, _, text = extract(image)
        entries += text or ""
        image = image[size:].lstrip(b"\0")  # containers are 8-aligned
    assert ".entry sample_saxpy(" in entries and ".entry other_kernel(" in entries
    wrapper = struct.pack("<iiQQ", 0x466243B1, 1, 0x1000, 0)  # what .nvFatBinSegment holds
    assert extract(wrapper)[0] == WRAPPER


# ------------------------------------------------------- layout, hand-built
def entry(kind: int, arch: int, payload: bytes, flags: int = 0x11, raw: int = 0,
          version: tuple[int, int] = (9, 0)) -> bytes:
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), len(payload), 0,
                         version[1], version[0], arch, 0, 0, flags, 0, raw)
    return header + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def ptx(arch: int) -> bytes:
    return f".version 9.0\n.target sm_{arch}\n.entry k{arch}() {{ ret; }}\n".encode()


def test_newest_ptx_wins_and_later_containers_are_other_modules():
    first = container(entry(1, 70, ptx(70) + b"\0\0"), entry(2, 86, b"\x7fELF" + bytes(60)),
                      entry(1, 80, ptx(80)))
    image = first + container(entry(1, 89, ptx(89)))  # the next translation unit's module
    assert lib.gl_fatbin_size(image, len(image)) == len(first)
    assert extract(image) == (1, "compute_70,sm_86,compute_80", ptx(80).decode())


def test_ptx_version_breaks_an_arch_tie():
    image = container(entry(1, 80, ptx(1), version=(8, 0)), entry(1, 80, ptx(2), version=(8, 5)))
    assert extract(image)[2] == ptx(2).decode()


def test_arch_specific_and_family_targets_are_named():
    image = container(entry(2, 90, b"", flags=0x100011), entry(1, 100, ptx(100), flags=0x200011))
    assert extract(image)[:2] == (1, "sm_90a,compute_100f")


def test_targets_are_cut_at_a_whole_name():
    image = container(*(entry(2, a, b"") for a in (75, 80, 86, 90)))
    assert extract(image, targets_len=18)[:2] == (0, "sm_75,sm_80,sm_86")
    assert extract(image, targets_len=0)[:2] == (0, "")


@pytest.mark.parametrize("bad", [
    b"", b"\x50\xed\x55\xba", container()[:12],
    struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 40),           # body past the end
    container(entry(1, 75, ptx(75)))[:-4],                       # truncated payload
    container(entry(1, 75, ptx(75), flags=0x2011, raw=1 << 40)),  # declared size over 64 MiB
    container(entry(1, 75, ptx(75), flags=0xA011, raw=100)),     # both compressions
    container(entry(1, 75, b"\xff" * 8, flags=0x2011, raw=100)),  # broken LZ4
    container(entry(1, 75, b"\x28\xb5\x2f\xfd" + bytes(8), flags=0x8011, raw=100)),  # zstd
])
def test_malformed_images_are_refused(bad):
    rc, _, text = extract(bad)
    assert rc < 0 and text is None


def test_lz4_entry_hand_made():
    text = b".version 9.0\n" + b"ab" * 40 + b"\n\0"
    # literals ".version 9.0\nab", then a match of 78 at distance 2, then literals "\n\0"
    block = bytes([0xFF, 0]) + text[:15] + struct.pack("<H", 2) + bytes([59])
    block += bytes([0x20]) + b"\n\0"
    assert lib.gl_fatbin_lz4(block, len(block), ffi.new("uint8_t[]", 200), 200) == len(text)
    image = container(entry(1, 75, block, flags=0x2011, raw=len(text)))
    assert extract(image)[2] == text[:-1].decode()


def _lz4_library() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("lz4")
    return ctypes.CDLL(name) if name else None


@pytest.mark.skipif(_lz4_library() is None, reason="liblz4 makes the blocks")
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000) | st.lists(st.sampled_from([b"ld.", b"%r1", b"\n", b"x" * 40]))
       .map(b"".join))
def test_lz4_decoder_matches_liblz4(data):
    lz4 = _lz4_library()
    assert lz4 is not None
    cap = len(data) + len(data) // 255 + 16
    block = ctypes.create_string_buffer(cap)
    n = lz4.LZ4_compress_default(data, block, len(data), cap)
    assert n > 0 or not data
    out = ffi.new("uint8_t[]", len(data) + 1)
    assert lib.gl_fatbin_lz4(block.raw[:n], n, out, len(data)) == len(data)
    assert ffi.buffer(out, len(data))[:] == data
    if data:  # one byte short of room is an error, never an overrun
        assert lib.gl_fatbin_lz4(block.raw[:n], n, out, len(data) - 1) == -1


# ---------------------------------------------------------------------- fuzz
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_random_bytes_never_crash(data):
    for image in (data, struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(data)) + data):
        rc, targets, _ = extract(image, targets_len=32)
        assert rc in (-5, -4, -3, -2, -1, 0, 1) and len(targets) < 32
    out = ffi.new("uint8_t[]", 256)
    assert -1 <= lib.gl_fatbin_lz4(data, len(data), out, 256) <= 256


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(VARIANTS)), st.data())
def test_mutated_real_fatbins_never_crash(name, data):
    image = bytearray(sample(name))
    for _ in range(data.draw(st.integers(1, 8))):
        where = data.draw(st.integers(0, len(image) - 1))
        if data.draw(st.booleans()):
            image[where] = data.draw(st.integers(0, 255))
        else:  # a whole header field: sizes and offsets are where parsers break
            value = data.draw(st.sampled_from([0, 1, 0x7F, 0xFFFF, 2**31, 2**32 - 1, 2**63]))
            chunk = value.to_bytes(8, "little")[: min(8, len(image) - where)]
            image[where:where + len(chunk)] = chunk
    cut = data.draw(st.integers(0, len(image)))
    for candidate in (bytes(image), bytes(image[:cut])):
        rc, _, text = extract(candidate)
        assert rc in (-4, -3, -2, -1, 0, 1) and (text is None) == (rc != 1)


if __name__ == "__main__":  # python -m tests.test_fatbin: rewrite the committed samples
    build(SAMPLES)
    print(f"wrote {len(VARIANTS)} fatbins and 2 PTX files to {SAMPLES}", file=sys.stderr)
