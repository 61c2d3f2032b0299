#!/usr/bin/env bash
# Download, on a machine with network, the wheels gleam needs to build and run on
# the GPU machine that scripts/gpu-check.sh runs on (no network there). What that
# machine already has (Python 3.12, torch, torchvision, transformers, CuPy,
# cuda-python, numpy) is not downloaded: gleam's own dependencies and its build
# requirements are, with theirs, for CPython 3.12 (GPU_PYTHON) on x86-64 manylinux.
#
#   scripts/gpu-wheels.sh [DIR]     # default: .gpu-wheels in the checkout (ignored by git)
#
# GPU_PYTHON=3.11 downloads for another CPython (the GPU machine's is 3.12).
#
# gpu-check.sh installs from that folder with `pip --no-index` when it exists.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.gpu-wheels}"
py="${PYTHON:-python3}"
target="${GPU_PYTHON:-3.12}"
abi="cp${target/./}"
mkdir -p "$dest"

# pyproject's [project] dependencies and [build-system] requires, read from the
# file so that this list cannot drift from it.
mapfile -t wants < <("$py" - "$root/pyproject.toml" <<'PY'
import sys, tomllib
doc = tomllib.load(open(sys.argv[1], "rb"))
for req in doc["project"]["dependencies"] + doc["build-system"]["requires"]:
    print(req)
PY
)

platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64 \
         manylinux_2_34_x86_64 manylinux_2_31_x86_64; do
    platforms+=(--platform "$p")
done
"$py" -m pip download --quiet --only-binary=:all: --python-version "$target" --implementation cp \
    --abi "$abi" --abi abi3 --abi none "${platforms[@]}" --platform any -d "$dest" "${wants[@]}"
echo "gpu-wheels: $(ls "$dest" | wc -l) wheels in $dest ($(du -sh "$dest" | cut -f1))"
