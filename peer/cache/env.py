"""The cache's sizes from the environment, in MiB (fractions allowed; docs/cache.md)."""

from __future__ import annotations

import os

MIB = 1 << 20
# Bytes a client session keeps for references the server has not yet confirmed
# (for a resend on a miss). A program that uploads its weights one-way confirms
# nothing until its first wait, so this bounds what its second run can send as
# references: 2 GiB, what the server's disk probation keeps from a first run.
DEFAULT_HOLD = 2048 * MIB


def env_mib(name: str, default: int) -> int:
    """``$name`` MiB in bytes; ``default`` when unset, negative or not a number."""
    try:
        value = float(os.environ.get(name, "").strip())
    except ValueError:
        return default
    return int(value * MIB) if value >= 0 else default


def hold_cap() -> int:
    """GLEAM_CACHE_HOLD_MB: a client session's cap on bytes held for resends."""
    return env_mib("GLEAM_CACHE_HOLD_MB", DEFAULT_HOLD)
