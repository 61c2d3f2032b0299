#!/usr/bin/env bash
# Regenerate the PTX interpreter's test corpus from tests/ptx_corpus/*.cu:
#   NAME.ptx     nvcc -ptx -O3 at nvcc's default arch (compute_75 for nvcc 12/13)
#   NAME.fatbin  nvcc's default fatbin: sm_75 SASS plus compressed compute_75 PTX, the image
#                most programs built with plain `nvcc x.cu` carry
# Both are committed because CI may have no nvcc; tests/test_ptx_corpus.py rebuilds them in
# a temporary folder when nvcc is present and checks they still match.
# Usage: scripts/gen-ptx-corpus.sh [OUTDIR]   (default: tests/ptx_corpus)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/ptx_corpus"
out="${1:-$src}"
mkdir -p "$out"
# No -G/-lineinfo: the outputs must not embed paths or dates, so they reproduce exactly.
for cu in "$src"/*.cu; do
    name="$(basename "$cu" .cu)"
    nvcc -ptx -O3 -o "$out/$name.ptx" "$cu"
    nvcc -fatbin -O3 -o "$out/$name.fatbin" "$cu"
done
echo "wrote .ptx and .fatbin of $(ls "$src"/*.cu | wc -l) sources to $out"
