#!/usr/bin/env bash
# The main job: bootstrap, then run the gleam agent in the foreground
# (state in ./state unless GLEAM_STATE_DIR is set). Extra arguments go to
# `gleam-peer up`, e.g. ./scripts/main.sh --peer 192.0.2.7:47470
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
export GLEAM_STATE_DIR="${GLEAM_STATE_DIR:-$root/state}"
exec gleam-peer up "$@"
