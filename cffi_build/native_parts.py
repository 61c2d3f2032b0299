"""The parts of gleam's native core: one folder of ``cffi_build/src`` each, and
which parts each may include. This table is the core's architecture.

``build_native.py`` compiles the core part by part from it; ``tests/test_native_layering.py``
checks every ``#include "..."`` of ``cffi_build`` against it. The include rule:
a file names a header of its own folder bare (``"ptx_int.h"``), a header of
another part as ``"part/name.h"`` (the include path is ``cffi_build/src``),
and the shared contract (``include/``, ``generated/``) bare, from anywhere.

A part's ``uses`` are the parts whose headers its files may include. An include
that breaks the table but is needed today is a ``KnownException`` below, one
(file, header) pair each, with the reason; the test fails on one no longer
needed, so the list only shrinks.
"""

from __future__ import annotations

from typing import NamedTuple


class Part(NamedTuple):
    holds: str  # one line: what the folder holds (docs/architecture.md's folder map)
    uses: tuple[str, ...] = ()
    core: bool = True  # compiled into gleam.peer._native (delayline is a module of its own)


PARTS: dict[str, Part] = {
    "mem": Part("memory bookkeeping several parts share: sorted tables of address ranges, "
                "the band where a session's virtual range goes, spare large buffers."),
    "crypto": Part("OpenSSL's libcrypto opened at run time: AES-256-GCM and SHA-256."),
    "wire": Part("the data plane's bytes: the call batch (records), the sealed data "
                 "connection (dpstream) and its in-process twin (dplocal).",
                 uses=("crypto",)),
    "journal": Part("the client session's journal: a batch read in one pass, the envelopes "
                    "kept in reference-counted blocks.", uses=("wire", "mem")),
    "cache": Part("the blob cache's native half: the content digest (BLAKE3, digest), finding "
                  "and rewriting a batch's payloads (blobcache), the client's references "
                  "(blobref), the server's RAM shelf.",
                  uses=("wire", "journal", "mem")),
    "image": Part("module images from the network: the PTX inside an nvcc fatbin, whether an "
                  "image declares variables."),
    "ptx": Part("the PTX interpreter: parser, translator, opcode handlers, launcher, linker "
                "and the device runtime (printf, heap, dynamic parallelism).",
                uses=("mem",)),
    "ptxc": Part("the compile tier: hot kernels translated to C, compiled, cached and run.",
                 uses=("ptx", "crypto")),
    "exec": Part("the session executor: a batch checked and run against a backend, its handle "
                 "table, graphs, arrays, VMM, mirrors and the reply's trailer.",
                 uses=("mem", "wire", "cache")),
    "hostdev": Part("the host backend, a software device: sessions, memory, streams, modules "
                    "and launches run by the PTX interpreter.",
                    uses=("exec", "ptx", "image", "mem")),
    "cudadev": Part("the cuda backend: forwarded calls on a real GPU through the driver.",
                    uses=("exec", "image", "mem")),
    "lanes": Part("the agents' native lanes: the client's uplink and downlink (pump) and "
                  "the program's hand-over ring (handover), the server's executor thread on "
                  "its data connection (serve).",
                  uses=("wire", "journal", "cache", "exec")),
    "train": Part("the sketch codec: lossless compression of sparse fp32 gradients."),
    "measure": Part("measurements of this machine: the CPU's FP32 rate as a software device, "
                    "raw socket round trips for `gleam-peer bench calls`."),
    "delayline": Part("the lab's delay line (gleam.peer.lab._delayline), a module of its own.",
                      core=False),
}

# Folders of cffi_build outside src that include the core's headers, and the parts they may.
CLIENTS: dict[str, tuple[str, ...]] = {
    "src": tuple(name for name, part in PARTS.items() if part.core),  # gleam_native.h, abi.c
    "interposer": ("mem", "wire"),
    "generated": ("wire", "exec"),
    "include": (),
    "common": (),
    "fuzz": ("wire", "image"),
    "ptxtest": ("ptx",),
}


class KnownException(NamedTuple):
    file: str  # relative to cffi_build
    header: str  # as the file includes it
    why: str


EXCEPTIONS: tuple[KnownException, ...] = (
    KnownException("src/ptx/ptx_launch.c", "ptxc/ptxc_tier.h",
               "the launcher hands a hot kernel to the compile tier and runs its code"),
    KnownException("src/ptx/ptx_parse.c", "ptxc/ptxc_tier.h",
               "a module's kernels carry the tier's per-kernel state, freed with the module"),
    KnownException("src/exec/executor.c", "ptx/ptx_devrt.h",
               "a session's device runtime (printf FIFO, output queue) is the executor's"),
    KnownException("src/exec/exec_output.c", "ptx/ptx_devrt.h",
               "a reply's trailer takes the device runtime's queued output"),
    KnownException("src/exec/exec_graphs.c", "ptx/ptx_devrt.h",
               "a conditional node's scope is set on the device runtime around a stage"),
    KnownException("src/exec/exec_vmm.c", "cudadev/cudadev_vmm.h",
               "the VMM rows call the cuda backend's half directly, not through a slot"),
    KnownException("interposer/mirror.c", "ptx/ptx.h",
               "PTX_MANAGED_ALIGN: managed memory is aligned as the host device maps it"),
    KnownException("interposer/module.c", "ptx/ptx_devrt.h",
               "the built-ins' numbers (PTX_BI_MALLOC, PTX_BI_FREE) in glFuncDevrt's answer"),
)


def core_parts() -> list[str]:
    """The folders of cffi_build/src compiled into the native core, in table order."""
    return [name for name, part in PARTS.items() if part.core]


def folder_map() -> str:
    """docs/architecture.md's folder map, one line per part (a test keeps the two equal)."""
    lines = []
    for name, part in PARTS.items():
        uses = f" Uses {', '.join(f'`{u}/`' for u in part.uses)}." if part.uses else ""
        lines.append(f"- `{name}/`: {part.holds}{uses}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(folder_map(), end="")
