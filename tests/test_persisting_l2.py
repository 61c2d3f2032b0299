"""Persisting L2 and access policy windows through two agents (cuda-samples'
simpleAttributes): the host device reports an 8.0 device's persisting and
window limits, and every call that takes them checks its values as CUDA
documents (docs/cuda-forwarding.md, "Persisting L2 and access policy windows").

examples/cuda/runtime/l2_persist.cu, built by nvcc with static and shared
cudart, runs through ``gleam-peer run`` against a server on the host backend
running its kernels from PTX, and prints what each call answered. The records the
interposer forwards are fuzzed as the executor receives them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native

from .cuda_mesh import ptx_mesh, run_through  # noqa: F401 (a fixture)
from .cuda_session import STREAM, Session, mint, rec
from .test_cuda_runtime import static_and_shared

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "cuda" / "runtime" / "l2_persist.cu"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return static_and_shared(SOURCE, tmp_path_factory)


@pytest.mark.parametrize("kind", ["static", "shared"])
def test_persisting_limits_windows_and_their_checks(ptx_mesh, program, kind):  # noqa: F811
    client, _ = ptx_mesh
    done, verdict = run_through(client, program[kind])
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict["failed"] == 0 and verdict["wrong"] == 0, done.stderr
    # An 8.0 device's limits (peer/cuda/server/host_identity.py), as cudaDeviceProp has them.
    assert verdict["persisting_max"] == 30 << 20
    assert verdict["window_max"] == 134_213_632
    assert verdict["l2"] == 40 << 20
    # cudaLimitPersistingL2CacheSize is a hint, clamped to the device's maximum.
    assert verdict["limit"] == [30 << 20, 30 << 20, 1 << 20]
    # hitRatio above 1, below 0 or NaN; a window past the device's maximum; missProp
    # PERSISTING; a launch attribute's hitRatio of 2.
    assert verdict["refused"] == ["cudaErrorInvalidValue"] * 6
    # A refused window leaves the one set before; a fresh stream has none; a copy has it.
    assert verdict["kept"] and verdict["fresh_bytes"] == 0 and verdict["copied"]
    assert verdict["sync_policy"] == 3  # cudaSyncPolicyYield, read back
    assert "access policy window refused" in done.stderr


# The forwarded hints, as untrusted records reach the executor: whatever the attribute
# id, the payload and the stream, the host device answers success or an error the next
# waiting call carries, and never reads a payload of the wrong size.
INVALID_VALUE, INVALID_HANDLE = 1, 400


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    backend = native.HostBackend({}, memory_limit=1 << 26)
    s = Session(backend)
    s.context()
    yield s
    s.x.close()
    backend.close()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attr=st.integers(min_value=0, max_value=(1 << 64) - 1),
       payload=st.one_of(st.binary(min_size=64, max_size=64), st.binary(max_size=96)),
       known=st.booleans())
def test_forwarded_stream_hints_from_the_wire_are_checked(session, attr, payload, known):
    stream = mint(STREAM)
    assert session.run(rec("cuStreamCreate", stream, 0)) is None
    target = stream if known else mint(STREAM)
    assert session.run(rec("glStreamSetAttribute", target, attr, payload=payload)) is None
    assert session.run(rec("glStreamCopyAttributes", stream, target)) is None
    assert session.run(rec("glCtxResetPersistingL2Cache")) is None
    result, deferred = session.sync()
    assert result == 0
    if not known:
        assert deferred == INVALID_HANDLE
    elif len(payload) != 64:
        assert deferred == INVALID_VALUE
    else:
        assert deferred == 0
    assert session.run(rec("cuStreamDestroy", stream)) is None
    assert session.sync() == (0, 0)
