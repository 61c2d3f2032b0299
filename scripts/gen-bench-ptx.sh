#!/usr/bin/env bash
# Regenerate peer/bench/ptx_kernels.ptx (the kernels of `gleam-peer bench ptx`) from
# peer/bench/ptx_kernels.cu: nvcc's default arch at -O3, as a user's build would be.
# Committed because a user machine may have no nvcc.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nvcc -ptx -O3 -o "$root/peer/bench/ptx_kernels.ptx" "$root/peer/bench/ptx_kernels.cu"
echo "wrote $root/peer/bench/ptx_kernels.ptx"
