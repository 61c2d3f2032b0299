/*
 * device.c — device facts, answered from the HELLO the agent sent when the
 * session opened (the server fetched them once), so none of these calls
 * travels.
 */
#include <string.h>

#include "gl_client_gen.h"
#include "internal.h"

/* The device's facts, or NULL with *r set. */
const gl_device_info *gl_device(CUdevice dev, CUresult *r)
{
    const gl_session_hello *h = gl_session();

    *r = gl_ready();
    if (*r != CUDA_SUCCESS)
        return NULL;
    if (dev < 0 || dev >= h->device_count) {
        *r = CUDA_ERROR_INVALID_DEVICE;
        return NULL;
    }
    return &h->devices[dev];
}

CUresult gli_cuDeviceGet(CUdevice *device_out, int ordinal, int ptds)
{
    CUresult r;

    (void)ptds;
    if (gl_device(ordinal, &r) == NULL)
        return r;
    if (device_out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device_out = ordinal;
    return CUDA_SUCCESS;
}

CUresult gls_cuDeviceGetCount(int *count, int ptds)
{
    (void)ptds;
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = gl_session()->device_count;
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceGetName(char *name, int len, CUdevice dev, int ptds)
{
    CUresult r;
    const gl_device_info *d = gl_device(dev, &r);

    (void)ptds;
    if (d == NULL)
        return r;
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t n = strnlen(d->name, GL_NAME_LEN - 1);
    if (n > (size_t)len - 1)
        n = (size_t)len - 1;
    memcpy(name, d->name, n);
    name[n] = '\0';
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev, int ptds)
{
    CUresult r;
    const gl_device_info *d = gl_device(dev, &r);

    (void)ptds;
    if (d == NULL)
        return r;
    if (pi == NULL || attrib < 0 || attrib >= GL_DEVICE_ATTR_SLOTS)
        return CUDA_ERROR_INVALID_VALUE;
    if (gl_managed_device_attribute(attrib, pi)) /* mapped and managed memory: managed.c */
        return CUDA_SUCCESS;
    *pi = gl_refused_attribute(attrib) ? 0 : d->attrs[attrib];
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceTotalMem(size_t *bytes, CUdevice dev, int ptds)
{
    CUresult r;
    const gl_device_info *d = gl_device(dev, &r);

    (void)ptds;
    if (d == NULL)
        return r;
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)d->total_mem;
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev, int ptds)
{
    CUresult r;
    const gl_device_info *d = gl_device(dev, &r);

    (void)ptds;
    if (d == NULL)
        return r;
    if (uuid == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, d->uuid, sizeof uuid->bytes);
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceComputeCapability(int *major, int *minor, CUdevice dev, int ptds)
{
    CUresult r;
    const gl_device_info *d = gl_device(dev, &r);

    (void)ptds;
    if (d == NULL)
        return r;
    if (major == NULL || minor == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *major = d->attrs[GL_ATTR_COMPUTE_CAPABILITY_MAJOR];
    *minor = d->attrs[GL_ATTR_COMPUTE_CAPABILITY_MINOR];
    return CUDA_SUCCESS;
}
