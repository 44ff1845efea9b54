"""Experiment tooling without a network: Student t intervals, the Fig. 5 summary
and its CSV/JSON outputs, the offline duplicate simulation, and the receiver's
elimination schedule (LDPC rank deficiency)."""

from __future__ import annotations

import csv
import json
import math
import os
import random
import statistics
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from m2c.experiments import fig5
from m2c.experiments.stats import mean_ci, summarise, t_cdf, t_quantile
from m2c.fec import ldpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("df, q", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622),
                                   (19, 2.0930), (30, 2.0423)])
def test_t_quantiles_match_the_printed_tables(df, q):
    assert t_quantile(0.975, df) == pytest.approx(q, abs=2e-3)


def test_t_tends_to_the_normal_and_is_symmetric():
    assert t_quantile(0.975, 5000) == pytest.approx(1.95996, abs=2e-3)
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7))
    assert t_cdf(0.0, 3) == 0.5
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=12))
def test_mean_ci_is_the_t_interval(xs):
    m, half = mean_ci(xs)
    assert m == pytest.approx(statistics.fmean(xs))
    expect = t_quantile(0.975, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    assert half == pytest.approx(expect, rel=1e-9, abs=1e-12)


def test_single_run_has_no_interval():
    assert mean_ci([3.0]) == (3.0, None)


def _row(run, flow, receiver, **m):
    base = {"run": run, "flow": flow, "receiver": receiver, "ok": True, "bottleneck_mbps": 1.0,
            "competing": "background", "receivers": 5, "size": 48_000_000}
    return {**base, **m}


def test_fig5_summary_averages_receivers_then_runs_and_puts_the_paper_beside():
    rows = []
    times = {0: (500.0, 510.0), 1: (480.0, 490.0), 2: (520.0, 530.0)}
    for run, ts in times.items():
        for i, t in enumerate(ts):
            rows.append(_row(run, "M2C_ft", i + 1, time=t, dup=1.0 + run, gput=800.0))
        rows.append(_row(run, "TCP_ft", 1, time=2000.0 + 10 * run, gput=190.0))
    summ = {r["flow"]: r for r in fig5.summary(rows)}
    m2c = summ["M2C_ft"]
    per_run = [505.0, 485.0, 525.0]
    assert m2c["runs"] == 3 and m2c["ok_runs"] == 3
    assert m2c["time"] == pytest.approx(statistics.fmean(per_run))
    assert m2c["time_ci"] == pytest.approx(t_quantile(0.975, 2) * statistics.stdev(per_run)
                                           / math.sqrt(3))
    assert (m2c["time_paper"], m2c["time_paper_ci"]) == (495, 65)
    assert (summ["TCP_ft"]["time_paper"], summ["TCP_ft"]["time_paper_ci"]) == (2055, 30)
    assert "dup" not in summ["TCP_ft"]  # TCP has no FEC metrics
    # other configurations have no paper figures beside them
    other = [dict(r, receivers=1) for r in rows]
    assert all("time_paper" not in r for r in fig5.summary(other))


def test_fig5_summary_counts_runs_with_a_failed_receiver():
    rows = [_row(0, "M2C_ft", 1, time=1.0), _row(1, "M2C_ft", 1, time=2.0),
            dict(_row(1, "M2C_ft", 2, time=3.0), ok=False)]
    (r,) = fig5.summary(rows)
    assert r["runs"] == 2 and r["ok_runs"] == 1


def test_fig5_writes_csv_and_json_with_metadata(tmp_path):
    rows = [_row(run, "M2C_ft", 1, time=10.0 + run, loss=5.0) for run in range(3)]
    summ = fig5.summary(rows)
    meta = {"experiment": "m2c.experiments.fig5", "argv": ["--repeats", "3"]}
    paths = fig5.write_outputs(str(tmp_path / "out"), rows, summ, meta)
    assert [os.path.basename(p) for p in paths] == ["fig5-runs.csv", "fig5-summary.csv",
                                                     "fig5.json"]
    with open(paths[0], newline="") as f:
        runs = list(csv.DictReader(f))
    assert [r["run"] for r in runs] == ["0", "1", "2"] and runs[2]["time"] == "12.0"
    with open(paths[1], newline="") as f:
        (s,) = list(csv.DictReader(f))
    assert float(s["time"]) == pytest.approx(11.0) and float(s["time_ci"]) > 0
    assert s["time_paper"] == "495"
    with open(paths[2]) as f:
        doc = json.load(f)
    assert doc["meta"] == meta and len(doc["rows"]) == 3 and doc["summary"][0]["runs"] == 3


def test_fig5_cli_rejects_zero_repeats():
    p = subprocess.run([sys.executable, "-m", "m2c.experiments.fig5", "--repeats", "0"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "--repeats" in p.stderr


def test_summarise_groups_by_keys():
    rows = [{"a": 1, "run": 0, "x": 1.0}, {"a": 1, "run": 1, "x": 3.0},
            {"a": 2, "run": 0, "x": 5.0}]
    out = {r["a"]: r for r in summarise(rows, ["a"], ["x"])}
    assert out[1]["x"] == 2.0 and out[1]["runs"] == 2 and out[2]["x_ci"] is None


def test_dupsim_quick_runs_the_real_sender_and_receiver():
    from m2c.experiments.dupsim import one, run

    rows = run(quick=True)
    assert [r["first_level"] for r in rows] == [1, 4]
    for r in rows:
        # it decoded: at least k symbols, and the split of the extra symbols adds up
        assert r["received/k"] >= 1.0 and r["dup"] >= 0 and r["sym"] >= 0
    one_run = one(4, "const", 90.0, 0.1, 1, symbols=600)
    assert one_run["received"] == one_run["needed"] + one_run["repeats"] + one_run["done_block"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_elimination_deficit_is_a_lower_bound_on_missing_symbols(seed):
    """After a failed solve(), at least ``ml_deficit`` more distinct symbols are needed,
    and the receiver's schedule (wait for that many) decodes on the same symbol as
    trying after every symbol would (also with the values-free first pass)."""
    k, E = 300, 8
    n = 2 * k
    p = ldpc.LDPCParams(k, n, E, 5, seed)
    src = random.Random(seed).randbytes(k * E)
    rep = ldpc.encode(p, src)
    syms = [src[i * E:(i + 1) * E] for i in range(k)] + [rep[i * E:(i + 1) * E]
                                                        for i in range(n - k)]
    order = list(range(n))
    random.Random(seed + 100).shuffle(order)

    every = ldpc.LDPCDecoder(p)
    deficits = []
    first = None
    for i, esi in enumerate(order):
        if every.add(esi, syms[esi]) or (i + 1 >= k and every.solve()):
            first = i + 1
            break
        if i + 1 >= k:
            deficits.append((i + 1, every.ml_deficit))
    assert first is not None
    for at, d in deficits:
        assert d >= 1 and at + d <= first

    sched = ldpc.LDPCDecoder(p)
    wait = None
    for i, esi in enumerate(order):
        if sched.add(esi, syms[esi]):
            break
        if i + 1 >= k:
            wait = (wait if wait is not None else 1) - 1
            if wait <= 0:
                if sched.solve(partial=False):
                    break
                wait = max(1, sched.ml_deficit)
    assert i + 1 == first and sched.source_block() == src


def test_file_receiver_splits_dup_into_repeats_and_decoded_blocks(tmp_path):
    from m2c.aio.driver import make_session
    from m2c.core.filetx import FileReceiver, FileSender

    path = tmp_path / "f"
    data = random.Random(5).randbytes(40_000)
    path.write_bytes(data)
    sd = make_session(str(path), min_rate=20.0, max_rate=400.0, symbol_size=100,
                      max_block_length=100, seed=3, session=9)
    assert sd.first_level == 4
    snd = FileSender(sd, lambda o, n: data[o:o + n])
    assert snd.buffer_time == pytest.approx(4 / snd.schedule.min_rate)
    rcv = FileReceiver(sd)
    pkts = [pkt for _ in range(60) for _pdu, pkt in snd.next_pdus() if not pkt.data_less]
    for pkt in pkts[:40] + pkts[:40] + pkts[40:]:  # the first 40 twice
        rcv.feed(pkt, 128)
        if rcv.complete:
            break
    assert rcv.complete
    m = rcv.metrics(1.0, 1.0, 0, rcv.packets)
    assert m.raw["repeats"] >= 40 - m.raw["after_done"]
    assert rcv.symbols == rcv.needed + rcv.repeats + rcv.after_done
    assert m.raw["eliminations"] >= 0


def test_deferred_eliminations_run_once_per_batch(tmp_path):
    """feed(defer=True) + flush() per batch (what the driver does per loop
    iteration) recovers the same file with no more eliminations than per packet."""
    from m2c.aio.driver import make_session
    from m2c.core.filetx import FileReceiver, FileSender

    path = tmp_path / "f"
    data = random.Random(8).randbytes(150_000)
    path.write_bytes(data)
    sd = make_session(str(path), min_rate=20.0, max_rate=400.0, symbol_size=100,
                      max_block_length=800, seed=4, session=3)
    snd = FileSender(sd, lambda o, n: data[o:o + n])
    pkts = [pkt for _ in range(400) for _pdu, pkt in snd.next_pdus() if not pkt.data_less]
    random.Random(1).shuffle(pkts)

    def recover(batch: int | None) -> tuple[bytes, FileReceiver]:
        rcv = FileReceiver(sd)
        out = bytearray(sd.size)
        for i in range(0, len(pkts), batch or 1):
            for pkt in pkts[i:i + (batch or 1)]:
                for off, blk in rcv.feed(pkt, 128, defer=batch is not None):
                    out[off:off + len(blk)] = blk
            for off, blk in rcv.flush():
                out[off:off + len(blk)] = blk
            if rcv.complete:
                break
        assert rcv.complete
        return bytes(out), rcv

    single, r1 = recover(None)
    batched, r2 = recover(25)
    assert single == batched == data
    assert 0 < r2.eliminations <= r1.eliminations


def test_offsets_model_birk_crupnicoff_never_repeats_before_half_without_loss():
    """Paper 6.2: with n = 2k a receiver of any fixed level count gets no repeated
    block before it holds the ~51 % it needs, when nothing is lost."""
    from m2c.experiments.dupsim import offsets_model

    rows = {(r["offsets"], r["loss"]): r for r in offsets_model(1000, 20, losses=(0.0, 0.2))}
    assert rows[("birk-crupnicoff", 0.0)]["max_dup"] == 0.0
    assert rows[("birk-crupnicoff", 0.2)]["mean_dup"] <= rows[("golden-ratio", 0.2)]["mean_dup"]


def test_fig5_metadata_comes_from_deliverykit_provenance():
    """One implementation of the run's commit (deliverykit.provenance), not fig5's own
    git call: the commit of the m2c tree, +dirty with local changes."""
    import argparse

    import m2c
    from deliverykit.provenance import git_commit

    meta = fig5._meta(["--quick"], argparse.Namespace(quick=True))
    assert meta["commit"] == git_commit(m2c.__file__)
    assert meta["argv"] == ["--quick"] and meta["cpus"] == os.cpu_count()
    assert meta["started_utc"] and len(meta["load_average"]) == 3
