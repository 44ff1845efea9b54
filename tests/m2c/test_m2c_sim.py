"""M2C in the simulator (m2c/sim.py): the sender and receiver cores that run on
multicast sockets, in virtual time over deliverykit.sim's network model."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from deliverykit.sim import Simulation
from m2c.core.events import Join, Leave
from m2c.sim import M2CApp, file_transfer, run


def test_three_receivers_recover_the_file_byte_identical():
    sc = file_transfer(3, 256 << 10, seed=1)
    res = run(sc)
    assert [r.verified for r in res.receivers] == [True, True, True]
    for r in res.receivers:
        assert r.completion_s is not None and r.completion_s > 0
        assert r.metrics["gput"] > 0 and r.metrics["sym"] >= 0
        assert r.end is None
    assert res.sender["packets"] > 0


def test_a_corrupted_block_is_not_verified():
    """The check can fail: one flipped byte in one receiver's decoded bytes is caught,
    the other receiver is verified."""
    from m2c.core.session import Decoded

    sc = file_transfer(2, 64 << 10, seed=1)

    class Flipping(M2CApp):
        flipped = False

        def on_event(self, host, event):
            if isinstance(event, Decoded) and host.name == "r002" and not self.flipped:
                self.flipped = True
                data = bytearray(event.data)
                data[len(data) // 2] ^= 1
                event = Decoded(event.offset, bytes(data))
            super().on_event(host, event)

    app = Flipping(sc, sc.seed)
    Simulation(sc, app).run()
    assert app.flipped and sorted(app.recovered) == ["r001", "r002"]
    assert app.verified("r001") and not app.verified("r002")
    assert hashlib.sha256(app.data).hexdigest() == app.sd.sha256


def test_same_seed_same_run_byte_for_byte():
    sc = file_transfer(3, 128 << 10, down_bps=[4e6, 2e6, 1e6], loss=[0.0, 0.01, 0.03],
                       seed=5)
    a, b = run(sc, trace=True), run(sc, trace=True)
    assert a.trace_hash == b.trace_hash
    ja, jb = a.to_json(), b.to_json()
    for j in (ja, jb):
        j["summary"].pop("cpu_s")
    assert json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)
    assert [r.trace for r in a.receivers] == [r.trace for r in b.receivers]
    # another seed draws other losses (and another session and FEC seed)
    c = run(file_transfer(3, 128 << 10, down_bps=[4e6, 2e6, 1e6], loss=[0.0, 0.01, 0.03],
                          seed=6), trace=True)
    assert c.trace_hash != a.trace_hash


def test_same_seed_same_result_in_another_process():
    args = [sys.executable, "-m", "m2c.sim", "--receivers", "2", "--size-kib", "64",
            "--loss", "0", "0.02", "--seed", "3", "--json"]
    outs = []
    for _ in range(2):
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        j = json.loads(p.stdout)
        j["summary"].pop("cpu_s")
        outs.append(j)
    assert outs[0] == outs[1]
    assert outs[0]["summary"]["verified"] == 2


def test_a_lossy_slow_link_makes_the_receiver_drop_layers():
    """The receiver behind 1 Mb/s with 2 % loss climbs, sees loss events, leaves
    groups (Leave events reach the network) and settles lower than the 4 Mb/s ones."""
    sc = file_transfer(3, 1 << 20, down_bps=[4e6, 4e6, 1e6], loss=[0.0, 0.0, 0.02], seed=1)
    seen: dict[str, list[object]] = {}

    class Recording(M2CApp):
        def on_event(self, host, event):
            if isinstance(event, (Join, Leave)):
                seen.setdefault(host.name, []).append(event)
            super().on_event(host, event)

    app = Recording(sc, sc.seed)
    sim = Simulation(sc, app)
    sim.run()
    assert all(app.verified(n) for n in app.receiver_names)
    slow = sim.hosts["r003"].core
    fast = sim.hosts["r001"].core
    assert any(isinstance(e, Leave) for e in seen["r003"])
    assert slow.cc.loss_events > 0 and slow.cc.loss.lost > 0
    levels = [e[1] for e in slow.trace]
    peak = levels.index(max(levels))
    assert min(levels[peak:]) < max(levels)  # a layer dropped after the peak
    # it ends below what the unconstrained receivers hold
    assert levels[-1] < max(e[1] for e in fast.trace)
    # every Leave was handed to the network: the group's membership ends
    net = sim.network
    for g in net.groups.values():
        left = g.members.get("r003")
        assert left is None or left[1] is not None


def test_fig5_on_the_simulator_gives_m2c_rows_and_intervals(tmp_path, capsys):
    """``m2c experiment fig5 --backend sim``: M2C_ft in virtual time (no root), one row
    per receiver and run, the summary with 95 % intervals, the outputs written."""
    import csv

    from m2c.experiments import fig5

    assert fig5.main(["--backend", "sim", "--size", "131072", "--receivers", "2",
                      "--repeats", "2", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "fig5-runs.csv")))
    assert len(rows) == 4 and {r["flow"] for r in rows} == {"M2C_ft"}
    assert all(r["ok"] == "True" for r in rows)
    summ = list(csv.DictReader(open(tmp_path / "fig5-summary.csv")))
    assert len(summ) == 1 and summ[0]["runs"] == "2" and summ[0]["gput_ci"] != ""
    assert "TCP_ft and the competing TCP" in capsys.readouterr().err


def test_fig5_sweep_runs_on_two_dask_workers(tmp_path):
    """``--sweep receivers=1,2 --seeds 2``: four tasks on a 2-worker LocalCluster, one
    CSV row each with provenance, and the per-point mean and CI."""
    import csv

    from m2c.experiments import fig5

    assert fig5.main(["--backend", "sim", "--size", "65536", "--sweep", "receivers=1,2",
                      "--seeds", "2", "--workers", "2", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "fig5-sim-sweep.csv")))
    assert sorted((r["receivers"], r["seed"]) for r in rows) == [
        ("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")]
    assert all(r["commit"] and float(r["gput"]) > 0 for r in rows)
    summ = list(csv.DictReader(open(tmp_path / "fig5-sim-sweep.summary.csv")))
    assert sorted(r["receivers"] for r in summ) == ["1", "2"]
    assert all(r["n"] == "2" and r["time_ci95"] not in ("", "nan") for r in summ)


def test_fig5_sweep_needs_the_simulator():
    import pytest

    from m2c.experiments import fig5

    with pytest.raises(SystemExit) as e:
        fig5.main(["--sweep", "receivers=1,2"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        fig5.main(["--backend", "sim", "--sweep", "leechers=1,2"])
    assert e.value.code == 2


def test_sim_cli_bad_input_is_one_line_exit_2():
    for args in (["--receivers", "0"], ["--receivers", "2", "--loss", "0", "0", "0"],
                 ["--controller", "nope"], ["--down-bps", "-1"]):
        p = subprocess.run([sys.executable, "-m", "m2c.sim", *args], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr
        assert p.stderr.strip().splitlines()[-1].startswith("python -m m2c.sim: error: ")


def test_summary_counts_membership_changes_per_second():
    res = run(file_transfer(2, 64 << 10, seed=1))
    s = res.summary()
    n = sum(r.joins + r.leaves for r in res.receivers)
    assert n > 2 and s["joins_leaves_per_s"] == n / res.run.virtual_s
