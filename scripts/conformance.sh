#!/usr/bin/env bash
# The conformance run: NVIDIA's cuda-samples (from a checkout you name) and
# numba-cuda's own tests, run unchanged through two gleam agents on loopback
# (a client without a device and a host-backend server). Bootstraps .venv with
# the test extra (numba-cuda, NVRTC/NVVM, numba's test dependencies), then
# passes every argument to `gleam-peer conformance` (see --help;
# docs/conformance.md has the results and the figures).
#
#   scripts/conformance.sh --samples ~/cuda-samples --numba
set -euo pipefail
GLEAM_JOB=test source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec gleam-peer conformance "$@"
