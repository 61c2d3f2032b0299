"""What the host device makes of a kernel's PTX beyond running it, and memsets of
module globals: driven in-process, straight into the executor (tests/cuda_session.py).

- function attributes from the PTX: launch bounds (.maxntid, .reqntid, .maxnreg) as
  MAX_THREADS_PER_BLOCK, the module's .const bytes, an estimate of live registers;
- a launch over the bounds is refused with a note, as a GPU refuses it;
- a shuffle that reads a lane not running it gets 0 (the cuda-samples reduction);
- a memset of a module global sets it (it wrote nothing and failed a later call);
- a one-way call that fails without saying why is named on the reply that reports it.
- a warp spinning on what another warp of its block writes lets that warp run.
"""

from __future__ import annotations

import struct

from .cuda_session import ptx_only_session, rec

INVALID_VALUE = 1
MAX_THREADS, SHARED, CONST, LOCAL, NUM_REGS = 0, 1, 2, 3, 4

BOUNDED = b""".version 8.0
.target sm_80
.address_size 64
.const .align 4 .b8 table[200];
.const .align 8 .u64 scale;
.global .align 4 .u32 counter;
.visible .entry bounded(.param .u64 p) .maxntid 64, 2, 1
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    ld.const.u32 %r2, [table];
    add.u32 %r3, %r1, %r2;
    st.global.u32 [%rd1], %r3;
    ret;
}
.visible .entry required() .reqntid 32 { ret; }
.visible .entry few_registers() .maxnreg 128 { ret; }
.visible .entry free() { ret; }
"""

# Lanes 0-7 sum eight values with down-shuffles of 16, 8, 4, 2, 1 and a member mask
# of those eight lanes; lanes 8-31 hold 100 each but skip the shuffles.
PARTIAL = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry partial(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %laneid;
    mov.u32 %r2, 100;
    setp.ge.u32 %p1, %r1, 8;
    @%p1 bra DONE;
    add.u32 %r2, %r1, 1;
    mov.u32 %r3, 16;
LOOP:
    shfl.sync.down.b32 %r4, %r2, %r3, 31, 255;
    add.u32 %r2, %r2, %r4;
    shr.u32 %r3, %r3, 1;
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra LOOP;
DONE:
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra END;
    st.global.u32 [%rd1], %r2;
END:
    ret;
}
"""

GLOBALS = b""".version 8.0
.target sm_80
.address_size 64
.global .align 4 .b8 flags[64];
"""


def attribute(s, fn: int, attrib: int) -> int:
    reply = s.run(rec("cuFuncGetAttribute", attrib, fn))
    assert reply is not None and reply[0] == 0, reply
    return reply[2][0]


def test_launch_bounds_constant_bytes_and_registers_come_from_the_ptx():
    with ptx_only_session() as s:
        mod = s.load(BOUNDED)
        fns = {name: s.function(mod, name)
               for name in ("bounded", "required", "few_registers", "free")}
        assert attribute(s, fns["bounded"], MAX_THREADS) == 128
        assert attribute(s, fns["required"], MAX_THREADS) == 32
        assert attribute(s, fns["few_registers"], MAX_THREADS) == 512  # 65536 / 128
        assert attribute(s, fns["free"], MAX_THREADS) == 1024
        assert attribute(s, fns["bounded"], CONST) == 208  # 200 + 8, .global not counted
        regs = attribute(s, fns["bounded"], NUM_REGS)
        assert 2 <= regs <= 8, regs  # a handful live at once, never 255
        assert attribute(s, fns["few_registers"], NUM_REGS) <= 128


def test_a_launch_over_the_bounds_is_refused_and_one_within_runs():
    with ptx_only_session() as s:
        fn = s.function(s.load(BOUNDED), "bounded")
        out = s.alloc(4)
        s.launch(fn, (1, 1, 1), (64, 2, 1), struct.pack("<Q", out))
        assert s.sync() == (0, 0)
        s.launch(fn, (1, 1, 1), (64, 4, 1), struct.pack("<Q", out))
        assert s.sync() == (0, INVALID_VALUE)
        assert s.notes == ["kernel bounded: a block of 256 threads is over its launch bounds "
                           "(128)"]


def test_a_shuffle_from_a_lane_not_running_it_reads_zero():
    with ptx_only_session() as s:
        fn = s.function(s.load(PARTIAL), "partial")
        out = s.alloc(4)
        s.launch(fn, (1, 1, 1), (32, 1, 1), struct.pack("<Q", out))
        assert struct.unpack("<I", s.dtoh(out, 4))[0] == sum(range(1, 9))


def test_a_memset_of_a_module_global_sets_it():
    with ptx_only_session() as s:
        result, ptr, size = s.global_(s.load(GLOBALS), "flags")
        assert result == 0 and size == 64
        s.run(rec("cuMemsetD8", ptr, 0x5A, 64))
        assert s.dtoh(ptr, 64) == b"\x5a" * 64
        s.run(rec("cuMemsetD32", ptr, 0x01020304, 16))
        assert s.dtoh(ptr, 8) == struct.pack("<II", 0x01020304, 0x01020304)
        assert s.sync() == (0, 0)


def test_a_failed_one_way_call_is_named_on_the_reply_that_reports_it():
    with ptx_only_session() as s:
        p = s.alloc(64)
        s.run(rec("cuMemsetD32", p + 2, 1, 4))  # misaligned: refused without a reason of its own
        assert s.sync() == (0, INVALID_VALUE)
        assert s.notes == ["cuMemsetD32 failed with CUDA_ERROR_INVALID_VALUE; a later call "
                           "reports it"]
        assert s.sync() == (0, 0) and s.notes == []


# Warp 0 spins until warp 1 writes the flag: the interpreter ran warp 0 until it
# reached a barrier or exited, so warp 1 never ran and the launch hit the time limit.
SPIN = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 flag, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 32;
    @%p1 bra SETTER;
WAIT:
    ld.volatile.global.u32 %r2, [%rd1];
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra WAIT;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra END;
    st.global.u32 [%rd2], %r2;
    bra.uni END;
SETTER:
    setp.ne.u32 %p1, %r1, 32;
    @%p1 bra END;
    st.volatile.global.u32 [%rd1], 42;
END:
    ret;
}
"""


def test_a_warp_spinning_on_another_warps_write_lets_it_run(monkeypatch):
    monkeypatch.setenv("GLEAM_PTX_TIMEOUT_S", "20")
    with ptx_only_session() as s:
        fn = s.function(s.load(SPIN), "spin")
        flag, out = s.alloc(4), s.alloc(4)
        s.htod(flag, b"\0" * 4)
        s.launch(fn, (1, 1, 1), (64, 1, 1), struct.pack("<QQ", flag, out))
        assert s.sync() == (0, 0), s.notes
        assert struct.unpack("<I", s.dtoh(out, 4))[0] == 42
