"""The cuda-samples that the conformance run builds and runs: one declarative table.

The table holds names, folders in the checkout, build recipes, arguments and
what output means success; never NVIDIA's code or output. Which samples: every
sample of cuda-samples (the commit in docs/conformance.md) that needs no
graphics (OpenGL, Vulkan, EGL, Direct3D), no NvSci, no second GPU and no
machine-code-only NVIDIA library (cuBLAS, cuFFT, cuRAND, cuSPARSE, cuSOLVER,
NPP, nvJPEG; nvJitLink, whose output is SASS only), per each sample's README
and CMakeLists. NVRTC, libNVVM and the CUDA runtime are in. ``EXCLUDED`` lists
the rest of the checkout's samples with the reason.

A sample passes when it exits with status 0, prints its ``expect`` pattern
(when it has one: most print "Test passed", "PASSED" or "Result = PASS") and
prints no failure marker (``FAILURE``). Exit status 2 is the samples'
EXIT_WAIVED: the sample decided the device lacks something; it is reported as
"waived" and is not a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

# What a sample prints when its check fails, whatever its exit status.
FAILURE = re.compile(r"Result = FAIL|Test failed|TEST FAILED|FAILED!|\bFAILED\b|"
                     r"[Vv]alidation (?:failed|FAILED)|Comparison failed|mismatch|"
                     r"CUDA error at|Error!|code=\d+\(cuda")
PASS = r"Test passed|Test PASSED|PASSED|Result = PASS"   # the usual success line
RETURNED_OK = r"completed, returned OK"                   # the other usual one
EXIT_WAIVED = 2


@dataclass(frozen=True)
class Sample:
    """One sample: how to build it, how to run it and what success looks like."""

    name: str                            # the program's name (argv[0] names its data folder)
    path: str                            # its folder in the checkout
    sources: tuple[str, ...] = ()        # compiled into it; () means every .cu/.cpp/.c there
    flags: tuple[str, ...] = ()          # nvcc flags beyond build.COMMON_FLAGS
    needs: tuple[str, ...] = ()          # nvrtc, nvvm, openmp, cdp (-rdc + cudadevrt), ...
    images: tuple[tuple[str, str], ...] = ()  # (kernel source, file it loads: .fatbin/.ptx)
    headers: tuple[str, ...] = ()        # toolkit headers NVRTC reads at run time (from ./)
    args: tuple[str, ...] = ()
    expect: str = ""                     # a regex the output must match; "" is exit 0 alone
    note: str = ""                       # why these arguments, or what the sample checks
    timeout: float | None = None         # seconds, when it needs more than --timeout


def _intro(name: str, **kw: object) -> Sample:
    return Sample(name, f"Samples/0_Introduction/{name}", **kw)  # type: ignore[arg-type]


def _concepts(name: str, **kw: object) -> Sample:
    return Sample(name, f"Samples/2_Concepts_and_Techniques/{name}", **kw)  # type: ignore[arg-type]


def _features(name: str, **kw: object) -> Sample:
    return Sample(name, f"Samples/3_CUDA_Features/{name}", **kw)  # type: ignore[arg-type]


def _domain(name: str, **kw: object) -> Sample:
    return Sample(name, f"Samples/5_Domain_Specific/{name}", **kw)  # type: ignore[arg-type]


def _nvrtc(sample: Sample) -> Sample:
    """An NVRTC sample: the kernel source stays a file it reads and compiles at run time."""
    return replace(sample, needs=("nvrtc",))


# What matrixMul_nvrtc's CMakeLists copies beside the program: its kernel includes
# cooperative groups, which NVRTC finds in the working directory.
_CG_HEADERS = ("cooperative_groups.h", "cooperative_groups", "cccl/nv", "cccl/cuda")


SAMPLES: tuple[Sample, ...] = (
    # ---- 0_Introduction
    _intro("asyncAPI"),
    _intro("clock", expect=r"Average clocks/block"),
    _nvrtc(_intro("clock_nvrtc", sources=("clock.cpp",), expect=r"Average clocks/block")),
    _intro("cudaOpenMP", needs=("openmp",)),
    _intro("fp16ScalarProduct", expect=PASS),
    _intro("matrixMul", args=("-wA=64", "-hA=64", "-wB=64", "-hB=64"), expect=PASS,
           note="64x64 matrices (default 320x320 times 640x320, 300 times)"),
    _intro("matrixMulDrv", sources=("matrixMulDrv.cpp",),
           images=(("matrixMul_kernel.cu", "matrixMul_kernel64.fatbin"),), expect=PASS),
    _intro("matrixMulDynlinkJIT"),
    _nvrtc(_intro("matrixMul_nvrtc", sources=("matrixMul.cpp",),
                  args=("-wA=64", "-hA=64", "-wB=64", "-hB=64"), expect=PASS,
                  headers=_CG_HEADERS, note="64x64 matrices, as matrixMul")),
    _intro("mergeSort", sources=("main.cpp", "mergeSort.cu", "mergeSort_host.cpp",
                                 "mergeSort_validate.cpp")),
    _intro("simpleAWBarrier", expect=PASS),
    _intro("simpleAssert", expect=RETURNED_OK,
           note="passes when the device's assert stops the kernel with cudaErrorAssert"),
    _nvrtc(_intro("simpleAssert_nvrtc", sources=("simpleAssert.cpp",))),
    _intro("simpleAtomicIntrinsics", expect=RETURNED_OK),
    _nvrtc(_intro("simpleAtomicIntrinsics_nvrtc", expect=RETURNED_OK)),
    _intro("simpleAttributes"),
    _intro("simpleCallback"),
    _intro("simpleCooperativeGroups"),
    _intro("simpleCubemapTexture"),
    _intro("simpleDrvRuntime", sources=("simpleDrvRuntime.cpp",),
           images=(("vectorAdd_kernel.cu", "vectorAdd_kernel64.fatbin"),), expect=PASS),
    _intro("simpleHyperQ"),
    _intro("simpleIPC", sources=("simpleIPC.cu", "../../../Common/helper_multiprocess.cpp")),
    _intro("simpleLayeredTexture"),
    _intro("simpleMultiCopy"),
    _intro("simpleMultiGPU"),
    _intro("simpleOccupancy", expect=PASS),
    _intro("simplePitchLinearTexture", expect=RETURNED_OK),
    _intro("simplePrintf", expect=r"\[3, 7\]:\t\tValue is:10",
           note="passes when the kernel's printf lines reach stdout (the last thread's)"),
    _intro("simpleStreams"),
    _intro("simpleSurfaceWrite", expect=RETURNED_OK),
    _intro("simpleTemplates", expect=r"Test Results: 0 Failures"),
    _intro("simpleTexture", expect=RETURNED_OK),
    _intro("simpleTextureDrv", sources=("simpleTextureDrv.cpp",),
           images=(("simpleTexture_kernel.cu", "simpleTexture_kernel64.fatbin"),)),
    _intro("simpleVoteIntrinsics"),
    _intro("simpleZeroCopy"),
    _intro("systemWideAtomics", expect=RETURNED_OK),
    _intro("template"),
    _intro("vectorAdd", expect=PASS),
    _intro("vectorAddDrv", sources=("vectorAddDrv.cpp",),
           images=(("vectorAdd_kernel.cu", "vectorAdd_kernel64.fatbin"),), expect=PASS),
    _intro("vectorAddMMAP", sources=("vectorAddMMAP.cpp", "multidevicealloc_memmap.cpp"),
           images=(("vectorAdd_kernel.cu", "vectorAdd_kernel64.fatbin"),), expect=PASS),
    _nvrtc(_intro("vectorAdd_nvrtc", sources=("vectorAdd.cpp",), expect=PASS)),
    # ---- 1_Utilities
    Sample("deviceQuery", "Samples/1_Utilities/deviceQuery", expect=PASS),
    Sample("deviceQueryDrv", "Samples/1_Utilities/deviceQueryDrv", expect=PASS),
    Sample("topologyQuery", "Samples/1_Utilities/topologyQuery"),
    # ---- 2_Concepts_and_Techniques
    _concepts("convolutionSeparable", expect=PASS),
    _concepts("convolutionTexture", expect=PASS),
    _concepts("dct8x8", expect=PASS),
    _concepts("eigenvalues", args=("-matrix-size=256", "-iters-timing=1"),
              note="a 256x256 matrix, timed once (default 2048, 100 times)"),
    _concepts("histogram", expect=PASS),
    _concepts("inlinePTX"),
    _nvrtc(_concepts("inlinePTX_nvrtc", sources=("inlinePTX.cpp",))),
    _concepts("interval"),
    _concepts("radixSortThrust", args=("-n=65536", "-iterations=1"), expect=PASS,
              note="64 Ki keys sorted once (default 1 Mi keys, 100 times)"),
    _concepts("reduction", args=("-n=1048576",), expect=PASS,
              note="1 Mi elements (default 16 Mi)"),
    _concepts("reductionMultiBlockCG", args=("-n=1048576",),
              note="1 Mi elements (default 32 Mi)"),
    _concepts("scalarProd", expect=PASS),
    _concepts("scan"),
    _concepts("segmentationTreeThrust"),
    _concepts("shfl_scan"),
    _concepts("sortingNetworks", sources=("main.cpp", "bitonicSort.cu",
                                          "sortingNetworks_validate.cpp")),
    _concepts("streamOrderedAllocation", expect=PASS),
    _concepts("streamOrderedAllocationIPC",
              sources=("streamOrderedAllocationIPC.cu",
                       "../../../Common/helper_multiprocess.cpp")),
    _concepts("threadFenceReduction"),
    _concepts("threadMigration", sources=("threadMigration.cpp",),
              images=(("threadMigration_kernel.cu", "threadMigration_kernel64.fatbin"),)),
    # ---- 3_CUDA_Features
    _features("StreamPriorities"),
    _features("bf16TensorCoreGemm"),
    _features("binaryPartitionCG"),
    _features("cdpAdvancedQuicksort", needs=("cdp",), expect=PASS),
    _features("cdpBezierTessellation", needs=("cdp",)),
    _features("cdpQuadtree", needs=("cdp",), expect=r"Results: OK"),
    _features("cdpSimplePrint", needs=("cdp",)),
    _features("cdpSimpleQuicksort", needs=("cdp",)),
    _features("cudaCompressibleMemory"),
    _features("cudaTensorCoreGemm"),
    _features("dmmaTensorCoreGemm"),
    _features("globalToShmemAsyncCopy", args=("-wA=128", "-hA=128", "-wB=128", "-hB=128"),
              expect=PASS, note="128x128 matrices (default 1280x1280)"),
    # (it prints what each conditional node chose: the ELSE body, and a SWITCH value past
    # its bodies running none, must show)
    _features("graphConditionalNodes",
              expect=r"(?s)condition was true.*counter = 0\n.*condition was false.*"
                     r"set to 3\nGPU: Handle set to 3\nGPU: Hello from switchGraphKernelF.*"
                     r"set to 4\nGPU: Handle set to 4\nsimpleSwitchGraph: Complete"),
    _features("graphMemoryFootprint"),
    _features("graphMemoryNodes", expect=PASS),
    _features("immaTensorCoreGemm"),
    _features("jacobiCudaGraphs", expect=PASS),
    _features("memMapIPCDrv", sources=("memMapIpc.cpp", "../../../Common/helper_multiprocess.cpp"),
              images=(("memMapIpc_kernel.cu", "memMapIpc_kernel64.ptx"),)),
    _features("newdelete"),
    _features("ptxjit", sources=("ptxjit.cpp",),
              images=(("ptxjit_kernel.cu", "ptxjit_kernel64.ptx"),)),
    _features("simpleCudaGraphs"),
    _features("tf32TensorCoreGemm"),
    _features("warpAggregatedAtomicsCG", expect=PASS),
    # ---- 4_CUDA_Libraries (the two that use no library)
    Sample("conjugateGradientMultiBlockCG",
           "Samples/4_CUDA_Libraries/conjugateGradientMultiBlockCG", expect=PASS),
    Sample("lineOfSight", "Samples/4_CUDA_Libraries/lineOfSight", expect=PASS),
    # ---- 5_Domain_Specific
    _domain("BlackScholes", expect=PASS),
    _nvrtc(_domain("BlackScholes_nvrtc", expect=PASS)),
    _domain("FDTD3d", sources=("src/FDTD3d.cpp", "src/FDTD3dGPU.cu", "src/FDTD3dReference.cpp"),
            args=("-dimx=96", "-dimy=96", "-dimz=96", "-timesteps=1"),
            note="the smallest volume it takes (96^3), one step (default: sized to memory, 5)"),
    _domain("HSOpticalFlow"),
    _domain("NV12toBGRandResize"),
    _domain("SobolQRNG", args=("-vectors=10000", "-dimensions=10"),
            note="10000 vectors of 10 dimensions (default 100000 of 100)"),
    _domain("binomialOptions", expect=PASS),
    _nvrtc(_domain("binomialOptions_nvrtc", sources=("binomialOptions.cpp",
                                                      "binomialOptions_gold.cpp",
                                                      "binomialOptions_gpu.cpp"),
                   expect=PASS)),
    _domain("dwtHaar1D"),
    _domain("dxtc", expect=PASS),
    _domain("fastWalshTransform", expect=PASS),
    _domain("quasirandomGenerator"),
    _nvrtc(_domain("quasirandomGenerator_nvrtc", sources=("quasirandomGenerator.cpp",
                                                           "quasirandomGenerator_gold.cpp"))),
    _domain("stereoDisparity"),
    # ---- 6_Performance
    Sample("LargeKernelParameter", "Samples/6_Performance/LargeKernelParameter", expect=PASS),
    Sample("UnifiedMemoryPerf", "Samples/6_Performance/UnifiedMemoryPerf",
           args=("-kernel-iterations=1",), note="each kernel once (default 20 times)"),
    Sample("alignedTypes", "Samples/6_Performance/alignedTypes", expect=PASS),
    Sample("cudaGraphsPerfScaling", "Samples/6_Performance/cudaGraphsPerfScaling", expect=PASS),
    Sample("transpose", "Samples/6_Performance/transpose", args=("-dimX=256", "-dimY=256"),
           expect=PASS, note="256x256 (default 1024x1024)"),
    # ---- 7_libNVVM (libNVVM compiles NVVM IR to PTX in the program)
    Sample("simple", "Samples/7_libNVVM/simple", needs=("nvvm",)),
    Sample("ptxgen", "Samples/7_libNVVM/ptxgen", needs=("nvvm", "libdevice"),
           args=("test.ll", "-arch=compute_75")),
    Sample("uvmlite", "Samples/7_libNVVM/uvmlite", needs=("nvvm",),
           expect=r"The final value checked in the host",
           note="exits 0 without running when the device has no managed memory: "
                "its last line is the pass"),
    Sample("device-side-launch", "Samples/7_libNVVM/device-side-launch",
           needs=("nvvm", "cudadevrt-path")),
)

_GL = "graphics: OpenGL (X11, GL)"
_TEGRA = "Tegra only (8_Platform_Specific)"

# The checkout's other samples, and why each is not in the run (their READMEs'
# "Dependencies needed to build/run" and CMakeLists).
EXCLUDED: dict[str, str] = {
    "UnifiedMemoryStreams": "cuBLAS",
    "simpleCUDA2GL": _GL,
    "simpleMPI": "needs an MPI installation and mpirun (not part of CUDA)",
    "simpleP2P": "needs two GPUs (peer-to-peer copies)",
    "simpleTexture3D": _GL,
    "EGLStream_CUDA_CrossGPU": "graphics: EGL, and two GPUs",
    "EGLStream_CUDA_Interop": "graphics: EGL",
    "FunctionPointers": _GL,
    "MC_EstimatePiInlineP": "cuRAND",
    "MC_EstimatePiInlineQ": "cuRAND",
    "MC_EstimatePiP": "cuRAND",
    "MC_EstimatePiQ": "cuRAND",
    "MC_SingleAsianOptionP": "cuRAND",
    "boxFilter": _GL,
    "imageDenoising": _GL,
    "particles": _GL,
    "streamOrderedAllocationP2P": "needs two GPUs (peer-to-peer)",
    "bindlessTexture": _GL,
    "FilterBorderControlNPP": "NPP",
    "MersenneTwisterGP11213": "cuRAND",
    "batchCUBLAS": "cuBLAS",
    "boxFilterNPP": "NPP",
    "cannyEdgeDetectorNPP": "NPP",
    "conjugateGradient": "cuBLAS, cuSPARSE",
    "conjugateGradientCudaGraphs": "cuBLAS, cuSPARSE",
    "conjugateGradientMultiDeviceCG": "needs two GPUs (multi-device cooperative groups)",
    "conjugateGradientPrecond": "cuBLAS, cuSPARSE",
    "conjugateGradientUM": "cuBLAS, cuSPARSE",
    "cuSolverDn_LinearSolver": "cuSOLVER, cuBLAS, cuSPARSE",
    "cuSolverRf": "cuSOLVER, cuBLAS, cuSPARSE",
    "cuSolverSp_LinearSolver": "cuSOLVER, cuSPARSE",
    "cuSolverSp_LowlevelCholesky": "cuSOLVER, cuSPARSE",
    "cuSolverSp_LowlevelQR": "cuSOLVER, cuSPARSE",
    "cudaNvSci": "NvSci",
    "freeImageInteropNPP": "NPP",
    "histEqualizationNPP": "NPP",
    "jitLto": "nvJitLink (links to SASS only)",
    "matrixMulCUBLAS": "cuBLAS",
    "nvJPEG": "nvJPEG",
    "nvJPEG_encoder": "nvJPEG",
    "oceanFFT": f"{_GL}; cuFFT",
    "randomFog": f"{_GL}; cuRAND",
    "simpleCUBLAS": "cuBLAS",
    "simpleCUBLASXT": "cuBLAS",
    "simpleCUBLAS_LU": "cuBLAS",
    "simpleCUFFT": "cuFFT",
    "simpleCUFFT_2d_MGPU": "cuFFT",
    "simpleCUFFT_MGPU": "cuFFT",
    "simpleCUFFT_callback": "cuFFT",
    "watershedSegmentationNPP": "NPP",
    "Mandelbrot": _GL,
    "MonteCarloMultiGPU": "cuRAND",
    "SobelFilter": _GL,
    "bicubicTexture": _GL,
    "bilateralFilter": _GL,
    "convolutionFFT2D": "cuFFT",
    "fluidsGL": f"{_GL}; cuFFT",
    "marchingCubes": _GL,
    "nbody": _GL,
    "p2pBandwidthLatencyTest": "peer-to-peer only (measures copies between GPUs)",
    "postProcessGL": _GL,
    "recursiveGaussian": _GL,
    "simpleD3D11": "graphics: Direct3D (Windows)",
    "simpleD3D11Texture": "graphics: Direct3D (Windows)",
    "simpleD3D12": "graphics: Direct3D (Windows)",
    "simpleGL": _GL,
    "simpleVulkan": "graphics: Vulkan",
    "simpleVulkanMMAP": "graphics: Vulkan",
    "smokeParticles": _GL,
    "volumeFiltering": _GL,
    "volumeRender": _GL,
    "vulkanImageCUDA": "graphics: Vulkan",
    "cuda-c-linking": "needs LLVM's development package (the sample links LLVM)",
    "cuda-shared-memory": "NVVM IR inputs for ptxgen, no program of its own",
    "syscalls": "NVVM IR inputs for ptxgen, no program of its own",
    "EGLSync_CUDAEvent_Interop": _TEGRA,
    "cuDLAErrorReporting": _TEGRA,
    "cuDLAHybridMode": _TEGRA,
    "cuDLALayerwiseStatsHybrid": _TEGRA,
    "cuDLALayerwiseStatsStandalone": _TEGRA,
    "cuDLAStandaloneMode": _TEGRA,
    "cudaNvSciBufMultiplanar": _TEGRA,
    "cudaNvSciNvMedia": _TEGRA,
    "fluidsGLES": _TEGRA,
    "nbody_opengles": _TEGRA,
    "simpleGLES": _TEGRA,
    "simpleGLES_EGLOutput": _TEGRA,
}
# Folders under Samples/ that hold shared code, not samples.
NOT_SAMPLES = {"common", "utils", "Tegra"}


def by_name() -> dict[str, Sample]:
    return {s.name: s for s in SAMPLES}


def unlisted(checkout: Path) -> list[str]:
    """Sample folders of ``checkout`` that neither table names (a newer checkout's)."""
    known = set(by_name()) | set(EXCLUDED) | NOT_SAMPLES
    found = {p.name for p in (checkout / "Samples").glob("*/*") if p.is_dir()}
    found |= {p.name for p in (checkout / "Samples").glob("8_Platform_Specific/Tegra/*")
              if p.is_dir()}
    return sorted(found - known)
