"""The host device's limits on a kernel, as a GPU's: virtual registers are not
refused as such (NVVM declares one per value: cuda-samples' tensor-core GEMM has
35,000); a block whose registers the host device cannot hold is
CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, which loses nothing; a kernel's parameters
take up to 32764 bytes (CUDA 12.1 on Volta and later)."""

from __future__ import annotations

import struct

from .cuda_session import ptx_only_session

HEAD = b".version 8.0\n.target sm_80\n.address_size 64\n"
OUT_OF_RESOURCES, INVALID_PTX = 701, 218


def many_registers(n: int) -> bytes:
    """A kernel that declares n registers and writes through the last one."""
    return HEAD + f""".visible .entry k(.param .u64 out)
{{
    .reg .b32 %r<{n}>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r{n - 1}, %tid.x;
    mul.wide.u32 %rd2, %r{n - 1}, 4;
    add.u64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r{n - 1};
    ret;
}}
""".encode()


def test_a_kernel_with_tens_of_thousands_of_registers_runs():
    with ptx_only_session() as s:
        fn = s.function(s.load(many_registers(40000)), "k")
        out = s.alloc(4 * 256)
        s.launch(fn, (2, 1, 1), (256, 1, 1), struct.pack("<Q", out))
        assert s.sync() == (0, 0)
        assert struct.unpack("<256I", s.dtoh(out, 4 * 256)) == tuple(range(256))


def test_a_block_whose_registers_do_not_fit_does_not_start_and_loses_nothing():
    with ptx_only_session() as s:
        fn = s.function(s.load(many_registers(200000)), "k")
        out = s.alloc(4 * 1024)
        s.launch(fn, (1, 1, 1), (1024, 1, 1), struct.pack("<Q", out))
        assert s.sync() == (0, OUT_OF_RESOURCES)
        assert "too many resources requested for launch" in s.notes[0]
        s.launch(fn, (1, 1, 1), (32, 1, 1), struct.pack("<Q", out))  # 32 threads fit
        assert s.sync() == (0, 0)
        assert struct.unpack("<32I", s.dtoh(out, 4 * 32)) == tuple(range(32))


def large_parameter(size: int) -> bytes:
    return HEAD + f""".visible .entry big(.param .align 4 .b8 p[{size}], .param .u64 out)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u32 %r1, [p+{size - 4}];
    ld.param.u64 %rd1, [out];
    st.global.u32 [%rd1], %r1;
    ret;
}}
""".encode()


def test_kernel_parameters_up_to_cudas_32764_bytes():
    with ptx_only_session() as s:
        size = 32752  # the pointer after it ends at 32760
        fn = s.function(s.load(large_parameter(size)), "big")
        out = s.alloc(4)
        params = bytes(size - 4) + struct.pack("<I", 0xC0FFEE) + struct.pack("<Q", out)
        s.launch(fn, (1, 1, 1), (1, 1, 1), params)
        assert s.sync() == (0, 0) and s.dtoh(out, 4) == struct.pack("<I", 0xC0FFEE)
    with ptx_only_session() as s:
        s.load(large_parameter(32764))
        assert s.sync() == (0, INVALID_PTX)
        assert "parameters larger than 32764 bytes" in s.notes[0]
