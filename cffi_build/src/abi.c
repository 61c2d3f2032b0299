/* ABI version of the native core: the build defines GL_NATIVE_ABI_VERSION from
 * the hash of the cdef (generated from the headers, cffi_build/cdef.py), and
 * gleam.peer.nativelib refuses a module whose number differs from the one it
 * was written against. */
#include "gleam_native.h"

#ifndef GL_NATIVE_ABI_VERSION
#error "GL_NATIVE_ABI_VERSION comes from cffi_build/build_native.py"
#endif

int gl_native_abi_version(void) { return GL_NATIVE_ABI_VERSION; }
