"""deliverykit.sweep on a real 2-worker Dask LocalCluster: the swift flash crowd swept over
points x seeds into one CSV with provenance, mean and 95 % CI per point, a failing task
reported while the others complete."""

from __future__ import annotations

import csv
import glob
import json
import math
import signal
import statistics
import subprocess
import sys
import time

import pytest

from deliverykit.sweep import ci95, run_sweep, t95
from swift.sim import sweep_task

GOOD = [{"leechers": 2, "size_kib": 16}, {"leechers": 3, "size_kib": 16}]
BAD = {"leechers": 0, "size_kib": 16}  # flash_crowd refuses it: the task raises


def test_t_quantiles_and_interval() -> None:
    assert t95(1) == 12.706 and t95(30) == 2.042 and t95(10_000) == 1.96
    mean, half = ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert math.isnan(ci95([5.0])[1])


def test_two_worker_sweep_with_a_failing_task(tmp_path, capsys) -> None:
    out = tmp_path / "crowd.csv"
    res = run_sweep(sweep_task, GOOD + [BAD], [1, 2], out, scenario="flash-crowd", workers=2,
                    progress=False)
    err = capsys.readouterr().err
    assert res.rows == 4 and len(res.failures) == 2
    assert {f.seed for f in res.failures} == {1, 2} and all(f.point == BAD for f in res.failures)
    assert all(f.error.startswith("ValueError: need at least one leecher") for f in res.failures)
    assert err.count("failed: ValueError") == 2 and "4 of 6 tasks done, 2 failed" in err
    # no terminal: one plain line per finished task (failed ones too), naming it
    lines = [x for x in err.splitlines() if " tasks finished " in x]
    assert [x.split()[1] for x in lines] == [f"{i}/6" for i in range(1, 7)]
    assert sum("(leechers=0 size_kib=16 seed=" in x for x in lines) == 2
    assert not (tmp_path / "crowd.csv.part").exists()

    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4
    assert {(r["leechers"], r["seed"]) for r in rows} == {("2", "1"), ("2", "2"), ("3", "1"),
                                                           ("3", "2")}
    assert all(r["scenario"] == "flash-crowd" and r["commit"] for r in rows)
    assert all(r["completed"] == r["leechers"] for r in rows)

    summary = {r["leechers"]: r for r in csv.DictReader(res.summary_csv.open())}
    assert summary["0"]["n"] == "0"
    for n in ("2", "3"):
        vals = [float(r["mean_completion_s"]) for r in rows if r["leechers"] == n]
        assert float(summary[n]["n"]) == 2
        assert float(summary[n]["mean_completion_s_mean"]) == pytest.approx(statistics.fmean(vals))
        half = 12.706 * statistics.stdev(vals) / math.sqrt(2)
        assert float(summary[n]["mean_completion_s_ci95"]) == pytest.approx(half)

    meta = json.loads(res.meta.read_text())
    assert meta["params"]["seeds"] == [1, 2] and len(meta["params"]["failures"]) == 2
    assert meta["params"]["function"] == "swift.sim:sweep_task"


def test_cli_refuses_a_bad_task_in_one_line(tmp_path) -> None:
    pts = tmp_path / "p.json"
    pts.write_text(json.dumps(GOOD))
    out = subprocess.run([sys.executable, "-m", "deliverykit.sweep", "no.such:thing", "--points",
                          str(pts), "--out", str(tmp_path / "o.csv")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 1 and "cannot load task" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "o.csv").exists()


def test_cli_sweep_writes_csv_and_exits_1_when_a_task_failed(tmp_path) -> None:
    pts = tmp_path / "p.json"
    pts.write_text(json.dumps([GOOD[0], BAD]))
    out = tmp_path / "r.csv"
    run = subprocess.run([sys.executable, "-m", "deliverykit.sweep", "swift.sim:sweep_task",
                          "--points", str(pts), "--seeds", "4", "--out", str(out),
                          "--workers", "1", "--scenario", "crowd"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 1, run.stderr
    assert "1 of 2 tasks done, 1 failed" in run.stderr and "Traceback" not in run.stderr
    assert run.stdout == ""  # progress and summary go to stderr
    rows = list(csv.DictReader(out.open()))
    assert [(r["leechers"], r["seed"], r["scenario"]) for r in rows] == [("2", "4", "crowd")]


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_sweep_stops_on_signal_and_leaves_no_worker(tmp_path, sig, code) -> None:
    pts = tmp_path / "p.json"
    pts.write_text(json.dumps([{"leechers": 16, "size_kib": 4096}]))  # minutes of CPU
    out = tmp_path / "r.csv"
    p = subprocess.Popen([sys.executable, "-m", "deliverykit.sweep", "swift.sim:sweep_task",
                          "--points", str(pts), "--seeds", "1", "--out", str(out),
                          "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True,  # a foreground Ctrl-C target has SIGINT at its default
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    try:
        part = tmp_path / "r.csv.part"
        for _ in range(600):  # the task is submitted once the .part file exists
            if part.exists() or p.poll() is not None:
                break
            time.sleep(0.1)
        assert part.exists(), p.stderr.read() if p.poll() is not None else "no .part yet"
        kids = _descendants(p.pid)
        assert kids, "the LocalCluster should have started worker processes"
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == code, err
    assert "Traceback" not in err and not out.exists()
    assert "sweep: stopped; 0 finished row(s) kept in" in err
    for _ in range(100):  # the workers are reaped as the cluster closes
        if not any(_alive(k) for k in kids):
            break
        time.sleep(0.1)
    assert not any(_alive(k) for k in kids)


def _descendants(pid: int) -> list[int]:
    out = []
    todo = [pid]
    while todo:
        cur = todo.pop()
        kids = []
        for task in glob.glob(f"/proc/{cur}/task/*/children"):  # children of every thread
            try:
                with open(task) as fh:
                    kids += fh.read().split()
            except OSError:
                pass
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_one_worker_runs_seed_major(tmp_path) -> None:
    """Tasks go out seed by seed: a sweep cut short has every point at its first seeds
    (the CSV's row order is the order tasks finished on the one worker)."""
    out = tmp_path / "order.csv"
    pts = [{"leechers": 1, "size_kib": 4}, {"leechers": 2, "size_kib": 4},
           {"leechers": 3, "size_kib": 4}]
    run_sweep(sweep_task, pts, [0, 1], out, workers=1, progress=False)
    rows = list(csv.DictReader(out.open()))
    assert [r["seed"] for r in rows] == ["0", "0", "0", "1", "1", "1"]
    assert [r["leechers"] for r in rows] == ["1", "2", "3"] * 2
