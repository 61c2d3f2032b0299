#!/usr/bin/env bash
# mypy over gleam's three top-level folders under their installed names.
# The repository keeps peer/, discovery/ and plugins/ at the top (setuptools maps
# them onto gleam.peer, gleam.discovery, gleam.plugins); mypy cannot follow that
# mapping, so this builds a tree of symlinks with the installed layout under
# build/typecheck/ and checks that. Configuration: [tool.mypy] in pyproject.toml.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tree="$root/build/typecheck"
rm -rf "$tree"
mkdir -p "$tree/gleam"
for part in peer discovery plugins; do
    ln -s "$root/$part" "$tree/gleam/$part"
done
cd "$tree"
exec "${MYPY:-mypy}" --config-file "$root/pyproject.toml" --cache-dir "$root/build/mypy-cache" \
    -p gleam.peer -p gleam.discovery -p gleam.plugins "$@"
