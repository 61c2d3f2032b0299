"""The forwarded CUDA driver API, declared once.

Every entry point gleam's ``libcuda.so.1`` exports is one row here; the build
(``gen_cuda.py``) turns the rows into the interposer's stubs, the record
encoding on both sides and the executor's dispatch (docs/cuda-forwarding.md).

A row is ``Row(name, signature, cls, symbols, roles, ...)``:

``signature``
    The C parameter list, as in NVIDIA's documentation.
``cls``
    LOCAL (answered in the interposer by ``gli_<name>``), CACHED (the same,
    from the device facts fetched when the session opened), ONEWAY (appended
    to the batch; returns at once) or WAITING (flushes and waits for the
    reply). Only ONEWAY and WAITING rows are *wire calls*: they have a call id
    and a record, and the executor dispatches them.
``symbols``
    The names the driver exports for this signature, each with the CUDA
    version from which ``cuGetProcAddress`` hands it out for the base name,
    and whether a per-thread-default-stream twin exists (``_ptds`` for
    synchronous calls, ``_ptsz`` for stream-ordered ones). A row with no
    symbols is internal: only the interposer's own code emits it.
``roles``
    What each pointer or handle parameter means (parameters not named are
    scalars passed by value):

    ``h:KIND``        a handle of KIND (ctx, mod, func, lib, kernel, stream, event;
                      pool handles never leave the interposer)
    ``h:KIND!``       the same, and the call destroys it
    ``mint:KIND``     ``KIND *`` out: the interposer mints the handle; the server
                      binds its own object to it
    ``dptr:EXPR``     a device pointer whose ``[p, p + EXPR)`` must lie in the
                      session's memory (EXPR is C over the other parameters)
    ``hin:EXPR``      host bytes read by the call: the record's payload
    ``cstr``          a NUL-terminated string: the record's payload
    ``out``           a scalar written by the call: a reply value
    ``hout:EXPR``     host bytes written by the call: the reply's bytes
    ``hsome:EXPR``    the same, at most EXPR of them: the reply carries as many as
                      the call's first ``out`` says (the rest stay untouched)
``client``
    ``"custom"``: the exported symbols call the hand-written ``gli_<name>``,
    which does the local part and calls the generated emitter ``glw_<name>``.
``server``
    ``"backend"`` (default): the executor calls the backend's slot for the call,
    whose signature is the row's with handles translated; ``"exec"``: the
    hand-written ``gx_<name>`` in the executor does it (allocation tracking).
``driver``
    The real driver's symbol with exactly this signature, which the cuda
    backend calls directly; rows without one have a hand-written ``cb_<name>``.
``ctx``
    False for calls that need no current context.
``backend``
    False (with ``server="exec"``): the executor's ``gx_<name>`` is the whole
    server half; the backends have no slot for the call.
``caller``
    True: the exported stubs record their return address, so the interposer
    can tell cudart's calls from the program's (interposer/caller.c).
``ready``
    True (rows with a hand-written ``gli_<name>``): the call needs the session.
    The generator writes ``gli_<name>`` itself: it answers what ``gl_ready()``
    says while there is no session (CUDA_ERROR_NOT_INITIALIZED before cuInit,
    CUDA_ERROR_DEVICE_UNAVAILABLE once the server is lost) and otherwise calls
    the hand-written ``gls_<name>``, which may then take the session as given.
    Internal callers of ``gli_<name>`` (cudart's export tables) get the same
    check. Rows without it answer before cuInit (cuInit, cuDriverGetVersion,
    the error strings) or leave the check to what they call.
``data``
    True (wire rows): the call's lasting effect is only on device memory, which
    a checkpoint's snapshot holds, or it has none (synchronisations, queries):
    a checkpoint drops its records (peer/cuda/client/checkpoint.py). Every other wire
    call builds state and is replayed, so a row added without it is kept.

Call ids are the wire rows' positions in ``ROWS``: append new rows at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LOCAL, CACHED, ONEWAY, WAITING = "local", "cached", "oneway", "waiting"


@dataclass(frozen=True)
class Sym:
    name: str
    since: int  # cuGetProcAddress hands this symbol out for versions >= since
    per_thread: bool = False  # a _ptds/_ptsz twin exists

    @property
    def twin(self) -> str:
        return self.name + ("_ptsz" if self.stream_ordered else "_ptds")

    stream_ordered: bool = False


@dataclass(frozen=True)
class Row:
    name: str
    signature: str
    cls: str
    symbols: tuple[Sym, ...] = ()
    roles: dict[str, str] = field(default_factory=dict)
    client: str = "auto"
    server: str = "backend"
    driver: str | None = None
    ctx: bool = True
    base: str | None = None  # cuGetProcAddress base name (default: name)
    caller: bool = False  # the exported stub records its return address (caller.c)
    backend: bool = True  # False: the executor's gx_<name> alone answers (no backend slot)
    ready: bool = False  # gli_<name> is generated: the session check, then gls_<name>
    data: bool = False  # a checkpoint drops its records: memory (the snapshot) or nothing

    @property
    def wire(self) -> bool:
        return self.cls in (ONEWAY, WAITING)


def s(name: str, since: int) -> Sym:
    return Sym(name, since)


def ptds(name: str, since: int) -> Sym:
    return Sym(name, since, per_thread=True)


def ptsz(name: str, since: int) -> Sym:
    return Sym(name, since, per_thread=True, stream_ordered=True)


R = Row
# The leading parameters of every cuGraphAdd*Node.
ADD_NODE = ("CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, "
            "size_t numDependencies")
ROWS: tuple[Row, ...] = (
    # ---------------------------------------------------------- initialisation
    R("cuInit", "unsigned int Flags", LOCAL, (s("cuInit", 2000),)),
    R("cuDriverGetVersion", "int *driverVersion", LOCAL, (s("cuDriverGetVersion", 2020),)),
    R("cuGetProcAddress", "const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags",
      LOCAL, (s("cuGetProcAddress", 11030),)),
    R("cuGetProcAddress_v2", "const char *symbol, void **pfn, int cudaVersion, "
      "cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus",
      LOCAL, (s("cuGetProcAddress_v2", 12000),), base="cuGetProcAddress"),
    R("cuGetErrorName", "CUresult error, const char **pStr", LOCAL, (s("cuGetErrorName", 6000),)),
    R("cuGetErrorString", "CUresult error, const char **pStr", LOCAL,
      (s("cuGetErrorString", 6000),)),
    # Driver logs (12.9): gleam's own messages, kept and handed to callbacks
    # (interposer/logs.c). PyTorch adds them to its CUDA errors.
    R("cuLogsRegisterCallback", "CUlogsCallback callbackFunc, void *userData, "
      "CUlogsCallbackHandle *callback_out", LOCAL, (s("cuLogsRegisterCallback", 12090),)),
    R("cuLogsUnregisterCallback", "CUlogsCallbackHandle callback", LOCAL,
      (s("cuLogsUnregisterCallback", 12090),)),
    R("cuLogsCurrent", "CUlogIterator *iterator_out, unsigned int flags", LOCAL,
      (s("cuLogsCurrent", 12090),)),
    R("cuLogsDumpToFile", "CUlogIterator *iterator, const char *pathToFile, unsigned int flags",
      LOCAL, (s("cuLogsDumpToFile", 12090),)),
    R("cuLogsDumpToMemory", "CUlogIterator *iterator, char *buffer, size_t *size, "
      "unsigned int flags", LOCAL, (s("cuLogsDumpToMemory", 12090),)),
    # ------------------------------------------------------------------ devices
    R("cuDeviceGet", "CUdevice *device, int ordinal", CACHED, (s("cuDeviceGet", 2000),)),
    R("cuDeviceGetCount", "int *count", CACHED, (s("cuDeviceGetCount", 2000),), ready=True),
    R("cuDeviceGetName", "char *name, int len, CUdevice dev", CACHED,
      (s("cuDeviceGetName", 2000),)),
    R("cuDeviceGetAttribute", "int *pi, CUdevice_attribute attrib, CUdevice dev", CACHED,
      (s("cuDeviceGetAttribute", 2000),)),
    R("cuDeviceTotalMem", "size_t *bytes, CUdevice dev", CACHED,
      (s("cuDeviceTotalMem_v2", 3020),)),
    R("cuDeviceGetUuid", "CUuuid *uuid, CUdevice dev", CACHED,
      (s("cuDeviceGetUuid", 9020), s("cuDeviceGetUuid_v2", 11040))),
    R("cuDeviceComputeCapability", "int *major, int *minor, CUdevice dev", CACHED,
      (s("cuDeviceComputeCapability", 2000),)),
    # ------------------------------------------------------ primary contexts
    R("cuDevicePrimaryCtxRetain", "CUcontext *pctx, CUdevice dev", ONEWAY,
      (s("cuDevicePrimaryCtxRetain", 7000),), {"pctx": "mint:ctx"}, client="custom",
      driver="cuDevicePrimaryCtxRetain", ctx=False, ready=True),
    R("cuDevicePrimaryCtxRelease", "CUdevice dev", ONEWAY,
      (s("cuDevicePrimaryCtxRelease", 7000), s("cuDevicePrimaryCtxRelease_v2", 11000)),
      client="custom", driver="cuDevicePrimaryCtxRelease_v2", ctx=False, ready=True),
    R("cuDevicePrimaryCtxSetFlags", "CUdevice dev, unsigned int flags", ONEWAY,
      (s("cuDevicePrimaryCtxSetFlags", 7000), s("cuDevicePrimaryCtxSetFlags_v2", 11000)),
      client="custom", driver="cuDevicePrimaryCtxSetFlags_v2", ctx=False, ready=True),
    R("cuDevicePrimaryCtxGetState", "CUdevice dev, unsigned int *flags, int *active", LOCAL,
      (s("cuDevicePrimaryCtxGetState", 7000),), ready=True),
    R("cuDevicePrimaryCtxReset", "CUdevice dev", ONEWAY,
      (s("cuDevicePrimaryCtxReset", 7000), s("cuDevicePrimaryCtxReset_v2", 11000)),
      client="custom", driver="cuDevicePrimaryCtxReset_v2", ctx=False, ready=True),
    # ---------------------------------------------------------------- contexts
    R("cuCtxCreate", "CUcontext *pctx, unsigned int flags, CUdevice dev", ONEWAY,
      (s("cuCtxCreate_v2", 3020),), {"pctx": "mint:ctx"}, client="custom",
      driver="cuCtxCreate_v2", ctx=False, ready=True),
    R("cuCtxCreate_v4", "CUcontext *pctx, CUctxCreateParams *ctxCreateParams, "
      "unsigned int flags, CUdevice dev", LOCAL, (s("cuCtxCreate_v4", 12050),),
      base="cuCtxCreate"),
    R("cuCtxDestroy", "CUcontext ctx", ONEWAY, (s("cuCtxDestroy_v2", 4000),),
      {"ctx": "h:ctx!"}, client="custom", driver="cuCtxDestroy_v2", ctx=False, ready=True),
    R("glCtxSetCurrent", "CUcontext ctx", ONEWAY, (), {"ctx": "h:ctx"},
      driver="cuCtxSetCurrent", ctx=False),
    R("cuCtxSetCurrent", "CUcontext ctx", LOCAL, (s("cuCtxSetCurrent", 4000),), ready=True),
    R("cuCtxGetCurrent", "CUcontext *pctx", LOCAL, (s("cuCtxGetCurrent", 4000),), ready=True),
    R("cuCtxPushCurrent", "CUcontext ctx", LOCAL, (s("cuCtxPushCurrent_v2", 4000),), ready=True),
    R("cuCtxPopCurrent", "CUcontext *pctx", LOCAL, (s("cuCtxPopCurrent_v2", 4000),), ready=True),
    R("cuCtxGetDevice", "CUdevice *device", LOCAL, (s("cuCtxGetDevice", 2000),), ready=True),
    R("cuCtxSynchronize", "", WAITING, (s("cuCtxSynchronize", 2000),),
      driver="cuCtxSynchronize", data=True),
    # ------------------------------------------------------------------ memory
    R("cuMemAlloc", "CUdeviceptr *dptr, size_t bytesize", LOCAL, (s("cuMemAlloc_v2", 3020),),
      ready=True),
    R("glMemAlloc", "CUdeviceptr dptr, size_t bytesize", ONEWAY, (), server="exec"),
    R("cuMemFree", "CUdeviceptr dptr", LOCAL, (s("cuMemFree_v2", 3020),), ready=True),
    R("glMemFree", "CUdeviceptr dptr", ONEWAY, (), server="exec"),
    R("cuMemGetInfo", "size_t *free, size_t *total", WAITING, (s("cuMemGetInfo_v2", 3020),),
      {"free": "out", "total": "out"}, driver="cuMemGetInfo_v2", data=True),
    R("cuMemGetAddressRange", "CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr", LOCAL,
      (s("cuMemGetAddressRange_v2", 3020),), ready=True),
    R("cuMemAllocHost", "void **pp, size_t bytesize", LOCAL, (s("cuMemAllocHost_v2", 3020),)),
    R("cuMemFreeHost", "void *p", LOCAL, (s("cuMemFreeHost", 2000),), ready=True),
    R("cuMemHostAlloc", "void **pp, size_t bytesize, unsigned int Flags", LOCAL,
      (s("cuMemHostAlloc", 2020),)),
    R("cuPointerGetAttribute", "void *data, CUpointer_attribute attribute, CUdeviceptr ptr",
      LOCAL, (s("cuPointerGetAttribute", 4000),), ready=True),
    # ------------------------------------------------------------------ copies
    R("cuMemcpyHtoD", "CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount", LOCAL,
      (ptds("cuMemcpyHtoD_v2", 3020),)),
    R("cuMemcpyHtoDAsync", "CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, "
      "CUstream hStream", LOCAL, (ptsz("cuMemcpyHtoDAsync_v2", 3020),)),
    R("glMemcpyHtoD", "CUdeviceptr dst, const void *src, size_t n, CUstream stream", ONEWAY, (),
      {"dst": "dptr:n", "src": "hin:n", "stream": "h:stream"},
      driver="cuMemcpyHtoDAsync_v2", data=True),
    R("cuMemcpyDtoH", "void *dstHost, CUdeviceptr srcDevice, size_t ByteCount", LOCAL,
      (ptds("cuMemcpyDtoH_v2", 3020),)),
    R("cuMemcpyDtoHAsync", "void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, "
      "CUstream hStream", LOCAL, (ptsz("cuMemcpyDtoHAsync_v2", 3020),)),
    R("glMemcpyDtoH", "void *dst, CUdeviceptr src, size_t n, CUstream stream", WAITING, (),
      {"dst": "hout:n", "src": "dptr:n", "stream": "h:stream"}, data=True),
    R("cuMemcpyDtoD", "CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount",
      ONEWAY, (ptds("cuMemcpyDtoD_v2", 3020),),
      {"dstDevice": "dptr:ByteCount", "srcDevice": "dptr:ByteCount"},
      driver="cuMemcpyDtoD_v2", data=True),
    R("cuMemcpyDtoDAsync", "CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, "
      "CUstream hStream", ONEWAY, (ptsz("cuMemcpyDtoDAsync_v2", 3020),),
      {"dstDevice": "dptr:ByteCount", "srcDevice": "dptr:ByteCount", "hStream": "h:stream"},
      driver="cuMemcpyDtoDAsync_v2", data=True),
    R("cuMemcpy", "CUdeviceptr dst, CUdeviceptr src, size_t ByteCount", LOCAL,
      (ptds("cuMemcpy", 4000),)),
    R("cuMemcpyAsync", "CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream",
      LOCAL, (ptsz("cuMemcpyAsync", 4000),)),
    # Pitched memory and 2D/3D copies (interposer/copies2d.c): each copy is cut
    # into the pitched records below (at most one copy chunk each) or, for
    # contiguous rows, the plain ones; peer copies stay on gleam's one device.
    R("cuMemAllocPitch", "CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, "
      "size_t Height, unsigned int ElementSizeBytes", LOCAL, (s("cuMemAllocPitch_v2", 3020),),
      ready=True),
    R("cuMemcpy2D", "const CUDA_MEMCPY2D *pCopy", LOCAL, (ptds("cuMemcpy2D_v2", 3020),),
      ready=True),
    R("cuMemcpy2DUnaligned", "const CUDA_MEMCPY2D *pCopy", LOCAL,
      (ptds("cuMemcpy2DUnaligned_v2", 3020),), ready=True),
    R("cuMemcpy2DAsync", "const CUDA_MEMCPY2D *pCopy, CUstream hStream", LOCAL,
      (ptsz("cuMemcpy2DAsync_v2", 3020),), ready=True),
    R("cuMemcpy3D", "const CUDA_MEMCPY3D *pCopy", LOCAL, (ptds("cuMemcpy3D_v2", 3020),),
      ready=True),
    R("cuMemcpy3DAsync", "const CUDA_MEMCPY3D *pCopy, CUstream hStream", LOCAL,
      (ptsz("cuMemcpy3DAsync_v2", 3020),), ready=True),
    R("cuMemcpyPeer", "CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, "
      "CUcontext srcContext, size_t ByteCount", LOCAL, (ptds("cuMemcpyPeer", 4000),),
      ready=True),
    R("cuMemcpyPeerAsync", "CUdeviceptr dstDevice, CUcontext dstContext, "
      "CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream",
      LOCAL, (ptsz("cuMemcpyPeerAsync", 4000),), ready=True),
    R("cuMemcpyBatchAsync", "CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, "
      "CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, "
      "CUstream hStream", LOCAL, (ptsz("cuMemcpyBatchAsync", 12080),), ready=True),
    R("cuMemcpyBatchAsync_v2", "CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, "
      "size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, "
      "CUstream hStream", LOCAL, (ptsz("cuMemcpyBatchAsync_v2", 13000),),
      base="cuMemcpyBatchAsync", ready=True),
    R("cuMemsetD2D8", "CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, "
      "size_t Height", LOCAL, (ptds("cuMemsetD2D8_v2", 3020),), ready=True),
    R("cuMemsetD2D16", "CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, "
      "size_t Width, size_t Height", LOCAL, (ptds("cuMemsetD2D16_v2", 3020),), ready=True),
    R("cuMemsetD2D32", "CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, "
      "size_t Height", LOCAL, (ptds("cuMemsetD2D32_v2", 3020),), ready=True),
    R("cuMemsetD2D8Async", "CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, "
      "size_t Width, size_t Height, CUstream hStream", LOCAL,
      (ptsz("cuMemsetD2D8Async", 3020),), ready=True),
    R("cuMemsetD2D16Async", "CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, "
      "size_t Width, size_t Height, CUstream hStream", LOCAL,
      (ptsz("cuMemsetD2D16Async", 3020),), ready=True),
    R("cuMemsetD2D32Async", "CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, "
      "size_t Width, size_t Height, CUstream hStream", LOCAL,
      (ptsz("cuMemsetD2D32Async", 3020),), ready=True),
    # ---------------------------------------------------------------- memsets
    R("cuMemsetD8", "CUdeviceptr dstDevice, unsigned char uc, size_t N", ONEWAY,
      (ptds("cuMemsetD8_v2", 3020),), {"dstDevice": "dptr:N"}, driver="cuMemsetD8_v2", data=True),
    R("cuMemsetD16", "CUdeviceptr dstDevice, unsigned short us, size_t N", ONEWAY,
      (ptds("cuMemsetD16_v2", 3020),), {"dstDevice": "dptr:N * 2"}, driver="cuMemsetD16_v2",
      data=True),
    R("cuMemsetD32", "CUdeviceptr dstDevice, unsigned int ui, size_t N", ONEWAY,
      (ptds("cuMemsetD32_v2", 3020),), {"dstDevice": "dptr:N * 4"}, driver="cuMemsetD32_v2",
      data=True),
    R("cuMemsetD8Async", "CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream",
      ONEWAY, (ptsz("cuMemsetD8Async", 3020),),
      {"dstDevice": "dptr:N", "hStream": "h:stream"}, driver="cuMemsetD8Async", data=True),
    R("cuMemsetD16Async", "CUdeviceptr dstDevice, unsigned short us, size_t N, "
      "CUstream hStream", ONEWAY, (ptsz("cuMemsetD16Async", 3020),),
      {"dstDevice": "dptr:N * 2", "hStream": "h:stream"}, driver="cuMemsetD16Async", data=True),
    R("cuMemsetD32Async", "CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream",
      ONEWAY, (ptsz("cuMemsetD32Async", 3020),),
      {"dstDevice": "dptr:N * 4", "hStream": "h:stream"}, driver="cuMemsetD32Async", data=True),
    # ---------------------------------------------------------------- modules
    R("cuModuleLoadData", "CUmodule *module, const void *image", LOCAL,
      (s("cuModuleLoadData", 2000),)),
    R("cuModuleLoadDataEx", "CUmodule *module, const void *image, unsigned int numOptions, "
      "CUjit_option *options, void **optionValues", LOCAL, (s("cuModuleLoadDataEx", 2010),)),
    R("glModuleLoad", "CUmodule *module, const void *image, size_t size", ONEWAY, (),
      {"module": "mint:mod", "image": "hin:size"}),
    R("cuModuleUnload", "CUmodule hmod", ONEWAY, (s("cuModuleUnload", 2000),),
      {"hmod": "h:mod!"}, driver="cuModuleUnload"),
    R("cuModuleGetFunction", "CUfunction *hfunc, CUmodule hmod, const char *name", ONEWAY,
      (s("cuModuleGetFunction", 2000),), {"hfunc": "mint:func", "hmod": "h:mod",
                                          "name": "cstr"},
      client="custom", driver="cuModuleGetFunction"),
    R("cuModuleGetGlobal", "CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name",
      WAITING, (s("cuModuleGetGlobal_v2", 3020),),
      {"dptr": "out", "bytes": "out", "hmod": "h:mod", "name": "cstr"},
      client="custom", server="exec"),
    R("cuLibraryLoadData", "CUlibrary *library, const void *code, CUjit_option *jitOptions, "
      "void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions, "
      "void **libraryOptionValues, unsigned int numLibraryOptions", LOCAL,
      (s("cuLibraryLoadData", 12000),)),
    # Libraries are context-independent (cudart's eager loading makes them
    # before any context exists).
    R("glLibraryLoad", "CUlibrary *library, const void *image, size_t size", ONEWAY, (),
      {"library": "mint:lib", "image": "hin:size"}, ctx=False),
    R("cuLibraryUnload", "CUlibrary library", ONEWAY, (s("cuLibraryUnload", 12000),),
      {"library": "h:lib!"}, driver="cuLibraryUnload", ctx=False),
    R("cuLibraryGetKernel", "CUkernel *pKernel, CUlibrary library, const char *name", ONEWAY,
      (s("cuLibraryGetKernel", 12000),), {"pKernel": "mint:kernel", "library": "h:lib",
                                          "name": "cstr"},
      client="custom", driver="cuLibraryGetKernel", ctx=False),
    R("cuKernelGetFunction", "CUfunction *pFunc, CUkernel kernel", ONEWAY,
      (s("cuKernelGetFunction", 12000),), {"pFunc": "mint:func", "kernel": "h:kernel"},
      client="custom", driver="cuKernelGetFunction"),
    R("cuFuncGetAttribute", "int *pi, CUfunction_attribute attrib, CUfunction hfunc", WAITING,
      (s("cuFuncGetAttribute", 2020),), {"pi": "out", "hfunc": "h:func"}, client="custom",
      driver="cuFuncGetAttribute", data=True),
    R("cuFuncGetParamInfo", "CUfunction func, size_t paramIndex, size_t *paramOffset, "
      "size_t *paramSize", WAITING, (s("cuFuncGetParamInfo", 12040),),
      {"func": "h:func", "paramOffset": "out", "paramSize": "out"}, client="custom",
      driver="cuFuncGetParamInfo", ready=True, data=True),
    # --------------------------------------------------------------- launches
    R("cuLaunchKernel", "CUfunction f, unsigned int gridDimX, unsigned int gridDimY, "
      "unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, "
      "unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, "
      "void **kernelParams, void **extra", LOCAL, (ptsz("cuLaunchKernel", 4000),), caller=True,
      ready=True),
    R("glLaunch", "CUfunction f, unsigned int gridDimX, unsigned int gridDimY, "
      "unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, "
      "unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, "
      "const void *params, size_t size", ONEWAY, (),
      {"f": "h:func", "hStream": "h:stream", "params": "hin:size"}, data=True),
    # ---------------------------------------------------------------- streams
    R("cuStreamCreate", "CUstream *phStream, unsigned int Flags", ONEWAY,
      (s("cuStreamCreate", 2000),), {"phStream": "mint:stream"}, driver="cuStreamCreate"),
    R("cuStreamCreateWithPriority", "CUstream *phStream, unsigned int flags, int priority",
      ONEWAY, (s("cuStreamCreateWithPriority", 5050),), {"phStream": "mint:stream"},
      driver="cuStreamCreateWithPriority"),
    R("cuStreamDestroy", "CUstream hStream", ONEWAY, (s("cuStreamDestroy_v2", 4000),),
      {"hStream": "h:stream!"}, driver="cuStreamDestroy_v2"),
    R("cuStreamSynchronize", "CUstream hStream", WAITING, (ptsz("cuStreamSynchronize", 2000),),
      {"hStream": "h:stream"}, driver="cuStreamSynchronize", data=True),
    R("cuStreamQuery", "CUstream hStream", WAITING, (ptsz("cuStreamQuery", 2000),),
      {"hStream": "h:stream"}, driver="cuStreamQuery", data=True),
    R("cuStreamWaitEvent", "CUstream hStream, CUevent hEvent, unsigned int Flags", ONEWAY,
      (ptsz("cuStreamWaitEvent", 3020),), {"hStream": "h:stream", "hEvent": "h:event"},
      driver="cuStreamWaitEvent"),
    # ----------------------------------------------------------------- events
    R("cuEventCreate", "CUevent *phEvent, unsigned int Flags", ONEWAY,
      (s("cuEventCreate", 2000),), {"phEvent": "mint:event"}, driver="cuEventCreate"),
    R("cuEventRecord", "CUevent hEvent, CUstream hStream", ONEWAY,
      (ptsz("cuEventRecord", 2000),), {"hEvent": "h:event", "hStream": "h:stream"},
      driver="cuEventRecord"),
    R("cuEventSynchronize", "CUevent hEvent", WAITING, (s("cuEventSynchronize", 2000),),
      {"hEvent": "h:event"}, driver="cuEventSynchronize", data=True),
    R("cuEventQuery", "CUevent hEvent", WAITING, (s("cuEventQuery", 2000),),
      {"hEvent": "h:event"}, driver="cuEventQuery", data=True),
    R("cuEventElapsedTime", "float *pMilliseconds, CUevent hStart, CUevent hEnd", WAITING,
      (s("cuEventElapsedTime", 2000), s("cuEventElapsedTime_v2", 12080)),
      {"pMilliseconds": "out", "hStart": "h:event", "hEnd": "h:event"},
      driver="cuEventElapsedTime", data=True),
    R("cuEventDestroy", "CUevent hEvent", ONEWAY,
      (s("cuEventDestroy", 2000), s("cuEventDestroy_v2", 4000)), {"hEvent": "h:event!"},
      driver="cuEventDestroy_v2"),
    # ------------------------------------- appended for numba-cuda (cuda.core)
    R("cuKernelGetAttribute", "int *pi, CUfunction_attribute attrib, CUkernel kernel, "
      "CUdevice dev", WAITING, (s("cuKernelGetAttribute", 12000),),
      {"pi": "out", "kernel": "h:kernel"}, driver="cuKernelGetAttribute", data=True),
    # The linker runs in the interposer (interposer/linker.c): one input image
    # links to itself, which either backend then loads (and JITs, for PTX).
    R("cuLinkCreate", "unsigned int numOptions, CUjit_option *options, void **optionValues, "
      "CUlinkState *stateOut", LOCAL, (s("cuLinkCreate", 5050), s("cuLinkCreate_v2", 6050)),
      ctx=False),
    R("cuLinkAddData", "CUlinkState state, CUjitInputType type, void *data, size_t size, "
      "const char *name, unsigned int numOptions, CUjit_option *options, void **optionValues",
      LOCAL, (s("cuLinkAddData", 5050), s("cuLinkAddData_v2", 6050)), ctx=False),
    R("cuLinkAddFile", "CUlinkState state, CUjitInputType type, const char *path, "
      "unsigned int numOptions, CUjit_option *options, void **optionValues",
      LOCAL, (s("cuLinkAddFile", 5050), s("cuLinkAddFile_v2", 6050)), ctx=False),
    R("cuLinkComplete", "CUlinkState state, void **cubinOut, size_t *sizeOut", LOCAL,
      (s("cuLinkComplete", 5050),), ctx=False),
    R("cuLinkDestroy", "CUlinkState state", LOCAL, (s("cuLinkDestroy", 5050),), ctx=False),
    # cuda.core launches with the extensible form; it becomes a glLaunch.
    R("cuLaunchKernelEx", "const CUlaunchConfig *config, CUfunction f, void **kernelParams, "
      "void **extra", LOCAL, (ptsz("cuLaunchKernelEx", 11060),), caller=True),
    # Occupancy (interposer/occupancy.c; host: hostdev_attrs.c). A CUkernel may
    # stand for its function here too.
    R("cuOccupancyMaxActiveBlocksPerMultiprocessor", "int *numBlocks, CUfunction func, "
      "int blockSize, size_t dynamicSMemSize", WAITING,
      (s("cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050),),
      {"numBlocks": "out", "func": "h:func"}, client="custom",
      driver="cuOccupancyMaxActiveBlocksPerMultiprocessor", data=True),
    R("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "int *numBlocks, CUfunction func, "
      "int blockSize, size_t dynamicSMemSize, unsigned int flags", WAITING,
      (s("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000),),
      {"numBlocks": "out", "func": "h:func"}, client="custom",
      driver="cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", data=True),
    R("cuOccupancyMaxPotentialBlockSize", "int *minGridSize, int *blockSize, CUfunction func, "
      "CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, "
      "int blockSizeLimit", LOCAL, (s("cuOccupancyMaxPotentialBlockSize", 6050),)),
    R("cuOccupancyMaxPotentialBlockSizeWithFlags", "int *minGridSize, int *blockSize, "
      "CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize, "
      "size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags", LOCAL,
      (s("cuOccupancyMaxPotentialBlockSizeWithFlags", 7000),)),
    # ------------------------------------- appended for libcudart (runtime API)
    # cudart's private tables, answered in the interposer (interposer/export_tables.c).
    R("cuGetExportTable", "const void **ppExportTable, const CUuuid *pExportTableId", LOCAL,
      (s("cuGetExportTable", 3000),), ctx=False, caller=True),
    # What cudart asks before loading its modules (interposer/runtime.c).
    R("cuModuleGetLoadingMode", "CUmoduleLoadingMode *mode", LOCAL,
      (s("cuModuleGetLoadingMode", 11070),), ctx=False),
    # cudart 12 takes each library's module (host: hostdev_runtime.c).
    R("cuLibraryGetModule", "CUmodule *pMod, CUlibrary library", ONEWAY,
      (s("cuLibraryGetModule", 12000),), {"pMod": "mint:mod", "library": "h:lib"},
      driver="cuLibraryGetModule"),
    # cudaMemcpyToSymbol & co. on a library: its module's global (interposer/runtime.c).
    R("cuLibraryGetGlobal", "CUdeviceptr *dptr, size_t *bytes, CUlibrary library, "
      "const char *name", LOCAL, (s("cuLibraryGetGlobal", 12000),), ready=True),
    # cudart asks it of the primary context on each new thread (interposer/runtime.c).
    R("cuCtxGetApiVersion", "CUcontext ctx, unsigned int *version", LOCAL,
      (s("cuCtxGetApiVersion", 3020),), ctx=False, ready=True),
    # Context and stream queries of cudaGetDeviceFlags, cudaDeviceGetLimit,
    # cudaDeviceGetStreamPriorityRange, cudaStreamGetPriority and
    # cudaPointerGetAttributes (interposer/runtime.c).
    R("cuCtxGetFlags", "unsigned int *flags", LOCAL, (s("cuCtxGetFlags", 7000),)),
    R("cuCtxGetLimit", "size_t *pvalue, CUlimit limit", LOCAL, (s("cuCtxGetLimit", 3010),),
      ready=True),
    R("cuCtxSetLimit", "CUlimit limit, size_t value", LOCAL, (s("cuCtxSetLimit", 3010),),
      ready=True),
    R("cuCtxGetStreamPriorityRange", "int *leastPriority, int *greatestPriority", LOCAL,
      (s("cuCtxGetStreamPriorityRange", 5050),), ready=True),
    R("cuStreamGetPriority", "CUstream hStream, int *priority", LOCAL,
      (ptsz("cuStreamGetPriority", 5050),), ready=True),
    R("cuPointerGetAttributes", "unsigned int numAttributes, CUpointer_attribute *attributes, "
      "void **data, CUdeviceptr ptr", LOCAL, (s("cuPointerGetAttributes", 7000),), ready=True),
    # ------------------------- appended for CuPy and cudart's stream-ordered calls
    # Stream capture (CUDA graphs) is not supported: queries answer "not
    # capturing", beginning one is NOT_SUPPORTED with a line (interposer/capture.c).
    R("cuStreamIsCapturing", "CUstream hStream, CUstreamCaptureStatus *captureStatus", LOCAL,
      (ptsz("cuStreamIsCapturing", 10000),)),
    R("cuStreamGetCaptureInfo", "CUstream hStream, CUstreamCaptureStatus *captureStatus_out, "
      "cuuint64_t *id_out", LOCAL, (ptsz("cuStreamGetCaptureInfo", 10010),)),
    R("cuStreamGetCaptureInfo_v2", "CUstream hStream, CUstreamCaptureStatus *captureStatus_out, "
      "cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out, "
      "size_t *numDependencies_out", LOCAL, (ptsz("cuStreamGetCaptureInfo_v2", 11030),),
      base="cuStreamGetCaptureInfo"),
    R("cuStreamGetCaptureInfo_v3", "CUstream hStream, CUstreamCaptureStatus *captureStatus_out, "
      "cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out, "
      "const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out", LOCAL,
      (ptsz("cuStreamGetCaptureInfo_v3", 12030),), base="cuStreamGetCaptureInfo"),
    R("cuStreamBeginCapture", "CUstream hStream", LOCAL, (ptsz("cuStreamBeginCapture", 10000),)),
    R("cuStreamBeginCapture_v2", "CUstream hStream, CUstreamCaptureMode mode", LOCAL,
      (ptsz("cuStreamBeginCapture_v2", 10010),), base="cuStreamBeginCapture"),
    R("cuStreamEndCapture", "CUstream hStream, CUgraph *phGraph", LOCAL,
      (ptsz("cuStreamEndCapture", 10000),)),
    R("cuThreadExchangeStreamCaptureMode", "CUstreamCaptureMode *mode", LOCAL,
      (s("cuThreadExchangeStreamCaptureMode", 10010),), ctx=False),
    # An event record with flags is the plain record (the only flag, EXTERNAL,
    # matters inside graphs).
    R("cuEventRecordWithFlags", "CUevent hEvent, CUstream hStream, unsigned int flags", LOCAL,
      (ptsz("cuEventRecordWithFlags", 11010),)),
    # Memory pools and stream-ordered allocation (interposer/mempool.c): every
    # stream completes in order on gleam's devices, so an async allocation is
    # an ordinary sub-allocation made at once, and a pool is its accounting.
    R("cuDeviceGetDefaultMemPool", "CUmemoryPool *pool_out, CUdevice dev", LOCAL,
      (s("cuDeviceGetDefaultMemPool", 11020),), ctx=False),
    R("cuDeviceGetMemPool", "CUmemoryPool *pool, CUdevice dev", LOCAL,
      (s("cuDeviceGetMemPool", 11020),), ctx=False),
    R("cuDeviceSetMemPool", "CUdevice dev, CUmemoryPool pool", LOCAL,
      (s("cuDeviceSetMemPool", 11020),), ctx=False),
    R("cuMemPoolCreate", "CUmemoryPool *pool, const CUmemPoolProps *poolProps", LOCAL,
      (s("cuMemPoolCreate", 11020),), ctx=False, ready=True),
    R("cuMemPoolDestroy", "CUmemoryPool pool", LOCAL, (s("cuMemPoolDestroy", 11020),), ready=True),
    R("cuMemPoolGetAttribute", "CUmemoryPool pool, CUmemPool_attribute attr, void *value", LOCAL,
      (s("cuMemPoolGetAttribute", 11020),), ctx=False),
    R("cuMemPoolSetAttribute", "CUmemoryPool pool, CUmemPool_attribute attr, void *value", LOCAL,
      (s("cuMemPoolSetAttribute", 11020),), ctx=False),
    R("cuMemPoolTrimTo", "CUmemoryPool pool, size_t minBytesToKeep", LOCAL,
      (s("cuMemPoolTrimTo", 11020),), ctx=False, ready=True),
    R("cuMemAllocAsync", "CUdeviceptr *dptr, size_t bytesize, CUstream hStream", LOCAL,
      (ptsz("cuMemAllocAsync", 11020),)),
    R("cuMemAllocFromPoolAsync", "CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, "
      "CUstream hStream", LOCAL, (ptsz("cuMemAllocFromPoolAsync", 11020),), ready=True),
    R("cuMemFreeAsync", "CUdeviceptr dptr, CUstream hStream", LOCAL,
      (ptsz("cuMemFreeAsync", 11020),), ready=True),
    # Registered host memory is remembered like pinned memory (interposer/pinned.c).
    R("cuMemHostRegister", "void *p, size_t bytesize, unsigned int Flags", LOCAL,
      (s("cuMemHostRegister", 4000), s("cuMemHostRegister_v2", 6050)), ready=True),
    R("cuMemHostUnregister", "void *p", LOCAL, (s("cuMemHostUnregister", 4000),), ready=True),
    R("cuMemHostGetFlags", "unsigned int *pFlags, void *p", LOCAL,
      (s("cuMemHostGetFlags", 2030),), ready=True),
    # Images larger than one copy chunk (CuPy's CUB fatbin is 41 MB, PyTorch's
    # are larger) travel as parts that the executor stages, then one staged
    # load (interposer/module.c, src/exec/exec_images.c): an envelope carries at
    # most one chunk.
    R("glImagePart", "const void *bytes, size_t n", ONEWAY, (), {"bytes": "hin:n"},
      server="exec", backend=False, ctx=False),
    R("glModuleLoadStaged", "CUmodule *module", ONEWAY, (), {"module": "mint:mod"},
      server="exec", backend=False),
    R("glLibraryLoadStaged", "CUlibrary *library", ONEWAY, (), {"library": "mint:lib"},
      server="exec", backend=False, ctx=False),
    # cuBLAS and PyTorch raise a kernel's dynamic shared memory limit before
    # launching it (cudaFuncSetAttribute; cudart 12+ sets it on the CUkernel).
    # One-way: a refused value surfaces at the next waiting call (host:
    # hostdev_attrs.c; cache configs are hints, answered in occupancy.c).
    R("cuFuncSetAttribute", "CUfunction hfunc, CUfunction_attribute attrib, int value", ONEWAY,
      (s("cuFuncSetAttribute", 9000),), {"hfunc": "h:func"}, client="custom",
      driver="cuFuncSetAttribute"),
    R("cuKernelSetAttribute", "CUfunction_attribute attrib, int val, CUkernel kernel, "
      "CUdevice dev", ONEWAY, (s("cuKernelSetAttribute", 12000),), {"kernel": "h:kernel"},
      driver="cuKernelSetAttribute"),
    R("cuFuncSetCacheConfig", "CUfunction hfunc, CUfunc_cache config", LOCAL,
      (s("cuFuncSetCacheConfig", 3000),)),
    R("cuKernelSetCacheConfig", "CUkernel kernel, CUfunc_cache config, CUdevice dev", LOCAL,
      (s("cuKernelSetCacheConfig", 12000),)),
    R("cuCtxSetCacheConfig", "CUfunc_cache config", LOCAL, (s("cuCtxSetCacheConfig", 3020),)),
    R("cuCtxGetCacheConfig", "CUfunc_cache *pconfig", LOCAL, (s("cuCtxGetCacheConfig", 3020),),
      ready=True),
    # ------------------------------- appended for checkpoints (docs/consistency.md)
    # A checkpoint keeps the contents of every module's (or library's: handle is
    # either kind) variables and a replay writes them back: kernels name them by
    # symbol, so the contents are enough wherever the new storage lies. The read
    # gives min(n, storage - offset) bytes (the rest of dst zero) and the size of
    # the whole storage (0: a library not yet translated, or no variables). The
    # cuda backend answers NOT_SUPPORTED for an image that may have variables.
    # (data: a checkpoint's snapshot holds the variables, read with glModuleVarsRead.)
    R("glModuleVarsRead", "cuuint64_t handle, size_t offset, void *dst, size_t n, "
      "size_t *size", WAITING, (), {"dst": "hout:n", "size": "out"}, server="exec",
      ctx=False, data=True),
    R("glModuleVarsWrite", "cuuint64_t handle, size_t offset, const void *src, size_t n",
      ONEWAY, (), {"src": "hin:n"}, server="exec", ctx=False, data=True),
    # ------------------------------ appended for pitched copies (interposer/copies2d.c)
    # HEIGHT rows of WIDTH bytes, PITCH bytes apart on the device side; the host
    # side's rows travel packed (the payload, or the reply's bytes).
    R("glMemcpy2DHtoD", "CUdeviceptr dst, size_t dpitch, const void *src, size_t width, "
      "size_t height, CUstream stream", ONEWAY, (),
      {"dst": "dptr:span(dpitch, width, height)", "src": "hin:width * height",
       "stream": "h:stream"}, data=True),
    R("glMemcpy2DDtoH", "void *dst, CUdeviceptr src, size_t spitch, size_t width, "
      "size_t height, CUstream stream", WAITING, (),
      {"dst": "hout:width * height", "src": "dptr:span(spitch, width, height)",
       "stream": "h:stream"}, data=True),
    R("glMemcpy2DDtoD", "CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch, "
      "size_t width, size_t height, CUstream stream", ONEWAY, (),
      {"dst": "dptr:span(dpitch, width, height)", "src": "dptr:span(spitch, width, height)",
       "stream": "h:stream"}, data=True),
    # ------------------------ appended for Hopper's tensor maps (interposer/tensormap.c)
    # A tensor map is 128 opaque bytes that only the serving device's driver
    # writes: each call packs its arguments into one gl_tmap_request
    # (include/gl_tensormap.h) and waits for the map (host: hostdev_tensormap.c).
    R("cuTensorMapEncodeTiled", "CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, "
      "cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim, "
      "const cuuint64_t *globalStrides, const cuuint32_t *boxDim, "
      "const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, "
      "CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, "
      "CUtensorMapFloatOOBfill oobFill", LOCAL, (s("cuTensorMapEncodeTiled", 12000),),
      ready=True),
    R("cuTensorMapEncodeIm2col", "CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, "
      "cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim, "
      "const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner, "
      "const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel, "
      "cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides, "
      "CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, "
      "CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill", LOCAL,
      (s("cuTensorMapEncodeIm2col", 12000),), ready=True),
    R("cuTensorMapEncodeIm2colWide", "CUtensorMap *tensorMap, "
      "CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress, "
      "const cuuint64_t *globalDim, const cuuint64_t *globalStrides, "
      "int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, "
      "cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn, "
      "const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, "
      "CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, "
      "CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill", LOCAL,
      (s("cuTensorMapEncodeIm2colWide", 12080),), ready=True),
    R("cuTensorMapReplaceAddress", "CUtensorMap *tensorMap, void *globalAddress", LOCAL,
      (s("cuTensorMapReplaceAddress", 12000),), ready=True),
    R("glTensorMapEncode", "void *tensorMap, const void *request, size_t n", WAITING, (),
      {"tensorMap": "hout:128", "request": "hin:n"}, server="exec"),
    # ------------------------- appended for thread-block clusters (interposer/launch.c)
    # cuBLASLt and cuDNN launch Hopper kernels in clusters (cuLaunchKernelEx's
    # CLUSTER_DIMENSION) and ask how many fit (host: hostdev_attrs.c).
    R("glLaunchCluster", "CUfunction f, unsigned int gridDimX, unsigned int gridDimY, "
      "unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, "
      "unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, "
      "unsigned int clusterDimX, unsigned int clusterDimY, unsigned int clusterDimZ, "
      "const void *params, size_t size", ONEWAY, (),
      {"f": "h:func", "hStream": "h:stream", "params": "hin:size"}, data=True),
    R("cuOccupancyMaxActiveClusters", "int *numClusters, CUfunction func, "
      "const CUlaunchConfig *config", LOCAL, (s("cuOccupancyMaxActiveClusters", 11070),),
      ready=True),
    R("cuOccupancyMaxPotentialClusterSize", "int *clusterSize, CUfunction func, "
      "const CUlaunchConfig *config", LOCAL, (s("cuOccupancyMaxPotentialClusterSize", 11070),),
      ready=True),
    # query: GL_CLUSTER_ACTIVE (how many clusters of the shape fit at once) or
    # GL_CLUSTER_POTENTIAL_SIZE (the largest cluster the launch could have).
    R("glClusterOccupancy", "int *value, CUfunction func, unsigned int query, "
      "unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, "
      "unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, "
      "unsigned int sharedMemBytes, unsigned int clusterDimX, unsigned int clusterDimY, "
      "unsigned int clusterDimZ", WAITING, (), {"value": "out", "func": "h:func"}, data=True),
    # ---------------- appended for cooperative launches (issue 25: interposer/launch.c)
    # A cooperative grid has every block resident at once, so that a grid-wide
    # barrier (cooperative groups' grid.sync()) works; cuLaunchKernelEx's
    # COOPERATIVE attribute and cudart's cudaLaunchCooperativeKernel come here
    # too (host: hostdev_kernels.c; cuda: cuLaunchKernelEx with the attribute).
    R("cuLaunchCooperativeKernel", "CUfunction f, unsigned int gridDimX, "
      "unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, "
      "unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, "
      "CUstream hStream, void **kernelParams", LOCAL,
      (ptsz("cuLaunchCooperativeKernel", 9000),), caller=True, ready=True),
    R("glLaunchCooperative", "CUfunction f, unsigned int gridDimX, unsigned int gridDimY, "
      "unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, "
      "unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, "
      "const void *params, size_t size", ONEWAY, (),
      {"f": "h:func", "hStream": "h:stream", "params": "hin:size"}),
    # cuda.core asks a cooperative launch's stream for its context (interposer/streamctx.c).
    R("cuStreamGetCtx", "CUstream hStream, CUcontext *pctx", LOCAL,
      (ptsz("cuStreamGetCtx", 9020),), ready=True),
    # ----------------- appended for the calls NVIDIA's samples and numba-cuda's suite
    # make (issue 25): answered in the interposer. Profiler control has no tool to
    # drive and succeeds (interposer/profiler.c); the names of entries are the ones
    # the handles were made with (interposer/module.c).
    R("cuProfilerStart", "", LOCAL, (s("cuProfilerStart", 4000),), ready=True),
    R("cuProfilerStop", "", LOCAL, (s("cuProfilerStop", 4000),), ready=True),
    R("cuFuncGetName", "const char **name, CUfunction hfunc", LOCAL,
      (s("cuFuncGetName", 12030),), ready=True),
    R("cuKernelGetName", "const char **name, CUkernel hfunc", LOCAL,
      (s("cuKernelGetName", 12030),), ready=True),
    # ------------- appended for CUDA graphs, stream capture and host functions
    # Graphs live in the interposer (interposer/graph*.c; capture records into
    # them, capture.c). Instantiating sends the description of the nodes the
    # device runs once (include/gl_graph.h; n == 0: the description was staged
    # in glImagePart records); launching is one record per stage, the process
    # running host functions and copies of its own memory between stages
    # (graph_launch.c, hostfn.c; server: src/exec/exec_graphs.c).
    R("glGraphInstantiate", "CUgraphExec *exec, const void *desc, size_t n", ONEWAY, (),
      {"exec": "mint:gexec", "desc": "hin:n"}, server="exec", backend=False),
    R("glGraphUpdate", "CUgraphExec exec, const void *desc, size_t n", ONEWAY, (),
      {"exec": "h:gexec", "desc": "hin:n"}, server="exec", backend=False),
    # (data: an instantiated graph is state, and its glGraphInstantiate is kept.)
    R("glGraphLaunch", "CUgraphExec exec, unsigned int stage, CUstream stream", ONEWAY, (),
      {"exec": "h:gexec", "stream": "h:stream"}, server="exec", backend=False, data=True),
    R("glGraphExecDestroy", "CUgraphExec exec", ONEWAY, (), {"exec": "h:gexec!"},
      server="exec", backend=False),
    # Graphs and their nodes (interposer/graph.c, graph_nodes.c): the interposer's own.
    R("cuGraphCreate", "CUgraph *phGraph, unsigned int flags", LOCAL,
      (s("cuGraphCreate", 10000),), ready=True),
    R("cuGraphDestroy", "CUgraph hGraph", LOCAL, (s("cuGraphDestroy", 10000),), ready=True),
    R("cuGraphClone", "CUgraph *phGraphClone, CUgraph originalGraph", LOCAL,
      (s("cuGraphClone", 10000),), ready=True),
    R("cuGraphAddKernelNode", ADD_NODE + ", const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams", LOCAL,
      (s("cuGraphAddKernelNode", 10000),), ready=True),
    R("cuGraphAddKernelNode_v2", ADD_NODE + ", const CUDA_KERNEL_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphAddKernelNode_v2", 12000),), base="cuGraphAddKernelNode", ready=True),
    R("cuGraphKernelNodeGetParams", "CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams",
      LOCAL, (s("cuGraphKernelNodeGetParams", 10000),), ready=True),
    R("cuGraphKernelNodeGetParams_v2", "CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams",
      LOCAL, (s("cuGraphKernelNodeGetParams_v2", 12000),), base="cuGraphKernelNodeGetParams",
      ready=True),
    R("cuGraphKernelNodeSetParams", "CUgraphNode hNode, "
      "const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams", LOCAL,
      (s("cuGraphKernelNodeSetParams", 10000),), ready=True),
    R("cuGraphKernelNodeSetParams_v2", "CUgraphNode hNode, "
      "const CUDA_KERNEL_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphKernelNodeSetParams_v2", 12000),), base="cuGraphKernelNodeSetParams",
      ready=True),
    R("cuGraphAddMemcpyNode", ADD_NODE + ", const CUDA_MEMCPY3D *copyParams, CUcontext ctx", LOCAL,
      (s("cuGraphAddMemcpyNode", 10000),), ready=True),
    R("cuGraphMemcpyNodeGetParams", "CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams", LOCAL,
      (s("cuGraphMemcpyNodeGetParams", 10000),), ready=True),
    R("cuGraphMemcpyNodeSetParams", "CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams", LOCAL,
      (s("cuGraphMemcpyNodeSetParams", 10000),), ready=True),
    R("cuGraphAddMemsetNode",
      ADD_NODE + ", const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx", LOCAL,
      (s("cuGraphAddMemsetNode", 10000),), ready=True),
    R("cuGraphMemsetNodeGetParams", "CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams",
      LOCAL, (s("cuGraphMemsetNodeGetParams", 10000),), ready=True),
    R("cuGraphMemsetNodeSetParams", "CUgraphNode hNode, "
      "const CUDA_MEMSET_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphMemsetNodeSetParams", 10000),), ready=True),
    R("cuGraphAddHostNode", ADD_NODE + ", const CUDA_HOST_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphAddHostNode", 10000),), ready=True),
    R("cuGraphHostNodeGetParams", "CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphHostNodeGetParams", 10000),), ready=True),
    R("cuGraphHostNodeSetParams", "CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams",
      LOCAL, (s("cuGraphHostNodeSetParams", 10000),), ready=True),
    R("cuGraphAddChildGraphNode", ADD_NODE + ", CUgraph childGraph", LOCAL,
      (s("cuGraphAddChildGraphNode", 10000),), ready=True),
    R("cuGraphChildGraphNodeGetGraph", "CUgraphNode hNode, CUgraph *phGraph", LOCAL,
      (s("cuGraphChildGraphNodeGetGraph", 10000),), ready=True),
    R("cuGraphAddEmptyNode", ADD_NODE, LOCAL, (s("cuGraphAddEmptyNode", 10000),), ready=True),
    R("cuGraphAddEventRecordNode", ADD_NODE + ", CUevent event", LOCAL,
      (s("cuGraphAddEventRecordNode", 11010),), ready=True),
    R("cuGraphEventRecordNodeGetEvent", "CUgraphNode hNode, CUevent *event_out", LOCAL,
      (s("cuGraphEventRecordNodeGetEvent", 11010),), ready=True),
    R("cuGraphEventRecordNodeSetEvent", "CUgraphNode hNode, CUevent event", LOCAL,
      (s("cuGraphEventRecordNodeSetEvent", 11010),), ready=True),
    R("cuGraphAddEventWaitNode", ADD_NODE + ", CUevent event", LOCAL,
      (s("cuGraphAddEventWaitNode", 11010),), ready=True),
    R("cuGraphEventWaitNodeGetEvent", "CUgraphNode hNode, CUevent *event_out", LOCAL,
      (s("cuGraphEventWaitNodeGetEvent", 11010),), ready=True),
    R("cuGraphEventWaitNodeSetEvent", "CUgraphNode hNode, CUevent event", LOCAL,
      (s("cuGraphEventWaitNodeSetEvent", 11010),), ready=True),
    R("cuGraphAddMemAllocNode", ADD_NODE + ", CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphAddMemAllocNode", 11040),), ready=True),
    R("cuGraphMemAllocNodeGetParams", "CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out",
      LOCAL, (s("cuGraphMemAllocNodeGetParams", 11040),), ready=True),
    R("cuGraphAddMemFreeNode", ADD_NODE + ", CUdeviceptr dptr", LOCAL,
      (s("cuGraphAddMemFreeNode", 11040),), ready=True),
    R("cuGraphMemFreeNodeGetParams", "CUgraphNode hNode, CUdeviceptr *dptr_out", LOCAL,
      (s("cuGraphMemFreeNodeGetParams", 11040),), ready=True),
    R("cuGraphAddNode", ADD_NODE + ", CUgraphNodeParams *nodeParams", LOCAL,
      (s("cuGraphAddNode", 12020),), ready=True),
    R("cuGraphAddNode_v2", "CUgraphNode *phGraphNode, CUgraph hGraph, "
      "const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, "
      "size_t numDependencies, CUgraphNodeParams *nodeParams", LOCAL,
      (s("cuGraphAddNode_v2", 12030),), base="cuGraphAddNode", ready=True),
    R("cuGraphNodeSetParams", "CUgraphNode hNode, CUgraphNodeParams *nodeParams", LOCAL,
      (s("cuGraphNodeSetParams", 12020),), ready=True),
    R("cuGraphNodeGetType", "CUgraphNode hNode, CUgraphNodeType *type", LOCAL,
      (s("cuGraphNodeGetType", 10000),), ready=True),
    R("cuGraphGetNodes", "CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes", LOCAL,
      (s("cuGraphGetNodes", 10000),), ready=True),
    R("cuGraphGetRootNodes", "CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes",
      LOCAL, (s("cuGraphGetRootNodes", 10000),), ready=True),
    R("cuGraphGetEdges", "CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges",
      LOCAL, (s("cuGraphGetEdges", 10000),), ready=True),
    R("cuGraphGetEdges_v2", "CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, "
      "CUgraphEdgeData *edgeData, size_t *numEdges", LOCAL, (s("cuGraphGetEdges_v2", 12030),),
      base="cuGraphGetEdges", ready=True),
    R("cuGraphNodeGetDependencies", "CUgraphNode hNode, CUgraphNode *dependencies, "
      "size_t *numDependencies", LOCAL, (s("cuGraphNodeGetDependencies", 10000),), ready=True),
    R("cuGraphNodeGetDependencies_v2", "CUgraphNode hNode, CUgraphNode *dependencies, "
      "CUgraphEdgeData *edgeData, size_t *numDependencies", LOCAL,
      (s("cuGraphNodeGetDependencies_v2", 12030),), base="cuGraphNodeGetDependencies",
      ready=True),
    R("cuGraphNodeGetDependentNodes", "CUgraphNode hNode, CUgraphNode *dependentNodes, "
      "size_t *numDependentNodes", LOCAL, (s("cuGraphNodeGetDependentNodes", 10000),),
      ready=True),
    R("cuGraphNodeGetDependentNodes_v2", "CUgraphNode hNode, CUgraphNode *dependentNodes, "
      "CUgraphEdgeData *edgeData, size_t *numDependentNodes", LOCAL,
      (s("cuGraphNodeGetDependentNodes_v2", 12030),), base="cuGraphNodeGetDependentNodes",
      ready=True),
    R("cuGraphAddDependencies", "CUgraph hGraph, const CUgraphNode *from, "
      "const CUgraphNode *to, size_t numDependencies", LOCAL,
      (s("cuGraphAddDependencies", 10000),), ready=True),
    R("cuGraphAddDependencies_v2", "CUgraph hGraph, const CUgraphNode *from, "
      "const CUgraphNode *to, const CUgraphEdgeData *edgeData, size_t numDependencies", LOCAL,
      (s("cuGraphAddDependencies_v2", 12030),), base="cuGraphAddDependencies", ready=True),
    R("cuGraphRemoveDependencies", "CUgraph hGraph, const CUgraphNode *from, "
      "const CUgraphNode *to, size_t numDependencies", LOCAL,
      (s("cuGraphRemoveDependencies", 10000),), ready=True),
    R("cuGraphRemoveDependencies_v2", "CUgraph hGraph, const CUgraphNode *from, "
      "const CUgraphNode *to, const CUgraphEdgeData *edgeData, size_t numDependencies", LOCAL,
      (s("cuGraphRemoveDependencies_v2", 12030),), base="cuGraphRemoveDependencies",
      ready=True),
    R("cuGraphDestroyNode", "CUgraphNode hNode", LOCAL, (s("cuGraphDestroyNode", 10000),),
      ready=True),
    R("cuGraphNodeFindInClone", "CUgraphNode *phNode, CUgraphNode hOriginalNode, "
      "CUgraph hClonedGraph", LOCAL, (s("cuGraphNodeFindInClone", 10000),), ready=True),
    R("cuGraphDebugDotPrint", "CUgraph hGraph, const char *path, unsigned int flags", LOCAL,
      (s("cuGraphDebugDotPrint", 11030),), ready=True),
    # Instantiated graphs (interposer/graph_exec.c, graph_launch.c).
    R("cuGraphInstantiate", "CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, "
      "char *logBuffer, size_t bufferSize", LOCAL,
      (s("cuGraphInstantiate", 10000), s("cuGraphInstantiate_v2", 11000)), ready=True),
    R("cuGraphInstantiateWithFlags", "CUgraphExec *phGraphExec, CUgraph hGraph, "
      "unsigned long long flags", LOCAL, (s("cuGraphInstantiateWithFlags", 11040),),
      ready=True),
    R("cuGraphInstantiateWithParams", "CUgraphExec *phGraphExec, CUgraph hGraph, "
      "CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams", LOCAL,
      (ptsz("cuGraphInstantiateWithParams", 12000),), ready=True),
    R("cuGraphExecGetFlags", "CUgraphExec hGraphExec, cuuint64_t *flags", LOCAL,
      (s("cuGraphExecGetFlags", 12000),), ready=True),
    R("cuGraphExecDestroy", "CUgraphExec hGraphExec", LOCAL, (s("cuGraphExecDestroy", 10000),),
      ready=True),
    R("cuGraphLaunch", "CUgraphExec hGraphExec, CUstream hStream", LOCAL,
      (ptsz("cuGraphLaunch", 10000),), ready=True),
    R("cuGraphUpload", "CUgraphExec hGraphExec, CUstream hStream", LOCAL,
      (ptsz("cuGraphUpload", 11010),), ready=True),
    R("cuGraphExecUpdate", "CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out, "
      "CUgraphExecUpdateResult *updateResult_out", LOCAL, (s("cuGraphExecUpdate", 10020),),
      ready=True),
    R("cuGraphExecUpdate_v2", "CUgraphExec hGraphExec, CUgraph hGraph, "
      "CUgraphExecUpdateResultInfo *resultInfo", LOCAL, (s("cuGraphExecUpdate_v2", 12000),),
      base="cuGraphExecUpdate", ready=True),
    R("cuGraphExecKernelNodeSetParams", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams", LOCAL,
      (s("cuGraphExecKernelNodeSetParams", 10010),), ready=True),
    R("cuGraphExecKernelNodeSetParams_v2", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "const CUDA_KERNEL_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphExecKernelNodeSetParams_v2", 12000),), base="cuGraphExecKernelNodeSetParams",
      ready=True),
    R("cuGraphExecMemcpyNodeSetParams", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "const CUDA_MEMCPY3D *copyParams, CUcontext ctx", LOCAL,
      (s("cuGraphExecMemcpyNodeSetParams", 10020),), ready=True),
    R("cuGraphExecMemsetNodeSetParams", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx", LOCAL,
      (s("cuGraphExecMemsetNodeSetParams", 10020),), ready=True),
    R("cuGraphExecHostNodeSetParams", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "const CUDA_HOST_NODE_PARAMS *nodeParams", LOCAL,
      (s("cuGraphExecHostNodeSetParams", 10020),), ready=True),
    R("cuGraphExecChildGraphNodeSetParams", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "CUgraph childGraph", LOCAL, (s("cuGraphExecChildGraphNodeSetParams", 11010),),
      ready=True),
    R("cuGraphExecEventRecordNodeSetEvent", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "CUevent event", LOCAL, (s("cuGraphExecEventRecordNodeSetEvent", 11010),), ready=True),
    R("cuGraphExecEventWaitNodeSetEvent", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "CUevent event", LOCAL, (s("cuGraphExecEventWaitNodeSetEvent", 11010),), ready=True),
    R("cuGraphExecNodeSetParams", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "CUgraphNodeParams *nodeParams", LOCAL, (s("cuGraphExecNodeSetParams", 12020),),
      ready=True),
    R("cuGraphNodeSetEnabled", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "unsigned int isEnabled", LOCAL, (s("cuGraphNodeSetEnabled", 11060),), ready=True),
    R("cuGraphNodeGetEnabled", "CUgraphExec hGraphExec, CUgraphNode hNode, "
      "unsigned int *isEnabled", LOCAL, (s("cuGraphNodeGetEnabled", 11060),), ready=True),
    # Memory that graphs allocate (interposer/graphmem.c).
    R("cuDeviceGetGraphMemAttribute", "CUdevice device, CUgraphMem_attribute attr, void *value",
      LOCAL, (s("cuDeviceGetGraphMemAttribute", 11040),), ready=True),
    R("cuDeviceSetGraphMemAttribute", "CUdevice device, CUgraphMem_attribute attr, void *value",
      LOCAL, (s("cuDeviceSetGraphMemAttribute", 11040),), ready=True),
    R("cuDeviceGraphMemTrim", "CUdevice device", LOCAL, (s("cuDeviceGraphMemTrim", 11040),),
      ready=True),
    # Host functions (interposer/hostfn.c) and the rest of capture (capture.c).
    R("cuLaunchHostFunc", "CUstream hStream, CUhostFn fn, void *userData", LOCAL,
      (ptsz("cuLaunchHostFunc", 10000),), ready=True),
    R("cuStreamAddCallback", "CUstream hStream, CUstreamCallback callback, void *userData, "
      "unsigned int flags", LOCAL, (ptsz("cuStreamAddCallback", 5000),), ready=True),
    R("cuStreamBeginCaptureToGraph", "CUstream hStream, CUgraph hGraph, "
      "const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, "
      "size_t numDependencies, CUstreamCaptureMode mode", LOCAL,
      (ptsz("cuStreamBeginCaptureToGraph", 12030),), ready=True),
    R("cuStreamUpdateCaptureDependencies", "CUstream hStream, CUgraphNode *dependencies, "
      "size_t numDependencies, unsigned int flags", LOCAL,
      (ptsz("cuStreamUpdateCaptureDependencies", 11030),), ready=True),
    R("cuStreamUpdateCaptureDependencies_v2", "CUstream hStream, CUgraphNode *dependencies, "
      "const CUgraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags",
      LOCAL, (ptsz("cuStreamUpdateCaptureDependencies_v2", 12030),),
      base="cuStreamUpdateCaptureDependencies", ready=True),
    # -------------- appended for mapped and managed memory (interposer/mirror.c, managed.c)
    # A mapped or managed allocation is *mirrored*: the program's view in the client
    # and device memory on the server, kept coherent by diffs against a twin on each
    # side (include/gl_mirror_diff.h; server: src/exec/exec_mirror.c). The coherence rule is
    # in docs/cuda-forwarding.md, "Mapped and managed memory".
    R("cuMemAllocManaged", "CUdeviceptr *dptr, size_t bytesize, unsigned int flags", LOCAL,
      (s("cuMemAllocManaged", 6000),), ready=True),
    R("cuMemHostGetDevicePointer", "CUdeviceptr *pdptr, void *p, unsigned int Flags", LOCAL,
      (s("cuMemHostGetDevicePointer_v2", 3020),), ready=True),
    R("cuStreamAttachMemAsync", "CUstream hStream, CUdeviceptr dptr, size_t length, "
      "unsigned int flags", LOCAL, (ptsz("cuStreamAttachMemAsync", 6000),), ready=True),
    R("cuMemPrefetchAsync", "CUdeviceptr devPtr, size_t count, CUdevice dstDevice, "
      "CUstream hStream", LOCAL, (ptsz("cuMemPrefetchAsync", 8000),), ready=True),
    R("cuMemPrefetchAsync_v2", "CUdeviceptr devPtr, size_t count, CUmemLocation location, "
      "unsigned int flags, CUstream hStream", LOCAL, (ptsz("cuMemPrefetchAsync_v2", 12020),),
      base="cuMemPrefetchAsync", ready=True),
    R("cuMemAdvise", "CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device",
      LOCAL, (s("cuMemAdvise", 8000),), ready=True),
    R("cuMemAdvise_v2", "CUdeviceptr devPtr, size_t count, CUmem_advise advice, "
      "CUmemLocation location", LOCAL, (s("cuMemAdvise_v2", 12020),), base="cuMemAdvise",
      ready=True),
    R("cuMemRangeGetAttribute", "void *data, size_t dataSize, CUmem_range_attribute attribute, "
      "CUdeviceptr devPtr, size_t count", LOCAL, (s("cuMemRangeGetAttribute", 8000),),
      ready=True),
    R("cuMemRangeGetAttributes", "void **data, size_t *dataSizes, "
      "CUmem_range_attribute *attributes, size_t numAttributes, CUdeviceptr devPtr, "
      "size_t count", LOCAL, (s("cuMemRangeGetAttributes", 8000),), ready=True),
    # dptr: the mirror's device memory; twin: an allocation of the same size that
    # holds what the program was last known to have (kept in the session's memory,
    # so a checkpoint's snapshot keeps it and a moved session diffs as before).
    R("glMirrorAdd", "CUdeviceptr dptr, CUdeviceptr twin, size_t size", ONEWAY, (),
      {"dptr": "dptr:size", "twin": "dptr:size"}, server="exec", backend=False, ctx=False),
    # What the program changed, applied to the device memory and its twin. (data:
    # mirror and twin are ordinary allocations, which a checkpoint's snapshot holds.)
    R("glMirrorPush", "const void *diff, size_t n", ONEWAY, (), {"diff": "hin:n"},
      server="exec", backend=False, ctx=False, data=True),
    # What the device changed, from mirrors at or above `from`, after all earlier
    # work: `used` bytes of diff; `next` is where to go on (0: nothing left).
    R("glMirrorPull", "void *diff, size_t n, CUdeviceptr from, size_t *used, "
      "CUdeviceptr *next", WAITING, (), {"diff": "hsome:n", "used": "out", "next": "out"},
      server="exec", backend=False, ctx=False, data=True),
    # ------------- appended for CUDA arrays, textures and surfaces (issue 25)
    # Arrays live on the server; the interposer keeps their descriptors and, for
    # the host device, allocates their storage in the session's memory
    # (interposer/arrays.c, include/gl_array.h). Copies that name an array are
    # cut into the 2D rows below, one slice and at most one copy chunk each
    # (interposer/arraycopy.c). Texture and surface objects are minted; the
    # request carries the handle and the server answers the value kernels see
    # (interposer/texobj.c; server: src/exec/exec_arrays.c; host device:
    # src/hostdev/hostdev_arrays.c, src/hostdev/hostdev_textures.c).
    R("cuArrayCreate", "CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray", LOCAL,
      (s("cuArrayCreate_v2", 3020),), ready=True),
    R("cuArray3DCreate", "CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray",
      LOCAL, (s("cuArray3DCreate_v2", 3020),), ready=True),
    R("cuMipmappedArrayCreate", "CUmipmappedArray *pHandle, "
      "const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc, unsigned int numMipmapLevels", LOCAL,
      (s("cuMipmappedArrayCreate", 5000),), ready=True),
    R("cuArrayGetDescriptor", "CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray", LOCAL,
      (s("cuArrayGetDescriptor_v2", 3020),), ready=True),
    R("cuArray3DGetDescriptor", "CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray",
      LOCAL, (s("cuArray3DGetDescriptor_v2", 3020),), ready=True),
    # desc: a gl_array_desc; storage: the host device's bytes of the array (0 on a GPU).
    R("glArrayCreate", "CUarray *array, const void *desc, size_t n, CUdeviceptr storage", ONEWAY,
      (), {"array": "mint:array", "desc": "hin:n"}, server="exec"),
    R("glMipmapCreate", "CUmipmappedArray *mipmap, const void *desc, size_t n, "
      "CUdeviceptr storage", ONEWAY, (), {"mipmap": "mint:mipmap", "desc": "hin:n"},
      server="exec"),
    R("cuArrayDestroy", "CUarray hArray", ONEWAY, (s("cuArrayDestroy", 2000),),
      {"hArray": "h:array!"}, client="custom", ready=True),
    R("cuMipmappedArrayDestroy", "CUmipmappedArray hMipmappedArray", ONEWAY,
      (s("cuMipmappedArrayDestroy", 5000),), {"hMipmappedArray": "h:mipmap!"}, client="custom",
      ready=True),
    R("cuMipmappedArrayGetLevel", "CUarray *pLevelArray, CUmipmappedArray hMipmappedArray, "
      "unsigned int level", ONEWAY, (s("cuMipmappedArrayGetLevel", 5000),),
      {"pLevelArray": "mint:array", "hMipmappedArray": "h:mipmap"}, client="custom", ready=True),
    # The 1D array copies (cuMemcpyHtoA & co.) and cuMemcpy2D/3D with an array side.
    R("cuMemcpyHtoA", "CUarray dstArray, size_t dstOffset, const void *srcHost, "
      "size_t ByteCount", LOCAL, (ptds("cuMemcpyHtoA_v2", 3020),), ready=True),
    R("cuMemcpyAtoH", "void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount",
      LOCAL, (ptds("cuMemcpyAtoH_v2", 3020),), ready=True),
    R("cuMemcpyHtoAAsync", "CUarray dstArray, size_t dstOffset, const void *srcHost, "
      "size_t ByteCount, CUstream hStream", LOCAL, (ptsz("cuMemcpyHtoAAsync_v2", 3020),),
      ready=True),
    R("cuMemcpyAtoHAsync", "void *dstHost, CUarray srcArray, size_t srcOffset, "
      "size_t ByteCount, CUstream hStream", LOCAL, (ptsz("cuMemcpyAtoHAsync_v2", 3020),),
      ready=True),
    R("cuMemcpyAtoD", "CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, "
      "size_t ByteCount", LOCAL, (ptds("cuMemcpyAtoD_v2", 3020),), ready=True),
    R("cuMemcpyDtoA", "CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, "
      "size_t ByteCount", LOCAL, (ptds("cuMemcpyDtoA_v2", 3020),), ready=True),
    R("cuMemcpyAtoA", "CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, "
      "size_t ByteCount", LOCAL, (ptds("cuMemcpyAtoA_v2", 3020),), ready=True),
    # HEIGHT rows of WIDTH bytes in slice Z of an array, from byte XBYTES of row Y.
    # (data: on the host device an array's bytes are session memory, which the
    # snapshot holds; a GPU's arrays make a session unmovable: journal.NOT_REPLAYABLE_ON.)
    R("glMemcpyHtoA", "CUarray dst, size_t xbytes, size_t y, size_t z, const void *src, "
      "size_t width, size_t height, CUstream stream", ONEWAY, (),
      {"dst": "h:array", "src": "hin:width * height", "stream": "h:stream"}, data=True),
    R("glMemcpyAtoH", "void *dst, CUarray src, size_t xbytes, size_t y, size_t z, "
      "size_t width, size_t height, CUstream stream", WAITING, (),
      {"dst": "hout:width * height", "src": "h:array", "stream": "h:stream"}, data=True),
    R("glMemcpyDtoA", "CUarray dst, size_t xbytes, size_t y, size_t z, CUdeviceptr src, "
      "size_t spitch, size_t width, size_t height, CUstream stream", ONEWAY, (),
      {"dst": "h:array", "src": "dptr:span(spitch, width, height)", "stream": "h:stream"},
      data=True),
    R("glMemcpyAtoD", "CUdeviceptr dst, size_t dpitch, CUarray src, size_t xbytes, size_t y, "
      "size_t z, size_t width, size_t height, CUstream stream", ONEWAY, (),
      {"dst": "dptr:span(dpitch, width, height)", "src": "h:array", "stream": "h:stream"},
      data=True),
    R("glMemcpyAtoA", "CUarray dst, size_t dx, size_t dy, size_t dz, CUarray src, size_t sx, "
      "size_t sy, size_t sz, size_t width, size_t height, CUstream stream", ONEWAY, (),
      {"dst": "h:array", "src": "h:array", "stream": "h:stream"}, data=True),
    # Texture and surface objects: the descriptors are answered in the interposer.
    R("cuTexObjectCreate", "CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc, "
      "const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc", LOCAL,
      (s("cuTexObjectCreate", 5000),), ready=True),
    R("cuTexObjectGetResourceDesc", "CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject",
      LOCAL, (s("cuTexObjectGetResourceDesc", 5000),), ready=True),
    R("cuTexObjectGetTextureDesc", "CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject", LOCAL,
      (s("cuTexObjectGetTextureDesc", 5000),), ready=True),
    R("cuTexObjectGetResourceViewDesc", "CUDA_RESOURCE_VIEW_DESC *pResViewDesc, "
      "CUtexObject texObject", LOCAL, (s("cuTexObjectGetResourceViewDesc", 5000),), ready=True),
    R("cuSurfObjectCreate", "CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc",
      LOCAL, (s("cuSurfObjectCreate", 5000),), ready=True),
    R("cuSurfObjectGetResourceDesc", "CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject",
      LOCAL, (s("cuSurfObjectGetResourceDesc", 5000),), ready=True),
    # request: a gl_tex_request naming its own minted handle; value: what kernels
    # receive (the host device: the handle; a GPU: its driver's object).
    R("glTexObjectCreate", "cuuint64_t *value, const void *request, size_t n", WAITING, (),
      {"value": "out", "request": "hin:n"}, server="exec"),
    R("cuTexObjectDestroy", "CUtexObject texObject", ONEWAY, (s("cuTexObjectDestroy", 5000),),
      {"texObject": "h:texobj!"}, client="custom", ready=True),
    R("cuSurfObjectDestroy", "CUsurfObject surfObject", ONEWAY,
      (s("cuSurfObjectDestroy", 5000),), {"surfObject": "h:surfobj!"}, client="custom",
      ready=True),
    # ------------- appended for device printf, assert and malloc (issue 26; src/ptx/ptx_devrt.h)
    # cuCtxSetLimit stays local (interposer/runtime.c) and sends the limits the
    # serving device holds: the stack (0), the printf FIFO (1) and the malloc
    # heap (2). Waiting: CUDA refuses a FIFO or heap size once a kernel that
    # prints or allocates ran, and the program hears it from cuCtxSetLimit.
    R("glCtxSetLimit", "CUlimit limit, size_t value", WAITING, (), driver="cuCtxSetLimit"),
    # The host device's malloc heap: a range of the session's memory that the
    # interposer allocated (interposer/devheap.c), at the first launch or when
    # the limit changes; a heap already used stays, which the base that
    # glDeviceHeapBase answers tells (a GPU's driver keeps its own heap: 0).
    R("glDeviceHeap", "CUdeviceptr base, size_t size", ONEWAY, (), {"base": "dptr:size"}),
    R("glDeviceHeapBase", "CUdeviceptr *base", WAITING, (), {"base": "out"}),
    # Which of the device runtime's built-ins a function calls (1 << PTX_BI_*,
    # src/ptx/ptx_devrt.h; a GPU's driver: 0), asked with its parameter layout for an
    # image the interposer cannot read: a heap is made only for kernels that use it.
    R("glFuncDevrt", "unsigned int *uses, CUfunction func", WAITING, (),
      {"uses": "out", "func": "h:func"}),
    # Takes output the server still holds for the program (a reply's sections
    # said more waits, or the program exits after launches): the reply's trailer.
    R("glOutputTake", "", WAITING, (), server="exec", backend=False, ctx=False),
    # ------------- appended for managed module variables (issue 25, branch isa)
    # A managed variable (.attribute(.managed)) of a module on the host device lies
    # alone in pages of a module storage mapped in the band; the interposer maps
    # its view there and pairs the pages with a fresh twin, which the server fills
    # from the variable (src/exec/exec_mirror.c), which checks that `var` lies in a module
    # variable of the session (the program knows only the variable's own bytes as
    # device memory, not the rest of its pages). Waiting: a refusal reaches the program.
    R("glManagedVarMirror", "CUdeviceptr var, CUdeviceptr twin, size_t size", WAITING, (),
      {"twin": "dptr:size"}, server="exec", backend=False, ctx=False),
    # ------------- appended for persisting L2 and access policy windows (issue 25, branch condg)
    # Cache hints, answered in the interposer (interposer/stream_attrs.c): a
    # stream keeps its attributes there after the checks CUDA documents.
    R("cuStreamGetAttribute", "CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value",
      LOCAL, (ptsz("cuStreamGetAttribute", 11000),), ready=True),
    R("cuStreamSetAttribute", "CUstream hStream, CUstreamAttrID attr, "
      "const CUstreamAttrValue *value", LOCAL, (ptsz("cuStreamSetAttribute", 11000),),
      ready=True),
    R("cuStreamCopyAttributes", "CUstream dst, CUstream src", LOCAL,
      (ptsz("cuStreamCopyAttributes", 11000),), ready=True),
    R("cuCtxResetPersistingL2Cache", "", LOCAL, (s("cuCtxResetPersistingL2Cache", 11000),),
      ready=True),
    # What the interposer took goes on to the serving device: the host device
    # has no L2 of its own and takes them as the hints they are
    # (src/hostdev/hostdev_cache_hints.c); the cuda backend hands them to the GPU's
    # driver. One-way: the interposer checked them first.
    R("glStreamSetAttribute", "CUstream hStream, CUstreamAttrID attr, "
      "const CUstreamAttrValue *value", ONEWAY, (),
      {"hStream": "h:stream", "value": "hin:64"}, driver="cuStreamSetAttribute"),
    R("glStreamCopyAttributes", "CUstream dst, CUstream src", ONEWAY, (),
      {"dst": "h:stream", "src": "h:stream"}, driver="cuStreamCopyAttributes"),
    R("glCtxResetPersistingL2Cache", "", ONEWAY, (), driver="cuCtxResetPersistingL2Cache"),
    # ------------- appended for virtual memory management (issue 25, branch vmm)
    # The program's VMM calls are answered in the interposer (interposer/vmm.c):
    # a reservation is a held range of the session's addresses, handles and
    # mappings are its tables. What makes memory exist goes to the server
    # (src/exec/exec_vmm.c), which checks every range against the session's own and
    # trusts nothing: an allocation (a memfd on the host device), a mapping of
    # one at an address, the access that puts a mapping among the session's
    # allocations, and their undoing. Waiting: a refusal reaches the program.
    R("cuMemGetAllocationGranularity", "size_t *granularity, const CUmemAllocationProp *prop, "
      "CUmemAllocationGranularity_flags option", LOCAL,
      (s("cuMemGetAllocationGranularity", 10020),), ready=True),
    R("cuMemAddressReserve", "CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, "
      "unsigned long long flags", LOCAL, (s("cuMemAddressReserve", 10020),), ready=True),
    R("cuMemAddressFree", "CUdeviceptr ptr, size_t size", LOCAL, (s("cuMemAddressFree", 10020),),
      ready=True),
    R("cuMemCreate", "CUmemGenericAllocationHandle *handle, size_t size, "
      "const CUmemAllocationProp *prop, unsigned long long flags", LOCAL,
      (s("cuMemCreate", 10020),), ready=True),
    R("cuMemRelease", "CUmemGenericAllocationHandle handle", LOCAL, (s("cuMemRelease", 10020),),
      ready=True),
    R("cuMemMap", "CUdeviceptr ptr, size_t size, size_t offset, "
      "CUmemGenericAllocationHandle handle, unsigned long long flags", LOCAL,
      (s("cuMemMap", 10020),), ready=True),
    R("cuMemUnmap", "CUdeviceptr ptr, size_t size", LOCAL, (s("cuMemUnmap", 10020),), ready=True),
    R("cuMemSetAccess", "CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count",
      LOCAL, (s("cuMemSetAccess", 10020),), ready=True),
    R("cuMemGetAccess", "unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr",
      LOCAL, (s("cuMemGetAccess", 10020),), ready=True),
    R("cuMemRetainAllocationHandle", "CUmemGenericAllocationHandle *handle, void *addr", LOCAL,
      (s("cuMemRetainAllocationHandle", 11000),), ready=True),
    R("cuMemGetAllocationPropertiesFromHandle", "CUmemAllocationProp *prop, "
      "CUmemGenericAllocationHandle handle", LOCAL,
      (s("cuMemGetAllocationPropertiesFromHandle", 10020),), ready=True),
    R("glVmmCreate", "cuuint64_t id, size_t size", WAITING, (), server="exec", backend=False,
      ctx=False),
    R("glVmmRelease", "cuuint64_t id", WAITING, (), server="exec", backend=False, ctx=False),
    R("glVmmMap", "CUdeviceptr ptr, size_t size, size_t offset, cuuint64_t id", WAITING, (),
      server="exec", backend=False, ctx=False),
    R("glVmmUnmap", "CUdeviceptr ptr, size_t size", WAITING, (), server="exec", backend=False,
      ctx=False),
    R("glVmmSetAccess", "CUdeviceptr ptr, size_t size, unsigned int flags", WAITING, (),
      server="exec", backend=False, ctx=False),
    # ------------- appended for conditional graph nodes (issue 25, branch condg2)
    # A graph's conditional handles are the interposer's (interposer/graph_cond.c);
    # conditional nodes travel in the graph's description with their bodies, and
    # the server decides them (src/exec/exec_graphs.c, cudaGraphSetConditional in
    # src/ptx/ptx_devrt.c).
    R("cuGraphConditionalHandleCreate", "CUgraphConditionalHandle *pHandle_out, CUgraph hGraph, "
      "CUcontext ctx, unsigned int defaultLaunchValue, unsigned int flags", LOCAL,
      (s("cuGraphConditionalHandleCreate", 12030),), ready=True),
    # User objects (interposer/userobj.c): reference counts with a destructor, owned by the
    # program and by graphs; cuda.core keeps a graph's kernel arguments alive with them.
    R("cuUserObjectCreate", "CUuserObject *object_out, void *ptr, CUhostFn destroy, "
      "unsigned int initialRefcount, unsigned int flags", LOCAL,
      (s("cuUserObjectCreate", 11030),), ready=True),
    R("cuUserObjectRetain", "CUuserObject object, unsigned int count", LOCAL,
      (s("cuUserObjectRetain", 11030),), ready=True),
    R("cuUserObjectRelease", "CUuserObject object, unsigned int count", LOCAL,
      (s("cuUserObjectRelease", 11030),), ready=True),
    R("cuGraphRetainUserObject", "CUgraph graph, CUuserObject object, unsigned int count, "
      "unsigned int flags", LOCAL, (s("cuGraphRetainUserObject", 11030),), ready=True),
    R("cuGraphReleaseUserObject", "CUgraph graph, CUuserObject object, unsigned int count",
      LOCAL, (s("cuGraphReleaseUserObject", 11030),), ready=True),
)

# Handle kinds: the byte minted handles carry (docs/cuda-forwarding.md).
# (graphs and their nodes never reach the server)
HANDLE_KINDS = ("ctx", "mod", "func", "lib", "kernel", "stream", "event", "pool",
                "graph", "gnode", "gexec", "array", "mipmap", "texobj", "surfobj")
