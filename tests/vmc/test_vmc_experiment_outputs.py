"""Experiment and workload outputs appear only complete (written beside, then renamed), and
long runs report progress on stderr only (issue 13 items 10 and 18, vmc part)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deliverykit.outputs import replacing, write_when_done

PY = [sys.executable, "-m", "vmc"]


def test_write_atomic_replaces_never_writes_into(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    os.chmod(out, 0o640)
    twin = tmp_path / "twin"
    os.link(out, twin)  # written in place, the twin would change too
    write_when_done(out, "new")
    assert out.read_text() == "new" and twin.read_text() == "old"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "twin"]


def test_failed_block_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "plot.png"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with replacing(out) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("plotting failed")
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_symlink_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.log"
    real.write_text("old")
    link = tmp_path / "link.log"
    link.symlink_to(real)
    write_when_done(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_workload_dash_is_stdout_and_file_is_replaced(tmp_path: Path) -> None:
    r = subprocess.run(PY + ["workload", "-n", "5", "-o", "-"], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 5 and not (tmp_path / "-").exists()
    out = tmp_path / "w.log"
    out.write_text("old\n")
    twin = tmp_path / "twin"
    os.link(out, twin)
    r = subprocess.run(PY + ["workload", "-n", "5", "-o", str(out)], capture_output=True, text=True, timeout=60)
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
    assert len(r.stderr.strip().splitlines()) <= 4, r.stderr  # a few summary lines, no bar (not a TTY)
    assert json.loads(res.read_text())["n"] == 12 and twin.read_text() == "{}"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
