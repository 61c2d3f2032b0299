#!/usr/bin/env bash
# The main job: bootstrap, then run `gleam-peer demo` — a loopback mesh of three
# agents (one without a device, two host-backend servers of different speed)
# that runs an unmodified CUDA program through gleam twice, shows the live
# status view and a summary, and removes everything it started. Extra
# arguments go to `gleam-peer demo` (see --help). To run a real agent instead:
# .venv/bin/gleam-peer up
set -euo pipefail
GLEAM_JOB=main source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec gleam-peer demo "$@"
