"""m2c.sim at issue 18's scale: per-receiver links, a shared backbone, iterative-only
decoding exposed to the experiments, membership load, and the 1,000-receiver
experiment (m2c/experiments/many.py) in its quick mode."""

from __future__ import annotations

import csv
import json

import pytest

from deliverykit.sim.network import Fate
from m2c import sim
from m2c.experiments import many


def test_per_receiver_delays_and_a_backbone_crossed_once_per_datagram() -> None:
    sc = sim.file_transfer(3, 64 << 10, down_bps=[4e6, 2e6, 1e6], delay=[0.005, 0.02, 0.05],
                           core_bps=100e6, seed=1)
    assert [n.down.delay for n in sc.nodes[1:]] == [0.005, 0.02, 0.05]
    app = sim.M2CApp(sc, 1)
    s = sim.Simulation(sc, app)
    s.run()
    assert len(app.recovered) == 3 and all(app.verified(n) for n in app.receiver_names)
    core = s.network.bottlenecks[0]
    # every datagram the sender sent crossed the backbone at most once, though
    # three receivers took most of them
    assert app.sender is not None and core.sent <= app.sender.sent
    # the copies made past the backbone (delivered, or dropped at an access link, or to
    # a receiver already done) outnumber backbone packets; delivered copies alone need
    # not, when a 64 KiB file's fast receivers are done within 0.3-0.5 s
    fanned = sum(s.network.fates) - s.network.fates[Fate.NO_ROUTE]
    assert fanned > core.sent


def test_iterative_only_decoding_costs_more_symbols_than_elimination() -> None:
    out = {}
    for mode in ("ml", "iterative"):
        res = sim.run(sim.file_transfer(1, 1 << 20, down_bps=4e6, decoding=mode, seed=2))
        assert res.all_verified
        out[mode] = res.receivers[0].metrics["sym"]
    assert out["iterative"] > out["ml"] + 2  # percent of k


def test_membership_reports_are_every_join_and_leave() -> None:
    res = sim.run(sim.file_transfer(2, 256 << 10, down_bps=[4e6, 1e6], seed=3))
    times = res.membership_s
    # the core's Join/Leave events, plus the leaves of each receiver once done
    assert len(times) >= sum(r.joins + r.leaves for r in res.receivers)
    assert list(times) == sorted(times)
    load = many.membership_load(times)
    assert load["reports"] == len(times) and load["peak_per_s"] >= load["mean_per_s"] > 0


def test_identical_receivers_behind_identical_links_are_identical_runs() -> None:
    """Why fig5's sim sweep may run one receiver for the paper's five: with no
    competing traffic each of five equal receivers sees the same packets."""
    res = sim.run(sim.file_transfer(5, 512 << 10, down_bps=1e6, seed=4))
    first = res.receivers[0]
    for r in res.receivers[1:]:
        assert (r.completion_s, r.metrics, r.joins, r.leaves) == (
            first.completion_s, first.metrics, first.joins, first.leaves)


def test_links_follow_the_stated_distribution_and_the_seed() -> None:
    a, b = many.draw_links(400, 0), many.draw_links(400, 0)
    assert a == b and a != many.draw_links(400, 1)
    assert all(0.5e6 <= r <= 6e6 for r in a.rate_bps)
    assert all(0.005 <= d <= 0.05 for d in a.delay_s)
    lossless = sum(1 for p in a.loss if p == 0)
    assert 150 < lossless < 250 and max(a.loss) <= 0.02


def test_many_quick_writes_the_cdf_and_a_verdict(tmp_path, capsys) -> None:
    assert many.main(["--quick", "--receivers", "6", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "goal every receiver <= 1.10x: " in out
    verdict = out.split("goal every receiver <= 1.10x: ")[1].split()[0]
    assert verdict in ("PASS", "FAIL")
    rows = list(csv.DictReader(open(tmp_path / "many-receivers.csv")))
    assert len(rows) == 6 and all(r["verified"] == "True" for r in rows)
    cdf = list(csv.DictReader(open(tmp_path / "many-cdf.csv")))
    assert [float(r["fraction"]) for r in cdf] == pytest.approx([i / 6 for i in range(1, 7)],
                                                                 abs=1e-5)
    ratios = [float(r["ratio"]) for r in cdf]
    assert ratios == sorted(ratios) and ratios[0] > 1.0  # nobody beats the link
    data = json.load(open(tmp_path / "many.json"))
    assert data["passed"] == (verdict == "PASS") == all(x <= 1.10 for x in ratios)
    assert data["membership"]["reports"] > 0 and (tmp_path / "many-cdf.png").stat().st_size


def test_many_bad_input_is_one_line_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        many.main(["--min-mbps", "9"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_many_trace_writes_the_named_receivers_epochs(tmp_path) -> None:
    """``--trace``: the per-epoch join trace of the named receivers (issue 18's profile
    of a fast and a slow receiver), one row per epoch, levels and times in order."""
    assert many.main(["--quick", "--receivers", "3", "--out", str(tmp_path),
                      "--trace", "r001,r003"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "many-trace.csv")))
    assert {r["receiver"] for r in rows} == {"r001", "r003"}
    assert list(rows[0]) == list(many.TRACE_FIELDS)
    for name in ("r001", "r003"):
        ts = [float(r["t_s"]) for r in rows if r["receiver"] == name]
        assert len(ts) > 5 and ts == sorted(ts)
        assert max(int(r["level"]) for r in rows if r["receiver"] == name) > 0
    assert "trace" not in json.load(open(tmp_path / "many.json"))


@pytest.mark.parametrize("argv", [["--receivers", "3", "--trace", "r004", "--out", "."],
                                  ["--receivers", "3", "--trace", "r1", "--out", "."],
                                  ["--receivers", "3", "--trace", "r001"],
                                  ["--trace", ","]])
def test_many_trace_bad_names_are_one_line_exit_2(argv, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        many.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err
