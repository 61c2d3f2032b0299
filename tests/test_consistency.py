"""Context consistency (docs/consistency.md): the journal, migration and failover.

End to end with real agents on loopback: the accumulate example keeps its
state in device memory across steps and waits on stdin between them, so a
server is killed (SIGKILL) or a session moved at a known point of the run.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gleam.peer.bench.gated import GatedRun as _GatedRun
from gleam.peer.bench.gated import verdict
from gleam.peer.cuda.client import checkpoint
from gleam.peer.cuda.client.journal import Entry, Journal
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.cuda.wire.calls import call_ids
from gleam.peer.localmesh import LocalAgent, LocalMesh, wait_for
from gleam.peer.records import CallRecord, encode_batch
from tests.cuda_arrays import ARRAY
from tests.cuda_session import mint

STEPS = 8
KILL_AFTER = 2  # steps done before the server is killed or the session moved


class GatedRun(_GatedRun):
    """accumulate through ``gleam-peer run``, one step per line written to its stdin."""

    def __init__(self, client: LocalAgent, binary: Path, peer: str, *extra: str) -> None:
        super().__init__(client.state.path, binary, KERNELS_PTX, STEPS, peer, *extra)


def _servers(mesh: LocalMesh, *names: str, env: dict[str, str] | None = None
             ) -> list[LocalAgent]:
    first = mesh.start(names[0], extra=["--backend", "host"], env=env)
    key = first.state.mesh_key()
    return [first] + [mesh.start(n, mesh_key=key, extra=["--backend", "host"], env=env)
                      for n in names[1:]]


def _client(mesh: LocalMesh, servers: list[LocalAgent], backend: str = "none",
            env: dict[str, str] | None = None) -> LocalAgent:
    client = mesh.start("client", mesh_key=servers[0].state.mesh_key(),
                        peers=[f"127.0.0.1:{s.port}" for s in servers],
                        extra=["--backend", backend], env=env)
    for server in servers:
        wait_for(lambda s=server: s.node_id in client.authenticated_peers(), 20, "the links")

        def advertised(s: LocalAgent = server) -> bool:
            peers = client.status()["peers"]
            return any((p.get("extra") or {}).get("cuda", {}).get("backend") == "host"
                       for p in peers if p["id"] == s.node_id)

        wait_for(advertised, 20, f"{server.name}'s cuda advert")
    return client


@contextlib.contextmanager
def _mesh(tmp_path: Path, *names: str, backend: str = "none",
          env: dict[str, str] | None = None
          ) -> Iterator[tuple[LocalMesh, list[LocalAgent], LocalAgent]]:
    """Host-backend servers ``names`` and a client agent linked to all of them."""
    mesh = LocalMesh(tmp_path)
    try:
        servers = _servers(mesh, *names)
        yield mesh, servers, _client(mesh, servers, backend=backend, env=env)
    finally:
        mesh.close()


def _session(client: LocalAgent) -> dict:
    rows = wait_for(lambda: client.request("cuda_sessions")["client"], 20, "the session")
    assert len(rows) == 1
    return rows[0]


def _finished(client: LocalAgent, session: str) -> dict:
    """The client agent's record of ``session`` once it has ended."""
    def ended() -> list[dict]:
        return [r for r in client.request("cuda_sessions")["finished"] if r["id"] == session]

    return wait_for(ended, 20, "the session's end")[-1]


def _move_to_beta(mesh: LocalMesh, alpha: LocalAgent, client: LocalAgent, session: str,
                  move: str) -> None:
    """Moves the session from alpha to beta: alpha killed (failover) or a migration."""
    if move == "failover":
        mesh.stop(alpha, signal.SIGKILL)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "gleam.peer", "migrate", session, "--to", "beta",
             "--state-dir", str(client.state.path)], capture_output=True, text=True,
            timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    wait_for(lambda: _session(client)["peer"] == "beta", 30, "the move")


def _undisturbed(client: LocalAgent, binary: Path, peer: str, *extra: str) -> list[str]:
    run = GatedRun(client, binary, peer, *extra)
    lines = run.steps(KILL_AFTER + 1)
    rc, rest, err = run.finish()
    assert rc == 0, err
    return lines + rest


@pytest.mark.parametrize("to_own_backend", [False, True], ids=["other-peer", "own-backend"])
def test_a_server_killed_mid_run_fails_over_and_the_results_are_right(
        tmp_path, accumulate, to_own_backend):
    names = ["alpha"] if to_own_backend else ["alpha", "beta"]
    backend = "host" if to_own_backend else "none"
    with _mesh(tmp_path, *names, backend=backend) as (mesh, servers, client):
        run = GatedRun(client, accumulate, "alpha")
        before = run.steps(KILL_AFTER + 1)
        session = _session(client)
        assert session["peer"] == "alpha"
        mesh.stop(servers[0], signal.SIGKILL)
        # The move happens while the program waits at its gate: every reply of the
        # replay is one the program already had, and is dropped.
        moved = wait_for(lambda: [r for r in client.request("cuda_sessions")["client"]
                                  if r["failovers"] == 1], 30, "the failover")
        assert moved[0]["peer"] == ("client" if to_own_backend else "beta")
        rc, rest, err = run.finish()
        assert rc == 0, err
        result = verdict(rest)
        assert result["ok"] and result["mismatches"] == 0 and result["steps"] == STEPS
        assert len(before + rest) == STEPS + 1
        row = _finished(client, session["id"])
        assert row["failovers"] == 1 and row["moves"][0]["kind"] == "failover"
        # At least the waiting copy of each step done before the kill was replayed.
        assert row["moves"][0]["batches"] > KILL_AFTER + 1


def test_a_server_killed_during_a_waiting_call_gives_that_call_its_answer(tmp_path, accumulate):
    with _mesh(tmp_path, "alpha", "beta") as (mesh, servers, client):
        reference = _undisturbed(client, accumulate, "alpha")
        run = GatedRun(client, accumulate, "alpha")
        lines = run.steps(KILL_AFTER + 1)
        # Frozen, alpha keeps its connections but answers nothing: the next step's
        # copy back is in flight when it dies.
        servers[0].process.send_signal(signal.SIGSTOP)
        run.release()
        session = wait_for(lambda: _session(client)["in_flight"] == 1 and _session(client), 20,
                           "the copy back to wait")
        mesh.stop(servers[0], signal.SIGKILL)
        lines.append(run.line())
        rc, rest, err = run.finish()
        assert rc == 0, err
        assert lines + rest == reference
        assert _finished(client, session["id"])["failovers"] == 1


def test_a_migration_mid_run_gives_the_same_results_as_none(tmp_path, accumulate):
    with _mesh(tmp_path, "alpha", "beta") as (_, servers, client):
        reference = _undisturbed(client, accumulate, "alpha")
        run = GatedRun(client, accumulate, "alpha")
        lines = run.steps(KILL_AFTER + 1)
        session = _session(client)["id"]

        def migrate(to: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "gleam.peer", "migrate", session[:8], "--to", to,
                 "--state-dir", str(client.state.path)],
                capture_output=True, text=True, timeout=120)

        # A refusal is one line on stderr (README, "Exit status").
        refused = migrate("alpha")
        assert refused.returncode == 1
        assert refused.stderr == "gleam-peer: not moved: the session is already served by alpha\n"
        refused = migrate("nowhere")
        assert refused.returncode == 1 and "no peer nowhere" in refused.stderr
        done = migrate("beta")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"moved session {session} from alpha to beta" in done.stdout
        assert _session(client)["peer"] == "beta"
        # `status --json` shows it too.
        shown = [r for r in client.status()["sessions"] if r["id"] == session]
        assert shown[0]["migrations"] == 1 and shown[0]["journal_bytes"] > 0
        assert shown[0]["moves"][0]["to"] == "beta"
        rc, rest, err = run.finish()
        assert rc == 0, err
        assert lines + rest == reference
        row = _finished(client, session)
        assert row["migrations"] == 1 and row["failovers"] == 0 and row["peer"] == "beta"
        # The old server let go of its side.
        wait_for(lambda: not servers[0].request("cuda_sessions")["served"], 20,
                 "alpha to close the moved session")


@pytest.mark.parametrize("move", ["failover", "migration"])
def test_after_checkpoints_a_moved_session_still_gives_the_same_results(
        tmp_path, accumulate, move):
    # A step journals ~0.26 MiB: with a 1.5 MiB bound a checkpoint comes every
    # few steps, and the journal never holds the whole run. "missing": the error
    # of a missing kernel, reported once at the start, is not reported again
    # after the move (the checkpoint dropped the wait that had taken it). "vars":
    # a kernel counts the steps in a module variable (a __device__ global), which
    # lives outside the session's memory: the checkpoint keeps its contents and
    # the move restores them, so the count goes on (the program checks it).
    env = {"GLEAM_JOURNAL_MB": "1.5"}
    with _mesh(tmp_path, "alpha", "beta", env=env) as (mesh, servers, client):
        reference = _undisturbed(client, accumulate, "alpha", "missing", "vars")
        run = GatedRun(client, accumulate, "alpha", "missing", "vars")
        lines = run.steps(STEPS - 2)
        row = _session(client)
        assert row["checkpoints"] >= 1 and row["movable"], row
        assert row["journal_bytes"] < 1.5 * (1 << 20)
        # The snapshot holds the two live buffers (2 x 256 KiB) and the count's
        # (4 bytes), not the uploads, and the module variable (4 bytes).
        assert row["snapshot_bytes"] == 2 * 4 * (1 << 16) + 4 + 4
        _move_to_beta(mesh, servers[0], client, row["id"], move)
        rc, rest, err = run.finish()
        assert rc == 0, err
        assert lines + rest == reference
        finished = _finished(client, row["id"])
        assert finished[move + "s"] == 1
        # Only what the last checkpoint left and the steps since were replayed.
        assert finished["moves"][0]["batches"] < 3 * (STEPS - 2)


@pytest.fixture(scope="module")
def texture_steps(tmp_path_factory) -> Path:
    """tests/ptx_textures/texture_steps.cu: state in CUDA arrays, read through texture
    objects and written through surface objects, across gated steps."""
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = tmp_path_factory.mktemp("bin") / "texture_steps"
    src = Path(__file__).parent / "ptx_textures" / "texture_steps.cu"
    subprocess.run([nvcc, "-o", str(out), str(src)], check=True, capture_output=True,
                   timeout=300)
    return out


@pytest.mark.parametrize("move", ["failover", "migration"])
def test_arrays_textures_and_surfaces_move_with_their_session(tmp_path, texture_steps, move):
    """On the host device an array's bytes are session memory and a texture or surface
    object's value is its minted handle, so a session that holds them moves between
    host devices, after checkpoints too: the same checksums as a run that never moved."""
    env = {"GLEAM_JOURNAL_MB": "0.25"}  # a checkpoint after the fourth step
    with _mesh(tmp_path, "alpha", "beta", env=env) as (mesh, servers, client):
        reference = _undisturbed(client, texture_steps, "alpha")
        run = GatedRun(client, texture_steps, "alpha")
        lines = run.steps(STEPS - 2)
        row = _session(client)
        assert row["checkpoints"] >= 1 and row["movable"], row
        # The snapshot holds the sums (8 KiB), the bias (32 KiB) and both arrays' bytes.
        assert row["snapshot_bytes"] == 8192 + 32768 + 2 * 8192
        _move_to_beta(mesh, servers[0], client, row["id"], move)
        rc, rest, err = run.finish()
        assert rc == 0, err
        assert lines + rest == reference
        assert _finished(client, row["id"])[move + "s"] == 1


def test_a_refused_migration_leaves_the_session_running_where_it_was(tmp_path, accumulate):
    with _mesh(tmp_path, "alpha", "beta") as (_, _, client):
        run = GatedRun(client, accumulate, "alpha", "global")
        run.steps(KILL_AFTER + 1)
        session = _session(client)["id"]
        done = subprocess.run(
            [sys.executable, "-m", "gleam.peer", "migrate", session, "--to", "beta", "--json",
             "--state-dir", str(client.state.path)], capture_output=True, text=True, timeout=120)
        answer = json.loads(done.stdout)
        assert done.returncode == 1 and not answer["moved"]
        assert "cuModuleGetGlobal cannot be replayed" in answer["reason"]
        assert _session(client)["peer"] == "alpha"
        rc, rest, err = run.finish()
        assert rc == 0 and verdict(rest)["ok"], err
        assert _finished(client, session)["migrations"] == 0


def test_without_another_server_the_program_gets_the_error_and_the_line(tmp_path, accumulate):
    with _mesh(tmp_path, "alpha") as (mesh, servers, client):
        run = GatedRun(client, accumulate, "alpha")
        run.steps(KILL_AFTER + 1)
        mesh.stop(servers[0], signal.SIGKILL)
        rc, rest, err = run.finish()
        assert rc != 0 and not verdict(rest)
        lost = [ln for ln in err.splitlines() if ln.startswith("gleam: lost the CUDA server:")]
        assert len(lost) == 1 and "no other server to move the session to" in lost[0], err
        assert "CUDA_ERROR_DEVICE_UNAVAILABLE" in err


def test_a_full_journal_or_an_unreplayable_call_gives_the_error_and_the_line(
        tmp_path, accumulate):
    # Three steps of accumulate journal ~0.8 MiB: 0.5 MiB is passed mid-run.
    env = {"GLEAM_JOURNAL_MB": "0.5"}
    with _mesh(tmp_path, "alpha", "beta", env=env) as (mesh, servers, client):
        full = GatedRun(client, accumulate, "alpha")
        full.steps(KILL_AFTER + 1)
        unreplayable = GatedRun(client, accumulate, "alpha", "global")
        unreplayable.steps(KILL_AFTER + 1)
        rows = client.request("cuda_sessions")["client"]
        assert sorted(r["movable"] for r in rows) == [False, False]
        mesh.stop(servers[0], signal.SIGKILL)
        # Full: the journal passed its bound, or the live memory a checkpoint
        # would keep is already more than it keeps (whichever comes first).
        full_why = ("the journal passed its bound (0.5 MiB, GLEAM_JOURNAL_MB)",
                    "is more than the journal keeps (0.5 MiB, GLEAM_JOURNAL_MB)")
        unreplayable_why = ("cuModuleGetGlobal cannot be replayed",)
        for run, whys in ((full, full_why), (unreplayable, unreplayable_why)):
            rc, _rest, err = run.finish()
            lost = [ln for ln in err.splitlines() if ln.startswith("gleam: lost the CUDA server:")]
            assert rc != 0 and len(lost) == 1 and any(w in lost[0] for w in whys), err
            assert "CUDA_ERROR_DEVICE_UNAVAILABLE" in err


# ------------------------------------------------------------------ the journal itself


def _envelope(records: list[CallRecord]) -> memoryview:
    batch = encode_batch(records)
    return memoryview(bytearray(16) + batch)


def test_the_journal_keeps_batches_until_its_bound_then_nothing():
    ids = call_ids()
    ctx = mint(1)
    one_way = _envelope([CallRecord(ids["glCtxSetCurrent"], (ctx,), oneway=True)])
    waiting = _envelope([CallRecord(ids["cuCtxSynchronize"], ())])
    journal = Journal(limit=len(one_way) + len(waiting))
    assert journal.add(one_way, 16) is False
    assert journal.add(waiting, 16) is True
    assert journal.row()["journal_batches"] == 2 and journal.broken is None
    journal.add(one_way, 16)
    assert journal.broken is not None and "passed its bound" in journal.broken
    assert journal.entries == [] and journal.bytes == 0 and journal.batches == 3


def test_a_checkpoint_keeps_the_state_and_the_live_allocations():
    ids = call_ids()
    ctx, p, q = mint(1), 0x7000_0000_0000, 0x7000_0010_0000
    entries = [
        Entry(_envelope([CallRecord(ids["cuCtxCreate"], (ctx, 0, 0), oneway=True),
                         CallRecord(ids["glCtxSetCurrent"], (ctx,), oneway=True),
                         CallRecord(ids["glMemAlloc"], (p, 4096), oneway=True),
                         CallRecord(ids["glMemAlloc"], (q, 256), oneway=True),
                         CallRecord(ids["cuMemsetD8"], (p, 7, 4096), oneway=True)]), False),
        Entry(_envelope([CallRecord(ids["glMemFree"], (q,), oneway=True),
                         CallRecord(ids["glMemcpyDtoH"], (p, 16, 0))]), True),
        Entry(_envelope([CallRecord(ids["cuCtxSynchronize"], ())]), True),
    ]
    built = checkpoint.compact(entries)
    state, live = built.state, built.live
    assert live == {p: 4096} and built.code == []
    # The memset, the copy and the synchronisation are gone; the rest is kept in order.
    assert [e.waits for e in state] == [False, False]
    assert state[0].envelope.nbytes < entries[0].envelope.nbytes
    assert list(checkpoint.chunks({p: checkpoint.CHUNK + 5})) == [
        (p, checkpoint.CHUNK), (p + checkpoint.CHUNK, 5)]
    writes = checkpoint.write_entries([(p, bytes(4096)), (q, b"x" * 256)])
    assert len(writes) == 1 and not writes[0].waits
    # After the state, one wait takes any error a kept call leaves deferred; its reply,
    # like those of waiting state records, is counted as already answered.
    folded, answered = checkpoint.fold(state, [(p, b"y" * 4096)])
    assert [e.waits for e in folded] == [False, False, True, False] and answered == 1


def test_an_unreplayable_call_or_a_malformed_batch_breaks_the_journal():
    ids = call_ids()
    journal = Journal(limit=1 << 20)
    journal.add(_envelope([CallRecord(ids["cuModuleGetGlobal"], (mint(2), 0),
                                      payload=b"g\0")]), 16)
    assert journal.broken is not None and "cuModuleGetGlobal" in journal.broken
    tensor_map = Journal(limit=1 << 20)
    tensor_map.add(_envelope([CallRecord(ids["glTensorMapEncode"], (312,),
                                         payload=bytes(312))]), 16)
    assert tensor_map.broken is not None and "a tensor map" in tensor_map.broken
    # A GPU's arrays and texture objects live in its driver; the host device's arrays
    # are session memory and its texture objects' values are the minted handles.
    desc = bytes(40)
    for backend, broken in (("cuda", True), ("host", False)):
        arrays = Journal(limit=1 << 20, backend=backend)
        arrays.add(_envelope([CallRecord(ids["glArrayCreate"], (mint(ARRAY), 40, 0), payload=desc,
                                         oneway=True)]), 16)
        assert (arrays.broken is not None) is broken, backend
        assert not broken or "a GPU's CUDA array" in str(arrays.broken)
        textures = Journal(limit=1 << 20, backend=backend)
        textures.add(_envelope([CallRecord(ids["glTexObjectCreate"], (168,),
                                           payload=bytes(168))]), 16)
        assert (textures.broken is not None) is broken, backend
    garbage = Journal(limit=1 << 20)
    garbage.add(memoryview(bytearray(16) + b"not a batch at all, no"), 16)
    assert garbage.broken == "the program sent a malformed batch"
    assert Journal(limit=0).broken is not None


# ------------------------------------------------------------------ hostile range requests


async def test_bad_range_requests_are_refused_and_the_server_serves_on(agents, mesh_key):
    from gleam.peer.addresses import PeerAddress
    from gleam.peer.cuda.client.opening import OpenFailed, open_remote
    from gleam.peer.cuda.forwarding import CudaForwarding

    from .conftest import wait_until

    server = await agents.start("srv", mesh_key, backend="host")
    client = await agents.start("cli", mesh_key, backend="none",
                                peers=[PeerAddress("127.0.0.1", server.listen_port)])
    await wait_until(lambda: server.node_id in client.links, timeout=10)
    await wait_until(lambda: server.components.get(CudaForwarding).backend is not None,
                     timeout=30)
    fw, link = client.components.get(CudaForwarding), client.links[server.node_id]
    first = await open_remote(fw, link, 1, "t")
    base, size = first.va_base, first.va_size
    hostile = {
        (1, 1 << 20): "bad address range request",               # not 64 KiB aligned
        (1 << 47, 1 << 30): "bad address range request",         # above user space
        (base, 0): "bad address range request",                  # empty
        (2**64 - (1 << 16), 1 << 20): "bad address range request",  # wraps around
        (1 << 30, 1 << 41): "bad address range request",         # larger than 1 TiB
        (base, size): "requested address",                       # in use: the first session's
    }
    for i, (va, why) in enumerate(hostile.items()):
        with pytest.raises(OpenFailed) as refused:
            await open_remote(fw, link, 100 + i, "t", va)
        assert "srv refused" in str(refused.value) and why in str(refused.value), refused
    # The server is unharmed: the next ordinary session opens on the same link.
    again = await open_remote(fw, link, 2, "t")
    assert again.va_size > 0 and not link.closed


def test_the_cuda_backend_reserves_the_range_asked_for_or_refuses(tmp_path):
    """With the stand-in driver of test_cuda_executor (it honours address hints as
    NVIDIA's does): a new range lies in the band, a requested free range is had,
    a range in use is refused with the reason."""
    import shutil

    from gleam.peer.cuda.server import native

    from .stand_in_driver import build_stand_in

    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the stand-in driver")
    so, _ = build_stand_in(tmp_path, "", "")
    be = native.CudaBackend(str(so))
    first = native.ExecSession(be, 1 << 24)
    assert 16 << 40 <= first.va_base < 80 << 40  # the band (cffi_build/src/mem/vaband.h)
    with pytest.raises(OSError, match="cannot reserve the requested address range"):
        native.ExecSession(be, first.va_size, first.va_base)
    base, size = first.va_base, first.va_size
    first.close()
    again = native.ExecSession(be, size, base)
    assert (again.va_base, again.va_size) == (base, size)
    with pytest.raises(OSError, match="bad address range request"):
        native.ExecSession(be, size + 512, base)  # not a 64 KiB multiple
    again.close()
    be.close()


def test_live_memory_beyond_the_journal_makes_the_session_unmovable_not_slow(tmp_path):
    """A checkpoint's snapshot holds the live device memory: when that alone passes
    what the journal keeps, the session runs on unmovable (one decision), instead
    of reading the memory back at every batch."""
    from gleam.peer.cuda.examples import build_example
    from tests.cuda_mesh import run_through

    binary = build_example("bench_calls", tmp_path / "bin")
    env = {"GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX)}
    # The client agent's journal bound comes from its own environment.
    with _mesh(tmp_path / "mesh", "alpha", env={"GLEAM_JOURNAL_MB": "8"}) as (_m, _s, client):
        done, result = run_through(client, binary, "h2d", 32 << 20, 4 << 20, env=env)
        assert done.returncode == 0, done.stderr
        row = wait_for(lambda: client.request("cuda_sessions")["finished"], 20, "the end")[-1]
    assert result["bytes"] == 32 << 20
    assert row["checkpoints"] == 0 and not row["movable"]
    assert "live device memory" in row["not_movable_because"]


def test_a_checkpoint_larger_than_the_journal_keeps_breaks_it_at_once():
    ids = call_ids()
    journal = Journal(limit=4096)
    big = Entry(_envelope([CallRecord(ids["cuCtxSynchronize"], (), payload=bytes(3500))]), True)
    journal.replace([big], 1, 3500, 0.1, 1)
    assert journal.entries == [] and journal.checkpoints == 0
    assert "more than the journal keeps" in journal.broken
