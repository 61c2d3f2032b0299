#!/usr/bin/env bash
# Make .venv ready: create it, install gleam editable with its test extra,
# and (re)build the native core when the build inputs changed.
# Sourced by scripts/main.sh and scripts/test.sh; needs only python3 (3.11+) and gcc.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"

if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "gleam needs Python 3.11 or newer (found: $("$py" --version 2>&1)); set PYTHON=..." >&2
    exit 1
fi
command -v gcc >/dev/null || { echo "gleam needs gcc to build its native core" >&2; exit 1; }

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv" >&2
    "$py" -m venv "$venv"
fi

# Everything that changes what pip would build; a new stamp means reinstall.
stamp="$(cd "$root" && cat pyproject.toml setup.py cffi_build/*.py cffi_build/*.cdef \
    cffi_build/src/* cffi_build/include/* cffi_build/interposer/* 2>/dev/null | sha256sum | cut -c1-16)"
if [ "$(cat "$venv/.gleam-stamp" 2>/dev/null)" != "$stamp" ] \
    || ! "$venv/bin/python" -c 'import gleam.peer._native' 2>/dev/null; then
    echo "== installing gleam (editable) and building the native core" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    # torch comes pinned to the CPU build this machine kind keeps on disk;
    # a bare "torch" would fetch a multi-GB CUDA build.
    "$venv/bin/python" -m pip install --quiet "torch==${GLEAM_TORCH_VERSION:-2.13.0}"
    "$venv/bin/python" -m pip install --quiet -e "$root[test,train,host]"
    echo "$stamp" > "$venv/.gleam-stamp"
fi
export PATH="$venv/bin:$PATH"
