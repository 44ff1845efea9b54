"""vmc.sim at the paper's scale (issue 19 items 3-4): the replay always moves its clock forward (no
event storm at one virtual instant), and its cost per request does not grow with the workload."""

from __future__ import annotations

import pytest

from vmc.core.machine import MachineConfig
from vmc.sim import Arrival, SimConfig, VmcSim


def test_a_replay_late_in_virtual_time_ends() -> None:
    """Three requests 2,369 s into a replay (the scale of a 5,000-file batch of high-vhigh). A flow
    left with a float residue of bytes smaller than its rate moves in one step of the clock at that
    time (1e9 B/s x 4.5e-13 s) has a next report time that rounds to ``now``: before the fix the
    replay re-ran ticks at that one instant until its event bound (the event storm that cut the
    25k high-low and high-vhigh runs)."""
    arrivals = [
        Arrival(2368.869621, "c0", "/o0?size=792891"),
        Arrival(2368.905216, "c2", "/o0?size=23495"),
        Arrival(2369.169334, "c1", "/o1?size=400374"),
    ]
    for counting in (True, False):
        cfg = SimConfig(
            origin_rate=0.0,
            origin_link=5173493.818079544,
            counting=counting,
            machine=MachineConfig(window=8 << 20, disk_budget=0, sharing=True),
        )
        r = VmcSim(arrivals, cfg, seed=1).run(until=1e9, max_events=200_000)
        assert r.complete, f"cut at {r.events} events (counting={counting})"
        assert r.digests_ok == 3
        assert r.clock_steps >= 1  # the residue was there, and carried by one step of the clock
        # a few events per 16 KiB step of each flow, not hundreds of thousands
        assert r.events < 2_000


def test_figures_are_csv_and_png_with_the_tables_figures(tmp_path) -> None:
    """``--figures``: per scenario the (a)/(b) curves as CSV (one row per file downloaded) whose
    last row is Table 2's totals, the PNG beside it, and metadata.json."""
    import csv
    import json

    from vmc.experiments.tables import main

    rc = main(["--backend", "sim", "-n", "60", "--batch", "30", "--scenario", "high-vhigh",
               "--figures", "--out", str(tmp_path)])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "vmc_sim_high-vhigh.csv").open()))
    assert [int(r["files"]) for r in rows] == list(range(1, 61))
    doc = json.loads((tmp_path / "sim_results.json").read_text())
    (row,) = doc["rows"]
    last = rows[-1]
    assert float(last["normal_origin_MB"]) == pytest.approx(row["normal_MB"], abs=1e-5)
    assert float(last["vmc_origin_MB"]) == pytest.approx(row["vmc_MB"], abs=1e-5)
    assert float(last["normal_latency_s"]) == pytest.approx(row["latency_sum_normal_s"], abs=1e-4)
    assert float(last["vmc_latency_s"]) == pytest.approx(row["latency_sum_vmc_s"], abs=1e-4)
    assert (tmp_path / "vmc_sim_high-vhigh.png").stat().st_size > 0
    assert json.loads((tmp_path / "metadata.json").read_text())["params"]["figures"] is True
    # every file under its final name, nothing left under a temporary one (outputs' ".*.part")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "metadata.json", "sim_results.json", "vmc_sim_high-vhigh.csv", "vmc_sim_high-vhigh.png"]
