#!/usr/bin/env bash
# The test job: bootstrap, lint, type-check, then the whole test suite. Extra
# arguments go to pytest.
set -euo pipefail
GLEAM_JOB=test source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$root"
echo "== ruff" >&2
ruff check peer discovery plugins cffi_build tests examples
echo "== mypy" >&2
scripts/typecheck.sh
echo "== pytest" >&2
exec python -m pytest -q "$@"
