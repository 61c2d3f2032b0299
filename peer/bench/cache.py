"""``gleam-peer bench cache``: a weight-heavy program run cold and warm (docs/cache.md).

The program copies N MiB of fixed, non-repeating bytes host to device (the
``h2d`` mode of examples/cuda/bench_calls.c, the shape of loading weights) through
a client agent and a host-backend server agent, twice against the same server:

* bytes sent and saved, cold beside warm (target: warm < 1 % of cold);
* the copy's wall time, cold beside warm, over loopback and, with root, between two
  network namespaces whose link is shaped with htb to 1 Gbit/s (target: warm at
  least 10x faster there);
* the admission rule: after one-off uploads (other bytes) larger than the server's whole RAM
  tier, the weights are still served from the cache (target: < 1 % of them sent again);
* the content digest's throughput (BLAKE3, one core) beside memcpy, measured in the same run
  (target: at least 1 GB/s, so hashing never costs more than the link it saves); beside it
  SHA-256 (the digest before) and BLAKE3 at the other vector widths this CPU runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from gleam.peer.bench import cpu_references
from gleam.peer.bench.calls import _run_example
from gleam.peer.bench.lab_agents import start_linked_pair
from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.bench.workdir import example_workdir
from gleam.peer.cache.blobs import DIGEST_KINDS, digest_kind, digest_using, hash_speed
from gleam.peer.localmesh import LocalMesh, wait_for

HELP = "the blob cache: a weight-heavy program cold and warm, hashing speed"
DESCRIPTION = __doc__

LAB_RATE_MBIT = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mib", type=positive_int, default=256,
                        help="MiB of weights copied host to device (default 256)")
    parser.add_argument("--chunk-mib", type=positive_int, default=64,
                        help="MiB per cuMemcpyHtoD call (default 64)")
    parser.add_argument("--ram-mb", type=positive_int, default=None,
                        help="the loopback server's RAM tier (GLEAM_CACHE_RAM_MB; default its "
                        "own, 1024): the one-off uploads of the admission figure exceed it")
    parser.add_argument("--no-lab", action="store_true",
                        help="skip the 1 Gbit/s figures (they need root for network namespaces)")


def _session(ask: Any, seen: int) -> dict[str, Any]:
    """The client agent's record of the run that just ended (ask: a cuda_sessions request)."""
    def ended() -> list[dict[str, Any]] | None:
        finished = ask()["finished"]
        return finished if len(finished) > seen else None

    return wait_for(ended, 10, "the session to be accounted")[seen]


def _cold_warm(run: Any, ask: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for _ in range(2):
        seen = len(ask()["finished"])
        result = run()
        if not result.get("ok"):
            raise RuntimeError(f"the program's data came back wrong: {result}")
        out.append((result, _session(ask, seen)))
    return out


def _rows(where: str, runs: list[tuple[dict[str, Any], dict[str, Any]]],
          speedup_target: float | None) -> list[Row]:
    (cold, cold_s), (warm, warm_s) = runs
    rows = [
        Row(f"warm run: host-to-device bytes sent ({where})", float(warm_s["h2d_sent"]),
            "cold run", float(cold_s["h2d_sent"]), "B", "< 1% of cold",
            warm_s["h2d_sent"] < cold_s["h2d_sent"] / 100),
        Row(f"warm run: bytes saved by references ({where})", float(warm_s["bytes_saved"]),
            "cold run", float(cold_s["bytes_saved"]), "B"),
        Row(f"warm run: copy time ({where})", warm["seconds"], "cold run", cold["seconds"], "s",
            f">= {speedup_target:.0f}x faster" if speedup_target else "",
            cold["seconds"] >= speedup_target * warm["seconds"] if speedup_target else None),
    ]
    return rows


def _loopback(args: argparse.Namespace, binary: Path, root: Path) -> list[Row]:
    mesh = LocalMesh(root)
    try:
        env = {"GLEAM_CACHE_RAM_MB": str(args.ram_mb)} if args.ram_mb else None
        client, server = mesh.serving_pair(server_env=env)
        total, chunk = str(args.mib << 20), str(args.chunk_mib << 20)
        ask = lambda: client.request("cuda_sessions")  # noqa: E731
        runs = _cold_warm(lambda: _run_example(binary, client.state.path, ["h2d", total, chunk]),
                          ask)
        rows = _rows("loopback", runs, None)
        rows.append(_admission(args, binary, client, server, ask))
    finally:
        mesh.close()
    return rows


def _admission(args: argparse.Namespace, binary: Path, client: Any, server: Any,
               ask: Any) -> Row:
    """One-off uploads (other seeds) of more than the whole RAM tier, then the weights
    again: the admission rule keeps them (docs/cache.md)."""
    ram = server.request("cache")["store"]["ram_cap"]
    mib = args.mib << 20
    one_off = 0
    seed = 1
    while one_off <= ram:
        seen = len(ask()["finished"])
        _run_example(binary, client.state.path, ["h2d", str(mib), str(args.chunk_mib << 20),
                                                 str(seed)])
        _session(ask, seen)  # accounted before the next run counts the sessions
        one_off += mib
        seed += 1
    seen = len(ask()["finished"])
    _run_example(binary, client.state.path, ["h2d", str(mib), str(args.chunk_mib << 20)])
    again = _session(ask, seen)
    return Row(f"weights after {one_off >> 20} MiB of one-off uploads: bytes sent",
               float(again["h2d_sent"]), "weights' size", float(mib), "B",
               "< 1% (admission keeps them)", again["h2d_sent"] < mib / 100)


def _lab(args: argparse.Namespace, binary: Path, root: Path) -> list[Row]:
    from gleam.peer import control
    from gleam.peer.lab.netns import NetLab

    with NetLab() as lab:
        a, b = lab.add_host("client"), lab.add_host("server")
        lab.shape(a, LAB_RATE_MBIT)
        lab.shape(b, LAB_RATE_MBIT)
        client = start_linked_pair(a, b, root)
        sock = client.control_socket
        total, chunk = str(args.mib << 20), str(args.chunk_mib << 20)
        runs = _cold_warm(
            lambda: _run_example(binary, client.path, ["h2d", total, chunk],
                                 netns=a.netns),
            lambda: control.request(sock, "cuda_sessions"))
    return _rows(f"{LAB_RATE_MBIT / 1000:.0f} Gbit/s link", runs, 10.0)


def _hash_rows() -> list[Row]:
    """The content digest beside memcpy over the same buffer, beside SHA-256 (the digest it
    replaced), and at the other widths this CPU runs."""
    default = digest_kind()
    digest, copy = hash_speed()
    sha = 1.0 / cpu_references.sha256(256 << 20)
    rows = [Row(f"BLAKE3, the content digest, one core ({default})", digest,
                "memcpy, same buffer", copy, "GB/s", ">= 1 GB/s", digest >= 1.0),
            Row("SHA-256 (OpenSSL), one core, 1 MiB pieces", sha, f"BLAKE3 ({default})",
                digest, "GB/s", "reference")]
    for kind in DIGEST_KINDS:
        with digest_using(kind) as runs:
            if runs and kind != default:
                rows.append(Row(f"BLAKE3 at another width ({kind})", hash_speed()[0],
                                f"BLAKE3 ({default})", digest, "GB/s", "informative"))
    return rows


def main(args: argparse.Namespace) -> int:
    with example_workdir("cache", "bench_calls") as (root, binary):
        if binary is None:
            return 2
        started = time.time()
        rows = _hash_rows()
        rows += _loopback(args, binary, root / "loopback")
        notes: dict[str, Any] = {}
        if args.no_lab:
            notes["lab"] = "skipped (--no-lab)"
        else:
            from gleam.peer.lab.netns import lab_unavailable_reason

            reason = lab_unavailable_reason()
            if reason is None:
                rows += _lab(args, binary, root / "lab")
            else:
                notes["lab"] = f"skipped: {reason}"
        meta = {"mib": args.mib, "chunk_mib": args.chunk_mib,
                "seconds": round(time.time() - started, 1), **notes}
        print_report("cache", rows, meta, as_json=args.json)
    return 0
