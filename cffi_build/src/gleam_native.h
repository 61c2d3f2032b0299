/* Umbrella header of gleam's native core: everything Python sees through cffi. */
#ifndef GLEAM_NATIVE_H
#define GLEAM_NATIVE_H
/* cdef: begin */
int gl_native_abi_version(void);
/* cdef: end */
#include "wire/records.h"
#include "measure/hostspeed.h"
#include "train/sketch.h"
#include "measure/pingpong.h"
#include "cache/digest.h"
#include "cache/blobcache.h"
#include "journal/journal.h"
#include "exec/exec_api.h"
#include "image/fatbin.h"
#include "gl_error_names.h"
#include "gl_linkimage.h"
#include "ptx/ptx.h"
#include "wire/dpstream.h"
#include "mem/spares.h"
#include "journal/jlog.h"
#include "lanes/pump.h"
#include "lanes/serve.h"
#include "crypto/dpcrypto.h"
#include "gl_mirror_diff.h"
#endif
