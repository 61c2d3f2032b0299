"""What of scripts/gpu-check.sh runs without a GPU: its syntax, the step scripts'
arguments, the comparison and the report on real files, and the wire figures read
from a real client agent after a real session (host backend)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cuda_mesh import host_mesh, run_through

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "scripts" / "gpu_check"


def py(*argv: object, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True,
                          timeout=120, check=check)


@pytest.mark.parametrize("script", ["gpu-check.sh", "gpu-wheels.sh"])
def test_scripts_parse(script):
    assert shutil.which("bash")
    done = subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", ["models.py", "cupy_step.py", "compare.py", "stats.py",
                                    "report.py"])
def test_step_scripts_parse_their_arguments(script):
    assert "usage:" in py(STEPS / script, "--help").stdout
    assert py(STEPS / script, "--no-such-flag", check=False).returncode == 2


def write(path: Path, outputs: dict) -> Path:
    path.write_text(json.dumps({"outputs": outputs, "wall_s": 1.5}))
    return path


def test_compare_passes_within_the_relative_tolerance_only(tmp_path):
    direct = write(tmp_path / "d.json", {"logits": [1.0, -2.0, 100.0], "loss": [3.0]})
    near = write(tmp_path / "n.json", {"logits": [1.0, -2.0, 100.005], "loss": [3.0]})
    far = write(tmp_path / "f.json", {"logits": [1.0, -2.0, 100.05], "loss": [3.0]})
    short = write(tmp_path / "s.json", {"logits": [1.0, -2.0], "loss": [3.0]})
    missing = write(tmp_path / "m.json", {"logits": [1.0, -2.0, 100.0]})
    verdict = json.loads(py(STEPS / "compare.py", direct, near).stdout)
    assert verdict["pass"] and verdict["errors"]["logits"] == pytest.approx(5e-5)
    for other in (far, short, missing, tmp_path / "absent.json"):
        done = py(STEPS / "compare.py", direct, other, check=False)
        assert done.returncode == 1 and not json.loads(done.stdout)["pass"]


def test_models_step_writes_its_outputs_without_a_gpu(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "available.json"
    py(STEPS / "models.py", "available", "--out", out)
    result = json.loads(out.read_text())
    assert result["step"] == "available" and set(result["outputs"]) == {"available"}


def test_report_names_each_step_and_writes_the_summary(tmp_path):
    (tmp_path / "steps.tsv").write_text("PASS\tbuild\t40\t\nFAIL\tgleam-gpt2\t12\tboom\n")
    write(tmp_path / "direct-gpt2.json", {"loss": [1.0]})
    write(tmp_path / "gleam-gpt2.json", {"loss": [1.0]})
    (tmp_path / "stats-gpt2.json").write_text(json.dumps(
        {"calls": 328, "waiting": 4, "round_trips": 4, "bytes_sent": 123456}))
    (tmp_path / "compare-gpt2.json").write_text(json.dumps(
        {"pass": True, "rtol": 1e-4, "errors": {"loss": 0.0}}))
    summary = tmp_path / "summary.json"
    done = py(STEPS / "report.py", "--work", tmp_path, "--summary", summary, check=False)
    assert done.returncode == 1
    assert "PASS  build (40 s)" in done.stdout and "FAIL  gleam-gpt2 (12 s): boom" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("gpt2"))
    assert "328" in row and "123,456" in row and row.endswith("PASS")
    doc = json.loads(summary.read_text())
    assert doc["passed"] is False and doc["runs"]["gpt2"]["stats"]["calls"] == 328


def test_stats_reads_the_session_a_real_run_made(tmp_path):
    pytest.importorskip("cuda.bindings.driver")
    with host_mesh(tmp_path / "mesh") as (client, _server):
        done, verdict = run_through(client, sys.executable,
                                    ROOT / "examples" / "cuda" / "driver_calls.py")
        assert verdict.get("ok"), done.stderr
        out = tmp_path / "stats.json"
        py(STEPS / "stats.py", "--state-dir", client.state.path, "--out", out)
        later = py(STEPS / "stats.py", "--state-dir", client.state.path, "--since",
                   time.time() + 60, "--out", tmp_path / "none.json", check=False)
    assert later.returncode == 1 and json.loads(later.stdout) is None
    figures = json.loads(out.read_text())
    assert figures["calls"] > figures["waiting"] > 0
    assert figures["round_trips"] == figures["waiting"] and figures["bytes_sent"] > 0
