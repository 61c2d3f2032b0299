"""Runtime-API programs built by nvcc run unchanged through gleam.

The programs (examples/cuda/runtime) are built with the CUDA toolkit's nvcc
three ways: static cudart (nvcc's default), ``-cudart shared`` (libcudart 13),
and, when the ``nvidia-cuda-runtime-cu12`` wheel is installed, against its
libcudart 12. They run through ``gleam-peer run`` against two real agents on
loopback, the server on the host backend with its kernel registry off, so every
kernel runs from the PTX that nvcc embeds. Each program checks its own results
and prints a JSON verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.cuda.examples import interposer_dir

from .cuda_mesh import host_mesh, run_through

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "examples" / "cuda" / "runtime"
PROGRAMS = ("vadd", "streams", "symbols", "errors", "threads", "reset", "props", "pitched",
            "graphs", "textures")

NVCC = shutil.which("nvcc")


def cudart12_dir() -> Path | None:
    """The lib folder of the nvidia-cuda-runtime-cu12 wheel, if installed."""
    try:
        import nvidia.cuda_runtime  # type: ignore[import-not-found]
    except ImportError:
        return None
    for base in nvidia.cuda_runtime.__path__:
        lib = Path(base) / "lib"
        if (lib / "libcudart.so.12").exists():
            return lib
    return None


def nvcc(source: Path, out: Path, *flags: str) -> Path:
    done = subprocess.run([NVCC, "-o", str(out), str(source), *flags], capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"nvcc {source.name} {' '.join(flags)}:\n{done.stderr}")
    return out


def static_and_shared(source: Path, factory: pytest.TempPathFactory) -> dict[str, Path]:
    """source built by nvcc with static and with shared cudart 13, in a fresh folder (the
    test skips without nvcc)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = factory.mktemp(source.stem)
    return {"static": nvcc(source, out / f"{source.stem}_static"),
            "shared": nvcc(source, out / f"{source.stem}_shared", "-cudart", "shared")}


def flavours(source: Path, out: Path, *cudart12_flags: str) -> dict[str, Path]:
    """source built with static and shared cudart 13 and, when the wheel is installed,
    with libcudart 12 shared and static (cudart12_flags added to those builds)."""
    name = source.stem
    built = {"static": nvcc(source, out / f"{name}_static"),
             "shared": nvcc(source, out / f"{name}_shared", "-cudart", "shared")}
    rt12 = cudart12_dir()
    if rt12 is not None:
        built["cudart12"] = nvcc(source, out / f"{name}_cudart12", "-cudart", "none",
                                 f"-L{rt12}", "-l:libcudart.so.12", "-Xlinker",
                                 f"-rpath={rt12}", *cudart12_flags)
        if (rt12 / "libcudart_static.a").exists():
            built["cudart12-static"] = nvcc(
                source, out / f"{name}_cudart12_static", "-cudart", "none",
                str(rt12 / "libcudart_static.a"), "-ldl", "-lrt", "-lpthread", *cudart12_flags)
    return built


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = tmp_path_factory.mktemp("cudart")
    return {(name, kind): path for name in PROGRAMS
            for kind, path in flavours(RUNTIME / f"{name}.cu", out).items()}


@pytest.fixture(scope="module")
def mesh(binaries, tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


def flavour(binaries, name: str, kind: str) -> Path:
    if (name, kind) not in binaries:
        pytest.skip("libcudart 12 (the nvidia-cuda-runtime-cu12 wheel) is not installed")
    return binaries[name, kind]


KINDS = ("static", "shared", "cudart12", "cudart12-static")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("loading", ["LAZY", "EAGER"])
def test_vector_add(mesh, binaries, kind, loading):
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "vadd", kind),
                                env={"CUDA_MODULE_LOADING": loading})
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "n": 65536, "mismatches": 0, "launch": "cudaSuccess",
                       "sync": "cudaSuccess"}
    assert "not implemented" not in done.stderr and "is not provided" not in done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_streams_events_pinned_memset_and_device_copies(mesh, binaries, kind):
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "streams", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "n": 16384, "mismatches": 0, "elapsed_ms_nonnegative": True}


@pytest.mark.parametrize("kind", KINDS)
def test_constant_and_device_variables(mesh, binaries, kind):
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "symbols", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "mismatches": 0, "counter": 1000}


@pytest.mark.parametrize("kind", KINDS)
def test_pitched_memory_2d_and_3d(mesh, binaries, kind):
    """cudaMallocPitch, cudaMemcpy2D every way, cudaMemset2D, a kernel over pitched
    rows, cudaMalloc3D/cudaMemcpy3D/cudaMemset3D (cudart uses cuMemAllocPitch,
    cuMemcpy2DUnaligned, cuMemcpy2DAsync, cuMemcpy3D, cuMemsetD2D8[Async])."""
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "pitched", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "mismatches": 0, "narrow_pitch": "cudaErrorInvalidPitchValue"}


@pytest.mark.parametrize("kind", KINDS)
def test_arrays_textures_and_surfaces(mesh, binaries, kind):
    """cudaMallocArray/3DArray (3D, layered, cubemap, surface), mipmapped arrays and
    their levels, copies to, from and between arrays, texture objects over arrays,
    mipmaps, linear and pitched memory in several modes, a surface object, the
    descriptor queries and a copy past an array's end: every value against the CPU
    (examples/cuda/runtime/textures.cu; the kernels run from their PTX)."""
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "textures", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "mismatches": 0, "linear_mismatches": 0}
    assert "is not forwarded" not in done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_two_host_threads_with_their_own_streams(mesh, binaries, kind):
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "threads", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "mismatches": [0, 0]}


@pytest.mark.parametrize("kind", KINDS)
def test_device_reset_drops_cudart_state_and_work_goes_on(mesh, binaries, kind):
    """cudaDeviceReset resets the primary context; the interposer calls the destructors
    cudart put in context-local storage, so cudart retains the context again."""
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "reset", kind),
                                env={"GLEAM_TRACE": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "first": 0, "reset": "cudaSuccess", "second": 0}
    after = done.stderr.split("gleam: trace: cuDevicePrimaryCtxReset\n", 1)[1]
    assert "gleam: trace: cuDevicePrimaryCtxRetain\n" in after


@pytest.mark.parametrize("kind", KINDS)
def test_device_context_stream_and_pointer_queries(mesh, binaries, kind):
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "props", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict["ok"] and verdict["failed"] == 0, done.stderr
    assert verdict["name"].startswith("gleam host device") and verdict["cc"] == 80
    assert verdict["flags_blocking"] and verdict["priorities"] == [0, 0]
    assert verdict["pointer_type"] == 2 and verdict["stack"] == 1024


@pytest.mark.parametrize("kind", KINDS)
def test_error_paths(mesh, binaries, kind):
    """A copy from an address no allocation holds is cudaErrorInvalidValue at once; a
    launch with 4096 threads per block is cudaErrorInvalidConfiguration at the launch, as
    on a GPU, and leaves the context usable (the interposer tells cudart's launches from
    the program's: docs/cuda-forwarding.md)."""
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "errors", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"malloc": "cudaSuccess", "copy": "cudaErrorInvalidValue",
                       "launch": "cudaErrorInvalidConfiguration", "sync": "cudaSuccess"}


@pytest.mark.parametrize("kind", ("static", "shared"))
def test_no_agent_is_no_device_with_one_line(binaries, tmp_path, kind):
    env = {**os.environ, "LD_LIBRARY_PATH": str(interposer_dir()),
           "GLEAM_CUDA_SOCKET": str(tmp_path / "absent.sock")}
    done = subprocess.run([str(flavour(binaries, "vadd", kind))], capture_output=True,
                          text=True, timeout=60, env=env)
    assert '"launch": "cudaErrorNoDevice"' in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("gleam:")]
    assert len(lines) == 1 and "no CUDA device" in lines[0], done.stderr


def test_machine_code_only_says_why_in_the_program(mesh, binaries, tmp_path):
    """A program built for sm_80 machine code alone cannot run on the host device:
    its launch fails as on a GPU without that architecture, and the program's own
    stderr (not only the serving agent's log) gets the server's line saying why and
    how to add PTX."""
    client, _ = mesh
    program = nvcc(RUNTIME / "vadd.cu", tmp_path / "vadd_sm80", "-gencode",
                   "arch=compute_80,code=sm_80")
    done, verdict = run_through(client, program, options=("--quiet",))  # its errors only
    assert verdict["launch"] == "cudaErrorSymbolNotFound" and not verdict["ok"]
    lines = [line for line in done.stderr.splitlines() if line.startswith("gleam:")]
    assert len(lines) == 1 and "image carries no PTX (only sm_80)" in lines[0], done.stderr
    assert lines[0].startswith("gleam: server: no host implementation for kernel _Z4vadd")
    assert "-gencode arch=compute_80,code=compute_80" in lines[0]


def test_trace_names_tables_slots_and_calls(mesh, binaries):
    client, _ = mesh
    done, verdict = run_through(client, binaries["vadd", "static"], env={"GLEAM_TRACE": "1"})
    assert verdict["ok"], done.stderr
    for line in ("gleam: trace: export table cudart_interface\n",
                 "gleam: trace: export table integrity slot 1\n",
                 "gleam: trace: export table context_local_storage slot 0\n",
                 "gleam: trace: cuLibraryLoadData\n", "gleam: trace: cuLaunchKernel\n"):
        assert line in done.stderr
    # Resolving is not calling: no line per name cudart resolves (it resolves ~270).
    assert "not forwarded" not in done.stderr and "cuGetProcAddress(" not in done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_trace_of_errors_is_silent_for_a_program_that_works(mesh, binaries, kind):
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "vadd", kind),
                                env={"GLEAM_TRACE": "errors"})
    assert verdict["ok"], done.stderr
    # (run's own lines say where the program ran and what it did: not a trace)
    assert not [line for line in done.stderr.splitlines() if line.startswith("gleam: trace")]
    assert "not forwarded" not in done.stderr


MD2_HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "gl_cuda.h"
void gl_md2(const void *msg, size_t len, uint8_t out[16]);
CUresult gli_cuDriverGetVersion(int *v, int p) { (void)p; *v = 13000; return 0; }
CUresult gli_cuDeviceGetCount(int *v, int p) { (void)p; *v = 0; return 0; }
CUresult gli_cuDeviceGetUuid(CUuuid *u, int d, int p) { (void)u; (void)d; (void)p; return 0; }
CUresult gli_cuDeviceGetAttribute(int *v, int a, int d, int p)
{ (void)a; (void)d; (void)p; *v = 0; return 0; }
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        uint8_t o[16];
        gl_md2(argv[i], strlen(argv[i]), o);
        for (int k = 0; k < 16; k++) printf("%02x", o[k]);
        printf("\n");
    }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not on PATH")
def test_md2_behind_the_integrity_answer_matches_rfc_1319(tmp_path):
    harness = tmp_path / "md2.c"
    harness.write_text(MD2_HARNESS)
    build = ROOT / "cffi_build"
    exe = tmp_path / "md2"
    subprocess.run(["gcc", "-o", str(exe), str(harness), str(build / "interposer" / "integrity.c"),
                    f"-I{build / 'include'}", f"-I{build / 'interposer'}",
                    f"-I{build / 'generated'}"], check=True, timeout=60)
    vectors = {"": "8350e5a3e24c153df2275c9f80692773", "a": "32ec01ec4a6dac72c0ab96fb34c0b5d1",
               "abc": "da853b0d3f88d99b30283a69e6ded6bb",
               "message digest": "ab4f496bfb2a530b219ff33031fe06b0"}
    out = subprocess.run([str(exe), *vectors], capture_output=True, text=True, check=True)
    assert out.stdout.split() == list(vectors.values())


EXPORT_TABLE_PROBE = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
table = ctypes.c_void_p()
def ask(uuid):
    return lib.cuGetExportTable(ctypes.byref(table), bytes.fromhex(uuid))
print(ask("c693336e1121df11a8c368f355d89593"), bool(table.value))  # context-local storage
print(ask("f8cff95121468b4eb9e2fb469e7c0dd9"), bool(table.value))  # refused: not found
print(ask("00112233445566778899aabbccddeeff"), bool(table.value))  # unknown
ask("00112233445566778899aabbccddeeff")  # named once only
proc = ctypes.c_void_p()
print(lib.cuGetProcAddress_v2(b"cuGetExportTable", ctypes.byref(proc), 13000, 0, None),
      bool(proc.value))
"""


def test_export_tables_known_refused_and_unknown(tmp_path):
    """Needs neither nvcc nor an agent: the tables are answered in the interposer."""
    lib = interposer_dir() / "libcuda.so.1"
    done = subprocess.run([sys.executable, "-c", EXPORT_TABLE_PROBE, str(lib)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:4] == ["0 True", "500 False", "801 False", "0 True"]
    assert done.stderr == ("gleam: export table 00112233-4455-6677-8899-aabbccddeeff is not "
                           "provided; returning CUDA_ERROR_NOT_SUPPORTED\n")


@pytest.mark.parametrize("kind", KINDS)
def test_graphs_capture_host_functions_and_callbacks(mesh, binaries, kind):
    """cudaStreamBeginCapture and replay with new input, cudaGraphAdd*Node, exec updates,
    cudaLaunchHostFunc, cudaStreamAddCallback and captured cudaMallocAsync, through each
    cudart (which resolves the graph entry points by their versioned names)."""
    client, _ = mesh
    done, verdict = run_through(client, flavour(binaries, "graphs", kind))
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "captured": 1, "built": 1, "set_params": 1, "updated": 1,
                       "callbacks": 1, "graph_memory": 1}
