"""Instantiated graphs on the server: descriptions checked and run by the executor.

Each test drives a real in-process session on the host backend with the records the
interposer sends (glGraphInstantiate, glGraphLaunch, glGraphUpdate, glGraphExecDestroy),
the descriptions built by tests/graph_desc.py. A description is untrusted: every
malformed one is refused whole (a deferred CUDA_ERROR_INVALID_VALUE and a note), and
hypothesis feeds random and mutated ones to the executor.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import graph_desc as gd
from .cuda_session import EVENT, Session, mint, ptx_only_session, rec

GEXEC = 11  # HANDLE_KINDS' eleventh kind
CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_HANDLE = 1, 400

ADD_ONE = b"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 p, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r6, [%rd4];
    add.u32 %r6, %r6, 1;
    st.global.u32 [%rd4], %r6;
DONE:
    ret;
}
\0"""


@pytest.fixture
def s():
    with ptx_only_session() as session:
        yield session


def instantiate(s: Session, g: gd.Graph | bytes) -> int:
    desc = g if isinstance(g, bytes) else g.encode()
    exec_ = mint(GEXEC)
    assert s.run(rec("glGraphInstantiate", exec_, len(desc), payload=desc)) is None
    return exec_


def launch(s: Session, exec_: int, stage: int = 0) -> tuple[int, int]:
    assert s.run(rec("glGraphLaunch", exec_, stage, 0)) is None
    return s.sync()


def words(s: Session, p: int, n: int) -> list[int]:
    return list(struct.unpack(f"<{n}I", s.dtoh(p, 4 * n)))


def test_nodes_run_in_dependency_order_and_only_when_launched(s):
    a, b = s.alloc(64), s.alloc(64)
    # Created copy first, memset second: the edge, not the order, decides.
    g = gd.Graph([gd.copy(b, a, 64), gd.memset(a, 16, 7, elem=4)], edges=[(1, 0)])
    ex = instantiate(s, g)
    assert s.sync() == (0, 0)
    assert words(s, b, 16) == [0] * 16  # instantiating runs nothing
    assert launch(s, ex) == (0, 0)
    assert words(s, b, 16) == [7] * 16


def test_kernel_node_with_packed_parameters_runs_each_launch(s):
    fn = s.function(s.load(ADD_ONE), "add_one")
    p = s.alloc(4 * 100)
    g = gd.Graph([gd.kernel(fn, (4, 1, 1), (32, 1, 1), struct.pack("<QI", p, 100))])
    ex = instantiate(s, g)
    for _ in range(3):
        assert launch(s, ex) == (0, 0)
    assert words(s, p, 100) == [3] * 100


def test_stages_run_separately_and_edges_stay_in_their_stage(s):
    a, b = s.alloc(16), s.alloc(16)
    g = gd.Graph([gd.memset(a, 16, 1), gd.memset(b, 16, 2, stage=1)], stages=3)
    ex = instantiate(s, g)
    assert launch(s, ex, 1) == (0, 0)
    assert s.dtoh(a, 16) == bytes(16) and s.dtoh(b, 16) == bytes([2] * 16)
    assert launch(s, ex, 2) == (0, 0)  # a stage without device nodes does nothing
    assert s.dtoh(a, 16) == bytes(16)
    assert launch(s, ex, 0) == (0, 0)
    assert s.dtoh(a, 16) == bytes([1] * 16)


def test_a_stage_beyond_the_graph_is_refused(s):
    ex = instantiate(s, gd.Graph([gd.memset(s.alloc(16), 16, 1)]))
    assert launch(s, ex, 1) == (0, CUDA_ERROR_INVALID_VALUE)


def test_pitched_memset_and_3d_copy(s):
    src, dst = s.alloc(4 * 8 * 3), s.alloc(6 * 4 * 3)
    s.htod(src, bytes(range(96)))
    # 3 slices of 2 rows of 3 bytes: source rows 8 apart, slices 4 rows apart;
    # destination rows 6 apart, slices 2 rows apart.
    g = gd.Graph([gd.memset(dst, 3, 0xEE, pitch=6, height=6),
                  gd.copy(dst, src, 3, height=2, depth=3, src_pitch=8, src_height=4,
                          dst_pitch=6, dst_height=2)], edges=[(0, 1)])
    assert launch(s, instantiate(s, g)) == (0, 0)
    out = s.dtoh(dst, 36)
    for z in range(3):
        for y in range(2):
            row = out[(z * 2 + y) * 6:(z * 2 + y) * 6 + 6]
            base = z * 32 + y * 8
            assert row == bytes(range(base, base + 3)) + b"\0\0\0"


def test_event_nodes_record_and_wait(s):
    ev = mint(EVENT)
    assert s.run(rec("cuEventCreate", ev, 0)) is None
    g = gd.Graph([gd.event(gd.EVENT_RECORD, ev), gd.event(gd.EVENT_WAIT, ev)], edges=[(0, 1)])
    assert launch(s, instantiate(s, g)) == (0, 0)
    r = s.run(rec("cuEventQuery", ev))
    assert r is not None and r[0] == 0


@pytest.mark.parametrize("change", [
    "magic", "version", "cycle", "self_edge", "cross_stage", "edge_index", "kind", "elem",
    "overlapping_rows", "params_outside", "empty_grid", "length", "stage", "too_many",
    "empty_with_contents", "copy_slices_overlap"])
def test_malformed_descriptions_are_refused_whole(s, change):
    a = s.alloc(64)
    nodes = [gd.memset(a, 4, 1), gd.memset(a, 4, 2)]
    edges = [(0, 1)]
    stages = None
    if change == "cycle":
        edges = [(0, 1), (1, 0)]
    elif change == "self_edge":
        edges = [(0, 0)]
    elif change == "cross_stage":
        nodes[1].stage = 1
    elif change == "edge_index":
        edges = [(0, 5)]
    elif change == "kind":
        nodes[0].kind = 9
    elif change == "elem":
        nodes[0] = gd.memset(a, 4, 1, elem=3)
    elif change == "overlapping_rows":
        nodes[0] = gd.memset(a, 8, 1, pitch=4, height=2)
    elif change == "params_outside":
        nodes[0] = gd.kernel(mint(3), (1, 1, 1), (1, 1, 1), b"")
    elif change == "empty_grid":
        nodes[0] = gd.kernel(mint(3), (0, 1, 1), (1, 1, 1), b"")
    elif change == "stage":
        stages = 1
        nodes[1].stage = 4
        edges = []
    elif change == "empty_with_contents":
        nodes[0] = gd.Node(gd.EMPTY, 0, b"\1")
    elif change == "copy_slices_overlap":
        nodes[0] = gd.copy(a, a + 32, 4, height=2, depth=2, src_height=1)
    desc = bytearray(gd.Graph(nodes, edges, stages).encode())
    if change == "magic":
        desc[0] ^= 1
    elif change == "version":
        desc[4] = 9
    elif change == "length":
        desc += b"\0"
    elif change == "too_many":
        struct.pack_into("<I", desc, 8, 1 << 21)
    elif change == "params_outside":  # 8 bytes of parameters in a description of none
        struct.pack_into("<I", desc, gd.HEAD.size + gd.NODE_HEAD.size + 52, 8)
    ex = instantiate(s, bytes(desc))
    assert s.sync() == (0, CUDA_ERROR_INVALID_VALUE)
    assert any("refused the graph" in note for note in s.notes), s.notes
    assert launch(s, ex) == (0, CUDA_ERROR_INVALID_HANDLE)  # nothing was bound
    assert s.dtoh(a, 8) == bytes(8)


def test_a_launch_checks_memory_and_handles_again_and_runs_nothing_on_failure(s):
    a, b = s.alloc(256), s.alloc(256)
    ev = mint(EVENT)
    assert s.run(rec("cuEventCreate", ev, 0)) is None
    g = gd.Graph([gd.memset(a, 16, 5), gd.memset(b, 16, 6), gd.event(gd.EVENT_RECORD, ev)],
                 edges=[(0, 1), (1, 2)])
    ex = instantiate(s, g)
    assert s.run(rec("glMemFree", b)) is None  # b is gone: the graph may not write it
    assert launch(s, ex) == (0, CUDA_ERROR_INVALID_VALUE)
    assert s.dtoh(a, 16) == bytes(16)  # the first node did not run either
    b2 = s.alloc(256, offset=b - s.x.va_base)
    assert b2 == b and launch(s, ex) == (0, 0)
    assert s.run(rec("cuEventDestroy", ev)) is None
    assert launch(s, ex) == (0, CUDA_ERROR_INVALID_HANDLE)


def test_update_replaces_parameters_of_the_same_shape_only(s):
    a = s.alloc(16)
    ex = instantiate(s, gd.Graph([gd.memset(a, 16, 1)]))
    new = gd.Graph([gd.memset(a, 16, 9)]).encode()
    assert s.run(rec("glGraphUpdate", ex, len(new), payload=new)) is None
    assert launch(s, ex) == (0, 0) and s.dtoh(a, 16) == bytes([9] * 16)
    other = gd.Graph([gd.memset(a, 16, 3), gd.memset(a, 16, 4)]).encode()
    assert s.run(rec("glGraphUpdate", ex, len(other), payload=other)) is None
    assert s.sync() == (0, CUDA_ERROR_INVALID_VALUE)
    assert s.run(rec("cuMemsetD8", a, 0, 16)) is None
    assert launch(s, ex) == (0, 0) and s.dtoh(a, 16) == bytes([9] * 16)


def test_a_description_staged_in_parts(s):
    a = s.alloc(16)
    desc = gd.Graph([gd.memset(a, 16, 4)]).encode()
    for part in (desc[:20], desc[20:]):
        assert s.run(rec("glImagePart", len(part), payload=part)) is None
    ex = mint(GEXEC)
    assert s.run(rec("glGraphInstantiate", ex, 0, payload=b"")) is None
    assert launch(s, ex) == (0, 0) and s.dtoh(a, 16) == bytes([4] * 16)


def test_destroyed_exec_is_gone(s):
    ex = instantiate(s, gd.Graph([gd.memset(s.alloc(16), 16, 1)]))
    assert s.run(rec("glGraphExecDestroy", ex)) is None
    assert launch(s, ex) == (0, CUDA_ERROR_INVALID_HANDLE)


# ------------------------------------------------------------------- fuzzing

def node_strategy(alloc: int) -> st.SearchStrategy[gd.Node]:
    """Nodes of every kind, conditional ones holding bodies of such nodes (nested). No
    WHILE: with no kernel to set its value, one whose value starts nonzero runs forever,
    as on a GPU (tests/test_conditional_nodes.py runs WHILE nodes)."""
    return st.recursive(
        plain_node_strategy(alloc),
        lambda inner: st.builds(
            lambda h, t, bodies: gd.cond(h, t, bodies), st.integers(0, 3),
            st.sampled_from([gd.IF, gd.SWITCH, 3]),
            st.lists(st.builds(lambda ns, g: gd.Graph(ns, stages=g), st.lists(inner, max_size=3),
                               st.sampled_from([1, 1, 1, 0, 2])), min_size=0, max_size=3)),
        max_leaves=6)


def plain_node_strategy(alloc: int) -> st.SearchStrategy[gd.Node]:
    u = st.integers(0, 40)
    # (offsets drawn, not addresses: each example's session lies elsewhere)
    addr = st.one_of(st.integers(-64, 4096 + 64).map(lambda o: alloc + o),
                     st.integers(0, 2 ** 64 - 1))
    return st.one_of(
        st.builds(lambda d, w, v, e, h, p, g: gd.memset(d, w, v, e, p, h, g), addr, u,
                  st.integers(0, 2 ** 32 - 1), st.sampled_from([1, 2, 3, 4]), u,
                  st.one_of(u, st.integers(0, 2 ** 64 - 1)), st.integers(0, 3)),
        st.builds(lambda d, sr, w, h, z, g: gd.copy(d, sr, w, h, z, stage=g), addr, addr, u,
                  u, st.integers(0, 4), st.integers(0, 3)),
        st.builds(lambda b, g: gd.Node(b[0], g, b[1:]), st.binary(min_size=1, max_size=73),
                  st.integers(0, 2 ** 32 - 1)),
        st.builds(lambda h, g: gd.event(gd.EVENT_RECORD, h, g), st.integers(0, 2 ** 64 - 1),
                  st.integers(0, 3)),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_descriptions_never_crash_and_never_reach_outside_the_session(data):
    with ptx_only_session() as s:
        a = s.alloc(4096)
        nodes = data.draw(st.lists(node_strategy(a), max_size=8))
        n = max(len(nodes), 1)
        edges = data.draw(st.lists(st.tuples(st.integers(0, n + 1), st.integers(0, n + 1)),
                                   max_size=10))
        # conditional handles (defaults of 0 and 1: IF and SWITCH bodies run or not)
        handles = data.draw(st.lists(st.tuples(st.integers(0, 2 ** 64 - 1),
                                               st.integers(0, 1), st.integers(0, 2)),
                                     max_size=3))
        desc = bytearray(gd.Graph(nodes, edges, data.draw(st.integers(0, 5)), handles).encode())
        for _ in range(data.draw(st.integers(0, 4))):  # and some mutated bytes
            if desc:
                i = data.draw(st.integers(0, len(desc) - 1))
                desc[i] = data.draw(st.integers(0, 255))
        ex = instantiate(s, bytes(desc))
        for stage in range(3):
            assert s.run(rec("glGraphLaunch", ex, stage, 0)) is None
        result, _ = s.sync()
        assert result == 0
        # The session is intact and its memory is where it was.
        s.htod(a, b"ok")
        assert s.dtoh(a, 2) == b"ok"
