"""Which exported calls stream capture and host functions restrict (interposer/hostfn.c).

Every exported stub asks the gate first while a capture is in progress or a host
function runs (gen_cuda.py writes each stub's class from these sets):

``UNSAFE_DURING_CAPTURE``
    The "potentially unsafe API calls" of ``cuThreadExchangeStreamCaptureMode``:
    calls that allocate or free outside stream order, or that are synchronous
    (NVIDIA's example is ``cudaMalloc``). A thread whose capture mode forbids them
    gets ``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`` and the captures concerned are
    invalidated (capture.c). Waits and queries are judged by their arguments at
    the record instead (a capturing stream, a captured event, the legacy stream).
``ANY_TIME``
    Calls a host function may make: they only read constant tables. Every other
    call from a host function is ``CUDA_ERROR_NOT_PERMITTED``, as NVIDIA documents.

Names are the rows' base names (cuda_api.py).
"""

from __future__ import annotations

UNSAFE_DURING_CAPTURE = frozenset({
    "cuMemAlloc", "cuMemAllocPitch", "cuMemFree", "cuMemAllocHost", "cuMemHostAlloc",
    "cuMemFreeHost", "cuMemHostRegister", "cuMemHostUnregister",
    "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpy", "cuMemcpy2D",
    "cuMemcpy2DUnaligned", "cuMemcpy3D", "cuMemcpyPeer",
    "cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cuMemsetD2D8", "cuMemsetD2D16",
    "cuMemsetD2D32",
})

ANY_TIME = frozenset({"cuGetErrorName", "cuGetErrorString", "cuDriverGetVersion"})
