/*
 * gl_graph.h — gleam's description of an instantiated CUDA graph, as the
 * interposer sends it (glGraphInstantiate, glGraphUpdate) and the executor
 * reads it (src/exec/graph_desc.c). It holds only the nodes the serving device
 * runs; the program's process runs the rest (host functions, copies from or
 * to its memory) between *stages*: stage k's device nodes run as one
 * glGraphLaunch, then the process's nodes of stage k, then stage k + 1
 * (docs/cuda-forwarding.md, "Graphs and host functions").
 *
 * Layout (little-endian, as every record): a gl_graph_head, `nodes`
 * gl_graph_node, `edges` gl_graph_edge, `handles` gl_graph_handle, `params`
 * bytes of kernel parameters (packed as glLaunch packs them), then `bodies`
 * bytes: the bodies of the conditional nodes, each a whole description of
 * its own (one stage, no handles), node after node and body after body.
 * Nothing else: the total must match exactly. Edges join nodes of one stage (ordering across stages is the
 * stages' order). The description is untrusted on the server: every count,
 * index, kind, extent and the absence of cycles is checked before any of it
 * is used, and handles and device ranges again at every launch.
 */
#ifndef GLEAM_GRAPH_H
#define GLEAM_GRAPH_H

#include <stdint.h>

#define GL_GRAPH_MAGIC 0x52474c47u /* "GLGR" */
#define GL_GRAPH_VERSION 1
/* Bounds a client cannot exceed: PyTorch's and llama.cpp's captured steps have
 * thousands of nodes; a description also fits the 1 GiB stage. */
#define GL_GRAPH_MAX_NODES (1u << 20)
#define GL_GRAPH_MAX_EDGES (1u << 22)
#define GL_GRAPH_MAX_PARAMS (1u << 28)
/* Conditional bodies nest (a body may hold conditional nodes): a bound keeps
 * a hostile description's recursion finite. */
#define GL_GRAPH_MAX_DEPTH 16
#define GL_GRAPH_MAX_HANDLES (1u << 16)

enum {
    GL_GN_EMPTY = 0,        /* an empty node, a memory node (its memory is the session's) */
    GL_GN_KERNEL = 1,       /* a launch, cluster dimensions as glLaunchCluster's */
    GL_GN_MEMSET = 2,       /* height rows of width elements, pitch bytes apart */
    GL_GN_COPY = 3,         /* device to device: depth slices of height rows of width bytes */
    GL_GN_EVENT_RECORD = 4, /* records an event */
    GL_GN_EVENT_WAIT = 5,   /* waits for an event */
    GL_GN_COND = 6,         /* a conditional node: a body chosen by a handle's value */
    GL_GN_KINDS
};

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t reserved;
    uint32_t nodes, edges, stages, params;
    uint32_t handles; /* the root's conditional handles; 0 in a body */
    uint32_t bodies;  /* bytes of conditional bodies after the parameters */
} gl_graph_head;

/* CUDA's conditional node types (CU_GRAPH_COND_TYPE_*). */
enum { GL_COND_IF = 0, GL_COND_WHILE = 1, GL_COND_SWITCH = 2 };
#define GL_COND_ASSIGN_DEFAULT 1u /* CU_GRAPH_COND_ASSIGN_DEFAULT */

/* A conditional handle of the graph: the value the program holds (what a
 * kernel passes to cudaGraphSetConditional), its default and its flags. */
typedef struct {
    uint64_t value;
    uint32_t dflt, flags;
} gl_graph_handle;

typedef struct {
    uint8_t kind;
    uint8_t reserved[3];
    uint32_t stage;
    union {
        struct {
            uint64_t func; /* a minted function handle */
            uint32_t grid[3], block[3], cluster[3], shared;
            uint32_t params_off, params_len;
        } kernel;
        struct {
            uint64_t dst, pitch, width, height; /* width and height in elements, rows */
            uint32_t value, elem;               /* elem: 1, 2 or 4 bytes */
        } memset;
        struct {
            uint64_t src, src_pitch, src_height, dst, dst_pitch, dst_height;
            uint64_t width, height, depth; /* width in bytes */
        } copy;
        struct {
            uint64_t event; /* a minted event handle */
        } event;
        struct {
            uint32_t handle;           /* an index into the root's handles */
            uint32_t type;             /* GL_COND_* */
            uint32_t size;             /* bodies: 1 (WHILE), 1 or 2 (IF), n (SWITCH) */
            uint32_t body_off, body_len; /* its bodies, within the bodies bytes */
        } cond;
        uint8_t bytes[72];
    } u;
} gl_graph_node;

typedef struct {
    uint32_t from, to;
} gl_graph_edge;

_Static_assert(sizeof(gl_graph_head) == 32, "the description's header is 32 bytes");
_Static_assert(sizeof(gl_graph_node) == 80, "a node is 80 bytes");
_Static_assert(sizeof(gl_graph_edge) == 8, "an edge is 8 bytes");
_Static_assert(sizeof(gl_graph_handle) == 16, "a handle is 16 bytes");

#endif /* GLEAM_GRAPH_H */
