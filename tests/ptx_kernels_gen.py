"""Random PTX kernels for differential tests of the host device's two tiers.

A kernel reads its registers from an input slot per thread, runs a random body
(integer, float and conversion arithmetic, comparisons and predicate logic, guards,
forward branches that diverge, short loops with per-lane trip counts (some with their
join block, and a warp-wide .sync, laid out before the divergent region), grid-stride loops
in nvcc's shape (some counting bytes into shared memory, a histogram), warp shuffles,
votes and __syncwarp, shared and local memory, a barrier, and now and then a store that may
land out of bounds), then writes every register to an output slot. It runs in one block, so
no register is read before it is written and every lane's result is defined: the
interpreter and the compiled code must leave identical bytes (or the identical fault).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

NR, NRD, NF, NFD, NP = 8, 4, 4, 2, 4  # registers of each kind the body uses
SLOT = 64  # bytes of input and of output per thread
HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

R = [f"%r{i}" for i in range(1, NR + 1)]
RD = [f"%rd{i}" for i in range(1, NRD + 1)]
F = [f"%f{i}" for i in range(1, NF + 1)]
FD = [f"%fd{i}" for i in range(1, NFD + 1)]
P = [f"%p{i}" for i in range(1, NP + 1)]


@dataclass
class Kernel:
    text: str
    threads: int
    lines: list[str] = field(default_factory=list)


def _imm32(draw: st.DrawFn) -> str:
    return str(draw(st.sampled_from([0, 1, 2, 3, 7, 31, 32, 33, 255, -1, -7, 0x7FFFFFFF,
                                     -0x80000000, 1000003])))


def _one(draw: st.DrawFn, regs: list[str]) -> str:
    return draw(st.sampled_from(regs))


@st.composite
def _operand(draw: st.DrawFn, regs: list[str], imm: bool = True) -> str:
    if imm and draw(st.integers(0, 4)) == 0:
        return _imm32(draw)
    return draw(st.sampled_from(regs))


@st.composite
def _int_op(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(["add", "sub", "mul.lo", "mul.hi", "min", "max", "div", "rem",
                               "and", "or", "xor", "shl", "shr", "mad.lo", "mul24.lo",
                               "sad", "add.sat", "popc", "clz", "brev", "not", "cnot", "neg",
                               "abs", "bfe", "prmt", "mul.wide", "bfind"]))
    t = draw(st.sampled_from(["s32", "u32"]))
    d, a, b, c = (_one(draw, R), draw(_operand(R, False)), draw(_operand(R)),
                  draw(_operand(R)))
    if op in ("and", "or", "xor", "shl", "not", "cnot", "popc", "clz", "brev", "prmt"):
        t = "b32"
    if op == "shr":
        return f"shr.{draw(st.sampled_from(['u32', 's32', 'b32']))} {d}, {a}, {b};"
    if op in ("popc", "clz", "brev", "not", "cnot"):
        return f"{op}.{t} {d}, {a};"
    if op in ("neg", "abs"):
        return f"{op}.s32 {d}, {a};"
    if op == "add.sat":
        return f"add.sat.s32 {d}, {a}, {b};"
    if op in ("mad.lo", "sad"):
        return f"{op}.{t} {d}, {a}, {b}, {c};"
    if op == "bfe":
        return f"bfe.{t} {d}, {a}, {b}, {c};"
    if op == "prmt":
        return f"prmt.b32 {d}, {a}, {b}, {c};"
    if op == "bfind":
        return f"bfind.{t} {d}, {a};"
    if op == "mul.wide":
        return f"mul.wide.{t} {_one(draw, RD)}, {a}, {b};"
    return f"{op}.{t} {d}, {a}, {b};"


@st.composite
def _wide_op(draw: st.DrawFn) -> str:
    d, a, b = _one(draw, RD), _one(draw, RD), _one(draw, RD)
    op = draw(st.sampled_from(["add.s64", "sub.u64", "mul.lo.u64", "mul.hi.s64", "xor.b64",
                               "min.s64", "max.u64", "shl.b64", "shr.s64", "div.u64"]))
    if op.startswith(("shl", "shr")):
        return f"{op} {d}, {a}, {_one(draw, R)};"
    return f"{op} {d}, {a}, {b};"


@st.composite
def _float_op(draw: st.DrawFn) -> str:
    d, a, b, c = (_one(draw, F) for _ in range(4))
    rnd = draw(st.sampled_from([".rn", ".rn", ".rn", ".rz", ".rm"]))
    sat = draw(st.sampled_from(["", "", ".sat"]))
    op = draw(st.sampled_from(["add", "sub", "mul", "div", "fma", "min", "max", "neg", "abs",
                               "sqrt", "rcp", "sin", "ex2", "lg2", "f64"]))
    if op in ("add", "sub", "mul"):
        return f"{op}{rnd}{sat}.f32 {d}, {a}, {b};"
    if op == "div":
        return f"div{rnd}.f32 {d}, {a}, {b};"
    if op == "fma":
        return f"fma{rnd}{sat}.f32 {d}, {a}, {b}, {c};"
    if op in ("min", "max"):
        return f"{op}{draw(st.sampled_from(['', '.NaN']))}.f32 {d}, {a}, {b};"
    if op in ("neg", "abs"):
        return f"{op}.f32 {d}, {a};"
    if op in ("sqrt", "rcp"):
        return f"{op}{rnd}.f32 {d}, {a};"
    if op in ("sin", "ex2", "lg2"):
        return f"{op}.approx.f32 {d}, {a};"
    x, y = _one(draw, FD), _one(draw, FD)
    return f"{draw(st.sampled_from(['add.f64', 'mul.rn.f64', 'div.rn.f64']))} {x}, {x}, {y};"


CONVERTS = (
    "cvt.rn.f32.s32 {f}, {r};", "cvt.rn.f32.u32 {f}, {r};", "cvt.rzi.s32.f32 {r}, {f};",
    "cvt.rni.s32.f32 {r}, {f};", "cvt.rzi.u32.f32 {r}, {f};", "cvt.f64.f32 {fd}, {f};",
    "cvt.rn.f32.f64 {f}, {fd};", "cvt.u64.u32 {rd}, {r};", "cvt.s64.s32 {rd}, {r};",
    "cvt.u32.u64 {r}, {rd};", "cvt.u16.u32 %rs1, {r};", "cvt.s32.s16 {r}, %rs1;",
    "cvt.sat.u8.s32 {r}, {r};", "cvt.rn.f64.s64 {fd}, {rd};", "mov.b32 {r}, {f};",
    "mov.b32 {f}, {r};", "mov.b64 {rd}, {fd};", "cvt.rn.f16.f32 %rs1, {f};",
    "cvt.f32.f16 {f}, %rs1;", "mov.b64 {{{r}, {r2}}}, {rd};",
)


@st.composite
def _convert(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(CONVERTS)).format(
        r=_one(draw, R), r2=_one(draw, R), f=_one(draw, F), rd=_one(draw, RD), fd=_one(draw, FD))


@st.composite
def _compare(draw: st.DrawFn) -> str:
    p, q = _one(draw, P), _one(draw, P)
    t = draw(st.sampled_from(["s32", "u32", "f32", "s64"]))
    regs = {"s32": R, "u32": R, "f32": F, "s64": RD}[t]
    cmps = ["eq", "ne", "lt", "le", "gt", "ge"] + (["equ", "ltu", "num", "nan"] if t == "f32"
                                                   else [])
    cmp = draw(st.sampled_from(cmps))
    a, b = draw(st.sampled_from(regs)), draw(st.sampled_from(regs))
    comb = draw(st.sampled_from(["", "", ".and", ".or"]))
    if comb:
        return f"setp.{cmp}{comb}.{t} {p}, {a}, {b}, {draw(st.sampled_from(['', '!']))}{q};"
    return f"setp.{cmp}.{t} {p}, {a}, {b};"


@st.composite
def _select(draw: st.DrawFn) -> str:
    p, q, s = (_one(draw, P) for _ in range(3))
    return draw(st.sampled_from([
        f"selp.b32 {_one(draw, R)}, {_one(draw, R)}, "
        f"{draw(_operand(R))}, {p};",
        f"selp.f32 {_one(draw, F)}, {_one(draw, F)}, "
        f"{_one(draw, F)}, {p};",
        f"and.pred {p}, {q}, {s};", f"or.pred {p}, !{q}, {s};", f"xor.pred {p}, {q}, {s};",
        f"not.pred {p}, {q};", f"mov.pred {p}, {q};",
    ]))


@st.composite
def _warp(draw: st.DrawFn) -> str:
    d, a = _one(draw, R), _one(draw, R)
    mode = draw(st.sampled_from(["bfly", "down", "up", "idx"]))
    lane = draw(st.sampled_from(["1", "2", "16", "31", _one(draw, R)]))
    c = draw(st.sampled_from(["31", "0x1f", "0", "0x101f"]))
    p = _one(draw, P)
    return draw(st.sampled_from([
        f"shfl.sync.{mode}.b32 {d}, {a}, {lane}, {c}, -1;",
        f"shfl.sync.{mode}.b32 {d}|{p}, {a}, {lane}, {c}, -1;",
        f"vote.sync.ballot.b32 {d}, {p}, -1;", f"vote.sync.any.pred {p}, {p}, -1;",
        f"vote.sync.all.pred {p}, !{p}, -1;", f"activemask.b32 {d};", "bar.warp.sync -1;",
    ]))


@st.composite
def _memory(draw: st.DrawFn) -> str:
    r, d = _one(draw, R), _one(draw, R)
    return draw(st.sampled_from([
        # shared: a thread's own word, another lane's, an atomic on a masked word
        f"st.shared.u32 [%rd10], {r};",
        f"and.b32 %r9, {r}, 252; add.s32 %r9, %r9, %r11; ld.shared.u32 {d}, [%r9];",
        f"and.b32 %r9, {r}, 252; add.s32 %r9, %r9, %r11; atom.shared.add.u32 {d}, [%r9], {r};",
        f"and.b32 %r9, {r}, 60; add.s32 %r9, %r9, %r12; st.local.u32 [%r9], {d};",
        f"and.b32 %r9, {r}, 60; add.s32 %r9, %r9, %r12; ld.local.u32 {d}, [%r9];",
        f"ld.global.u32 {d}, [%rd12+{4 * draw(st.integers(0, 15))}];",
        # a store whose index comes from data: in bounds most of the time
        f"and.b32 %r9, {r}, {draw(st.sampled_from(['15', '15', '255', '1023']))}; "
        f"mul.wide.u32 %rd9, %r9, 4; add.s64 %rd9, %rd13, %rd9; st.global.u32 [%rd9], {d};",
    ]))


@st.composite
def _straight(draw: st.DrawFn) -> str:
    line = draw(st.one_of(_int_op(), _wide_op(), _float_op(), _convert(), _compare(),
                          _select(), _warp(), _memory()))
    if ";" in line[:-1] or line.startswith(("shfl", "vote", "activemask", "bar")):
        return line  # several instructions, or warp-wide: never guarded
    guard = draw(st.sampled_from(["", "", "", f"@{_one(draw, P)} ",
                                  f"@!{_one(draw, P)} "]))
    return guard + line


@st.composite
def kernels(draw: st.DrawFn) -> Kernel:
    """A kernel `k(out, in)` for one block of the drawn size."""
    threads = draw(st.sampled_from([32, 64, 80]))
    body: list[str] = []
    labels = 0
    for _ in range(draw(st.integers(4, 40))):
        shape = draw(st.integers(0, 9))
        if shape == 0:  # a forward branch: lanes diverge and meet again
            labels += 1
            body.append(f"@{draw(st.sampled_from(['', '!']))}{_one(draw, P)} "
                        f"bra $L{labels};")
            body += [draw(_straight()) for _ in range(draw(st.integers(1, 4)))]
            body.append(f"$L{labels}:")
        elif shape == 1:  # a loop of 1 to 4 trips, the count per lane
            labels += 1
            body.append(f"and.b32 %r10, {_one(draw, R)}, 3; add.s32 %r10, %r10, 1;")
            body.append(f"$L{labels}:")
            body += [draw(_straight()) for _ in range(draw(st.integers(1, 3)))]
            body.append(f"sub.s32 %r10, %r10, 1; setp.ne.s32 %p5, %r10, 0; @%p5 bra $L{labels};")
        elif shape == 2:
            body.append("bar.sync 0;")
        elif shape == 3:  # a loop whose join block, with a .sync, comes before its region
            labels += 1  # (nvcc's layout: the lanes that skip the region get there first)
            j, h, d = f"$J{labels}", f"$H{labels}", f"$D{labels}"
            body.append(f"and.b32 %r10, {_one(draw, R)}, 3; add.s32 %r10, %r10, 1; "
                        f"bra.uni {h};")
            body.append(f"{j}:")
            body += [draw(_straight()) for _ in range(draw(st.integers(0, 2)))]
            body.append(draw(_warp()))
            body.append("sub.s32 %r10, %r10, 1;")
            body.append(f"{h}:")
            body.append(f"setp.eq.s32 %p5, %r10, 0; @%p5 bra {d}; "
                        f"@{draw(st.sampled_from(['', '!']))}{_one(draw, P)} bra {j};")
            body += [draw(_straight()) for _ in range(draw(st.integers(1, 3)))]
            body.append(f"bra.uni {j};")
            body.append(f"{d}:")
        elif shape == 4:  # a grid-stride loop in nvcc's shape (compiled: trips with one index)
            labels += 1
            t = f"$T{labels}"
            body.append("mov.u32 %r10, %tid.x;")
            body.append(f"{t}:")
            body += [draw(_straight()) for _ in range(draw(st.integers(0, 2)))]
            if draw(st.booleans()):  # a histogram's gather: in[x & 1023] counted in shared
                body.append("and.b32 %r9, %r10, 1023; cvt.u64.u32 %rd9, %r9; "
                            "mov.u32 %r9, %tid.x; mul.wide.u32 %rd11, %r9, 64; "
                            "sub.s64 %rd11, %rd12, %rd11; add.s64 %rd9, %rd11, %rd9;")
                body.append("ld.global.u8 %rs1, [%rd9]; cvt.u32.u16 %r9, %rs1; "
                            "shl.b32 %r9, %r9, 2; add.s32 %r9, %r9, %r11; "
                            f"atom.shared.add.u32 {_one(draw, R)}, [%r9], 1;")
            stride = draw(st.sampled_from([32, 64, 96]))
            bound = draw(st.integers(1, 6 * stride + 80))
            ty = draw(st.sampled_from(["s32", "u32"]))
            body.append(f"add.s32 %r10, %r10, {stride}; setp.lt.{ty} %p5, %r10, {bound}; "
                        f"@%p5 bra {t};")
        else:
            body.append(draw(_straight()))
    regs = (f".reg .pred %p<6>; .reg .b32 %r<13>; .reg .b64 %rd<14>; .reg .f32 %f<{NF + 1}>;"
            f" .reg .f64 %fd<{NFD + 1}>; .reg .b16 %rs<2>;")
    load = [f"ld.global.u32 {r}, [%rd12+{4 * i}];" for i, r in enumerate(R)]
    load += [f"ld.global.f32 {f}, [%rd12+{32 + 4 * i}];" for i, f in enumerate(F)]
    load += [f"cvt.u64.u32 {rd}, {R[i]}; shl.b64 {rd}, {rd}, 17; xor.b64 {rd}, {rd}, {R[-1 - i]};"
             for i, rd in enumerate(RD)]
    load += [f"cvt.f64.f32 {fd}, {F[i]};" for i, fd in enumerate(FD)]
    load += [f"setp.lt.u32 {p}, {R[i]}, {R[i + 1]};" for i, p in enumerate(P)]
    load += ["cvt.u16.u32 %rs1, %r1;"]
    store = [f"st.global.u32 [%rd13+{4 * i}], {r};" for i, r in enumerate(R)]
    store += [f"st.global.f32 [%rd13+{32 + 4 * i}], {f};" for i, f in enumerate(F)]
    store += [f"st.global.u64 [%rd13+{48 + 8 * 0}], {RD[0]};", f"xor.b64 %rd9, {RD[1]}, {RD[2]};"
              f" xor.b64 %rd9, %rd9, {RD[3]}; cvt.rzi.s64.f64 %rd11, {FD[0]};"
              f" xor.b64 %rd9, %rd9, %rd11; st.global.u64 [%rd13+56], %rd9;"]
    bits = "".join(f"selp.b32 %r9, {1 << i}, 0, {p}; or.b32 %r10, %r10, %r9; "
                   for i, p in enumerate(P))
    store += [f"mov.u32 %r10, 0; {bits}st.global.u32 [%rd13+44], %r10;"]
    text = HEADER + "\n".join([
        ".visible .entry k(.param .u64 out, .param .u64 in)", "{", regs,
        ".shared .align 8 .b8 sh[4096];", ".local .align 8 .b8 lbuf[64];",
        "ld.param.u64 %rd13, [out]; ld.param.u64 %rd12, [in];",
        "mov.u32 %r10, %tid.x; mul.wide.u32 %rd11, %r10, 64;",
        "add.s64 %rd12, %rd12, %rd11; add.s64 %rd13, %rd13, %rd11;",
        "mul.wide.u32 %rd10, %r10, 4; mov.u32 %r11, sh; mov.u32 %r12, lbuf;", *load,
        "bar.sync 0;", *body, "bar.sync 0;", *store, "ret;", "}", ""])
    return Kernel(text, threads, body)
