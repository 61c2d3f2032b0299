"""PTX kernels that call CUDA's device runtime (vprintf, __assertfail, malloc,
free), written out here so the tests need no nvcc, and the helpers that drive them
through an in-process session (tests/cuda_session.py)."""

from __future__ import annotations

import struct

from .cuda_session import Session, rec

HEAD = b""".version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0,
    .param .b64 vprintf_param_1);
.extern .func __assertfail (.param .b64 a0, .param .b64 a1, .param .b32 a2, .param .b64 a3,
    .param .b64 a4);
.extern .func (.param .b64 func_retval0) malloc (.param .b64 malloc_param_0);
.extern .func free (.param .b64 free_param_0);
"""

# show(fmt, args, ret): vprintf(fmt, args), its result to *ret (thread 0's).
# repeat(fmt, n): every thread prints fmt (with its thread index as %d) n times.
# check(n): assert(threadIdx.x < n), with the strings in the module.
# grab(out, size): out[tid] = malloc(size), and writes tid into its first word.
# drop(out): free(out[tid]).
# aligned(out): the generic addresses of a 256-aligned local and shared array.
KERNELS = HEAD + b"""
.global .align 1 .b8 msg[14] = {116, 104, 114, 101, 97, 100, 73, 100, 120, 46, 120, 32, 60, 0};
.global .align 1 .b8 file[5] = {107, 46, 99, 117, 0};
.global .align 1 .b8 func[16] = {118, 111, 105, 100, 32, 99, 104, 101, 99, 107, 40, 105, 110,
    116, 41, 0};

.visible .entry show(.param .u64 fmt, .param .u64 args, .param .u64 ret)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [fmt];
    ld.param.u64 %rd2, [args];
    ld.param.u64 %rd3, [ret];
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd2;
    .param .b32 retval0;
    call.uni (retval0), vprintf, (param0, param1);
    ld.param.b32 %r1, [retval0+0];
    }
    mov.u32 %r2, %tid.x;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra DONE;
    st.global.u32 [%rd3], %r1;
DONE:
    ret;
}

.visible .entry repeat(.param .u64 fmt, .param .u32 n)
{
    .local .align 8 .b8 depot[8];
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [fmt];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u64 %rd2, depot;
    st.local.u32 [%rd2], %r2;
    cvta.local.u64 %rd3, %rd2;
    mov.u32 %r3, 0;
LOOP:
    setp.ge.u32 %p1, %r3, %r1;
    @%p1 bra END;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd3;
    .param .b32 retval0;
    call.uni (retval0), vprintf, (param0, param1);
    }
    add.u32 %r3, %r3, 1;
    bra LOOP;
END:
    ret;
}

.visible .entry check(.param .u32 n)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.lt.u32 %p1, %r2, %r1;
    @%p1 bra OK;
    mov.u64 %rd1, msg;
    cvta.global.u64 %rd1, %rd1;
    mov.u64 %rd2, file;
    cvta.global.u64 %rd2, %rd2;
    mov.u64 %rd3, func;
    cvta.global.u64 %rd3, %rd3;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd2;
    .param .b32 param2;
    st.param.b32 [param2+0], 12;
    .param .b64 param3;
    st.param.b64 [param3+0], %rd3;
    .param .b64 param4;
    st.param.b64 [param4+0], 1;
    call.uni __assertfail, (param0, param1, param2, param3, param4);
    }
OK:
    ret;
}

.visible .entry grab(.param .u64 out, .param .u64 size)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<6>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [size];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.u64 %rd4, %rd1, %rd3;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd2;
    .param .b64 retval0;
    call.uni (retval0), malloc, (param0);
    ld.param.b64 %rd5, [retval0+0];
    }
    st.global.u64 [%rd4], %rd5;
    setp.eq.u64 %p1, %rd5, 0;
    @%p1 bra DONE;
    st.u32 [%rd5], %r1;
DONE:
    ret;
}

.visible .entry drop(.param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 8;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u64 %rd4, [%rd3];
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd4;
    call.uni free, (param0);
    }
    ret;
}

.visible .entry aligned(.param .u64 out)
{
    .local .align 4 .b8 small[4];
    .local .align 256 .b8 big[16];
    .shared .align 4 .b8 s_small[4];
    .shared .align 256 .b8 s_big[16];
    .reg .b64 %rd<8>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, big;
    cvta.local.u64 %rd3, %rd2;
    mov.u64 %rd4, s_big;
    cvta.shared.u64 %rd5, %rd4;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd6, %r1, 16;
    add.u64 %rd7, %rd1, %rd6;
    st.global.u64 [%rd7], %rd3;
    st.global.u64 [%rd7+8], %rd5;
    mov.u64 %rd2, small;
    st.local.u32 [%rd2], %r1;
    mov.u64 %rd4, s_small;
    st.shared.u32 [%rd4], %r1;
    ret;
}
"""

ILLEGAL_ADDRESS, ASSERT, INVALID_VALUE, INVALID_PTX = 700, 710, 1, 218


def kernels(s: Session) -> dict[str, int]:
    mod = s.load(KERNELS)
    return {name: s.function(mod, name)
            for name in ("show", "repeat", "check", "grab", "drop", "aligned")}


def cstr(s: Session, text: bytes) -> int:
    """``text`` NUL-terminated in new device memory."""
    p = s.alloc(len(text) + 1)
    s.htod(p, text + b"\0")
    return p


def heap(s: Session, size: int) -> int:
    """A device heap of ``size`` bytes, as the interposer makes one: an allocation
    named with glDeviceHeap."""
    base = s.alloc(size)
    assert s.run(rec("glDeviceHeap", base, size)) is None
    return base


def heap_base(s: Session) -> int:
    r = s.run(rec("glDeviceHeapBase"))
    assert r is not None and r[0] == 0
    return r[2][0]


def set_limit(s: Session, limit: int, value: int) -> int:
    r = s.run(rec("glCtxSetLimit", limit, value))
    assert r is not None
    return r[0] or r[1]


def show(s: Session, fn: dict[str, int], fmt: bytes, args: bytes,
         threads: int = 1) -> tuple[int, int, int]:
    """vprintf(fmt, args) in ``threads`` threads: (sync's deferred error, printf's
    result, the bytes the program's stdout got)."""
    before = len(s.stdout)
    f = cstr(s, fmt)
    a = s.alloc(max(len(args), 8))
    if args:
        s.htod(a, args)
    ret = s.alloc(4)
    s.launch(fn["show"], (1, 1, 1), (threads, 1, 1), struct.pack("<QQQ", f, a, ret))
    err = s.sync()[1]
    result = struct.unpack("<i", s.dtoh(ret, 4))[0] if err == 0 else 0
    return err, result, len(s.stdout) - before


# Dynamic parallelism (src/ptx/ptx_cdp.h), with no nvcc: poke(func, grid, block, shared,
# stream, shift, out) asks cudaGetParameterBufferV2(func, (grid,1,1), (block,1,1), shared)
# for a buffer, fills it for fill(out, 9), launches buffer + shift in stream, and writes
# out[32] = the buffer was given, out[33] = the launch's result, out[34] = the last error.
# fill(out, v): out[tid] = v for the first 32 threads (the slots before the answers: a
# block of up to 1024 threads is a valid launch and must not overwrite them or run past
# the buffer).
LAUNCHES = b""".version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b64 r) cudaGetParameterBufferV2 (.param .b64 f,
    .param .align 4 .b8 g[12], .param .align 4 .b8 b[12], .param .b32 s);
.extern .func (.param .b32 r) cudaLaunchDeviceV2 (.param .b64 p, .param .b64 s);
.extern .func (.param .b32 r) cudaGetLastError ();

.visible .entry fill(.param .u64 out, .param .u32 v)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, 32;
    @%p1 ret;
    mad.wide.u32 %rd2, %r2, 4, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}

.visible .entry poke(.param .u64 func, .param .u32 grid, .param .u32 block, .param .u32 shared,
    .param .u64 stream, .param .u64 shift, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [func];
    setp.ne.u64 %p1, %rd1, 0;
    @%p1 bra GIVEN;
    mov.u64 %rd1, fill; // func 0: the module's own kernel
GIVEN:
    ld.param.u32 %r1, [grid];
    ld.param.u32 %r2, [block];
    ld.param.u32 %r3, [shared];
    ld.param.u64 %rd2, [stream];
    ld.param.u64 %rd3, [shift];
    ld.param.u64 %rd4, [out];
    {
    .param .b64 f;
    .param .align 4 .b8 g[12];
    .param .align 4 .b8 b[12];
    .param .b32 s;
    .param .b64 r;
    st.param.b64 [f], %rd1;
    st.param.b32 [g], %r1;
    st.param.b32 [g+4], 1;
    st.param.b32 [g+8], 1;
    st.param.b32 [b], %r2;
    st.param.b32 [b+4], 1;
    st.param.b32 [b+8], 1;
    st.param.b32 [s], %r3;
    call.uni (r), cudaGetParameterBufferV2, (f, g, b, s);
    ld.param.b64 %rd5, [r];
    }
    setp.ne.u64 %p1, %rd5, 0;
    selp.u32 %r4, 1, 0, %p1;
    st.global.u32 [%rd4+128], %r4;
    @!%p1 bra ASKED;
    st.u64 [%rd5], %rd4;
    st.u32 [%rd5+8], 9;
ASKED:
    add.s64 %rd6, %rd5, %rd3;
    {
    .param .b64 p;
    .param .b64 s;
    .param .b32 r;
    st.param.b64 [p], %rd6;
    st.param.b64 [s], %rd2;
    call.uni (r), cudaLaunchDeviceV2, (p, s);
    ld.param.b32 %r5, [r];
    }
    st.global.u32 [%rd4+132], %r5;
    {
    .param .b32 r;
    call.uni (r), cudaGetLastError, ();
    ld.param.b32 %r6, [r];
    }
    st.global.u32 [%rd4+136], %r6;
    ret;
}
"""
