"""The host device's attribute table (peer/cuda/server/host_identity.py): complete enough
for cudart's ``cudaDeviceProp`` and cuBLASLt, and true to what the interpreter does."""

from __future__ import annotations

from gleam.peer.cuda.server.host_identity import host_attributes
from gleam.peer.cuda.server.native import HostBackend

PTX_MAX_SHARED = 1 << 20  # cffi_build/src/ptx/ptx.h: static + dynamic shared bytes per block


def test_capability_and_the_limits_libraries_read() -> None:
    attrs = host_attributes(6)
    assert (attrs[75], attrs[76]) == (8, 0)
    assert attrs[16] == 6  # a core per multiprocessor
    # cuBLASLt refuses a context whose per-block or per-SM limits are zero.
    for number in (8, 9, 12, 13, 36, 37, 38, 39, 81, 82, 97, 106):
        assert attrs[number] > 0, number
    assert attrs[8] <= attrs[97] <= attrs[81] <= PTX_MAX_SHARED
    assert attrs[1] == attrs[2] == 1024  # the interpreter's block limit
    # an 8.0 device's residency, which the host device's cooperative grids keep
    assert (attrs[39], attrs[106]) == (2048, 32)
    assert all(-(2**31) <= v < 2**31 for v in attrs.values())


def test_array_and_texture_limits_are_within_the_host_devices_own() -> None:
    from gleam.peer.nativelib import lib

    attrs = host_attributes(2)
    # every texture and surface extent limit (21-29, 42-49, 52-68, 73, 74, 77)
    extents = [*range(21, 30), 42, 43, 45, 46, 47, 48, 49, *range(52, 69), 73, 74, 77]
    for number in extents:
        assert 0 < attrs[number] <= lib.GL_ARRAY_EXTENT_MAX, number
    assert (attrs[14], attrs[51]) == (512, 32)  # texture and pitch alignment


def test_what_the_host_device_does_not_have_reads_zero() -> None:
    attrs = host_attributes(2)
    # Managed and mapped memory, clusters, VMM's shareable handles, compression: not there.
    for number in (19, 83, 89, 103, 107, 120):
        assert attrs.get(number, 0) == 0, number
    assert attrs[95] == 1  # COOPERATIVE_LAUNCH: every block of such a grid resident
    assert host_attributes(0)[16] == 1


def test_the_backend_reports_the_table() -> None:
    backend = HostBackend({}, memory_limit=1 << 26)
    try:
        (device,) = backend.devices()
    finally:
        backend.close()
    assert device.attrs[97] == host_attributes(1)[97] and device.attrs[16] >= 1
