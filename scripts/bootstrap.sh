#!/usr/bin/env bash
# Make .venv ready for one job and (re)install gleam when its sources changed.
# Sourced by scripts/main.sh (GLEAM_JOB=main) and scripts/test.sh (GLEAM_JOB=test);
# needs only python3 (3.11+) and gcc.
#
#   main: gleam and what the demo needs (numpy, NVIDIA's cuda.h), nothing else
#   test: also the test tools, mypy, the training extra (torch, CPU build), and
#         torch's CUDA build in .venv/torch-cuda for tests/test_torch_cuda.py
#
# gleam is installed as a regular (non-editable) package: its top-level folders
# map onto gleam.peer / gleam.discovery / gleam.plugins, which an editable install
# can only emulate with an import hook that setuptools warns about. A stamp of
# every installed input (Python, C, packaging) triggers a reinstall when one
# changes. GLEAM_EDITABLE=1 installs editable instead, for a quicker inner loop
# while changing Python code (setuptools then prints its editable-mode notes).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"
job="${GLEAM_JOB:-test}"

if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "gleam needs Python 3.11 or newer (found: $("$py" --version 2>&1)); set PYTHON=..." >&2
    exit 1
fi
command -v gcc >/dev/null || { echo "gleam needs gcc to build its native core" >&2; exit 1; }

case "$job" in
    main) extras="demo" ;;
    test) extras="test,train,host,demo" ;;
    *) echo "bootstrap.sh: GLEAM_JOB must be main or test (got '$job')" >&2; exit 2 ;;
esac

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv" >&2
    "$py" -m venv "$venv"
fi

editable="${GLEAM_EDITABLE:-0}"
# Everything pip would install from the tree; a changed hash means reinstall.
inputs="$(cd "$root" && git ls-files -co --exclude-standard -- pyproject.toml setup.py \
    cffi_build peer discovery plugins examples/cuda 2>/dev/null | sort)"
sources="$(cd "$root" && { echo "editable=$editable"; cat $inputs 2>/dev/null; } \
    | sha256sum | cut -c1-16)"
# .gleam-stamp: line 1 the sources' hash, line 2 the extras installed so far (pip
# never removes an extra's packages, so the test job's install covers the demo's).
stamp="$venv/.gleam-stamp"
have="$( { sed -n 2p "$stamp" 2>/dev/null || true; } | tr ',' '\n')"
missing="$(comm -23 <(tr ',' '\n' <<<"$extras" | sort) <(sort <<<"$have"))"
if [ "$(sed -n 1p "$stamp" 2>/dev/null)" != "$sources" ] || [ -n "$missing" ] \
    || ! "$venv/bin/python" -c 'import gleam.peer._native' 2>/dev/null; then
    echo "== installing gleam [$extras] and building its native core (a minute or two)" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    if [ "$job" = test ]; then
        # torch comes pinned to the CPU build this machine kind keeps on disk;
        # a bare "torch" would fetch a multi-GB CUDA build.
        "$venv/bin/python" -m pip install --quiet "torch==${GLEAM_TORCH_VERSION:-2.13.0}"
    fi
    if [ "$editable" = 1 ]; then
        "$venv/bin/python" -m pip install --quiet -e "$root[$extras]"
    else
        # pip always rebuilds and reinstalls a project given as a folder.
        "$venv/bin/python" -m pip install --quiet "$root[$extras]"
    fi
    all="$( { tr ',' '\n' <<<"$extras"; echo "$have"; } | grep -v '^$' | sort -u | paste -sd,)"
    printf '%s\n%s\n' "$sources" "$all" > "$stamp"
fi
if [ "$job" = test ]; then
    # PyTorch's CUDA build (cudart, cuBLAS, cuDNN 13 as wheels) in a folder of its
    # own, which only tests/test_torch_cuda.py puts on its programs' PYTHONPATH:
    # in .venv it would bring nvJitLink, with which numba-cuda links to SASS
    # that the host device cannot run (docs/cuda-forwarding.md, "numba-cuda").
    # About 5.4 GB, once; this machine kind keeps the release on disk.
    cuda_torch="${GLEAM_TORCH_CUDA_VERSION:-2.14.1}"
    if [ ! -e "$venv/torch-cuda/.gleam-$cuda_torch" ]; then
        echo "== installing torch $cuda_torch (CUDA build) into $venv/torch-cuda (a minute)" >&2
        rm -rf "$venv/torch-cuda"
        "$venv/bin/python" -m pip install --quiet --target "$venv/torch-cuda" \
            "torch==$cuda_torch"
        touch "$venv/torch-cuda/.gleam-$cuda_torch"
    fi
fi
export PATH="$venv/bin:$PATH"
