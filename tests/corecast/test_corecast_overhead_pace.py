"""Section 6 at the paper's real-time pace (issue 18): ``--pace-ms 25`` offers one chunk every
25 ms, so the rate grows with the scale (the paper's Fig. 8), and ``--itr-send batch`` runs
the ITR on its TxBatch + UDP GSO send path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from corecast.experiments import overhead as ov

REPO = Path(__file__).resolve().parents[2]
#: session 24's 420 runs at 12k/s, the committed series the checks below read back
MAIN_SERIES = REPO / "docs/results/corecast/overhead-main-s24.part.jsonl"


def _main_series() -> list[dict]:
    return [json.loads(ln) for ln in MAIN_SERIES.read_text().splitlines()]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corecast", "experiment", "overhead", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_paced_rate_is_one_chunk_of_the_corecast_stream_per_period():
    # the payload and one header a client, every 25 ms: 40 x (clients + 1) packets/s
    assert ov.paced_rate(1, ov.PAPER_PACE_MS) == 40 * (1429 + 1)
    assert ov.paced_rate(7, ov.PAPER_PACE_MS) == 40 * (10_003 + 1)  # the paper's ~400k
    assert ov.paced_rate(1, 50.0) == 20 * 1430
    subs = ov.subjects(kernel=True)
    keys = ov.plan(2, (1, 7), (12_000.0,), subs, pace_ms=25.0)
    assert len(keys) == 2 * 2 * 3
    assert {k[2] for k in keys if k[1] == 1} == {57_200.0}
    assert {k[2] for k in keys if k[1] == 7} == {400_160.0}
    assert ov.rates_at(3, (1.0, 2.0), None) == (1.0, 2.0)


def test_defaults_keep_the_configuration_of_the_series_before_them():
    """A part file of the 12k/s series (no itr_send, no pace_ms in its configuration) still
    resumes: the defaults add neither key."""
    base = ov.configuration((1, 2), (12_000.0,), 30.0, 3, 0, (ov.Lookup.TRIE,), (True,), True,
                            3.0)
    assert "itr_send" not in base and "pace_ms" not in base and base["rates"] == [12_000.0]
    paced = ov.configuration((1, 2), (12_000.0,), 30.0, 3, 0, (ov.Lookup.TRIE,), (True,), True,
                             3.0, ov.ItrSend.BATCH, 25.0)
    assert paced["itr_send"] == "batch" and paced["pace_ms"] == 25.0 and paced["rates"] == []
    opts = ov.options(paced)
    assert "--pace-ms 25" in opts and "--itr-send batch" in opts and "--rate" not in opts
    assert "--itr-send" not in ov.options(base) and "--rate 12000" in ov.options(base)
    # the committed main series reads back under today's defaults
    first = _main_series()[0]
    assert first["config"] == ov.configuration(
        tuple(first["config"]["scales"]), (12_000.0,), 30.0, first["config"]["chunks"],
        first["config"]["pad"], (ov.Lookup.TRIE,), (True,), True, first["config"]["idle_s"])


def test_the_itr_share_of_a_core_agrees_with_its_cost_per_packet():
    """ITR % (CPU seconds over the send's seconds) and ITR us (CPU per packet taken in) are
    two readings of the same getrusage figure: at 12k/s, % ~ us x 1.2 (idle windows add a
    little to both)."""
    rows = _main_series()
    for cell in ov._summarise(rows):
        for label, v in cell["subjects"].items():
            if label == "kernel":
                assert v["itr_cpu_pct"] is None
                continue
            expect = v["itr_us_per_pkt"] * cell["rate"] / 1e4
            assert abs(v["itr_cpu_pct"] - expect) < 0.1 * expect, (cell["scale"], label)


def test_paired_ratios_are_the_ones_docs_corecast_reports_for_the_main_series():
    """docs/corecast.md, "The third sitting": computed there by a script over the part file,
    now by ``paired`` (and printed under ``--table``)."""
    rows = _main_series()
    got = {p.what: (round(p.mean, 3), round(p.half, 3), p.n) for p in ov.paired(rows)}
    assert got["CoreCast / plain, ITR process"] == (0.995, 0.010, 140)
    assert got["CoreCast / plain, whole machine"] == (0.982, 0.021, 134)
    assert got["CoreCast / plain, core batch path"] == (0.697, 0.030, 140)
    assert got["CoreCast / kernel, whole machine"] == (3.277, 0.093, 131)
    assert list(got)[0] == "CoreCast / plain, ITR process"
    # one repetition alone: a mean, no interval
    one = ov.paired([r for r in rows if r["rep"] == 0 and r["scale"] == 1])
    assert all(p.n == 1 and p.half != p.half for p in one)


def test_pace_and_rate_together_are_refused():
    r = _cli("--quick", "--pace-ms", "25", "--rate", "12000")
    assert r.returncode == 2 and "give it or --rate, not both" in r.stderr
    r = _cli("--quick", "--itr-send", "gso")
    assert r.returncode == 2 and "--itr-send" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.root
@pytest.mark.slow
def test_a_paced_run_on_the_batch_send_path(tmp_path):
    """Real namespaces: scale 1 at the paper's 25 ms pace (57,200 packets/s), the ITR on its
    TxBatch + GSO path; every subject is offered the paced rate and the ITR forwards."""
    r = ov.run(quick=True, scales=(1,), reps=1, chunks=1, out_dir=str(tmp_path), kernel=True,
               send=ov.ItrSend.BATCH, pace_ms=25.0)
    rows = {row["subject"]: row for row in r["rows"]}
    assert set(rows) == {"kernel", "plain/trie", "corecast/trie/hash on"}
    for row in rows.values():
        assert row["rate"] == 57_200.0 and row["config"]["itr_send"] == "batch"
        assert row["config"]["pace_ms"] == 25.0 and row["send_pps"] > 0
    for label in ("plain/trie", "corecast/trie/hash on"):
        row = rows[label]
        assert row["itr_in"] > 0 and row["cap_rx"] >= row["itr_out"] > 0
    meta = json.loads((tmp_path / "overhead.json").read_text())["metadata"]["params"]
    assert meta["itr_send"] == "batch" and meta["pace_ms"] == 25.0
    table = _cli("--table", str(tmp_path / ov.PART))
    assert table.returncode == 0 and "--pace-ms 25" in table.stdout
    assert "--itr-send batch" in table.stdout and "57,200" in table.stdout
