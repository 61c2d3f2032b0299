"""What gleam's host device says it is: the attributes ``cuDeviceGetAttribute``
answers, one table.

The host device reports compute capability 8.0 (docs/cuda-forwarding.md,
"Device identity"), so cudart and the libraries above it take the paths an
8.0 GPU takes, and each value here is either what the host device really does
(a core runs one block at a time and keeps an 8.0 device's residency for
cooperative grids, no clusters) or,
where it only describes hardware the host does not have (clocks, caches), a
value an 8.0 device reports. cudart copies all of them into
``cudaDeviceProp``; cuBLASLt refuses a context whose per-block and
per-multiprocessor limits are zero, which is why the table is complete rather
than the few attributes gleam itself reads. The managed and mapped memory
attributes are not here: the interposer answers them for every device, since what
it can honour across the network decides them (interposer/managed.c).
"""

from __future__ import annotations

from gleam.peer.nativelib import lib

# Shared memory an 8.0 device lets one block opt into, and has per multiprocessor:
# what libraries plan their tiles for. The host device allows more (PTX_MAX_SHARED,
# 1 MiB), so anything planned within these runs.
_OPTIN_SHARED = 163 * 1024
# What a multiprocessor (a core) keeps resident: the occupancy answers and the
# cooperative grids of the host device follow the same numbers (hostdev_attrs.c).
_SM_SHARED = int(lib.GL_HOST_SHARED_PER_SM)
_SM_THREADS = int(lib.GL_HOST_THREADS_PER_SM)
_SM_BLOCKS = int(lib.GL_HOST_BLOCKS_PER_SM)

# CUdevice_attribute number: (value, why). Numbers not listed answer 0: a NUMA or
# interop feature the host device does not have.
_TABLE: dict[int, tuple[int, str]] = {
    1: (1024, "MAX_THREADS_PER_BLOCK: the interpreter's block limit"),
    2: (1024, "MAX_BLOCK_DIM_X"),
    3: (1024, "MAX_BLOCK_DIM_Y"),
    4: (64, "MAX_BLOCK_DIM_Z"),
    5: (2**31 - 1, "MAX_GRID_DIM_X"),
    6: (65535, "MAX_GRID_DIM_Y"),
    7: (65535, "MAX_GRID_DIM_Z"),
    8: (48 * 1024, "MAX_SHARED_MEMORY_PER_BLOCK without opting in, as on a GPU"),
    9: (64 * 1024, "TOTAL_CONSTANT_MEMORY"),
    10: (32, "WARP_SIZE"),
    11: (2**31 - 1, "MAX_PITCH"),
    12: (65536, "MAX_REGISTERS_PER_BLOCK"),
    13: (1_410_000, "CLOCK_RATE (kHz): an 8.0 device's"),
    14: (512, "TEXTURE_ALIGNMENT: also the pitch of cuMemAllocPitch rows"),
    15: (1, "GPU_OVERLAP: copies and kernels overlap across streams"),
    # CUDA arrays, textures and surfaces (docs/ptx-execution.md): an 8.0 device's limits,
    # all within the host device's own (include/gl_array.h, GL_ARRAY_EXTENT_MAX).
    21: (131072, "MAXIMUM_TEXTURE1D_WIDTH"),
    22: (131072, "MAXIMUM_TEXTURE2D_WIDTH"),
    23: (65536, "MAXIMUM_TEXTURE2D_HEIGHT"),
    24: (16384, "MAXIMUM_TEXTURE3D_WIDTH"),
    25: (16384, "MAXIMUM_TEXTURE3D_HEIGHT"),
    26: (16384, "MAXIMUM_TEXTURE3D_DEPTH"),
    27: (32768, "MAXIMUM_TEXTURE2D_LAYERED_WIDTH"),
    28: (32768, "MAXIMUM_TEXTURE2D_LAYERED_HEIGHT"),
    29: (2048, "MAXIMUM_TEXTURE2D_LAYERED_LAYERS"),
    30: (512, "SURFACE_ALIGNMENT"),
    31: (1, "CONCURRENT_KERNELS: streams run kernels side by side"),
    36: (1_215_000, "MEMORY_CLOCK_RATE (kHz): an 8.0 device's"),
    37: (5120, "GLOBAL_MEMORY_BUS_WIDTH (bits): an 8.0 device's"),
    38: (40 * 1024 * 1024, "L2_CACHE_SIZE: an 8.0 device's"),
    39: (_SM_THREADS, "MAX_THREADS_PER_MULTIPROCESSOR: resident threads of a core"),
    40: (1, "ASYNC_ENGINE_COUNT: copies overlap kernels"),
    41: (1, "UNIFIED_ADDRESSING: one address space for host and device pointers"),
    42: (32768, "MAXIMUM_TEXTURE1D_LAYERED_WIDTH"),
    43: (2048, "MAXIMUM_TEXTURE1D_LAYERED_LAYERS"),
    45: (32768, "MAXIMUM_TEXTURE2D_GATHER_WIDTH"),
    46: (32768, "MAXIMUM_TEXTURE2D_GATHER_HEIGHT"),
    47: (8192, "MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE"),
    48: (8192, "MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE"),
    49: (32768, "MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE"),
    51: (32, "TEXTURE_PITCH_ALIGNMENT"),
    52: (32768, "MAXIMUM_TEXTURECUBEMAP_WIDTH"),
    53: (32768, "MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH"),
    54: (2046, "MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS"),
    55: (32768, "MAXIMUM_SURFACE1D_WIDTH"),
    56: (131072, "MAXIMUM_SURFACE2D_WIDTH"),
    57: (65536, "MAXIMUM_SURFACE2D_HEIGHT"),
    58: (16384, "MAXIMUM_SURFACE3D_WIDTH"),
    59: (16384, "MAXIMUM_SURFACE3D_HEIGHT"),
    60: (16384, "MAXIMUM_SURFACE3D_DEPTH"),
    61: (32768, "MAXIMUM_SURFACE1D_LAYERED_WIDTH"),
    62: (2048, "MAXIMUM_SURFACE1D_LAYERED_LAYERS"),
    63: (32768, "MAXIMUM_SURFACE2D_LAYERED_WIDTH"),
    64: (32768, "MAXIMUM_SURFACE2D_LAYERED_HEIGHT"),
    65: (2048, "MAXIMUM_SURFACE2D_LAYERED_LAYERS"),
    66: (32768, "MAXIMUM_SURFACECUBEMAP_WIDTH"),
    67: (32768, "MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH"),
    68: (2046, "MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS"),
    69: (1 << 27, "MAXIMUM_TEXTURE1D_LINEAR_WIDTH: elements of a linear texture"),
    70: (131072, "MAXIMUM_TEXTURE2D_LINEAR_WIDTH"),
    71: (65000, "MAXIMUM_TEXTURE2D_LINEAR_HEIGHT"),
    72: (2097120, "MAXIMUM_TEXTURE2D_LINEAR_PITCH"),
    73: (32768, "MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH"),
    74: (32768, "MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT"),
    75: (8, "COMPUTE_CAPABILITY_MAJOR"),
    76: (0, "COMPUTE_CAPABILITY_MINOR"),
    77: (32768, "MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH"),
    78: (1, "STREAM_PRIORITIES_SUPPORTED: priorities are accepted (and ignored)"),
    79: (1, "GLOBAL_L1_CACHE_SUPPORTED"),
    80: (1, "LOCAL_L1_CACHE_SUPPORTED"),
    81: (_SM_SHARED, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
    82: (65536, "MAX_REGISTERS_PER_MULTIPROCESSOR"),
    87: (2, "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO"),
    95: (1, "COOPERATIVE_LAUNCH: a cooperative grid's blocks are all resident"),
    97: (_OPTIN_SHARED, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
    99: (1, "HOST_REGISTER_SUPPORTED: cuMemHostRegister works (interposer/pinned.c)"),
    106: (_SM_BLOCKS, "MAX_BLOCKS_PER_MULTIPROCESSOR: resident blocks of a core"),
    102: (1, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: interposer/vmm.c, src/exec/exec_vmm.c"),
    # 107 GENERIC_COMPRESSION_SUPPORTED: 0, cuMemCreate makes ordinary memory.
    # Persisting L2 (docs/cuda-forwarding.md, "Persisting L2 and access policy windows"):
    # an 8.0 device's set-aside and window limits; the windows and the limit are
    # hints the host device checks and keeps, with no effect on results.
    108: (30 * 1024 * 1024, "MAX_PERSISTING_L2_CACHE_SIZE: an 8.0 device's"),
    109: (134_213_632, "MAX_ACCESS_POLICY_WINDOW_SIZE: an 8.0 device's"),
    115: (1, "MEMORY_POOLS_SUPPORTED: cuMemAllocAsync and pools (interposer/mempool.c)"),
    126: (1, "MEM_SYNC_DOMAIN_COUNT"),
    131: (-1, "NUMA_ID: none"),
    134: (-1, "HOST_NUMA_ID: none"),
}


def host_attributes(cores: int) -> dict[int, int]:
    """The host device's attributes for a machine with ``cores`` cores."""
    attrs = {number: value for number, (value, _why) in _TABLE.items()}
    attrs[16] = max(1, cores)  # MULTIPROCESSOR_COUNT: a core runs one block at a time
    return attrs
