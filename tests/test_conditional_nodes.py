"""Conditional graph nodes (cuda-samples' graphConditionalNodes), end to end and on the wire.

examples/cuda/runtime/conditional.cu, built by nvcc with static and shared cudart, runs
through ``gleam-peer run`` against a host-backend server running its kernels from PTX:
IF/ELSE, WHILE (a default applied at each launch), SWITCH, a WHILE captured into a graph
under capture with an IF nested in its body, each decided by kernels calling
cudaGraphSetConditional on the server; then what gleam refuses (a host function or a copy
of the program's memory in a body, bad flags, a handle of another graph) and a kernel
setting a handle outside any graph (a launch failure with a line). The executor's side
reads descriptions with nested bodies from the wire: each rule is checked, and
tests/test_graph_executor.py fuzzes them.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import graph_desc as gd
from .cuda_mesh import ptx_mesh, run_through  # noqa: F401 (a fixture)
from .cuda_session import Session, ptx_only_session, rec
from .test_cuda_runtime import static_and_shared
from .test_graph_executor import instantiate, launch
from .test_ptx_compile import kernel_c, load

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "cuda" / "runtime" / "conditional.cu"
INVALID_VALUE, INVALID_HANDLE, LAUNCH_FAILED = 1, 400, 719
CHECKS = 13


def test_conditional_nodes_decided_by_kernels(ptx_mesh, tmp_path_factory):  # noqa: F811
    """The program built with static and with shared cudart, each run through gleam."""
    client, _ = ptx_mesh
    for kind, binary in static_and_shared(SOURCE, tmp_path_factory).items():
        done, verdict = run_through(client, binary)
        assert verdict == {"ok": True, "checks": CHECKS, "failed": 0, "wrong": "",
                           "outside": "cudaErrorLaunchFailure"}, (kind, done.stdout,
                                                                  done.stderr)
        # Each refusal says why, in gleam's words.
        assert "host function in a conditional node's body is not supported" in done.stderr
        assert "copy of the program's memory" in done.stderr
        assert "cudaGraphSetConditional: handle 0x3039 is not one of the launching graph's" \
            in done.stderr


# ------------------------------------------------------------ the executor's side

# Sets the handle p (a u64 parameter) to the u32 word at q.
DECIDE = b"""
.version 7.8
.target sm_80
.address_size 64
.extern .func cudaGraphSetConditional(.param .b64 h, .param .b32 v);
.visible .entry decide(.param .u64 h, .param .u64 q)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [h];
    ld.param.u64 %rd2, [q];
    cvta.to.global.u64 %rd3, %rd2;
    ld.global.u32 %r1, [%rd3];
    {
    .param .b64 p0;
    st.param.b64 [p0+0], %rd1;
    .param .b32 p1;
    st.param.b32 [p1+0], %r1;
    call.uni cudaGraphSetConditional, (p0, p1);
    }
    ret;
}
\0"""


def test_a_kernel_setting_a_handle_stays_with_the_interpreter():
    """The compile tier leaves device-runtime calls to the interpreter, whose built-in
    knows the launching graph."""
    source, why = kernel_c(load(DECIDE.rstrip(b"\0").decode()), "decide")
    assert source is None and "is not compiled" in why, why


def decide_fn(s: Session) -> int:
    return s.function(s.load(DECIDE), "decide")


@pytest.fixture
def s():
    with ptx_only_session() as session:
        yield session


def test_a_switch_and_a_while_run_the_bodies_the_values_choose(s):
    fn, word, out = decide_fn(s), s.alloc(16), s.alloc(64)
    key = 0x676C636E00000001
    bodies = [gd.Graph([gd.memset(out + 4 * k, 4, 10 + k)], stages=1) for k in range(3)]
    g = gd.Graph([gd.kernel(fn, (1, 1, 1), (1, 1, 1), struct.pack("<QQ", key, word)),
                  gd.cond(0, gd.SWITCH, bodies)], edges=[(0, 1)],
                 handles=[(key, 0, 0)])
    ex = instantiate(s, g)
    for value, want in ((1, [0, 11, 0]), (2, [0, 11, 12]), (3, [0, 11, 12])):
        s.htod(word, struct.pack("<I", value))
        assert launch(s, ex) == (0, 0)
        assert list(s.dtoh(out, 12)) == [b for w in want for b in [w] * 4]


def test_the_default_applies_at_each_launch_only_with_its_flag(s):
    fn, word, out = decide_fn(s), s.alloc(16), s.alloc(16)
    key = 0x676C636E00000002
    # WHILE: the body sets the value to the word (0), once per launch when the default
    # 1 is applied at each launch; without the flag the 0 stays and the body never runs.
    body = gd.Graph([gd.kernel(fn, (1, 1, 1), (1, 1, 1), struct.pack("<QQ", key, word)),
                     gd.memset(out, 1, 1)], edges=[], stages=1)
    for flags, want in ((1, [1, 1]), (0, [1, 0])):
        s.htod(out, bytes(16))
        ex = instantiate(s, gd.Graph([gd.cond(0, gd.WHILE, [body])],
                                     handles=[(key, 1, flags)]))
        seen = []
        for _ in range(2):
            s.htod(out, bytes(16))
            assert launch(s, ex) == (0, 0)
            seen.append(s.dtoh(out, 1)[0])
        assert seen == want, flags


def test_an_update_replaces_the_bodies(s):
    out = s.alloc(16)
    handles = [(0x676C636E00000005, 1, 1)]  # IF, its default 1 at each launch

    def graph(value: int) -> gd.Graph:
        return gd.Graph([gd.cond(0, gd.IF, [gd.Graph([gd.memset(out, 4, value)], stages=1)])],
                        handles=handles)

    ex = instantiate(s, graph(1))
    assert launch(s, ex) == (0, 0) and s.dtoh(out, 4) == bytes([1] * 4)
    new = graph(7).encode()
    assert s.run(rec("glGraphUpdate", ex, len(new), payload=new)) is None
    assert launch(s, ex) == (0, 0) and s.dtoh(out, 4) == bytes([7] * 4)


def test_a_kernel_outside_its_graph_cannot_set_the_handle(s):
    fn, word = decide_fn(s), s.alloc(16)
    args = struct.pack("<QQ", 0x676C636E00000003, word)
    assert s.run(rec("glLaunch", fn, 1, 1, 1, 1, 1, 1, 0, 0, len(args), payload=args)) is None
    assert s.sync() == (0, LAUNCH_FAILED)
    assert any("not one of the launching graph's" in n for n in s.notes), s.notes


@pytest.mark.parametrize("change", [
    "handle_index", "while_size", "if_size", "type", "body_outside", "body_gap",
    "body_with_handles", "body_stages", "bodies_without_node", "nest_too_deep", "flags",
    "cond_contents"])
def test_malformed_conditional_descriptions_are_refused_whole(s, change):
    a = s.alloc(64)
    key = 0x676C636E00000004
    body = gd.Graph([gd.memset(a, 4, 1)], stages=1)
    handles = [(key, 0, 0)]
    node = gd.cond(0, gd.IF, [body])
    extra = b""
    if change == "handle_index":
        node = gd.cond(1, gd.IF, [body])
    elif change == "while_size":
        node = gd.cond(0, gd.WHILE, [body, body])
    elif change == "if_size":
        node = gd.cond(0, gd.IF, [body, body, body])
    elif change == "type":
        node = gd.cond(0, 3, [body])
    elif change == "body_with_handles":
        node = gd.cond(0, gd.IF, [gd.Graph([gd.memset(a, 4, 1)], stages=1, handles=handles)])
    elif change == "body_stages":
        node = gd.cond(0, gd.IF, [gd.Graph([gd.memset(a, 4, 1)], stages=2)])
    elif change == "nest_too_deep":
        for _ in range(20):
            body = gd.Graph([gd.cond(0, gd.IF, [body])], stages=1)
        node = gd.cond(0, gd.IF, [body])
    elif change == "flags":
        handles = [(key, 0, 2)]
    elif change == "cond_contents":
        node.body = node.body.ljust(20, b"\0") + b"\1"
    g = gd.Graph([gd.memset(a, 4, 2), node], edges=[(0, 1)], handles=handles)
    desc = bytearray(g.encode())
    cond_at = gd.HEAD.size + gd.NODE_HEAD.size + gd.UNION + gd.NODE_HEAD.size
    if change == "body_outside":  # the body's range runs past the bodies bytes
        struct.pack_into("<I", desc, cond_at + 16, len(body.encode()) + 8)
    elif change == "body_gap":  # the range starts past the first byte
        struct.pack_into("<I", desc, cond_at + 12, 4)
    elif change == "bodies_without_node":
        desc = bytearray(gd.Graph([gd.memset(a, 4, 2)], handles=handles).encode())
        struct.pack_into("<I", desc, 28, 32)
        extra = bytes(32)
    ex = instantiate(s, bytes(desc + extra))
    assert s.sync() == (0, INVALID_VALUE)
    assert any("refused the graph" in note for note in s.notes), s.notes
    assert launch(s, ex) == (0, INVALID_HANDLE)
    assert s.dtoh(a, 4) == bytes(4)


# ------------------------------------------------------------------- fuzzing

def body_strategy(alloc: int, handles: int, depth: int,
                  min_size: int = 0) -> st.SearchStrategy[gd.Graph]:
    """Well-formed bodies (memsets in the session, IF and SWITCH nodes nesting bodies):
    the fuzz below mutates them, so most descriptions it sends are near valid ones."""
    memset = st.builds(lambda o, w, v: gd.memset(alloc + o, w, v), st.integers(0, 4000),
                       st.integers(0, 32), st.integers(0, 255))
    if depth == 0:
        return st.builds(lambda ns: gd.Graph(ns, stages=1), st.lists(memset, max_size=3))
    body = body_strategy(alloc, handles, depth - 1)
    index = st.sampled_from([*range(handles)] * 4 + [handles])  # now and then not a handle
    cond = st.one_of(
        st.builds(lambda h, bodies: gd.cond(h, gd.IF, bodies), index,
                  st.lists(body, min_size=1, max_size=2)),
        st.builds(lambda h, bodies: gd.cond(h, gd.SWITCH, bodies), index,
                  st.lists(body, min_size=1, max_size=3)))
    return st.builds(lambda ns: gd.Graph(ns, edges=[(i, i + 1) for i in range(len(ns) - 1)],
                                         stages=1),
                     st.lists(st.one_of(cond, memset), min_size=min_size, max_size=3))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_conditional_descriptions_never_crash_or_reach_outside_the_session(data):
    with ptx_only_session() as s:
        a = s.alloc(4096)
        # No WHILE: with no kernel to end it, one whose value is not 0 runs forever (as on
        # a GPU). Mutated descriptions start every value at 0, so that a byte turned into
        # WHILE's type finds its loop ended.
        mutations = data.draw(st.integers(0, 3))
        handles = data.draw(st.lists(st.tuples(st.integers(0, 2 ** 64 - 1),
                                               st.integers(0, 0 if mutations else 3),
                                               st.integers(0, 1)), min_size=1, max_size=3))
        root = data.draw(body_strategy(a, len(handles), 3, min_size=1))
        desc = bytearray(gd.Graph(root.nodes, root.edges, handles=handles).encode())
        for _ in range(mutations):
            i = data.draw(st.integers(0, len(desc) - 1))
            desc[i] = data.draw(st.integers(0, 255))
        ex = instantiate(s, bytes(desc))
        assert s.run(rec("glGraphLaunch", ex, 0, 0)) is None
        assert s.run(rec("glGraphLaunch", ex, 0, 0)) is None
        assert s.sync()[0] == 0
        s.htod(a, b"ok")
        assert s.dtoh(a, 2) == b"ok"
