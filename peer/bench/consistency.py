"""``gleam-peer bench consistency``: failover, migration and checkpoints (docs/consistency.md).

Three host-backend servers and a client agent on loopback run the ``accumulate``
example (an accumulator of ``--mib`` MiB in device memory, a fresh upload of that
size added into it at each step, one gate per step), with the journal bound at
``--journal-mb`` so that checkpoints happen:

* an undisturbed run: its wall time and step checksums are the reference;
* a run whose server is SIGKILLed halfway: the time from the link's loss to the
  end of the replay on another server, the batches replayed, and whether the
  checksums equal the reference's;
* a run migrated halfway (``cuda_migrate``): the same figures;
* the checkpoints of these runs: how long the last one took, and the journal's
  size beside the bytes the program sent.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

from gleam.peer.bench.gated import GatedRun
from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.bench.workdir import example_workdir
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.localmesh import LocalAgent, LocalMesh, wait_for

HELP = "context consistency: failover and migration mid-run, checkpoints"
DESCRIPTION = __doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=16,
                        help="steps of the program (default 16); the move comes halfway")
    parser.add_argument("--mib", type=positive_int, default=16,
                        help="MiB of the accumulator and of each step's upload (default 16)")
    parser.add_argument("--journal-mb", type=float, default=None,
                        help="the client's journal bound, GLEAM_JOURNAL_MB (default 8 x --mib: "
                        "a step journals about --mib, so checkpoints come every few steps)")


def _session(client: LocalAgent) -> dict[str, Any]:
    rows = wait_for(lambda: client.request("cuda_sessions")["client"], 20, "the session")
    return dict(rows[-1])


def _finished(client: LocalAgent, session: str) -> dict[str, Any]:
    def ended() -> list[dict[str, Any]]:
        return [r for r in client.request("cuda_sessions")["finished"] if r["id"] == session]

    return dict(wait_for(ended, 20, "the session's end")[-1])


class _Bench:
    def __init__(self, mesh: LocalMesh, binary: Path, steps: int, mib: int,
                 journal_mb: float) -> None:
        first = mesh.start("alpha", extra=["--backend", "host"])
        key = first.state.mesh_key()
        self.servers = [first] + [mesh.start(n, mesh_key=key, extra=["--backend", "host"])
                                  for n in ("beta", "gamma")]
        self.client = mesh.start("client", mesh_key=key, extra=["--backend", "none"],
                                 peers=[f"127.0.0.1:{s.port}" for s in self.servers],
                                 env={"GLEAM_JOURNAL_MB": str(journal_mb)})
        wait_for(self._all_serving, 30, "the client to link every server and see its advert")
        self.mesh, self.binary, self.steps = mesh, binary, steps
        self.size = f"elements={mib << 18}"  # floats

    def _all_serving(self) -> bool:
        peers = {p["id"]: p for p in self.client.status()["peers"]}
        return all(s.node_id in peers and peers[s.node_id].get("authenticated")
                   and (peers[s.node_id].get("extra") or {}).get("cuda")
                   for s in self.servers)

    def run(self, peer: str, disturb: Any = None) -> tuple[list[str], float, dict[str, Any]]:
        """One run on ``peer``; ``disturb(session_row)`` acts halfway. (lines, seconds, row)"""
        start = time.perf_counter()
        run = GatedRun(self.client.state.path, self.binary, KERNELS_PTX, self.steps, peer,
                       self.size)
        lines = run.steps(self.steps // 2)
        row = _session(self.client)
        if disturb is not None:
            disturb(row)
        rc, rest, err = run.finish()
        seconds = time.perf_counter() - start
        if rc != 0:
            raise RuntimeError(f"the program failed: {err.strip()}")
        return lines + rest, seconds, _finished(self.client, row["id"])


def _move_rows(kind: str, lines: list[str], reference: list[str], t_ref: float,
               row: dict[str, Any]) -> list[Row]:
    move = row["moves"][0] if row["moves"] else {"seconds": float("nan"), "batches": 0}
    same = lines == reference
    return [
        Row(f"{kind}: hold to replay sent to the new server", move["seconds"],
            "the whole undisturbed run", t_ref, "s"),
        Row(f"{kind}: batches replayed", float(move["batches"]),
            "batches the program sent", float(row["batches"]), "batches"),
        Row(f"{kind}: step checksums equal the undisturbed run's", float(same),
            "expected", 1.0, "", "identical", same),
    ]


def main(args: argparse.Namespace) -> int:
    with example_workdir("consistency", "accumulate") as (root, binary):
        if binary is None:
            return 2
        started = time.time()
        mesh = LocalMesh(root / "mesh")
        try:
            journal_mb = args.journal_mb or 8.0 * args.mib
            bench = _Bench(mesh, binary, args.steps, args.mib, journal_mb)
            reference, t_ref, ref_row = bench.run("alpha")
            gone = bench.servers[0]
            lost, _t, lost_row = bench.run("alpha", lambda _row: mesh.stop(gone, signal.SIGKILL))
            where = lost_row["peer"]
            to = "gamma" if where == "beta" else "beta"

            def migrate(row: dict[str, Any]) -> None:
                answer = bench.client.request("cuda_migrate", {"session": row["id"], "to": to},
                                              timeout=120)
                if not answer.get("moved"):
                    raise RuntimeError(f"the migration was refused: {answer.get('reason')}")

            moved, _t, moved_row = bench.run(where, migrate)
        finally:
            mesh.close()
        rows = (_move_rows("failover after SIGKILL", lost, reference, t_ref, lost_row)
                + _move_rows("migration", moved, reference, t_ref, moved_row))
        rows += [
            Row("checkpoint: the last one's time", ref_row["checkpoint_seconds"],
                "one undisturbed step", t_ref / args.steps, "s"),
            Row("checkpoint: live memory read back", float(ref_row["snapshot_bytes"]),
                "the accumulator and the upload buffer", float(2 * args.mib << 20), "B"),
            Row("checkpoints in the undisturbed run", float(ref_row["checkpoints"]),
                "steps", float(args.steps), ""),
            Row("journal at the end of the undisturbed run", float(ref_row["journal_bytes"]),
                "bytes the program sent", float(ref_row["bytes_to_server"]), "B",
                f"< the bound ({journal_mb:g} MiB)",
                ref_row["journal_bytes"] < journal_mb * (1 << 20)),
        ]
        meta = {"steps": args.steps, "mib": args.mib, "journal_mb": journal_mb,
                "seconds": round(time.time() - started, 1)}
        print_report("consistency", rows, meta, as_json=args.json)
    return 0
