"""A benchmark prints a table for people or, with --json, the document: never both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gleam.peer.bench.report import Row, note_file, print_report

ROWS = [Row("round trip", 12.5, "raw TCP", 10.0, "us", target="<= 2x", met=True)]
META = {"details": {"samples": [1, 2, 3]}}


def test_the_table_has_no_json_after_it(capsys):
    print_report("demo", ROWS, META, as_json=False)
    out = capsys.readouterr().out
    assert "gleam-peer bench demo" in out and "round trip" in out and "raw TCP" in out
    assert "{" not in out and "samples" not in out


def test_json_is_the_document_alone(capsys):
    print_report("demo", ROWS, META, as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["bench"] == "demo" and doc["details"] == META["details"]
    assert doc["results"][0]["ratio"] == 1.25


def test_a_written_file_is_one_line_beside_the_table_and_off_the_json(capsys, tmp_path: Path):
    note_file("chart", tmp_path / "c.svg", as_json=False)
    assert capsys.readouterr().out == f"chart written to {tmp_path / 'c.svg'}\n"
    note_file("chart", tmp_path / "c.svg", as_json=True)
    captured = capsys.readouterr()
    assert captured.out == "" and "c.svg" in captured.err


def test_a_bench_command_prints_its_table_only():
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "bench", "gossip", "--sizes", "10"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "gleam-peer bench gossip" in done.stdout and '"results"' not in done.stdout
    with_json = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "gossip", "--sizes", "10", "--json"],
        capture_output=True, text=True, timeout=120)
    assert json.loads(with_json.stdout)["bench"] == "gossip"
