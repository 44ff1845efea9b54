"""Every benchmark runs in --quick mode and writes its JSON, so none can rot.

A benchmark module may declare ``REQUIRES = {"root": True, "tools": ["nginx"]}``;
without them the case skips with a reason (a failure under CI=true).

Figures are not checked here (speed is never asserted in a test); only that the
benchmark ran, measured something, and wrote a well-formed result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.harness import RESULTS, available  # noqa: E402
from deliverykit.testing import require_root, require_tool  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_benchmark_quick_mode_runs(name):
    import importlib

    needs = getattr(importlib.import_module(f"bench.bench_{name}"), "REQUIRES", {})
    if needs.get("root"):
        require_root()
    require_tool(*needs.get("tools", ()))
    out = subprocess.run(
        [sys.executable, "-m", "bench.harness", "--quick", name],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((RESULTS / f"{name}.json").read_text())
    assert result["quick"] is True and result["name"] == name
    assert result["rows"], "a benchmark must measure something"
    assert result["machine"]["cores"] >= 1
    assert f"### {result['title']}" in out.stdout  # the markdown table was printed
    assert_reporting_rules(name, result, out.stdout)


def assert_reporting_rules(name: str, result: dict, stdout: str) -> None:
    """Issue 16 item 10 / issue 17: the structure, never the speed."""
    assert len(result["load"]["before"]) == 3 and len(result["load"]["after"]) == 3
    assert "load average" in stdout
    subjects = {r["subject"] for r in result["rows"]}
    for c in result.get("comparisons", []):
        if c["kind"] == "measured":
            # the anchor ran in this run: it is a row of the table, and the ratio column is
            # computed from its samples and ours, nothing else
            assert c["reference"] is None and c["anchor"] in subjects, c["name"]
            ours, anchor = c["ours"]["samples"], c["anchor_figure"]["samples"]
            want = ([o / a for o, a in zip(ours, anchor)] if len(ours) == len(anchor)
                    else [o / a for o in ours for a in anchor])
            assert c["ratio"]["samples"] == pytest.approx(want), c["name"]
        else:
            # a reference figure carries its source and never sits in a measured column
            assert c["kind"] == "reference" and c["anchor_figure"] is None, c["name"]
            assert c["reference"]["source"].strip(), c["name"]
            assert c["ratio"]["samples"] == pytest.approx(
                [o / c["reference"]["value"] for o in c["ours"]["samples"]]), c["name"]
            assert c["anchor"] not in subjects, c["name"]
    for r in result["rows"]:
        for key, v in r.items():
            # figures measured more than once are reported as median or range, not as one pick
            if isinstance(v, dict) and "samples" in v:
                assert v["range"] == (min(v["samples"]) > 0 and max(v["samples"]) / min(
                    v["samples"]) > 1.2 or min(v["samples"]) <= 0 < max(v["samples"])), key
    if name != "sim":  # bench_sim is another helper's and has no anchors
        assert result.get("repeats", 0) >= 2, "repeats are interleaved: at least two"


# ------------------------------------------------------------------ the reporting model
# (issue 16 item 10, issue 17): measured anchors and reference figures never share a
# column, repeats are interleaved, a figure that swings > 20% is a range, the load is said.

from bench.harness import Figure, Reference, interleaved, markdown, measured, referenced  # noqa: E402


def test_figure_is_the_median_when_repeats_agree_and_a_range_when_they_swing():
    steady = Figure.of([10.0, 11.0, 11.5])
    assert not steady.swings and steady.median == 11.0 and str(steady) == "11"
    wild = Figure.of([10.0, 13.0, 11.0])  # 13/10 = 1.3 > 1.2
    assert wild.swings and str(wild) == "10-13"
    assert wild.to_json()["range"] is True and wild.to_json()["lo"] == 10.0


def test_interleaved_runs_subjects_in_turn_not_in_blocks():
    calls: list[str] = []
    got = interleaved({"A": lambda: calls.append("A") or 1.0,
                       "B": lambda: calls.append("B") or 2.0}, repeats=3)
    assert calls == ["A", "B", "A", "B", "A", "B"]
    assert got == {"A": [1.0, 1.0, 1.0], "B": [2.0, 2.0, 2.0]}


def test_a_reference_needs_its_source():
    with pytest.raises(ValueError):
        Reference(25.0, "MB/s", "")


def test_measured_and_reference_ratios_are_rendered_in_separate_columns():
    m = measured("ours/libtorrent", [10.0, 20.0], [20.0, 40.0], anchor="libtorrent TCP",
                 unit="MB/s", target=">= 1")
    r = referenced("ours/libswift", [10.0, 20.0],
                   Reference(25.0, "MB/s", "libswift 1 KiB, issue 17"), anchor="libswift")
    assert m.ratio is not None and m.ratio.median == 0.5 and not m.ratio.swings  # per-pair
    assert str(r.ratio) == "0.4-0.8"  # 10/25 .. 20/25: swings, so a range
    text = markdown({"name": "x", "title": "T", "rows": [{"subject": "a", "MB/s": 1.0}],
                     "comparisons": [m, r], "load": {"before": [1.0, 1, 1], "after": [2.0, 2, 2],
                                                     "cores": 2}})
    head = next(line for line in text.splitlines() if "vs anchor (measured)" in line)
    cols = [c.strip() for c in head.strip("|").split("|")]
    mi, ri = cols.index("vs anchor (measured)"), cols.index("vs reference (source)")
    mrow = next(line for line in text.splitlines() if line.startswith("| ours/libtorrent"))
    rrow = next(line for line in text.splitlines() if line.startswith("| ours/libswift"))
    mcells = [c.strip() for c in mrow.strip("|").split("|")]
    rcells = [c.strip() for c in rrow.strip("|").split("|")]
    assert mcells[mi] == "0.5" and mcells[ri] == ""
    assert rcells[mi] == "" and rcells[ri].startswith("0.4-0.8")
    assert "libswift 1 KiB, issue 17" in rrow
    assert "load average" in text and "1.00 -> 2.00" in text
