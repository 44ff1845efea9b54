"""fig5 on the simulator (issue 18): the sweep's table beside the paper's, and the
receivers' decoding as a sweep option."""

from __future__ import annotations

import csv

import pytest

from m2c.experiments import fig5

COLS = ["commit", "scenario", "seed", "bottleneck", "controller", "decoding", "receivers",
        "size", *fig5.SWEEP_METRICS]


def _csv(path, rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLS)
        w.writeheader()
        w.writerows(rows)


def test_table_has_mean_and_ci_per_configuration_and_the_papers_row(tmp_path, capsys) -> None:
    rows = [{"commit": "x", "scenario": "s", "seed": s, "bottleneck": "4000000.0",
             "controller": "m2c", "decoding": "ml", "receivers": 1, "size": 4000000,
             **{m: 10.0 + s for m in fig5.SWEEP_METRICS}} for s in range(3)]
    rows.append({**rows[0], "decoding": "iterative", "sym": 15.0})
    p = tmp_path / "sweep.csv"
    _csv(p, rows)
    assert fig5.main(["--table", str(p)]) == 0
    lines = capsys.readouterr().out.splitlines()
    ours = next(x for x in lines if x.startswith("| 4 Mb/s, sim, 4 MB | 3 |"))
    assert "11.00 +- 2.48" in ours  # mean 11, t(0.975, 2) * 1 / sqrt(3)
    assert any(x.startswith("| 4 Mb/s, sim, 4 MB, iterative-only decoding | 1 |")
               for x in lines)
    paper = next(x for x in lines if "paper 5(c)" in x)
    assert "146.00 +- 28.00" in paper and "6.06 +- 0.93" in paper


def test_table_of_a_file_that_is_not_a_sweep_is_one_line_exit_2(tmp_path, capsys) -> None:
    p = tmp_path / "other.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit) as e:
        fig5.main(["--table", str(p)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "not a fig5 sweep CSV" in err and "Traceback" not in err


def test_sweep_points_carry_the_decoding_to_the_receivers() -> None:
    point = {"bottleneck": 4e6, "size": 1 << 20, "receivers": 1, "controller": "m2c"}
    ml = fig5.sim_task({**point, "decoding": "ml"}, 0)
    it = fig5.sim_task({**point, "decoding": "iterative"}, 0)
    assert it["sym"] > ml["sym"] + 2 and it["time"] > ml["time"]
