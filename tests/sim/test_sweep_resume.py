"""deliverykit.sweep's resume on a real Dask LocalCluster: a stopped sweep's
``.part`` rows are kept and only the missing (point, seed) tasks run; a
``.part`` of another commit, another sweep or a cut-short row is refused and
left as it was; without ``resume`` an existing ``.part`` is never overwritten."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from deliverykit.sweep import run_sweep
from swift.sim import sweep_task

POINTS = [{"leechers": 2, "size_kib": 16}, {"leechers": 3, "size_kib": 16}]
SEEDS = [0, 1]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _results(path: Path) -> list[dict[str, str]]:
    """The rows without the one measured column (``cpu_s``), sorted by point and seed."""
    rows = [{k: v for k, v in r.items() if k != "cpu_s"} for r in _rows(path)]
    return sorted(rows, key=lambda r: (r["leechers"], r["seed"]))


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole sweep, run once: what a resumed sweep must end up equal to."""
    out = tmp_path_factory.mktemp("full") / "crowd.csv"
    res = run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=2,
                    progress=False)
    assert res.rows == 4 and not res.failures and res.resumed == 0
    return out


def _stopped(full: Path, tmp: Path, keep: int) -> Path:
    """A ``.part`` as a sweep stopped after ``keep`` rows leaves it."""
    lines = full.read_text().splitlines(keepends=True)
    out = tmp / "crowd.csv"
    Path(f"{out}.part").write_text("".join(lines[:1 + keep]))
    return out


def test_resume_runs_only_the_missing_tasks_and_ends_equal(full: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    out = _stopped(full, tmp_path, keep=3)
    kept = _rows(Path(f"{out}.part"))
    res = run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=1,
                    progress=False, resume=True)
    assert res.rows == 4 and res.resumed == 3 and not res.failures
    assert "4 of 4 tasks done (3 kept from crowd.csv.part)" in capsys.readouterr().err
    rows = _rows(out)
    assert rows[:3] == kept  # kept as they were, the new row appended
    assert _results(out) == _results(full)  # deterministic tasks: equal but for CPU time
    assert not Path(f"{out}.part").exists()
    # the summary counts every seed, resumed or run
    assert [r["n"] for r in csv.DictReader(res.summary_csv.open())] == ["2", "2"]
    assert json.loads(res.meta.read_text())["params"]["resumed_rows"] == 3


def test_resume_of_a_complete_part_runs_nothing(full: Path, tmp_path: Path) -> None:
    out = _stopped(full, tmp_path, keep=4)
    res = run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=1,
                    progress=False, resume=True)
    assert res.rows == res.resumed == 4 and _rows(out) == _rows(full)


@pytest.mark.parametrize("change, says", [
    (lambda r: r.update(commit="0" * 40), "written by commit 0000000000"),
    (lambda r: r.update(scenario="other"), "scenario 'other'"),
    (lambda r: r.update(seed="7"), "is not in this sweep"),
    (lambda r: r.update(leechers="9"), "is not in this sweep"),
])
def test_a_part_of_another_code_or_sweep_is_refused_and_kept(full: Path, tmp_path: Path,
                                                             change, says: str) -> None:
    rows = _rows(full)[:2]
    change(rows[1])
    out = tmp_path / "crowd.csv"
    part = Path(f"{out}.part")
    with part.open("w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    before = part.read_bytes()
    with pytest.raises(ValueError, match=says):
        run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=1,
                  progress=False, resume=True)
    assert part.read_bytes() == before and not out.exists()


def test_a_cut_short_row_is_refused(full: Path, tmp_path: Path) -> None:
    out = _stopped(full, tmp_path, keep=2)
    part = Path(f"{out}.part")
    part.write_text(part.read_text() + full.read_text().splitlines()[3][:20] + "\n")
    with pytest.raises(ValueError, match="line 4: not a whole row"):
        run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=1,
                  progress=False, resume=True)


def test_without_resume_an_existing_part_is_an_error_not_overwritten(full: Path,
                                                                     tmp_path: Path) -> None:
    out = _stopped(full, tmp_path, keep=2)
    part = Path(f"{out}.part")
    before = part.read_bytes()
    with pytest.raises(ValueError, match=r"exists .*--resume"):
        run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=1,
                  progress=False)
    assert part.read_bytes() == before


def test_cli_resume(full: Path, tmp_path: Path) -> None:
    """``python -m deliverykit.sweep --resume``: one line and exit 1 without the flag,
    the whole CSV with it."""
    out = _stopped(full, tmp_path, keep=1)
    pts = tmp_path / "p.json"
    pts.write_text(json.dumps(POINTS))
    cmd = [sys.executable, "-m", "deliverykit.sweep", "swift.sim:sweep_task", "--points",
           str(pts), "--seeds", *map(str, SEEDS), "--out", str(out), "--workers", "1",
           "--scenario", "flash-crowd"]
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode == 1 and "--resume" in refused.stderr
    assert "Traceback" not in refused.stderr
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-500:]
    assert "4 of 4 tasks done (1 kept from crowd.csv.part)" in done.stderr
    assert _results(out) == _results(full)


def test_experiment_resume_needs_a_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    from swift.experiments.flashcrowd import main
    with pytest.raises(SystemExit) as e:
        main(["--backend", "sim", "--resume"])
    assert e.value.code == 2 and "--resume go with --sweep" in capsys.readouterr().err


def test_experiment_sweep_resumes_its_part(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``ppspp experiment vod-swarm --sweep ... --resume`` after a stop: the part's row
    kept, the rest run, one CSV."""
    from swift.experiments.vod_swarm import main
    args = ["--backend", "sim", "--sweep", "leechers=2", "--seeds", "2", "--workers", "1",
            "--video-s", "2", "--algorithms", "vod", "--out", str(tmp_path)]
    assert main(args) == 0
    out = tmp_path / "vod_swarm-sweep.csv"
    first = out.read_text().splitlines(keepends=True)
    Path(f"{out}.part").write_text("".join(first[:2]))
    out.unlink()
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    assert "2 of 2 tasks done (1 kept from vod_swarm-sweep.csv.part)" in capsys.readouterr().err
    assert out.read_text().splitlines(keepends=True)[:2] == first[:2]


def test_resume_extends_a_finished_sweep_by_more_seeds(full: Path, tmp_path: Path) -> None:
    """No .part, a finished CSV of seed 0: ``resume`` with seeds 0 and 1 keeps seed
    0's rows (copied; the finished file is only replaced once the new one is whole)
    and runs seed 1 only."""
    out = tmp_path / "crowd.csv"
    lines = full.read_text().splitlines(keepends=True)
    seed0 = [ln for ln in lines[1:] if ln.split(",")[2] == "0"]
    out.write_text(lines[0] + "".join(seed0))
    res = run_sweep(sweep_task, POINTS, SEEDS, out, scenario="flash-crowd", workers=1,
                    progress=False, resume=True)
    assert res.rows == 4 and res.resumed == 2 and not res.failures
    assert _results(out) == _results(full)
    assert not Path(f"{out}.part").exists()
