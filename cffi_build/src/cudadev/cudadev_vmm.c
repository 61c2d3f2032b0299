/*
 * cudadev_vmm.c — the program's VMM allocations and mappings on a GPU: the
 * real driver's cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap and
 * cuMemRelease, as NVIDIA documents them, at addresses inside the range the
 * backend reserved for the session. src/exec/exec_vmm.c has checked that each
 * range lies there, granule-aligned, clear of the session's own memory (whose
 * granules never reach into a 2 MiB-aligned range it does not overlap, as the
 * backend's granule divides GL_VMM_GRANULE: checked at create). No state.
 */
#include "cudadev_vmm.h"

#include "cudadev_arrays.h"
#include "gl_vmm.h"

typedef CUresult (*fn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*fn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*fn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*fn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*fn_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

CUresult gl_cuda_vmm_create(gl_exec *x, size_t size, uint64_t *handle)
{
    size_t gran = gl_cuda_granule(x);
    if (gran == 0 || GL_VMM_GRANULE % gran != 0)
        return CUDA_ERROR_NOT_SUPPORTED; /* the program's granule must hold whole ones */
    CUmemAllocationProp prop = {0};
    prop.type = GL_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = GL_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = gl_cuda_device(x);
    CUmemGenericAllocationHandle h = 0;
    CUresult r = ((fn_create)gl_cuda_fns(x)->cuMemCreate)(&h, size, &prop, 0);
    if (r == CUDA_SUCCESS)
        *handle = h;
    return r;
}

CUresult gl_cuda_vmm_release(gl_exec *x, uint64_t handle)
{
    return ((fn_release)gl_cuda_fns(x)->cuMemRelease)(handle);
}

CUresult gl_cuda_vmm_map(gl_exec *x, uint64_t ptr, size_t size, size_t offset, uint64_t handle)
{
    return ((fn_map)gl_cuda_fns(x)->cuMemMap)(ptr, size, offset, handle, 0);
}

CUresult gl_cuda_vmm_unmap(gl_exec *x, uint64_t ptr, size_t size)
{
    return ((fn_unmap)gl_cuda_fns(x)->cuMemUnmap)(ptr, size);
}

CUresult gl_cuda_vmm_access(gl_exec *x, uint64_t ptr, size_t size, int flags)
{
    CUmemAccessDesc desc = {{GL_CU_MEM_LOCATION_TYPE_DEVICE, gl_cuda_device(x)}, flags};
    return ((fn_access)gl_cuda_fns(x)->cuMemSetAccess)(ptr, size, &desc, 1);
}
