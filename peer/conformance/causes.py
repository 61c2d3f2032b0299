"""Why a program failed: its first error line, and the known cause it belongs to.

A failure's *first error line* is what the program (or gleam, on its behalf)
said first about it: a ``gleam: server:`` line (the serving agent's reason,
docs/cuda-forwarding.md "Diagnostics"; the run's server is named "server"),
else another ``gleam:`` line (a call that is not forwarded, an image without
PTX), else the first call that failed (``GLEAM_TRACE=errors``), else the
program's own first line that reads like an error. The *cause* groups
failures: the first entry of ``CAUSES`` whose pattern matches the lines of
the output that read like errors (so a "not forwarded" line explains the
sample's generic "CUDA error" after it), else "other" and the first error
line itself. Each cause names the work that fixes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gleam.peer.cuda.client.runs import OPEN_LINE_PREFIX

LINE_LIMIT = 240
# The serving agent's name in the run's mesh: the interposer prefixes the server's
# reasons with it ("gleam: server: kernel ...: illegal address").
SERVER_NAME = "server"
SERVER_PREFIX = f"gleam: {SERVER_NAME}: "
ERROR_LINE = re.compile(
    r"(?i)\berror\b|failed|\bFAIL|not supported|unsupported|waiv|requires|exception|"
    r"traceback|abort|segmentation|illegal|invalid|mismatch|does not|cannot|can't|unable")


@dataclass(frozen=True)
class Cause:
    label: str
    pattern: re.Pattern[str]
    fixed_by: str


def _c(label: str, pattern: str, fixed_by: str) -> Cause:
    return Cause(label, re.compile(pattern, re.IGNORECASE | re.MULTILINE), fixed_by)


# Most specific first: the first match names the cause.
CAUSES: tuple[Cause, ...] = (
    _c("timeout (host device speed)", r"^no result within \d+ s|time limit reached",
       "the host device's speed (a separate issue)"),
    _c("SASS only: NVRTC or nvJitLink built a cubin",
       r"carries no PTX \(only a cubin\)|image is machine code only|only sm_\d+\)",
       "nothing in gleam: the host device runs PTX (a GPU server runs these)"),
    _c("dynamic parallelism (device-side launch)",
       r"cudaLaunchDevice|cudaGetParameterBuffer|cudaCGGetIntrinsicHandle|cudadevrt",
       "device-side launch on the host device (no branch yet)"),
    _c("cooperative launch / grid sync",
       r"cooperative|cuLaunchCooperativeKernel|grid\.sync|cudaErrorCooperativeLaunch",
       "linking and cooperative launch (branch in progress)"),
    _c("multi-image linking (cuLink*)",
       r"cuLinkComplete|cuLinkAdd|links one image|LTO", "linking (branch in progress)"),
    _c("CUDA graphs, stream capture, host functions",
       r"cuGraph|cudaGraph|StreamBeginCapture|StreamEndCapture|cuLaunchHostFunc|"
       r"cuStreamAddCallback|stream capture|graph",
       "graphs, capture and host functions (branch in progress)"),
    _c("CUDA arrays, textures, surfaces",
       r"cuArray|cuMipmappedArray|cuTexObject|cuSurfObject|cuTexRef|cudaArray|texture|"
       r"surface", "CUDA arrays, textures and surfaces (branch in progress)"),
    _c("mapped (zero-copy) host memory",
       r"cuMemHostGetDevicePointer|DEVICEMAP|canMapHostMemory|mapped memory|"
       r"cannot map host memory|zero.?copy|mapped_array|cudaHostAllocMapped",
       "mapped and managed memory (branch in progress)"),
    _c("managed (unified) memory",
       r"cuMemAllocManaged|cudaMallocManaged|managed memory|MANAGED|cuMemPrefetch|"
       r"cuMemAdvise|concurrentManagedAccess|unified memory|managed_array",
       "mapped and managed memory (branch in progress)"),
    _c("IPC between processes",
       r"cuIpc|cudaIpc|IpcGetMemHandle|ShareableHandle|cuMemExport|cuMemImport",
       "not planned: one session never sees another's memory (docs/conformance.md)"),
    _c("device printf / assert (issue 26)",
       r"vprintf|__assertfail|device.side assert|printf", "issue 26"),
    _c("tensor cores (wmma, mma) in the PTX interpreter", r"\bwmma\.|\bmma\.|ldmatrix",
       "the PTX interpreter (not yet assigned)"),
    _c("asynchronous barriers (mbarrier) in the PTX interpreter", r"mbarrier|cp\.async\.bulk",
       "the PTX interpreter (not yet assigned)"),
    _c("device-side malloc/free", r"without a body: (?:malloc|free)\b",
       "the PTX interpreter's device heap (not yet assigned)"),
    _c("PTX the host device refuses",
       r"PTX is refused|unsupported PTX instruction|is not a variable or function",
       "the PTX interpreter (docs/ptx-execution.md; not yet assigned)"),
    _c("kernel fault on the host device",
       r"illegal address|illegal memory access|unspecified launch failure|\btrap\b",
       "not yet assigned: a fault to investigate"),
    _c("virtual memory management (cuMemCreate/cuMemMap)",
       r"cuMemCreate|cuMemMap|cuMemAddressReserve|cuMemSetAccess|cuMemGetAllocationGranularity",
       "not yet assigned"),
    _c("a call gleam does not forward", r"is not forwarded|export table .* not",
       "not yet assigned: the line names the call"),
)
OTHER = "other"
# Where a session runs, printed when it opens: not an error.
OPEN_LINE = OPEN_LINE_PREFIX


def first_error_line(stdout: str, stderr: str) -> str:
    """The first line that says what went wrong ("" when none does)."""
    lines_err = [line.strip() for line in stderr.splitlines() if line.strip()]
    lines_out = [line.strip() for line in stdout.splitlines() if line.strip()]
    for line in lines_err:
        if line.startswith(SERVER_PREFIX):
            return line[:LINE_LIMIT]
    for line in lines_err + lines_out:
        if line.startswith("gleam:") and not line.startswith(("gleam: trace:", OPEN_LINE)):
            return line[:LINE_LIMIT]
    for line in lines_err:   # GLEAM_TRACE=errors: the first call that failed
        if line.startswith("gleam: trace:") and " -> " in line:
            return line[:LINE_LIMIT]
    for line in lines_err + lines_out:
        if ERROR_LINE.search(line):
            return line[:LINE_LIMIT]
    return ""


def evidence(stdout: str, stderr: str) -> str:
    """The lines a cause is read from: gleam's (of its trace, the calls that failed:
    GLEAM_TRACE=errors) and the ones that read like errors (a sample's ordinary
    output names textures or graphs without failing on them)."""
    keep = [line for line in (stderr + "\n" + stdout).splitlines()
            if line.startswith("gleam:") or ERROR_LINE.search(line)]
    return "\n".join(line for line in keep
                     if not line.startswith("gleam: trace:") or " -> " in line)


def classify(text: str) -> Cause | None:
    """The known cause whose pattern ``text`` (an output, or a first error line) matches."""
    for cause in CAUSES:
        if cause.pattern.search(text):
            return cause
    return None


def cause_label(text: str) -> str:
    found = classify(text)
    return found.label if found else OTHER


def fixed_by(label: str) -> str:
    for cause in CAUSES:
        if cause.label == label:
            return cause.fixed_by
    return "not yet assigned"
