"""Experiment and workload outputs appear only complete (written beside, then renamed), and
long runs report progress on stderr only (issue 13 items 10 and 18, vmc part)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PY = [sys.executable, "-m", "vmc"]


def test_workload_dash_is_stdout_and_file_is_replaced(tmp_path: Path) -> None:
    r = subprocess.run(
        PY + ["workload", "-n", "5", "-o", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 5 and not (tmp_path / "-").exists()
    out = tmp_path / "w.log"
    out.write_text("old\n")
    twin = tmp_path / "twin"
    os.link(out, twin)
    r = subprocess.run(
        PY + ["workload", "-n", "5", "-o", str(out)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert len(out.read_text().splitlines()) == 5 and twin.read_text() == "old\n"


def test_tables_progress_on_stderr_and_results_renamed_into_place(tmp_path: Path) -> None:
    res = tmp_path / "results.json"
    res.write_text("{}")
    twin = tmp_path / "twin"
    os.link(res, twin)
    r = subprocess.run(PY + ["experiment", "tables", "--quick", "-n", "12", "--scenario", "low-low",
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Table 1:") and "requests" not in r.stdout.split("Table 2")[0]
    assert "vmc experiment tables: low-low done (36/36 requests" in r.stderr, r.stderr
    assert "vmc experiment tables: finished: 36/36 requests" in r.stderr, r.stderr
    # a few summary lines, no bar (not a TTY)
    assert len(r.stderr.strip().splitlines()) <= 4, r.stderr
    assert json.loads(res.read_text())["n"] == 12 and twin.read_text() == "{}"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
