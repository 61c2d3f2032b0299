/*
 * gl_cuda_graph.h — the CUDA driver API's graph, capture and host-function
 * types, as CUDA 13's cuda.h lays them out (written from NVIDIA's
 * documentation, like gl_cuda.h; examples/cuda/graph_*.c, built against
 * NVIDIA's own header, check that the layouts agree). Only the interposer
 * reads these: the server sees graphs as gleam's own description
 * (gl_graph.h).
 */
#ifndef GLEAM_CUDA_GRAPH_H
#define GLEAM_CUDA_GRAPH_H

#include "gl_cuda.h"

typedef void (*CUhostFn)(void *userData);
typedef struct CUuserObject_st *CUuserObject;
typedef void (*CUstreamCallback)(CUstream hStream, CUresult status, void *userData);
typedef cuuint64_t CUgraphConditionalHandle;
typedef int CUgraphNodeType;
typedef int CUgraphMem_attribute;
typedef int CUgraphExecUpdateResult;
typedef int CUgraphInstantiateResult;

enum {
    GL_CU_GRAPH_NODE_TYPE_KERNEL = 0,
    GL_CU_GRAPH_NODE_TYPE_MEMCPY = 1,
    GL_CU_GRAPH_NODE_TYPE_MEMSET = 2,
    GL_CU_GRAPH_NODE_TYPE_HOST = 3,
    GL_CU_GRAPH_NODE_TYPE_GRAPH = 4,
    GL_CU_GRAPH_NODE_TYPE_EMPTY = 5,
    GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
    GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
    GL_CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL = 8,
    GL_CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT = 9,
    GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
    GL_CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
    GL_CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12,
    GL_CU_GRAPH_NODE_TYPE_CONDITIONAL = 13
};

enum {
    GL_CU_STREAM_CAPTURE_STATUS_NONE = 0,
    GL_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
    GL_CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
};
enum {
    GL_CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    GL_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    GL_CU_STREAM_CAPTURE_MODE_RELAXED = 2
};
enum { GL_CU_STREAM_ADD_CAPTURE_DEPENDENCIES = 0, GL_CU_STREAM_SET_CAPTURE_DEPENDENCIES = 1 };
enum { GL_CU_STREAM_NON_BLOCKING = 1 };
enum { GL_CU_EVENT_RECORD_EXTERNAL = 1, GL_CU_EVENT_WAIT_EXTERNAL = 1 };

enum {
    GL_CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
    GL_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,
    GL_CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
    GL_CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8
};
enum {
    GL_CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
    GL_CUDA_GRAPH_INSTANTIATE_ERROR = 1,
    GL_CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE = 2,
    GL_CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED = 3
};
enum {
    GL_CU_GRAPH_EXEC_UPDATE_SUCCESS = 0,
    GL_CU_GRAPH_EXEC_UPDATE_ERROR = 1,
    GL_CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2,
    GL_CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED = 3,
    GL_CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED = 4,
    GL_CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED = 5,
    GL_CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED = 6
};
enum {
    GL_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
    GL_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
    GL_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
    GL_CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3
};
enum { GL_CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE = 0, GL_CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE = 1 };

/* Kernel and memset nodes: the newer layouts add members at the end. */
#define GL_KERNEL_NODE_MEMBERS                         \
    CUfunction func;                                   \
    unsigned int gridDimX, gridDimY, gridDimZ;         \
    unsigned int blockDimX, blockDimY, blockDimZ;      \
    unsigned int sharedMemBytes;                       \
    void **kernelParams;                               \
    void **extra;
#define GL_MEMSET_NODE_MEMBERS \
    CUdeviceptr dst;           \
    size_t pitch;              \
    unsigned int value;        \
    unsigned int elementSize;  \
    size_t width, height;
typedef struct {
    GL_KERNEL_NODE_MEMBERS
} CUDA_KERNEL_NODE_PARAMS_v1;
typedef struct {
    GL_KERNEL_NODE_MEMBERS
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct {
    GL_MEMSET_NODE_MEMBERS
} CUDA_MEMSET_NODE_PARAMS;
typedef struct {
    GL_MEMSET_NODE_MEMBERS
    CUcontext ctx;
} CUDA_MEMSET_NODE_PARAMS_v2;
typedef struct {
    CUhostFn fn;
    void *userData;
} CUDA_HOST_NODE_PARAMS;
typedef struct {
    int type, id;
} CUmemLocation;
typedef struct {
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps_layout;
typedef struct {
    CUmemLocation location;
    int flags;
} CUmemAccessDesc;
typedef struct {
    CUmemPoolProps_layout poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
typedef struct {
    int flags;
    int reserved;
    CUcontext copyCtx;
    CUDA_MEMCPY3D copyParams;
} CUDA_MEMCPY_NODE_PARAMS;
typedef struct {
    CUgraphConditionalHandle handle;
    int type;
    unsigned int size;
    CUgraph *phGraph_out;
    CUcontext ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;
/* The generic form (cuGraphAddNode, cuGraphNodeSetParams): a type and a union
 * of 29 long longs, then one more reserved. */
typedef struct {
    CUgraphNodeType type;
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_KERNEL_NODE_PARAMS kernel;
        CUDA_MEMCPY_NODE_PARAMS memcpy;
        CUDA_MEMSET_NODE_PARAMS_v2 memset;
        CUDA_HOST_NODE_PARAMS host;
        struct { CUgraph graph; int ownership; } graph;
        struct { CUevent event; } eventWait;
        struct { CUevent event; } eventRecord;
        CUDA_MEM_ALLOC_NODE_PARAMS alloc;
        struct { CUdeviceptr dptr; } free;
        CUDA_CONDITIONAL_NODE_PARAMS conditional;
    };
    long long reserved2;
} CUgraphNodeParams;
struct CUgraphEdgeData_st {
    unsigned char from_port, to_port, type, reserved[5];
};
typedef struct {
    cuuint64_t flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;
typedef struct {
    CUgraphExecUpdateResult result;
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
} CUgraphExecUpdateResultInfo;

_Static_assert(sizeof(CUgraphNodeParams) == 256, "CUgraphNodeParams is 256 bytes in cuda.h");
_Static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120, "as cuda.h lays it out");
_Static_assert(sizeof(struct CUgraphEdgeData_st) == 8, "as cuda.h lays it out");

#endif /* GLEAM_CUDA_GRAPH_H */
