"""`deliverykit sim validate --quick`: the three small scenarios on the namespace
testbed and in the simulator, per metric side by side (needs root)."""

from __future__ import annotations

import csv
import json

import pytest

from deliverykit.sim.validate import METRICS, Comparison, cases, table
from deliverykit.testing import require_root


def test_relative_difference_and_table() -> None:
    c = Comparison("crowd6", "mean_completion_s", 2.0, 2.5)
    assert c.rel_diff == pytest.approx(0.25)
    assert Comparison("x", "m", None, 1.0).rel_diff is None
    assert Comparison("x", "m", 0.0, 1.0).rel_diff is None
    text = table([c, Comparison("x", "m", 1.0, 1.05)])
    lines = text.splitlines()
    assert lines[1].endswith("+25% *") and lines[2].endswith("+5%")


def test_the_three_scenarios() -> None:
    # swift's cases (the ones with the default table; m2c's have their own tests)
    built = {c.name: c.build(64 * 1024, 1) for c in cases() if c.metrics is METRICS}
    assert list(built) == ["crowd6", "lossy2", "hetero-delay"]
    leechers = {k: [n for n in sc.nodes if n.role == "leecher"] for k, sc in built.items()}
    assert len(leechers["crowd6"]) == 6 and {n.up.rate for n in leechers["crowd6"]} == {1.2e6}
    assert all(n.up.loss.p == 0.02 for n in built["lossy2"].nodes)  # the seeder's too
    # Fig. 5's one-way delays on top of the testbed's access link
    from swift.experiments.swarm import TESTBED_DELAY
    assert sorted(n.up.delay for n in leechers["hetero-delay"]) == pytest.approx(
        [TESTBED_DELAY + d for d in (0.010, 0.025, 0.050, 0.100)])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_validate_quick(tmp_path, capsys) -> None:
    require_root()
    from deliverykit.cli import main
    out = tmp_path / "validate.csv"
    # swift's three (other packages' cases, m2c's, have their own tests)
    assert main(["sim", "validate", "--quick", "--only", "crowd6,lossy2,hetero-delay",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in ("crowd6", "lossy2", "hetero-delay"):
        assert f"{name}: netns 6/6 verified" in printed or f"{name}: netns 4/4 verified" in printed
        assert f"{name}: sim " in printed
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * len(METRICS)
    assert all(r["netns"] and r["sim"] for r in rows if r["metric"] != "mean_startup_s")
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["repeats"] == 1 and set(record["cases"]) == {"crowd6", "lossy2", "hetero-delay"}
    # each run's own metrics (the spread behind the means) and where they came from
    for rec in record["cases"].values():
        for b in ("netns", "sim"):
            (run,) = rec[b]["runs"]
            assert run["seed"] == 1 and set(METRICS) <= set(run)
    assert record["metadata"]["commit"] and record["metadata"]["params"]["quick"] is True
    assert not list(tmp_path.glob("*.tmp"))
