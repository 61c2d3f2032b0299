"""Driver entry points outside the forwarded table that the cuda backend calls itself.

The rows of cuda_api.py are what a program may call; these are what the
executor needs of the real driver around them: reserving and mapping the
session's address range, the primary context, and the calls that load code and
launch it once the backend has prepared them. Python resolves each symbol in
the driver it opened and hands the addresses over in a ``gl_cuda_extra``
struct; gen_cuda_extra.py writes that struct and the list of required entries
from this table, so the three never disagree.
"""

from __future__ import annotations

from typing import NamedTuple


# A NamedTuple, not a dataclass: cdef.py loads this file by path, outside sys.modules.
class Extra(NamedTuple):
    symbol: str  # the driver's exported name (and the struct field)
    # True: without it a session cannot open, and the backend refuses to start.
    # False: the calls that need it answer CUDA_ERROR_NOT_SUPPORTED.
    required: bool = True


EXTRAS: tuple[Extra, ...] = (
    # The session's device address range (virtual memory management).
    Extra("cuMemAddressReserve"),
    Extra("cuMemAddressFree"),
    Extra("cuMemCreate"),
    Extra("cuMemRelease"),
    Extra("cuMemMap"),
    Extra("cuMemUnmap"),
    Extra("cuMemSetAccess"),
    Extra("cuMemGetAllocationGranularity"),
    # The device's primary context, which every session shares.
    Extra("cuDevicePrimaryCtxRetain"),
    Extra("cuDevicePrimaryCtxRelease_v2"),
    Extra("cuCtxSetCurrent"),
    Extra("cuCtxSynchronize"),
    # Reading device memory back for replies.
    Extra("cuMemcpyDtoHAsync_v2"),
    Extra("cuStreamSynchronize"),
    # Code loading and launches on the backend's own terms (cudadev.c).
    Extra("cuModuleLoadData", required=False),
    Extra("cuLibraryLoadData", required=False),
    Extra("cuLaunchKernel", required=False),
    Extra("cuModuleGetGlobal_v2", required=False),
    # Pitched copies (the glMemcpy2D* rows).
    Extra("cuMemcpy2DAsync_v2", required=False),
    # Hopper's tensor maps (cb_glTensorMapEncode): the driver alone knows their layout.
    Extra("cuTensorMapEncodeTiled", required=False),
    Extra("cuTensorMapEncodeIm2col", required=False),
    Extra("cuTensorMapEncodeIm2colWide", required=False),
    Extra("cuTensorMapReplaceAddress", required=False),
    # Thread-block clusters (cb_glLaunchCluster, cb_glClusterOccupancy).
    Extra("cuLaunchKernelEx", required=False),
    Extra("cuOccupancyMaxActiveClusters", required=False),
    Extra("cuOccupancyMaxPotentialClusterSize", required=False),
    # Link images (cudadev_link.c): the driver's own linker links the client's inputs.
    Extra("cuLinkCreate_v2", required=False),
    Extra("cuLinkAddData_v2", required=False),
    Extra("cuLinkComplete", required=False),
    Extra("cuLinkDestroy", required=False),
    # CUDA graphs (cudadev_graphs.c): each stage of an instantiated graph is a
    # real graph; without these entries the stages run node by node.
    Extra("cuGraphCreate", required=False),
    Extra("cuGraphDestroy", required=False),
    Extra("cuGraphAddKernelNode_v2", required=False),
    Extra("cuGraphKernelNodeSetAttribute", required=False),
    Extra("cuGraphAddMemsetNode", required=False),
    Extra("cuGraphAddMemcpyNode", required=False),
    Extra("cuGraphAddEmptyNode", required=False),
    Extra("cuGraphAddEventRecordNode", required=False),
    Extra("cuGraphAddEventWaitNode", required=False),
    Extra("cuGraphInstantiateWithFlags", required=False),
    Extra("cuGraphExecUpdate_v2", required=False),
    Extra("cuGraphLaunch", required=False),
    Extra("cuGraphExecDestroy", required=False),
    # CUDA arrays, texture and surface objects (src/cudadev/cudadev_arrays.c).
    Extra("cuArray3DCreate_v2", required=False),
    Extra("cuArrayDestroy", required=False),
    Extra("cuMipmappedArrayCreate", required=False),
    Extra("cuMipmappedArrayGetLevel", required=False),
    Extra("cuMipmappedArrayDestroy", required=False),
    Extra("cuMemcpy3DAsync_v2", required=False),
    Extra("cuTexObjectCreate", required=False),
    Extra("cuTexObjectDestroy", required=False),
    Extra("cuSurfObjectCreate", required=False),
    Extra("cuSurfObjectDestroy", required=False),
)
