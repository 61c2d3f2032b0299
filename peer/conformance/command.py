"""``gleam-peer conformance``: run programs nobody here wrote through gleam.

It starts its own two agents on 127.0.0.1 (a client without a device and a
host-backend server, in a temporary state directory), then

  * with --samples DIR: builds NVIDIA's cuda-samples from the checkout DIR
    with nvcc (the samples in gleam's table, peer/conformance/samples.py:
    those that need no graphics, no second GPU and no machine-code-only NVIDIA
    library), each once per content (kept in the cache), and runs each through
    gleam with its table arguments and a time limit;
  * with --numba: runs numba-cuda's own test suite from its wheel, one pytest
    process per test module, through gleam;

and prints a table per part (every failure with its first error line and its
cause) and writes the JSON document (--report; --json prints it instead of the
tables). Agents, state and working folders are removed at the end, also on
Ctrl-C; builds and numba's per-test events stay in the cache (--cache) for the
next run and for --resume.

Every program runs as `gleam-peer run` runs it, with GLEAM_TRACE=errors, so a
failure names the driver call that failed; the server's own reasons reach the
program's stderr as `gleam: server: ...` lines (the serving agent is named
"server"). A run of everything takes
hours on 2 cores (docs/conformance.md has the figures); --only and
--numba-only choose parts.

examples:
  gleam-peer conformance --samples ~/cuda-samples
  gleam-peer conformance --samples ~/cuda-samples --only vectorAdd --only matrixMul
  gleam-peer conformance --numba --numba-only 'cudapy.test_array*' --json
  gleam-peer conformance --samples ~/cuda-samples --numba --jobs 2 --resume
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gleam.peer.bench.report import positive_int

HELP = "build and run NVIDIA's cuda-samples and numba-cuda's tests through gleam"
DESCRIPTION = __doc__
DEFAULT_TIMEOUT = 300.0
AGENT_START = 120.0   # seconds an agent may take to start, or the two to link


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    return value


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gleam" / "conformance"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parts = parser.add_argument_group("what to run (at least one of --samples, --numba)")
    parts.add_argument("--samples", metavar="DIR",
                       help="a checkout of github.com/NVIDIA/cuda-samples (read only)")
    parts.add_argument("--samples-commit", metavar="SHA",
                       help="the checkout's commit, for the report, when DIR is not a git "
                            "clone (default: git rev-parse HEAD in DIR)")
    parts.add_argument("--only", metavar="NAME", action="append", default=[],
                       help="run this sample only (repeatable; names as in --list)")
    parts.add_argument("--numba", action="store_true",
                       help="run numba-cuda's test suite from its wheel")
    parts.add_argument("--numba-only", metavar="PATTERN", action="append", default=[],
                       help="only the numba test modules matching this glob, e.g. "
                            "'cudapy.test_array*' (repeatable; implies --numba)")
    parts.add_argument("--list", action="store_true",
                       help="list the sample table (and the samples left out, with why)")
    limits = parser.add_argument_group("limits and places")
    limits.add_argument("--timeout", type=_positive_float, default=DEFAULT_TIMEOUT,
                        metavar="S", help=f"seconds one sample, or one numba test, may run "
                        f"(default {DEFAULT_TIMEOUT:.0f}); a sample that outruns it is "
                        "reported as a timeout")
    limits.add_argument("--jobs", type=positive_int, default=max(1, min(4, os.cpu_count() or 1)),
                        metavar="N", help="builds, samples and numba modules at once "
                        "(default: the cores, at most 4); builds run under nice")
    limits.add_argument("--cache", metavar="DIR",
                        help=f"builds and numba results kept between runs "
                        f"(default {default_cache()})")
    limits.add_argument("--resume", action="store_true",
                        help="numba: keep the results of an earlier, interrupted run and "
                             "run only what it did not finish")
    limits.add_argument("--nvcc", metavar="PATH", help="the nvcc to build with "
                        "(default: PATH, then $CUDA_HOME/bin)")
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print the JSON document instead of the tables")
    out.add_argument("--report", metavar="FILE",
                     help="where to write the JSON document (default CACHE/report.json)")


class ConformanceError(Exception):
    """A problem the user can fix; printed as one line, exit status 2."""


def _say(text: str) -> None:
    print(f"gleam conformance: {text}", file=sys.stderr, flush=True)


def _samples_commit(checkout: Path, given: str | None) -> str:
    if given:
        return given
    try:
        done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _select_samples(args: argparse.Namespace) -> list[Any]:
    from gleam.peer.conformance.samples import SAMPLES, by_name

    if not args.only:
        return list(SAMPLES)
    known = by_name()
    unknown = [n for n in args.only if n not in known]
    if unknown:
        raise ConformanceError(f"--only: no sample named {', '.join(unknown)} "
                               "(gleam-peer conformance --list names them)")
    return [known[n] for n in dict.fromkeys(args.only)]


def _list_samples() -> int:
    from rich.console import Console
    from rich.table import Table

    from gleam.peer.conformance.samples import EXCLUDED, SAMPLES

    table = Table(title=f"the {len(SAMPLES)} samples of the conformance run")
    for column in ("sample", "folder", "arguments", "success", "note"):
        table.add_column(column, overflow="fold")
    for s in SAMPLES:
        table.add_row(s.name, s.path, " ".join(s.args), s.expect or "exit 0", s.note)
    left_out = Table(title=f"the {len(EXCLUDED)} samples left out")
    left_out.add_column("sample")
    left_out.add_column("why", overflow="fold")
    for name, why in sorted(EXCLUDED.items()):
        left_out.add_row(name, why)
    console = Console()
    console.print(table)
    console.print(left_out)
    return 0


def _build(samples: Sequence[Any], checkout: Path, args: argparse.Namespace,
           cache: Path) -> tuple[dict[str, Any], Path | None]:
    from gleam.peer.conformance.build import Built, build_all
    from gleam.peer.conformance.toolchain import ToolchainError, find_toolchain
    from gleam.peer.run_cmd import RunError, interposer_dir

    try:
        toolchain = find_toolchain(args.nvcc, interposer_dir())
    except (ToolchainError, RunError) as exc:
        raise ConformanceError(str(exc)) from None
    _say(f"building {len(samples)} samples with {toolchain.nvcc} "
         f"({args.jobs} at once; cached in {cache / 'builds'})")
    finished = 0

    def progress(built: Built) -> None:
        nonlocal finished
        finished += 1
        how = "cached" if built.cached else f"{built.seconds:.0f} s"
        _say(f"[{finished:3}/{len(samples)}] build {built.name}: "
             f"{'ok' if built.ok else 'FAILED: ' + built.error} ({how})")

    return build_all(samples, checkout, toolchain, cache, args.jobs, progress), toolchain.include


def _run_samples(samples: Sequence[Any], builds: dict[str, Any], include: Path | None,
                 checkout: Path, work: Path, cache: Path, env: dict[str, str],
                 args: argparse.Namespace, stop: threading.Event,
                 outcomes: dict[str, Any]) -> None:
    from gleam.peer.conformance.run import run_sample

    passed = 0
    pool = ThreadPoolExecutor(max_workers=args.jobs)
    try:
        logs = cache / "logs"
        futures = {pool.submit(run_sample, s, builds[s.name], checkout, work, logs, env,
                               args.timeout, stop, include): s for s in samples}
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[outcome.name] = outcome
            passed += outcome.passed
            detail = "" if outcome.passed else f": {outcome.group}: {outcome.cause}"
            _say(f"[{len(outcomes):3}/{len(samples)}] {outcome.name}: {outcome.status}"
                 f" ({outcome.seconds:.1f} s; {passed} passed so far){detail}")
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _start_agents(mesh: Any, timeout: float) -> Any:
    """A host-backend server and a client without a device, linked; the client.
    Generous start limits: the run's own builds may keep a small machine busy."""
    from gleam.peer.conformance.causes import SERVER_NAME
    from gleam.peer.localmesh import wait_for

    # A kernel may run as long as the program: the host device's own limit would
    # otherwise cut a slow kernel before the run's time limit.
    server = mesh.start(SERVER_NAME, extra=["--backend", "host"], timeout=AGENT_START,
                        env={"GLEAM_PTX_TIMEOUT_S": str(int(timeout) + 1)})
    client = mesh.start("client", mesh_key=server.state.mesh_key(), timeout=AGENT_START,
                        peers=[f"127.0.0.1:{server.port}"], extra=["--backend", "none"])
    wait_for(lambda: server.node_id in client.authenticated_peers(), AGENT_START,
             "the client agent to link the server")
    return client


def _run_numba(args: argparse.Namespace, env: dict[str, str], cache: Path,
               stop: threading.Event, modules: list[str]) -> tuple[list[Any], bool]:
    from gleam.peer.conformance.numba import NumbaSetup, TestOutcome, partial_results, run_suite

    results_dir = cache / "numba"
    setup = NumbaSetup(env=env, results=results_dir, test_timeout=args.timeout, stop=stop)
    _say(f"running {len(modules)} numba-cuda test modules ({args.jobs} at once; events in "
         f"{results_dir}{', resuming' if args.resume else ''})")
    finished = 0

    def progress(module: str, results: list[TestOutcome], seconds: float) -> None:
        nonlocal finished
        finished += 1
        tally: dict[str, int] = {}
        for r in results:
            tally[r.outcome] = tally.get(r.outcome, 0) + 1
        _say(f"[{finished:3}/{len(modules)}] {module.removeprefix('numba.cuda.tests.')}: "
             + (", ".join(f"{v} {k}" for k, v in sorted(tally.items())) or "no tests")
             + f" ({seconds:.0f} s)")

    try:
        return run_suite(modules, setup, args.jobs, args.resume, progress), True
    except KeyboardInterrupt:
        return partial_results(modules, results_dir), False


def main(args: argparse.Namespace) -> int:
    if args.list:
        return _list_samples()
    try:
        return _main(args)
    except ConformanceError as exc:
        print(f"gleam-peer conformance: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    from gleam.peer import __version__
    from gleam.peer.conformance import numba as numba_suite
    from gleam.peer.conformance.report import numba_section, print_tables, samples_section
    from gleam.peer.localmesh import LocalMesh, MeshError
    from gleam.peer.run_cmd import interposer_dir, run_environment

    run_numba = args.numba or bool(args.numba_only)
    if not args.samples and not run_numba:
        raise ConformanceError("nothing to run: give --samples DIR and/or --numba "
                               "(see --help)")
    checkout = Path(args.samples).resolve() if args.samples else None
    if checkout is not None and not (checkout / "Samples").is_dir():
        raise ConformanceError(f"--samples {args.samples}: no Samples folder there; give a "
                               "checkout of github.com/NVIDIA/cuda-samples")
    samples = _select_samples(args) if checkout else []
    modules: list[str] = []
    if run_numba:
        try:
            numba_suite.check_ready()
            modules = numba_suite.test_modules(args.numba_only)
        except numba_suite.NumbaUnavailable as exc:
            raise ConformanceError(str(exc)) from None
        if not modules:
            raise ConformanceError(f"--numba-only {' '.join(args.numba_only)}: no numba-cuda "
                                   "test module matches")
    cache = Path(args.cache).resolve() if args.cache else default_cache()
    report_file = Path(args.report) if args.report else cache / "report.json"
    started = time.monotonic()
    stop = threading.Event()
    doc: dict[str, Any] = {
        "gleam": __version__, "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(), "timeout_s": args.timeout, "jobs": args.jobs,
    }
    outcomes: dict[str, Any] = {}
    numba_results: list[Any] = []
    numba_complete = True
    numba_started = 0.0
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="gleam-conformance-") as tmp:
        root = Path(tmp)
        mesh = LocalMesh(root / "a")   # short: agents' Unix socket paths have a limit
        try:
            builds, include = _build(samples, checkout, args, cache) if checkout else ({}, None)
            _say("starting two agents on 127.0.0.1 (a client without a device and a "
                 "host-backend server)")
            client = _start_agents(mesh, args.timeout)
            env = run_environment(interposer_dir(), client.state.control_socket, None,
                                  dict(os.environ))
            env["GLEAM_TRACE"] = "errors"
            if checkout:
                _run_samples(samples, builds, include, checkout, root / "work", cache, env,
                             args, stop, outcomes)
            if modules:
                numba_started = time.monotonic()
                numba_results, numba_complete = _run_numba(args, env, cache, stop, modules)
                interrupted = not numba_complete
        except KeyboardInterrupt:
            stop.set()
            interrupted = True
            _say("interrupted: stopping the programs and the agents")
            if modules and not numba_results:
                numba_results = numba_suite.partial_results(modules, cache / "numba")
                numba_complete = False
        except MeshError as exc:
            raise ConformanceError(f"the agents did not start: {exc}") from None
        finally:
            mesh.close()
    if checkout:
        doc["samples"] = samples_section(samples, outcomes, str(checkout),
                                         _samples_commit(checkout, args.samples_commit))
    if modules:
        from importlib import metadata

        doc["numba"] = numba_section(
            numba_results, metadata.version("numba-cuda"), len(modules), numba_complete,
            time.monotonic() - numba_started if numba_started else 0.0)
    doc["interrupted"] = interrupted
    doc["wall_seconds"] = round(time.monotonic() - started, 1)
    doc["report_file"] = str(report_file)
    report_file.parent.mkdir(parents=True, exist_ok=True)
    report_file.write_text(json.dumps(doc, indent=2) + "\n")
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_tables(doc)
    if interrupted:
        return 130
    met = all(doc[part]["met"] for part in ("samples", "numba") if part in doc)
    return 0 if met else 1
