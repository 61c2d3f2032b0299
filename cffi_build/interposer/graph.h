/*
 * graph.h — CUDA graphs in the interposer: graphs and their nodes are the
 * interposer's own objects (graph.c, graph_nodes.c); stream capture records
 * into them (capture.c); instantiation turns one into an exec and sends the
 * description of its device nodes once (graph_exec.c); a launch runs the
 * stages (graph_launch.c), with host functions and copies of the program's
 * memory run in the program's process by the host-function thread
 * (hostfn.c); graph allocations are accounted in graphmem.c.
 *
 * Locking: one mutex (gl_graph_lock) guards every graph, node and exec and
 * the handle maps; functions named *_locked expect it held. It is never held
 * while a record is emitted or waited for, or while a host function runs.
 */
#ifndef GLEAM_INTERPOSER_GRAPH_H
#define GLEAM_INTERPOSER_GRAPH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "gl_cuda_graph.h"
#include "gl_graph.h"
#include "internal.h"

/* ---- graph.c: graphs, nodes, edges, handles */

typedef struct gl_graph gl_graph;
typedef struct gl_gnode gl_gnode;

/* A kernel node's launch, packed as a launch packs it (launch.c). */
typedef struct {
    uint64_t func;      /* the function launched (a CUkernel's function) */
    uint64_t kern;      /* the CUkernel given, else 0 */
    unsigned grid[3], block[3], cluster[3], shared;
    uint8_t *params;    /* owned */
    uint32_t size;
    void **args;        /* owned: pointers into params, for GetParams (NULL: extra form) */
    uint32_t nargs;
} gl_kernel_launch;

struct gl_gnode {
    uint64_t handle;
    gl_graph *graph;
    int type;             /* GL_CU_GRAPH_NODE_TYPE_* */
    gl_gnode **deps;      /* incoming edges, owned array */
    uint32_t ndeps, cap;
    uint64_t origin;      /* cuGraphClone: the node this one copies (cuGraphNodeFindInClone) */
    uint32_t index;       /* its place in graph->nodes (kept when nodes are removed) */
    union {
        gl_kernel_launch kernel;
        CUDA_MEMCPY3D copy;
        CUDA_MEMSET_NODE_PARAMS memset;
        CUDA_HOST_NODE_PARAMS host;
        gl_graph *child; /* owned */
        uint64_t event;
        struct {
            CUDA_MEM_ALLOC_NODE_PARAMS given; /* as given (accessDescs not kept) */
            CUdeviceptr dptr;
        } alloc;
        CUdeviceptr free_dptr;
        struct {
            uint64_t handle; /* a CUgraphConditionalHandle of this graph or one above */
            int type;        /* GL_COND_* (CU_GRAPH_COND_TYPE_*) */
            uint32_t size;   /* bodies */
            gl_graph **body; /* owned, each a graph whose owner is this node */
            CUgraph *out;    /* owned: their handles, the program's phGraph_out */
        } cond;
    } u;
};

/* References to a user object that a graph owns (userobj.c). */
typedef struct {
    struct gl_uobj *obj;
    uint32_t count;
} gl_uobj_ref;

struct gl_graph {
    uint64_t handle;
    gl_uobj_ref *users; /* owned array: the user object references it holds */
    uint32_t nusers, capusers;
    gl_gnode **nodes; /* in creation order, owned */
    uint32_t n, cap;
    int capturing;    /* a capture adds to it: no destroy, no node removal */
    int child;        /* owned by a child-graph node: not in the handle map */
    gl_gnode *owner;  /* a conditional node's body: that node (graph_cond.c) */
    gl_graph_handle *conds; /* conditional handles made for this graph, owned */
    uint32_t nconds, ccap;
};

extern pthread_mutex_t gl_graph_lock;

/* The objects behind handles (NULL: not one), with the lock held. */
gl_graph *gl_graph_of(CUgraph g);
gl_gnode *gl_gnode_of(CUgraphNode n);
/* A new empty graph (in the handle map unless child), or NULL. */
gl_graph *gl_graph_new_locked(int child);
void gl_graph_free_locked(gl_graph *g);
/* A deep copy (child graphs copied too; each node's origin is its source). */
gl_graph *gl_graph_clone_locked(const gl_graph *src, int child);
/* Adds a node of a type with these dependencies: the node (params zeroed,
 * the caller fills them) or NULL with *r set. */
gl_gnode *gl_gnode_add_locked(gl_graph *g, int type, const CUgraphNode *deps, size_t ndeps,
                              CUresult *r);
/* Same, from node pointers (capture). */
gl_gnode *gl_gnode_add_nodes_locked(gl_graph *g, int type, gl_gnode *const *deps,
                                    size_t ndeps, CUresult *r);
void gl_gnode_remove_locked(gl_gnode *n);
/* Frees what a node's parameters own. */
void gl_gnode_params_free(gl_gnode *n);
/* Copies src's parameters into dst (deep: owned buffers duplicated). */
CUresult gl_gnode_params_copy(gl_gnode *dst, const gl_gnode *src);

/* ---- graph_cond.c: conditional nodes and their handles */

/* A conditional node's parameters checked and its bodies made (their handles
 * written to p->phGraph_out), or why not (nothing made). */
CUresult gl_cond_fill_locked(gl_gnode *n, CUDA_CONDITIONAL_NODE_PARAMS *p);
void gl_cond_free_locked(gl_gnode *n);
/* dst's bodies become deep copies of src's (dst->u.cond holds src's fields). */
CUresult gl_cond_copy_locked(gl_gnode *dst, const gl_gnode *src);
/* The handle table of src copied to dst (a clone keeps its graph's handles). */
CUresult gl_cond_handles_copy(gl_graph *dst, const gl_graph *src);
/* Whether a node of type may join g: anything outside a body; in a body
 * (and the graphs it holds, as CUDA documents) kernel, empty, memset, memcpy,
 * child-graph and conditional nodes. *r says why not. */
int gl_cond_body_allows(const gl_graph *g, int type, CUresult *r);
/* Whether a capture fills a body of g's conditional nodes (at any depth):
 * then neither g nor such a node may be destroyed. */
int gl_cond_capturing(const gl_graph *g);
int gl_cond_node_capturing(const gl_gnode *n);

/* ---- userobj.c: user objects */

/* Drops every user object reference a graph holds (a destructor may then run). */
void gl_uobj_refs_drop_locked(gl_graph *g);
/* Gives dst (a new copy of src) the same references again: 0, or -1 (no memory). */
int gl_uobj_refs_copy_locked(gl_graph *dst, const gl_graph *src);

/* ---- graph_nodes.c: node parameters */

/* Packs a kernel launch as launches are packed (kernel node or capture). */
CUresult gl_kernel_launch_set(gl_kernel_launch *k, const CUDA_KERNEL_NODE_PARAMS *p);
/* From a glLaunch/glLaunchCluster record's packed buffer (capture). */
CUresult gl_kernel_launch_packed(gl_kernel_launch *k, uint64_t func, const unsigned grid[3],
                                 const unsigned block[3], const unsigned cluster[3],
                                 unsigned shared, const void *params, size_t size);
void gl_kernel_launch_free(gl_kernel_launch *k);
CUresult gl_memset_check(const CUDA_MEMSET_NODE_PARAMS *p);
CUresult gl_memcpy_check(const CUDA_MEMCPY3D *p);

/* ---- graph_exec.c: instantiated graphs */

typedef struct gl_gexec gl_gexec;
/* The exec behind a handle (NULL: not one), with the lock held. */
gl_gexec *gl_gexec_of(CUgraphExec e);

/* ---- graph_launch.c */

/* cuGraphLaunch's work, for a launch on a stream that is not capturing. */
CUresult gl_graph_launch(CUgraphExec exec, CUstream stream, int ptds);

/* ---- graphmem.c: memory that graphs allocate */

/* A graph allocation of bytesize (backed at once, its address fixed): 0 and
 * *dptr, or an error. Each node that names it holds a reference. */
CUresult gl_graphmem_new(size_t bytesize, CUdeviceptr *dptr);
void gl_graphmem_ref(CUdeviceptr dptr);
void gl_graphmem_unref(CUdeviceptr dptr);
/* Whether dptr is the start of a graph allocation. */
int gl_graphmem_is(CUdeviceptr dptr);
/* A launch's alloc node ran (fails with INVALID_VALUE when the allocation is
 * still live and auto_free is off) or its free node ran. */
CUresult gl_graphmem_launch_alloc(CUdeviceptr dptr, int auto_free);
void gl_graphmem_launch_free(CUdeviceptr dptr);
/* cuMemFree/cuMemFreeAsync of a graph allocation: 1 when it was one (it is no
 * longer live; its memory stays while a graph names it), 0 otherwise. */
int gl_graphmem_program_free(CUdeviceptr dptr);

/* ---- capture.c: stream capture */

/* Whether the stream (as the call was given it) is capturing: 1 with the
 * capture's graph and dependencies locked in (the caller adds one node with
 * gl_capture_add_node, which also unlocks), 0 when not capturing (nothing
 * held), or an error (the capture is invalidated, nothing held). */
int gl_capture_begin_op(CUstream stream, int ptds, CUresult *r);
/* Adds a node of type to the capturing stream's graph after its
 * dependencies and makes it the stream's new dependency; fill sets its
 * parameters (return non-SUCCESS: the node is removed, the capture
 * invalidated). Ends the operation begun by gl_capture_begin_op. */
CUresult gl_capture_add_node(int type, CUresult (*fill)(gl_gnode *n, void *arg), void *arg);
/* The stream-ordered record a wire call would emit, seen first by capture
 * (batch.c): GL_CAPTURE_PASS to send it, else what the call returns. */
#define GL_CAPTURE_PASS (-1)
int gl_capture_record(uint16_t call, const uint64_t *args, uint8_t nargs, const void *payload,
                      size_t len);
/* Any capture in progress (a relaxed read, for fast paths). */
extern atomic_int gl_captures_live;
/* A potentially unsafe call (the stub gate's GL_GATE_UNSAFE) while captures
 * run: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the captures that forbid it
 * invalidated, or CUDA_SUCCESS when the thread's mode allows it. */
CUresult gl_capture_unsafe_call(const char *name);
/* 1 with *r set when the stream is capturing (a call capture cannot take:
 * the capture is invalidated), else 0. */
int gl_capture_refuse(CUstream stream, int ptds, CUresult *r);
/* Calls captured where the call is made: each returns 0 when the stream is
 * not capturing (the caller goes on), else 1 with *r the call's result (a
 * node added, or why not). */
int gl_capture_memcpy(CUstream stream, int ptds, const CUDA_MEMCPY3D *p, CUresult *r);
int gl_capture_memset(CUstream stream, int ptds, const CUDA_MEMSET_NODE_PARAMS *p, CUresult *r);
int gl_capture_linear_copy(CUstream stream, int ptds, uint64_t dst, uint64_t src, size_t n,
                           CUresult *r);
int gl_capture_alloc(CUstream stream, int ptds, CUdeviceptr *dptr, size_t bytesize, CUresult *r);
int gl_capture_free(CUstream stream, int ptds, CUdeviceptr dptr, CUresult *r);
/* The stream-handle argument of each wire call, or -1 (generated). */
extern const signed char gl_call_stream_arg[];
/* Each record's call as the program named it (generated: gen_cuda.py). */
extern const char *const gl_call_api_names[];

/* ---- batch.c and hostfn.c: the hold and the host-function thread */

/* Work the host-function thread does in the program's process once
 * everything before it in the process's record stream has run on the
 * server (reach: the thread first waits for the stream's completion; status
 * is what that gave). Records after it are held back until it returns. */
typedef void (*gl_host_job_fn)(void *data, CUresult status);
typedef struct {
    gl_host_job_fn fn;
    void *data;
    uint64_t stream; /* as sent (gl_stream_arg) */
    uint64_t ctx;    /* the context its records use */
    int reach;
} gl_held_job;
/* Queues a job (starting the host-function thread once); the hold begins. */
CUresult gl_host_job(const gl_held_job *job);
/* batch.c: the queue behind the hold. */
CUresult gl_hold_job(const gl_held_job *job);
int gl_hold_active(void);
/* Waits until no host job is pending (the program's thread, never the host one). */
void gl_hold_wait(void);
/* The host-function thread: waits for the next job, moving the records held
 * before it to the batch (the hold ends when nothing is left). */
void gl_hold_next_job(gl_held_job *out);
void gl_hold_become_host_thread(void);
/* The host-function thread itself: it emits past the hold, never into a capture. */
int gl_on_host_thread(void);
/* A launch's asynchronous error, owed to the program's next waiting call. */
void gl_owe(CUresult r);
/* The deferred error of the host-function thread's last wait (also owed). */
CUresult gl_hold_last_deferred(void);
/* hostfn.c: a graph host node's function, run with the gate closed to it. */
void gl_host_node_run(CUhostFn fn, void *data);
/* hostfn.c: waits (on the host-function thread) until the server has run
 * the stream's work so far: CUDA_SUCCESS, or the error that stops host
 * functions (a device fault, a lost server). */
CUresult gl_host_reach(uint64_t stream);

#endif /* GLEAM_INTERPOSER_GRAPH_H */
