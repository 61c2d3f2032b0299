"""Asynchronous barriers (PTX's ``mbarrier`` objects) and ``cp.async.mbarrier.arrive``
on the host device's interpreter.

The rules come from the PTX ISA: an object counts the arrivals pending in its
current phase and a tx-count; a phase completes when both are zero (the parity
flips, the pending count starts again from the expected count); the state an
arrive returns is the object before that arrive, and a wait on it (or on a
parity) is true once that phase has completed. cuda-samples' simpleAWBarrier and
globalToShmemAsyncCopy (``cuda::barrier``, ``memcpy_async``) were refused at
load before (``unsupported PTX instruction 'mbarrier.init.shared.b64'``).
Hand-written PTX on host buffers through ``gl_ptx_run``.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .test_ptx_fuzz import FUZZ, HEADER, LAUNCH_FAILED, LAUNCH_TIMEOUT, check, load, run

ILLEGAL_ADDRESS = 700

# One thread walks one object through six phases; each line's value lands in out[k].
SEQUENCE = [
    ("mbarrier.init.shared.b64 [bar], 2;", None),
    ("mbarrier.arrive.noComplete.shared.b64 %rd2, [bar], 1;", None),
    ("mbarrier.pending_count.b64 %r1, %rd2;", ("r", 2)),              # before the arrive
    ("mbarrier.test_wait.shared.b64 %p1, [bar], %rd2;", ("p", 0)),     # phase 0 goes on
    ("mbarrier.arrive.shared.b64 %rd3, [bar];", None),                 # ... and completes
    ("mbarrier.test_wait.shared.b64 %p1, [bar], %rd2;", ("p", 1)),
    ("mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;", ("p", 1)),
    ("mbarrier.try_wait.parity.shared.b64 %p1, [bar], 1;", ("p", 0)),
    ("mbarrier.arrive.expect_tx.shared.b64 %rd4, [bar], 16;", None),   # phase 1: 16 bytes
    ("mbarrier.arrive.shared.b64 %rd5, [bar];", None),                 # no arrival pending
    ("mbarrier.test_wait.shared.b64 %p1, [bar], %rd4;", ("p", 0)),     # but tx-count 16
    ("mbarrier.complete_tx.shared.b64 [bar], 10;", None),
    ("mbarrier.test_wait.parity.shared.b64 %p1, [bar], 1;", ("p", 0)),
    ("mbarrier.complete_tx.shared.b64 [bar], 6;", None),               # completes phase 1
    ("mbarrier.try_wait.shared.b64 %p1, [bar], %rd4, 1000;", ("p", 1)),
    ("mbarrier.arrive_drop.shared.b64 %rd6, [bar];", None),            # phase 2; expects 1 after
    ("mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;", ("p", 0)),
    ("mbarrier.arrive.release.cta.shared::cta.b64 _, [bar];", None),   # completes phase 2
    ("mbarrier.arrive.shared.b64 %rd7, [bar];", None),                 # one arrival ends phase 3
    ("mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 %p1, [bar], 1;", ("p", 1)),
    ("cp.async.mbarrier.arrive.shared.b64 [bar];", None),              # +1 then -1: no change
    ("mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;", ("p", 0)),
    ("cp.async.mbarrier.arrive.noinc.shared.b64 [bar];", None),        # an arrival: ends phase 4
    ("mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;", ("p", 1)),
    ("cvta.shared.u64 %rd9, bar;", None),                              # generic addressing
    ("mbarrier.arrive.b64 %rd8, [%rd9];", None),                       # ends phase 5
    ("mbarrier.test_wait.b64 %p1, [%rd9], %rd8;", ("p", 1)),
    ("mbarrier.inval.shared.b64 [bar];", None),
]


def sequence_kernel() -> str:
    body, k = [], 0
    for line, out in SEQUENCE:
        body.append(line)
        if out is not None:
            value = "%r1" if out[0] == "r" else "%r2"
            if out[0] == "p":
                body.append("selp.u32 %r2, 1, 0, %p1;")
            body.append(f"st.global.u32 [%rd1+{4 * k}], {value};")
            k += 1
    return (HEADER + ".visible .entry seq(.param .u64 out)\n{\n"
            ".reg .pred %p<4>; .reg .b32 %r<4>; .reg .b64 %rd<12>;\n"
            ".shared .align 8 .b64 bar;\nld.param.u64 %rd1, [out];\n"
            + "\n".join(body) + "\nret;\n}\n")


def test_phases_tokens_parity_and_tx_count_follow_the_isa():
    want = [out[1] for _, out in SEQUENCE if out is not None]
    out = np.full(len(want), 0xFFFF, np.uint32)
    rc, _, msg = run(load(sequence_kernel()), "seq", struct.pack("<Q", out.ctypes.data), [out],
                     block=1)
    assert rc == 0, msg
    assert out.tolist() == want


# Every thread of the block publishes a word, arrives and waits; then reads a word
# of another warp. Three phases over one object; the second arrive comes after
# the reads, so no thread overwrites a word another has yet to read.
EXCHANGE = HEADER + """
.visible .entry exchange(.param .u64 out)
{
    .reg .pred %p<4>; .reg .b32 %r<24>; .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    .shared .align 4 .b32 data[256];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra INITED;
    mbarrier.init.shared.b64 [bar], %r2;
INITED:
    bar.sync 0;
    mov.u32 %r3, data; shl.b32 %r4, %r1, 2; add.u32 %r5, %r3, %r4;
    add.u32 %r7, %r1, 33; rem.u32 %r8, %r7, %r2; shl.b32 %r9, %r8, 2; add.u32 %r10, %r3, %r9;
    mul.wide.u32 %rd3, %r1, 8; add.s64 %rd4, %rd1, %rd3;
    mad.lo.u32 %r6, %r1, 3, 1; st.shared.u32 [%r5], %r6;
    mbarrier.arrive.shared.b64 %rd2, [bar];
WAIT0:
    mbarrier.test_wait.shared.b64 %p2, [bar], %rd2;
    @!%p2 bra WAIT0;
    ld.shared.u32 %r11, [%r10]; st.global.u32 [%rd4], %r11;
    mbarrier.arrive.shared.b64 %rd2, [bar];
WAIT1:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 1;
    @!%p2 bra WAIT1;
    mad.lo.u32 %r6, %r1, 5, 2; st.shared.u32 [%r5], %r6;
    mbarrier.arrive.shared.b64 %rd2, [bar];
WAIT2:
    mbarrier.try_wait.shared.b64 %p2, [bar], %rd2;
    @!%p2 bra WAIT2;
    ld.shared.u32 %r11, [%r10]; st.global.u32 [%rd4+4], %r11;
    ret;
}
"""


@pytest.mark.parametrize("threads", [32, 128, 200])
def test_a_block_exchanges_words_through_its_barrier(threads):
    out = np.zeros((threads, 2), np.uint32)
    rc, insns, msg = run(load(EXCHANGE), "exchange", struct.pack("<Q", out.ctypes.data), [out],
                         block=threads)
    assert rc == 0, msg
    other = (np.arange(threads) + 33) % threads
    assert out[:, 0].tolist() == (other * 3 + 1).tolist()
    assert out[:, 1].tolist() == (other * 5 + 2).tolist()
    # A warp whose phase is not over lets the others run at its next back edge
    # rather than spinning through its turn (1,024 back edges: 3,000 and more
    # instructions per lane for the first warp alone).
    assert insns < threads * 150


def spin_forever(setup: str) -> str:
    return (HEADER + ".visible .entry k()\n{\n.reg .pred %p<2>; .reg .b64 %rd<4>;\n"
            ".shared .align 8 .b64 bar;\n" + setup + "\nmbarrier.arrive.shared.b64 %rd1, [bar];\n"
            "L: mbarrier.try_wait.shared.b64 %p1, [bar], %rd1;\n@!%p1 bra L;\nret;\n}\n")


def test_a_phase_that_never_completes_reaches_the_time_limit(monkeypatch):
    monkeypatch.setenv("GLEAM_PTX_TIMEOUT_S", "0.3")
    rc, _, msg = run(load(spin_forever("mbarrier.init.shared.b64 [bar], 2;")), "k", b"", [],
                     block=1)
    assert rc == LAUNCH_TIMEOUT and "time limit" in msg


@pytest.mark.parametrize("setup,code,why", [
    ("", LAUNCH_FAILED, "before mbarrier.init"),
    ("mbarrier.init.shared.b64 [bar], 1; mbarrier.inval.shared.b64 [bar];", LAUNCH_FAILED,
     "after mbarrier.inval"),
    ("mbarrier.init.shared.b64 [bar], 0;", LAUNCH_FAILED, "count outside"),
    ("mbarrier.init.shared.b64 [bar], 2; mbarrier.arrive.shared.b64 %rd2, [bar], 3;",
     LAUNCH_FAILED, "fewer arrivals pending"),
    ("mbarrier.init.shared.b64 [bar], 2; mbarrier.arrive.noComplete.shared.b64 %rd2, [bar], 2;",
     LAUNCH_FAILED, "noComplete"),
    ("mbarrier.init.shared.b64 [bar], 2; mbarrier.complete_tx.shared.b64 [bar], 2000000;",
     LAUNCH_FAILED, "tx-count"),
    ("mov.u64 %rd3, 4096; mbarrier.init.b64 [%rd3], 1;", ILLEGAL_ADDRESS, "outside shared"),
    ("mbarrier.init.shared.b64 [bar+4], 1;", 716, ""),
])
def test_what_the_isa_leaves_undefined_is_an_error(monkeypatch, setup, code, why):
    monkeypatch.setenv("GLEAM_PTX_TIMEOUT_S", "5")
    rc, _, msg = run(load(spin_forever(setup)), "k", b"", [], block=1)
    assert rc == code and why in msg, msg


@pytest.mark.parametrize("insn", [
    "mbarrier.init.shared::cluster.b64 [bar], 1;",
    "mbarrier.arrive.shared::cluster.b64 _, [bar];",
    "mbarrier.init.shared.b32 [bar], 1;",
    "mbarrier.frobnicate.shared.b64 [bar];",
])
def test_other_forms_are_refused_by_name(insn):
    text = (HEADER + ".visible .entry k() {\n.reg .b64 %rd<2>;\n.shared .align 8 .b64 bar;\n"
            + insn + "\nret;\n}\n")
    rc, msg = check(text.encode())
    assert rc == -1 and "unsupported PTX instruction 'mbarrier." in msg, msg


OPS = ["mbarrier.arrive.shared.b64 %rd2, [bar], %r1;",
       "mbarrier.arrive_drop.shared.b64 %rd2, [bar];",
       "mbarrier.arrive.expect_tx.shared.b64 %rd2, [bar], %r1;",
       "mbarrier.expect_tx.shared.b64 [bar], %r1;",
       "mbarrier.complete_tx.shared.b64 [bar], %r1;",
       "mbarrier.test_wait.shared.b64 %p1, [bar], %rd1;",
       "mbarrier.test_wait.parity.shared.b64 %p1, [bar], %r1;",
       "mbarrier.pending_count.b64 %r2, %rd1;",
       "cp.async.mbarrier.arrive.noinc.shared.b64 [bar];"]


@FUZZ
@given(word=st.integers(0, 2**64 - 1), operand=st.integers(0, 2**32 - 1),
       ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=6))
def test_any_object_bits_give_an_answer_or_an_error(word, operand, ops):
    """The object lives in shared memory the kernel may overwrite: whatever its bits,
    every operation answers or faults, and never reaches outside the object."""
    text = (HEADER + ".visible .entry k(.param .u64 out)\n{\n.reg .pred %p<2>; "
            ".reg .b32 %r<4>; .reg .b64 %rd<4>;\n.shared .align 8 .b64 bar;\n"
            ".shared .align 8 .b64 guard;\n"
            f"mov.u64 %rd1, {word}; mov.u32 %r1, {operand};\n"
            "st.shared.u64 [bar], %rd1; st.shared.u64 [guard], 77;\n"
            + "\n".join(ops) + "\nld.shared.u64 %rd3, [guard]; ld.param.u64 %rd2, [out];\n"
            "st.global.u64 [%rd2], %rd3;\nret;\n}\n")
    out = np.zeros(1, np.uint64)
    rc, _, msg = run(load(text), "k", struct.pack("<Q", out.ctypes.data), [out], block=1)
    assert rc in (0, LAUNCH_FAILED), msg
    assert rc != 0 or out[0] == 77
