/*
 * hostdev_runtime.c — the host backend's side of the driver calls that
 * libcudart makes beyond the driver-API programs' (docs/cuda-forwarding.md,
 * "Runtime API (libcudart)"). Objects are hostdev.h's; nothing here owns
 * state of its own.
 */
#include "gl_calls.h"
#include "hostdev.h"

/* A library and its module are one object on the host device: cudart 12
 * asks for the module of each library it loads, then resolves functions and
 * globals in it. The library keeps owning the object (cuLibraryUnload frees
 * it); the module handle is a second name for it. */
CUresult hb_cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    gl_hmod *m = (gl_hmod *)library;

    if (m == NULL || m->unloaded)
        return CUDA_ERROR_INVALID_HANDLE;
    *pMod = (CUmodule)m;
    return CUDA_SUCCESS;
}
