/*
 * graph_layout.c — sizes and member offsets of the graph structs a program hands the driver,
 * printed once from gleam's own header (-DGLEAM: include/gl_cuda_graph.h through gl_cuda.h)
 * and once from NVIDIA's cuda.h: tests/test_graph_layout.py compares the two.
 */
#include <stddef.h>
#include <stdio.h>
#ifdef GLEAM
#include "gl_cuda.h"
#else
#include <cuda.h>
#endif
#define S(t) printf("%s %zu\n", #t, sizeof(t))
#define O(t, m) printf("%s.%s %zu\n", #t, #m, offsetof(t, m))
int main(void)
{
    S(CUDA_KERNEL_NODE_PARAMS); O(CUDA_KERNEL_NODE_PARAMS, kernelParams); O(CUDA_KERNEL_NODE_PARAMS, kern); O(CUDA_KERNEL_NODE_PARAMS, ctx);
    S(CUDA_KERNEL_NODE_PARAMS_v1);
    S(CUDA_MEMSET_NODE_PARAMS); O(CUDA_MEMSET_NODE_PARAMS, elementSize); O(CUDA_MEMSET_NODE_PARAMS, height);
    S(CUDA_HOST_NODE_PARAMS);
    S(CUDA_MEM_ALLOC_NODE_PARAMS); O(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize); O(CUDA_MEM_ALLOC_NODE_PARAMS, dptr);
    O(CUDA_MEM_ALLOC_NODE_PARAMS, poolProps.location);
    S(CUgraphNodeParams); O(CUgraphNodeParams, kernel); O(CUgraphNodeParams, memcpy.copyParams); O(CUgraphNodeParams, memset.ctx); O(CUgraphNodeParams, alloc.dptr); O(CUgraphNodeParams, free.dptr); O(CUgraphNodeParams, graph.ownership);
    S(CUDA_GRAPH_INSTANTIATE_PARAMS); O(CUDA_GRAPH_INSTANTIATE_PARAMS, result_out);
    S(CUgraphExecUpdateResultInfo); O(CUgraphExecUpdateResultInfo, errorFromNode);
    S(CUgraphEdgeData);
    S(CUDA_MEMCPY3D);
    return 0;
}
