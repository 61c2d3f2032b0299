/* Umbrella header of gleam's native core: everything Python sees through cffi. */
#ifndef GLEAM_NATIVE_H
#define GLEAM_NATIVE_H
/* cdef: begin */
int gl_native_abi_version(void);
/* cdef: end */
#include "records.h"
#include "hostspeed.h"
#include "sketch.h"
#include "pingpong.h"
#include "blobcache.h"
#include "journal.h"
#include "exec_api.h"
#include "fatbin.h"
#include "gl_linkimage.h"
#include "ptx.h"
#include "dpstream.h"
#include "spares.h"
#include "jlog.h"
#include "pump.h"
#include "serve.h"
#include "dpcrypto.h"
#include "gl_mirror_diff.h"
#endif
