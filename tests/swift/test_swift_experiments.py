"""The shipped experiments run (quick mode) on the namespace testbed and write
their machine-readable output (CSV, JSON metadata, PNG plots)."""

import csv
import json

import pytest


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_vod_swarm_quick(tmp_path) -> None:
    from swift.experiments.vod_swarm import SUPPLY, run
    rows = run(quick=True, leechers=4, video_s=10, algorithms=("linear", "vod"), out=str(tmp_path))
    assert [r["what"].rsplit(", ", 1)[1] for r in rows] == ["linear", "vod"]
    for r in rows:
        assert r["completed"] == "4/4", r
        assert r["rejected chunks"] == 0
        assert r["mean start-up s"] is not None
        assert r["seeder Mb/s"] == round(max(2, SUPPLY * 4), 2)  # scaled to the swarm
    with open(tmp_path / "vod_swarm-4.csv") as f:
        per = list(csv.DictReader(f))
    assert len(per) == 8 and {p["algorithm"] for p in per} == {"linear", "vod"}
    assert {p["group"] for p in per} == {"A", "B", "C", "D"}
    meta = json.loads((tmp_path / "vod_swarm-4.json").read_text())
    assert meta["parameters"]["leechers"] == 4 and meta["git_commit"] and meta["load_avg_before"]
    assert meta["summary"] == json.loads(json.dumps(rows)) and "Fig. 6" in meta["paper"]
    assert (tmp_path / "vod_swarm-4-fig6.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_flashcrowd_quick_against_libtorrent(tmp_path) -> None:
    from swift.experiments.flashcrowd import run
    rows = run(quick=True, leechers=3, size_mb=2, out=str(tmp_path))
    assert [r["system"] for r in rows] == ["swift", "libtorrent"]
    for r in rows:
        assert r["completed"] == "3/3", r
        assert r["start-up s"]["n"] == 3
    base = tmp_path / "flashcrowd-flash-3x2MiB"
    with open(f"{base}.csv") as f:
        per = list(csv.DictReader(f))
    assert [p["system"] for p in per] == ["swift"] * 3 + ["libtorrent"] * 3
    assert all(float(p["completion_s"]) > 0 for p in per)
    from swift.experiments.flashcrowd import DIAG
    assert all(int(p[k]) >= 0 for p in per[:3] for k in DIAG)  # our peer's counters
    assert all(p[k] == "" for p in per[3:] for k in DIAG)
    with open(f"{base}.json") as f:
        meta = json.load(f)
    assert meta["versions"]["libtorrent"] and meta["parameters"]["leechers"] == 3
    for kind in ("completion", "startup"):
        with open(f"{base}-{kind}.png", "rb") as f:
            assert f.read(4) == b"\x89PNG"


# -- one scenario, two backends (issue 14): the simulator runs without root --------------


def test_vod_scenario_is_what_the_testbed_shapes() -> None:
    """Both backends read the one description: the testbed's netem/tbf per uplink
    carry the scenario's delay (beyond the unshaped hop's), loss and queue."""
    from swift.experiments.swarm import GROUPS, TESTBED_DELAY, _shaping, vod_scenario
    sc = vod_scenario(8, 10.0, seeder_bps=5e6)
    seeder = next(n for n in sc.nodes if n.role == "seeder")
    netem, tbf = _shaping(seeder.up)
    assert netem.delay_ms == pytest.approx(5.0) and netem.loss_pct == 0
    assert tbf.rate_bps == 5_000_000 and abs(tbf.limit_bytes - seeder.up.queue) <= 1
    leechers = [n for n in sc.nodes if n.role == "leecher"]
    assert [n.group for n in leechers] == list("ABCDABCD")
    for n in leechers:
        netem, tbf = _shaping(n.up)
        assert netem.delay_ms == pytest.approx(GROUPS[n.group][0])
        assert netem.loss_pct == pytest.approx(GROUPS[n.group][1])
        assert n.up.delay == pytest.approx(TESTBED_DELAY + GROUPS[n.group][0] / 1000)
        assert tbf.rate_bps == 1_200_000 and abs(tbf.limit_bytes - n.up.queue) <= 1
    assert sc.params["size"] == 10 * 1_000_000 // 8 and sc.params["bitrate"] == 125_000


def test_vod_scenario_lasts_long_enough_for_the_seeder_alone() -> None:
    """The run's bound leaves time for the seeder alone to send every leecher the
    video: at 128 leechers of an 8 s, 1 Mb/s video behind the paper's 20 Mb/s seeder,
    3 x 8 + 20 s ended the run with 18-54 leechers still downloading (their
    sweep tasks failed as unverified)."""
    from swift.experiments.swarm import vod_scenario
    for n, secs, seeder in ((128, 8.0, 20e6), (208, 8.0, 20e6), (4, 15.0, 2e6)):
        sc = vod_scenario(n, secs, seeder_bps=seeder)
        assert sc.duration >= secs * 3 + 20 + n * sc.params["size"] * 8 / seeder


@pytest.mark.timeout(300)
def test_vod_swarm_on_the_simulator(tmp_path) -> None:
    from swift.experiments.vod_swarm import run
    rows = run(leechers=4, video_s=4, algorithms=("linear", "vod"), out=str(tmp_path),
               backend="sim")
    assert [r["what"].rsplit(", ", 1)[1] for r in rows] == ["linear", "vod"]
    for r in rows:
        assert r["backend"] == "sim" and r["completed"] == "4/4", r
        assert r["mean start-up s"] is not None and r["rejected chunks"] == 0
    with open(tmp_path / "vod_swarm-4-sim.csv") as f:
        per = list(csv.DictReader(f))
    assert len(per) == 8 and all(p["verified"] == "True" for p in per)
    # the player's 5 s buffer of a 4 s video: start-up waits for the whole video
    assert all(float(p["startup_s"]) >= float(p["completion_s"]) for p in per)
    meta = json.loads((tmp_path / "vod_swarm-4-sim.json").read_text())
    assert meta["parameters"]["backend"] == "sim" and meta["parameters"]["scenario"]["nodes"]
    assert (tmp_path / "vod_swarm-4-sim-fig6.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.timeout(300)
def test_simulated_player_stalls_when_the_seeder_is_too_slow() -> None:
    """The player runs in virtual time as in real time: a lone leecher whose seeder
    sends at 60 % of the bit rate starts after its 2 s buffer and then stalls."""
    from swift.experiments.swarm import Backend, vod_scenario
    from swift.experiments.vod_swarm import run_one
    sc = vod_scenario(1, 6.0, bitrate_bps=400_000, seeder_bps=240_000, prebuffer=2.0)
    r = run_one(sc, "vod", Backend.SIM)
    (x,) = r.leechers
    assert x.verified and x.completion_s is not None
    assert x.startup_s is not None and x.startup_s > 2.0  # 2 s of video at 0.6 x the rate
    assert x.stalls >= 1 and x.stall_s > 0


@pytest.mark.timeout(300)
def test_flashcrowd_on_the_simulator(tmp_path) -> None:
    from swift.experiments.flashcrowd import run
    rows = run(leechers=3, size_mb=0.25, systems=("swift",), out=str(tmp_path), backend="sim",
               arrivals="poisson", seed=3)
    (r,) = rows
    assert r["completed"] == "3/3" and r["start-up s"]["n"] == 3
    with open(tmp_path / "flashcrowd-poisson-3x0.25MiB-sim.csv") as f:
        per = list(csv.DictReader(f))
    arrivals = [float(p["arrival_s"]) for p in per]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals) and arrivals[-1] > 0
    from swift.experiments.flashcrowd import DIAG
    assert all(int(p[k]) >= 0 for p in per for k in DIAG)


def test_sweep_needs_the_simulator(capsys) -> None:
    from swift.experiments.vod_swarm import main
    with pytest.raises(SystemExit) as e:
        main(["--sweep", "leechers=2,3"])
    assert e.value.code == 2 and "--backend sim" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["--backend", "sim", "--sweep", "leechers"])
    assert e.value.code == 2 and "NAME=v1,v2" in capsys.readouterr().err


@pytest.mark.timeout(600)
def test_vod_sweep_on_two_dask_workers(tmp_path) -> None:
    """CI's quick sweep: 2 points x 2 seeds on a 2-worker LocalCluster, one CSV with
    provenance, mean and 95 % CI per point, a plot."""
    from swift.experiments.vod_swarm import main
    rc = main(["--backend", "sim", "--sweep", "leechers=2,3", "--seeds", "2", "--workers", "2",
               "--video-s", "2", "--algorithms", "vod", "--out", str(tmp_path)])
    assert rc == 0
    with open(tmp_path / "vod_swarm-sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {r["seed"] for r in rows} == {"0", "1"}
    assert all(r["commit"] and r["scenario"].startswith("vod_swarm") for r in rows)
    assert {(r["leechers"], r["algorithm"]) for r in rows} == {("2", "vod"), ("3", "vod")}
    assert all(int(r["verified"]) == int(r["leechers"]) for r in rows)
    with open(tmp_path / "vod_swarm-sweep.summary.csv") as f:
        summ = list(csv.DictReader(f))
    assert [s["n"] for s in summ] == ["2", "2"] and "mean_stalls_ci95" in summ[0]
    assert (tmp_path / "vod_swarm-sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.part"))


@pytest.mark.timeout(300)
def test_simulated_startup_is_the_first_bytes_in_order() -> None:
    """Start-up on the simulator is measured as on the testbed: the first
    ``startup_bytes`` verified in order, before the whole content."""
    from swift.experiments.flashcrowd import configs
    from swift.experiments.swarm import Backend, crowd_scenario, run
    sc = crowd_scenario(2, 256 * 1024, startup_bytes=32 * 1024, seed=1)
    r = run(sc, Backend.SIM, *configs(32 * 1024))
    for x in r.leechers:
        assert x.verified and x.completion_s is not None and x.startup_s is not None
        assert 0 < x.startup_s < x.completion_s


@pytest.mark.timeout(600)
def test_flashcrowd_sweep_runs_both_arrival_patterns(tmp_path) -> None:
    """Figs. 7-11 in one command: flash and Poisson arrivals per swarm size, every
    leecher's times in the CSV, mean and 95 % CI per point, the CDFs at one size and
    the table beside the paper's findings."""
    from swift.experiments.flashcrowd import main
    rc = main(["--backend", "sim", "--arrivals", "both", "--sweep", "leechers=2,3",
               "--seeds", "2", "--workers", "1", "--size-mb", "0.03125", "--startup-kib", "8",
               "--rate", "1,40", "--cdf-leechers", "3", "--out", str(tmp_path)])
    assert rc == 0
    with open(tmp_path / "flashcrowd-both-sweep.csv") as f:
        rows = list(csv.DictReader(f))
    patterns = ("flash", "poisson 1/s", "poisson 40/s")
    assert {(r["pattern"], r["leechers"], r["seed"]) for r in rows} == {
        (a, n, s) for a in patterns for n in ("2", "3") for s in ("0", "1")}
    assert {r["rate"] for r in rows if r["arrivals"] == "poisson"} == {"1.0", "40.0"}
    for r in rows:
        comp = [float(x) for x in r["completion_times"].split()]
        start = [float(x) for x in r["startup_times"].split()]
        assert len(comp) == len(start) == int(r["leechers"]) == int(r["completed"])
        assert comp == sorted(comp) and float(r["max_completion_s"]) == pytest.approx(comp[-1],
                                                                                     abs=1e-3)
        assert all(s <= c + 1e-9 for s, c in zip(start, comp))  # 8 of 32 KiB: before the end
    with open(tmp_path / "flashcrowd-both-sweep.summary.csv") as f:
        summ = list(csv.DictReader(f))
    assert len(summ) == 6 and all(s["n"] == "2" for s in summ)
    assert "mean_completion_s_ci95" in summ[0] and "p75_startup_s_mean" in summ[0]
    for png in ("flashcrowd-both-sweep.png", "flashcrowd-both-sweep-cdf3.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "flashcrowd-both-sweep.md").read_text()
    assert "| poisson 40/s | 3 | 2 |" in md and "| flash | 2 | 2 |" in md
    assert "poisson 1/s at 3: completion quartiles" in md and "poisson 40/s / flash" in md
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.part"))
    # a stopped sweep's .part (here: its first 7 rows) makes the same files, "-partial"
    from swift.experiments import crowd_report
    lines = (tmp_path / "flashcrowd-both-sweep.csv").read_text().splitlines(keepends=True)
    (tmp_path / "cut.csv.part").write_text("".join(lines[:8]))
    assert crowd_report.main([str(tmp_path / "cut.csv.part"), "--cdf-leechers", "2"]) == 0
    with open(tmp_path / "cut-partial.summary.csv") as f:
        cut = list(csv.DictReader(f))
    assert sum(int(s["n"]) for s in cut) == 7 and "mean_completion_s_ci95" in cut[0]
    for name in ("cut-partial.png", "cut-partial-cdf2.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert "| figure | paper | ours |" in (tmp_path / "cut-partial.md").read_text()
    assert not list(tmp_path.glob("*.tmp"))


def test_flashcrowd_both_needs_a_sweep(capsys) -> None:
    from swift.experiments.flashcrowd import main
    with pytest.raises(SystemExit) as e:
        main(["--backend", "sim", "--arrivals", "both"])
    assert e.value.code == 2 and "--sweep" in capsys.readouterr().err
