#!/usr/bin/env bash
# Regenerate the shipped images of the example kernels from examples/cuda/kernels.cu:
#   peer/cuda/ptx/kernels.ptx     PTX for compute_80 (any newer driver JIT-compiles it)
#   peer/cuda/ptx/kernels.fatbin  SASS for sm_80 only, no PTX, so the path that cannot
#                                 read parameters from PTX (func_param_info) gets exercised
#   peer/cuda/ptx/tma_tile.ptx    PTX for compute_90, from examples/cuda/tma_tile.cu (a TMA
#                                 kernel: examples/cuda/tensor_maps.py runs it on 9.0+ GPUs)
# They are committed because a user machine may have no nvcc.
# Usage: scripts/gen-example-kernels.sh [OUTDIR]   (default: peer/cuda/ptx)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/peer/cuda/ptx}"
src="$root/examples/cuda/kernels.cu"
mkdir -p "$out"
# -lineinfo/-G stay off: the PTX must not embed paths or dates, so it reproduces exactly.
nvcc -ptx -arch=compute_80 -o "$out/kernels.ptx" "$src"
nvcc -fatbin -gencode arch=compute_80,code=sm_80 -o "$out/kernels.fatbin" "$src"
nvcc -ptx -arch=compute_90 -o "$out/tma_tile.ptx" "$root/examples/cuda/tma_tile.cu"
echo "wrote $out/kernels.ptx $out/kernels.fatbin $out/tma_tile.ptx"
