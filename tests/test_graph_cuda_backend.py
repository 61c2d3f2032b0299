"""The cuda backend's graphs against a stand-in driver: each stage of a description is
built as a real CUDA graph (kernel nodes with the launch's packed parameters and their
cluster attribute, memsets and copies in the session's memory, event nodes), instantiated
once and launched with one cuGraphLaunch, ordered after the graph's previous launch by an
event of its own; an update goes through cuGraphExecUpdate; a launch whose memory was freed
runs nothing. The stand-in keeps what it was given and runs memsets and copies on its host
memory, so the test reads back both."""

from __future__ import annotations

import struct

from . import graph_desc as gd
from .cuda_session import EVENT, FUNC, MOD, mint, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session

GEXEC = 11
CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED = 1, 801

GRAPH_DRIVER = r"""
typedef struct { int type; uint64_t a[12]; uint64_t param0; unsigned cluster[3]; } N;
typedef struct { N nodes[32]; int n; } Gr;
static Gr graphs[32], execs[32];
static int ngraphs, nexecs;
static uint64_t count[16], last[8];
enum { CREATED, DESTROYED, INSTANTIATED, UPDATED, LAUNCHED, EXEC_DESTROYED, RECORDS, WAITS,
       EVENT_DESTROYED, EMPTY_NODES };
typedef struct { void *f; unsigned g[3], b[3], shared; void **kp, **extra; void *k, *ctx; } KP;
typedef struct { P dst; size_t pitch; unsigned value, elem; size_t width, height; } MP;
typedef struct { size_t sx, sy, sz, slod; int st; const void *sh; P sd; void *sa, *r0;
                 size_t sp, sheight; size_t dx, dy, dz, dlod; int dt; void *dh; P dd; void *da,
                 *r1; size_t dp, dheight; size_t w, h, d; } M3;
static N *node(Gr *g, void **out, int type) {
    N *n = &g->nodes[g->n++];
    memset(n, 0, sizeof *n);
    n->type = type;
    *out = n;
    return n;
}
CUresult cuModuleLoadData(void **m, const void *image) { *m = (void *)0x2000; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    *f = (void *)0x3000; return 0;
}
CUresult cuEventCreate(void **e, unsigned f) {
    static int k; *e = (void *)(0x5000 + ++k); return 0;
}
CUresult cuEventRecord(void *e, void *s) { count[RECORDS]++; return 0; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { count[WAITS]++; return 0; }
CUresult cuEventDestroy_v2(void *e) { count[EVENT_DESTROYED]++; return 0; }
CUresult cuGraphCreate(void **g, unsigned f) {
    Gr *x = &graphs[ngraphs++ % 32]; x->n = 0; *g = x; count[CREATED]++; return 0;
}
CUresult cuGraphDestroy(void *g) { count[DESTROYED]++; return 0; }
CUresult cuGraphAddKernelNode_v2(void **o, Gr *g, void **d, size_t nd, const KP *p) {
    N *n = node(g, o, 0);
    n->a[0] = (uint64_t)(uintptr_t)p->f; n->a[1] = p->g[0]; n->a[2] = p->b[0];
    n->a[3] = *(const size_t *)p->extra[3];
    n->param0 = *(const uint64_t *)p->extra[1];
    return p->kp == 0 ? 0 : 1;
}
CUresult cuGraphKernelNodeSetAttribute(N *n, int id, const unsigned *v) {
    if (id != 4) return 1;
    memcpy(n->cluster, v, sizeof n->cluster); return 0;
}
CUresult cuGraphAddMemsetNode(void **o, Gr *g, void **d, size_t nd, const MP *p, void *c) {
    N *n = node(g, o, 2);
    n->a[0] = p->dst; n->a[1] = p->pitch; n->a[2] = p->value; n->a[3] = p->elem;
    n->a[4] = p->width; n->a[5] = p->height; n->a[6] = nd; return 0;
}
CUresult cuGraphAddMemcpyNode(void **o, Gr *g, void **d, size_t nd, const M3 *c, void *x) {
    N *n = node(g, o, 1);
    if (c->st != 2 || c->dt != 2 || c->sx || c->dx) return 1;
    n->a[0] = c->sd; n->a[1] = c->dd; n->a[2] = c->w; n->a[3] = c->h; n->a[4] = c->d;
    n->a[5] = nd; return 0;
}
CUresult cuGraphAddEmptyNode(void **o, Gr *g, void **d, size_t nd) {
    node(g, o, 5); count[EMPTY_NODES]++; return 0;
}
CUresult cuGraphAddEventRecordNode(void **o, Gr *g, void **d, size_t nd, void *e) {
    node(g, o, 7)->a[0] = (uint64_t)(uintptr_t)e; return 0;
}
CUresult cuGraphAddEventWaitNode(void **o, Gr *g, void **d, size_t nd, void *e) {
    node(g, o, 6)->a[0] = (uint64_t)(uintptr_t)e; return 0;
}
CUresult cuGraphInstantiateWithFlags(void **e, Gr *g, unsigned long long f) {
    Gr *x = &execs[nexecs++ % 32]; *x = *g; *e = x; count[INSTANTIATED]++; return 0;
}
CUresult cuGraphExecUpdate_v2(Gr *e, Gr *g, void *info) {
    if (e->n != g->n) return 910;
    *e = *g; count[UPDATED]++; return 0;
}
CUresult cuGraphExecDestroy(void *e) { count[EXEC_DESTROYED]++; return 0; }
/* Runs the memsets and copies on the stand-in's memory, keeps the last kernel's launch. */
CUresult cuGraphLaunch(Gr *e, void *s) {
    count[LAUNCHED]++;
    for (int i = 0; i < e->n; i++) {
        N *n = &e->nodes[i];
        if (n->type == 2)
            for (size_t y = 0; y < n->a[5]; y++)
                for (size_t k = 0; k < n->a[4]; k++)
                    ((unsigned *)(uintptr_t)(n->a[0] + y * n->a[1]))[k] = (unsigned)n->a[2];
        if (n->type == 1)
            memcpy((void *)(uintptr_t)n->a[1], (void *)(uintptr_t)n->a[0], n->a[2]);
        if (n->type == 0) {
            last[0] = n->a[0]; last[1] = n->a[1]; last[2] = n->a[2]; last[3] = n->a[3];
            last[4] = n->param0; last[5] = n->cluster[0];
        }
    }
    return 0;
}
uint64_t fake_count(int i) { return count[i]; }
uint64_t fake_last(int i) { return last[i]; }
"""
CREATED, DESTROYED, INSTANTIATED, UPDATED, LAUNCHED, EXEC_DESTROYED, RECORDS, WAITS = range(8)
EVENT_DESTROYED, EMPTY_NODES = 8, 9


@needs_gcc
def test_stages_are_real_graphs_launched_once_each_in_order(tmp_path):
    so, fake = build_stand_in(tmp_path, GRAPH_DRIVER,
                              "uint64_t fake_count(int); uint64_t fake_last(int);")
    with stand_in_session(so) as s:
        mod, fn, ev = mint(MOD), mint(FUNC), mint(EVENT)
        s.run(rec("glModuleLoad", mod, 4, payload=b"abcd"),
              rec("cuModuleGetFunction", fn, mod, payload=b"k\0"), rec("cuEventCreate", ev, 0))
        a, b = s.alloc(64), s.alloc(64)
        assert s.sync() == (0, 0)
        g = gd.Graph([gd.memset(a, 16, 7, elem=4), gd.copy(b, a, 64),
                      gd.kernel(fn, (2, 1, 1), (32, 1, 1), struct.pack("<Q", 0x1234),
                                cluster=(2, 1, 1)),
                      gd.event(gd.EVENT_RECORD, ev), gd.memset(b, 0, 1, elem=4),
                      gd.memset(b, 4, 9, elem=4, stage=1)],
                     edges=[(0, 1), (1, 2), (2, 3)])
        desc = g.encode()
        ex = mint(GEXEC)
        assert s.run(rec("glGraphInstantiate", ex, len(desc), payload=desc)) is None
        assert s.sync() == (0, 0)
        counts = [fake.fake_count(i) for i in (CREATED, DESTROYED, INSTANTIATED, EMPTY_NODES)]
        assert counts == [2, 2, 2, 1]  # two stages; the empty memset is an empty node
        assert s.run(rec("glGraphLaunch", ex, 0, 0)) is None
        assert s.sync() == (0, 0)
        assert struct.unpack("<16I", s.dtoh(b, 64)) == (7,) * 16
        assert [fake.fake_last(i) for i in range(6)] == [0x3000, 2, 32, 8, 0x1234, 2]
        assert [fake.fake_count(i) for i in (LAUNCHED, RECORDS, WAITS)] == [1, 1, 0]
        assert s.run(rec("glGraphLaunch", ex, 1, 0)) is None
        assert s.sync() == (0, 0)
        assert struct.unpack("<4I", s.dtoh(b, 16)) == (9,) * 4
        assert [fake.fake_count(i) for i in (LAUNCHED, RECORDS, WAITS)] == [2, 2, 1]

        g.nodes[0] = gd.memset(a, 16, 5, elem=4)
        new = g.encode()
        assert s.run(rec("glGraphUpdate", ex, len(new), payload=new)) is None
        assert s.sync() == (0, 0) and fake.fake_count(UPDATED) == 2
        assert s.run(rec("glGraphLaunch", ex, 0, 0)) is None
        assert s.sync() == (0, 0)
        assert struct.unpack("<I", s.dtoh(b, 4)) == (5,)

        assert s.run(rec("glMemFree", b)) is None  # the copy's memory is gone
        assert s.run(rec("glGraphLaunch", ex, 0, 0)) is None
        assert s.sync() == (0, CUDA_ERROR_INVALID_VALUE)
        assert fake.fake_count(LAUNCHED) == 3  # refused before the driver saw it

        assert s.run(rec("glGraphExecDestroy", ex)) is None
        assert s.sync() == (0, 0)
        assert [fake.fake_count(i) for i in (EXEC_DESTROYED, EVENT_DESTROYED)] == [2, 1]


@needs_gcc
def test_conditional_nodes_are_refused_with_a_note(tmp_path):
    """The kernels' handles are the interposer's, not a real driver's: not built."""
    so, fake = build_stand_in(tmp_path, GRAPH_DRIVER,
                              "uint64_t fake_count(int); uint64_t fake_last(int);")
    with stand_in_session(so) as s:
        a = s.alloc(64)
        body = gd.Graph([gd.memset(a, 4, 1)], stages=1)
        desc = gd.Graph([gd.cond(0, gd.IF, [body])], handles=[(1, 0, 0)]).encode()
        ex = mint(GEXEC)
        assert s.run(rec("glGraphInstantiate", ex, len(desc), payload=desc)) is None
        assert s.sync() == (0, CUDA_ERROR_NOT_SUPPORTED)
        assert any("conditional graph nodes are not supported on the cuda backend" in n
                   for n in s.notes), s.notes
        assert fake.fake_count(CREATED) == 0
        # nor does an update bring one in (the same shape: one node, kinds may change)
        plain = gd.Graph([gd.memset(a, 4, 2)]).encode()
        assert s.run(rec("glGraphInstantiate", ex, len(plain), payload=plain)) is None
        assert s.sync() == (0, 0)
        assert s.run(rec("glGraphUpdate", ex, len(desc), payload=desc)) is None
        assert s.sync() == (0, CUDA_ERROR_NOT_SUPPORTED)
        assert fake.fake_count(UPDATED) == 0
