/*
 * gl_cuda.h — the part of the CUDA driver API's binary interface that gleam
 * forwards: handle and scalar types, result codes and the constants the
 * interposer and the executor interpret. Written from NVIDIA's documentation so
 * that gleam builds on machines without any CUDA installation; the examples,
 * compiled against NVIDIA's own cuda.h, check that the two agree.
 */
#ifndef GLEAM_CUDA_H
#define GLEAM_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef uint32_t cuuint32_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUlinkState_st *CUlinkState;
typedef struct { char bytes[16]; } CUuuid;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef int CUpointer_attribute;
typedef int CUjit_option;
typedef int CUjitInputType;
typedef size_t (*CUoccupancyB2DSize)(int blockSize);
typedef int CUlibraryOption;
typedef int CUdriverProcAddressQueryResult;
typedef int CUmoduleLoadingMode;
typedef int CUlimit;
typedef int CUstreamCaptureStatus;
typedef int CUstreamCaptureMode;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphEdgeData_st CUgraphEdgeData; /* only ever pointed to */
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmemPoolProps_st CUmemPoolProps; /* only ever pointed to */
typedef int CUmemPool_attribute;
typedef int CUfunc_cache;
typedef int CUlogLevel; /* CU_LOG_LEVEL_ERROR 0, CU_LOG_LEVEL_WARNING 1 */
typedef struct CUlogsCallbackEntry_st *CUlogsCallbackHandle;
typedef void (*CUlogsCallback)(void *data, CUlogLevel logLevel, char *message, size_t length);
typedef unsigned int CUlogIterator;
/* Hopper's tensor maps: 128 opaque bytes (CUDA 13's cuda.h aligns the type to
 * 128; gleam only ever copies them); the enums are plain ints. */
typedef struct CUtensorMap_st { cuuint64_t opaque[16]; } CUtensorMap;
typedef int CUtensorMapDataType;
typedef int CUtensorMapInterleave;
typedef int CUtensorMapSwizzle;
typedef int CUtensorMapL2promotion;
typedef int CUtensorMapFloatOOBfill;
typedef int CUtensorMapIm2ColWideMode;
/* cuCtxCreate_v4's parameters (execution affinity and CIG); gleam accepts only
 * a NULL pointer or one whose members are both NULL. */
typedef struct { void *execAffinityParams; int numExecAffinityParams; void *cigParams; } CUctxCreateParams;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_UNSUPPORTED_LIMIT = 215,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_FILE_NOT_FOUND = 301,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_TIMEOUT = 702,
    CUDA_ERROR_ASSERT = 710,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    /* Stream capture and graphs (interposer/capture.c, graph*.c). */
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CUDA_ERROR_CAPTURED_EVENT = 907,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
    CUDA_ERROR_INVALID_CLUSTER_SIZE = 912,
    CUDA_ERROR_UNKNOWN = 999
};

#define GL_CU_STREAM_LEGACY ((uint64_t)0x1)
#define GL_CU_STREAM_PER_THREAD ((uint64_t)0x2)

/* cuLaunchKernel's `extra` markers. */
#define GL_CU_LAUNCH_PARAM_END ((void *)0x00)
#define GL_CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define GL_CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* cuGetProcAddress flags and results. */
enum {
    GL_CU_GET_PROC_ADDRESS_DEFAULT = 0,
    GL_CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
    GL_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2
};
enum {
    GL_CU_GET_PROC_ADDRESS_SUCCESS = 0,
    GL_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    GL_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
};

/* cuLink*: input kinds and the JIT options whose values the linker writes. */
enum {
    GL_CU_JIT_INPUT_CUBIN = 0, GL_CU_JIT_INPUT_PTX = 1, GL_CU_JIT_INPUT_FATBINARY = 2,
    GL_CU_JIT_INPUT_OBJECT = 3, GL_CU_JIT_INPUT_LIBRARY = 4, GL_CU_JIT_INPUT_NVVM = 5
};
enum {
    GL_CU_JIT_MAX_REGISTERS = 0, GL_CU_JIT_WALL_TIME = 2,
    GL_CU_JIT_INFO_LOG_BUFFER = 3, GL_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    GL_CU_JIT_ERROR_LOG_BUFFER = 5, GL_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};

/* cuLaunchKernelEx's configuration (the layout is CUDA's: an attribute is an
 * id padded to 8 bytes and a 64-byte value union). */
typedef struct {
    int id;
    char pad[4];
    union { char bytes[64]; int cooperative; unsigned int clusterDim[3]; } value;
} CUlaunchAttribute;
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;
/* glClusterOccupancy's queries: cuOccupancyMaxActiveClusters and
 * cuOccupancyMaxPotentialClusterSize. */
enum { GL_CLUSTER_ACTIVE = 0, GL_CLUSTER_POTENTIAL_SIZE = 1 };
enum {
    GL_CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
    GL_CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1,
    GL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
    GL_CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY = 3,
    GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5,
    GL_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    GL_CU_LAUNCH_ATTRIBUTE_PRIORITY = 8,
    GL_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP = 9,
    GL_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN = 10,
    GL_CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION = 11,
    GL_CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 14,
    GL_CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING = 16,
    GL_CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE = 17
};

/* Access policy windows (CUDA's layouts): a cache hint for the bytes
 * [base_ptr, base_ptr + num_bytes), set on a stream, a launch or a kernel
 * node. A stream attribute's value is CUDA's 64-byte launch attribute union. */
typedef struct {
    void *base_ptr;
    size_t num_bytes;
    float hitRatio;
    int hitProp;  /* CUaccessProperty: NORMAL 0, STREAMING 1, PERSISTING 2 */
    int missProp; /* NORMAL or STREAMING */
} CUaccessPolicyWindow;
enum {
    GL_CU_ACCESS_PROPERTY_NORMAL = 0, GL_CU_ACCESS_PROPERTY_STREAMING = 1,
    GL_CU_ACCESS_PROPERTY_PERSISTING = 2
};
typedef int CUstreamAttrID;
typedef union {
    char bytes[64];
    CUaccessPolicyWindow accessPolicyWindow;
    int syncPolicy; /* CUsynchronizationPolicy: AUTO 1 .. BLOCKING_SYNC 4 */
    int priority;
} CUstreamAttrValue;

/* cuPointerGetAttribute. */
enum {
    GL_CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    GL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    GL_CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
    GL_CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
    GL_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    GL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    GL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    GL_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    GL_CU_POINTER_ATTRIBUTE_MAPPED = 13
};
enum {
    GL_CU_MEMORYTYPE_HOST = 1, GL_CU_MEMORYTYPE_DEVICE = 2, GL_CU_MEMORYTYPE_ARRAY = 3,
    GL_CU_MEMORYTYPE_UNIFIED = 4
};

/* cuMemcpy2D's and cuMemcpy3D's descriptions of a copy (the layouts are
 * CUDA's _v2 structs: every extent is a size_t). An array side names a
 * minted CUarray (interposer/arraycopy.c). */
typedef struct CUarray_st *CUarray;
typedef int CUmemorytype;
typedef struct {
    size_t srcXInBytes, srcY;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

/* CUDA arrays, texture and surface objects (CUDA's _v2 array descriptors and
 * the v1 resource, texture and view descriptors; the enums are plain ints:
 * include/gl_array.h names the values gleam interprets). */
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef unsigned long long CUtexObject;
typedef unsigned long long CUsurfObject;
typedef int CUarray_format;
typedef struct {
    size_t Width, Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
    size_t Width, Height, Depth;
    CUarray_format Format;
    unsigned int NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
typedef struct {
    int resType;
    union {
        struct { CUarray hArray; } array;
        struct { CUmipmappedArray hMipmappedArray; } mipmap;
        struct {
            CUdeviceptr devPtr;
            CUarray_format format;
            unsigned int numChannels;
            size_t sizeInBytes;
        } linear;
        struct {
            CUdeviceptr devPtr;
            CUarray_format format;
            unsigned int numChannels;
            size_t width, height, pitchInBytes;
        } pitch2D;
        struct { int reserved[32]; } reserved;
    } res;
    unsigned int flags;
} CUDA_RESOURCE_DESC;
typedef struct {
    int addressMode[3];
    int filterMode;
    unsigned int flags, maxAnisotropy;
    int mipmapFilterMode;
    float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
    float borderColor[4];
    int reserved[12];
} CUDA_TEXTURE_DESC;
typedef struct {
    int format;
    size_t width, height, depth;
    unsigned int firstMipmapLevel, lastMipmapLevel, firstLayer, lastLayer;
    unsigned int reserved[16];
} CUDA_RESOURCE_VIEW_DESC;

/* cuMemcpyBatchAsync's attributes (CUDA 12.8; CUmemcpyAttributes_v1). */
typedef struct {
    int srcAccessOrder; /* 1 stream, 2 during the call, 3 any; 0 is invalid */
    struct { int type, id; } srcLocHint, dstLocHint;
    unsigned int flags;
} CUmemcpyAttributes;

/* Device attributes gleam's host device reports (the numbers are CUDA's). */
enum {
    GL_ATTR_MAX_THREADS_PER_BLOCK = 1,
    GL_ATTR_MAX_BLOCK_DIM_X = 2, GL_ATTR_MAX_BLOCK_DIM_Y = 3, GL_ATTR_MAX_BLOCK_DIM_Z = 4,
    GL_ATTR_MAX_GRID_DIM_X = 5, GL_ATTR_MAX_GRID_DIM_Y = 6, GL_ATTR_MAX_GRID_DIM_Z = 7,
    GL_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    GL_ATTR_WARP_SIZE = 10,
    GL_ATTR_MAX_PITCH = 11,
    GL_ATTR_CLOCK_RATE = 13,
    GL_ATTR_MULTIPROCESSOR_COUNT = 16,
    GL_ATTR_UNIFIED_ADDRESSING = 41,
    GL_ATTR_TEXTURE_PITCH_ALIGNMENT = 51,
    GL_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    GL_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    GL_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    GL_ATTR_MAX_PERSISTING_L2_CACHE_SIZE = 108,
    GL_ATTR_MAX_ACCESS_POLICY_WINDOW_SIZE = 109
};

/* cuFuncGetAttribute. */
enum {
    GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK = 0,
    GL_FUNC_ATTR_SHARED_SIZE_BYTES = 1,
    GL_FUNC_ATTR_NUM_REGS = 4,
    GL_FUNC_ATTR_PTX_VERSION = 5,
    GL_FUNC_ATTR_BINARY_VERSION = 6
};

/* Graphs, capture and host functions: the types of their entry points. */
#include "gl_cuda_graph.h"

/* Mapped and managed memory (interposer/mirror.c, managed.c). */
typedef int CUmem_advise;
typedef int CUmem_range_attribute;
/* CUmemLocation (a CUmemLocationType, then an id): gl_cuda_graph.h */
enum { GL_CU_MEM_ATTACH_GLOBAL = 1, GL_CU_MEM_ATTACH_HOST = 2, GL_CU_MEM_ATTACH_SINGLE = 4 };
enum { GL_CU_MEMHOSTALLOC_DEVICEMAP = 2, GL_CU_MEMHOSTREGISTER_DEVICEMAP = 2 };
enum {
    GL_CU_MEM_LOCATION_TYPE_INVALID = 0, GL_CU_MEM_LOCATION_TYPE_DEVICE = 1,
    GL_CU_MEM_LOCATION_TYPE_HOST = 2, GL_CU_MEM_LOCATION_TYPE_HOST_NUMA = 3,
    GL_CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 4
};
/* Virtual memory management (interposer/vmm.c): CUDA 13's CUmemAllocationProp. */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef int CUmemAllocationGranularity_flags;
typedef struct {
    int type, requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType, gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
enum { GL_CU_MEM_ALLOCATION_TYPE_PINNED = 1, GL_CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
       GL_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };
#define GL_CU_DEVICE_CPU (-1)
#define GL_CU_DEVICE_INVALID (-2)

#endif /* GLEAM_CUDA_H */
