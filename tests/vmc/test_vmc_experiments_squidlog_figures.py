"""vmc experiment squidlog --backend sim --figures (issue 19 items 4-5): the (a)/(b) curves of a
Squid log replayed in simulated time carry every request of the log, past the 2,000 the proxy's
status log keeps in detail, as ``vmc experiment tables --backend sim --figures`` does."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vmc.core.stats import Stats
from vmc.experiments.squidlog import main
from vmc.workload.synth import SCENARIOS, generate

#: More requests than the status log's detail ring keeps, in one run (``--batch 0``).
N = 2_100


def _log(path: Path, n: int, scenario: str = "high-high") -> Path:
    path.write_text("".join(e.format() + "\n" for e in generate(SCENARIOS[scenario], n, seed=1)))
    return path


def test_figures_carry_every_request_of_a_log_past_the_status_ring(tmp_path: Path,
                                                                   capsys) -> None:
    assert N > Stats().keep  # the ring the old curves were cut at
    log = _log(tmp_path / "access.log", N)
    out = tmp_path / "figs"
    rc = main(["--backend", "sim", "--log", str(log), "--scenario", "high-high", "--batch", "0",
               "--figures", "--out", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    rep = doc["replay"]
    assert rep["requests"] == N and rep["failed"] == 0 and rep["batch"] == N
    # one row per file downloaded, every one of them, in arrival order
    rows = list(csv.DictReader((out / "vmc_sim_high-high.csv").open()))
    assert [int(r["files"]) for r in rows] == list(range(1, N + 1))
    # the curves end on the replay's totals (nothing cut before the end)
    last = rows[-1]
    assert float(last["normal_origin_MB"]) == pytest.approx(rep["normal_MB"], abs=1e-3)
    assert float(last["vmc_origin_MB"]) == pytest.approx(rep["vmc_MB"], abs=1e-3)
    assert float(last["normal_latency_s"]) == pytest.approx(rep["latency_sum_normal_s"], abs=1e-3)
    assert float(last["vmc_latency_s"]) == pytest.approx(rep["latency_sum_vmc_s"], abs=1e-3)
    assert (out / "vmc_sim_high-high.png").stat().st_size > 0
    # the JSON document is also written beside the figures, and nothing under a temporary name
    assert json.loads((out / "squidlog.json").read_text())["replay"]["requests"] == N
    assert sorted(p.name for p in out.iterdir()) == [
        "metadata.json", "squidlog.json", "vmc_sim_high-high.csv", "vmc_sim_high-high.png"]


@pytest.mark.parametrize("extra, says", [
    (["--figures"], "--figures needs --out"),
    (["--figures", "--out", "OUT", "--backend", "loopback"], "--figures: with --backend sim"),
])
def test_figures_refuse_what_they_cannot_draw_in_one_line(tmp_path: Path, extra: list[str],
                                                          says: str) -> None:
    log = _log(tmp_path / "access.log", 5)
    argv = [sys.executable, "-m", "vmc.experiments.squidlog", "--log", str(log)]
    argv += ["--backend", "sim"] + [str(tmp_path / "o") if x == "OUT" else x for x in extra]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2
    assert "Traceback" not in cp.stderr
    last = cp.stderr.strip().splitlines()[-1]
    assert last.startswith("vmc experiment squidlog: error:") and says in last
    assert not (tmp_path / "o").exists()
