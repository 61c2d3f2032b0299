/* ABI version of the native core; the Python side refuses a mismatched build. */
#include "gleam_native.h"
int gl_native_abi_version(void) { return 1; }
