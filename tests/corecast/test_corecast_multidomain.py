"""`corecast experiment multidomain`: the ITR placement and the cost columns (issue 18)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

CMD = [sys.executable, "-m", "corecast.cli", "experiment", "multidomain", "--backend", "sim"]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CMD + args, capture_output=True, text=True, timeout=300)


def test_source_as_itr_writes_the_same_per_as_rows(tmp_path):
    outs = {}
    for itr in ("separate", "source"):
        d = tmp_path / itr
        d.mkdir()
        p = _run(["--ases", "10", "--clients", "60", "--seconds", "0.25", "--itr", itr,
                  "--out", str(d)])
        assert p.returncode == 0, p.stderr
        rows = {r["quantity"]: r for r in csv.DictReader(open(d / "multidomain.csv"))}
        assert rows["itr"]["ours"] == itr
        assert rows["transit_bytes"]["ours"] == rows["transit_bytes"]["model"]
        assert rows["local_bytes"]["ours"] == rows["local_bytes"]["model"]
        assert float(rows["cpu_us_per_client_chunk"]["ours"]) > 0
        assert rows["load_1min_start"]["ours"] and rows["load_1min_end"]["ours"]
        outs[itr] = ((d / "multidomain-as.csv").read_text(), rows)
    assert outs["source"][0] == outs["separate"][0]
    # 10 chunks x (2 k + j) against 10 x (3 k + j + 1)
    assert int(outs["source"][1]["datagrams"]["ours"]) == 10 * (2 * 60 + 10)
    assert int(outs["separate"][1]["datagrams"]["ours"]) == 10 * (3 * 60 + 10 + 1)


def test_cost_curve_reports_cpu_per_client_chunk_and_the_load(tmp_path):
    p = _run(["--cost-curve", "--seconds", "0.1", "--max-clients", "100", "--itr", "source",
              "--out", str(tmp_path)])
    assert p.returncode == 0, p.stderr
    (row,) = list(csv.DictReader(open(tmp_path / "multidomain-cost.csv")))
    assert (row["ases"], row["clients"], row["itr"], row["eqs_3_5_equal"]) == (
        "10", "100", "source", "True")
    cc = int(row["chunks"]) * 100
    assert abs(float(row["cpu_us_per_client_chunk"]) - 1e6 * float(row["cpu_s"]) / cc) < 0.1 + (
        1e6 * 0.005 / cc)  # cpu_s is rounded to 10 ms in the CSV
    assert float(row["load_start"]) >= 0


def test_bad_itr_placement_is_one_line(tmp_path):
    p = _run(["--itr", "router", "--out", str(tmp_path)])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--itr" in p.stderr.strip().splitlines()[-1]
    assert os.listdir(tmp_path) == []


def test_the_commit_row_names_the_code_read_before_the_run():
    """A long run outlives HEAD (other commits land meanwhile): the row carries the
    commit read when the run started, not when it wrote its CSV."""
    from corecast.experiments.multidomain import Shape, run_shape, summary_rows

    res, s, cost = run_shape(Shape(10, 20), 0.1)
    rows = {q: ours for q, ours, _m, _p in summary_rows(res, s, cost, 0.1, commit="0123abc")}
    assert rows["commit"] == "0123abc"
