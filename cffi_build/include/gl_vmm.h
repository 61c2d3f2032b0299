/*
 * gl_vmm.h — what the interposer (interposer/vmm.c) and the server
 * (src/exec/exec_vmm.c) agree on for virtual memory management.
 */
#ifndef GLEAM_VMM_H
#define GLEAM_VMM_H

/* cuMemGetAllocationGranularity's answer, minimum and recommended: 2 MiB, as
 * NVIDIA's GPUs answer, a multiple of any host page size the host device
 * maps memfd pages at. Sizes, offsets and mapped addresses are multiples. */
#define GL_VMM_GRANULE (2ull << 20)

#endif /* GLEAM_VMM_H */
