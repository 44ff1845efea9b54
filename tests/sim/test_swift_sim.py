"""Real swift Peer objects (the ones swift/aio/node.py puts on sockets) in the simulator:
a flash crowd completes, every leecher's content equals the seeder's byte for byte, and a
run is a pure function of its scenario and seed."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from deliverykit.sim import Scenario, Simulation
from swift.core.peer import Peer
from swift.sim import Arrivals, SwiftApp, flash_crowd, run

# 6 leechers x 128 KiB: ~3 CPU s.  1 MiB costs ~90 CPU s today, nearly all in the swift
# peer's end game scan (docs/sim.md, "Hot spots"), so the test stays small until that changes.
LEECHERS = 6
SIZE = 128 * 1024


@pytest.fixture(scope="module")
def crowd():
    sc = flash_crowd(LEECHERS, SIZE, seed=3)
    return sc, run(sc)


def test_flash_crowd_completes_and_every_copy_is_verified(crowd) -> None:
    _sc, res = crowd
    assert len(res.leechers) == LEECHERS
    assert all(r.completion_s is not None and r.completion_s > 0 for r in res.leechers)
    assert res.all_verified
    # at 20 Mb/s the seeder alone needs SIZE * 6 * 8 / 20e6 s; leechers share (PEX)
    assert sum(r.sent_chunks for r in res.leechers) > 0
    assert res.run.fates["delivered"] > 0 and res.run.datagrams > 0
    # the run ends at the event that completes the last leecher (all arrived at 0)
    assert res.run.virtual_s == max(res.completion_times)


def test_same_seed_same_completion_times(crowd) -> None:
    sc, res = crowd
    again = run(sc)
    assert again.completion_times == res.completion_times
    assert again.run.fates == res.run.fates


def test_scenario_from_json_runs_the_same(crowd) -> None:
    sc, res = crowd
    loaded = Scenario.from_json(sc.to_json())
    assert loaded == sc
    assert run(loaded).completion_times == res.completion_times


def test_the_simulated_peer_is_the_socket_peer_class() -> None:
    sc = flash_crowd(1, 4096)
    app = SwiftApp(sc)
    sim = Simulation(sc, app)
    sim.run()
    assert all(type(h.core) is Peer for h in sim.hosts.values())
    leecher = sim.hosts["l000"]
    assert app.verified(leecher)
    leecher.core.content.storage.buf[100] ^= 1  # one flipped bit is caught
    assert not app.verified(leecher)


def test_same_seed_same_result_across_processes() -> None:
    """Hash randomisation differs per process: the result must not depend on it."""
    code = ("from swift.sim import flash_crowd, run;"
            "print(run(flash_crowd(3, 32768, seed=5)).completion_times)")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, env={"PYTHONHASHSEED": str(h), "PATH": ""},
                           check=True).stdout for h in (1, 2)}
    assert len(outs) == 1 and "None" not in outs.pop()


def test_bad_scenarios_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one leecher"):
        flash_crowd(0)
    sc = flash_crowd(2, 4096)
    no_seeder = sc.replace(nodes=sc.nodes[1:])
    with pytest.raises(ValueError, match="exactly one 'seeder'"):
        SwiftApp(no_seeder)


def test_cli_prints_a_summary_and_refuses_bad_options() -> None:
    out = subprocess.run([sys.executable, "-m", "swift.sim", "--leechers", "2", "--size-kib", "16",
                          "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert '"verified": 2' in out.stdout
    bad = subprocess.run([sys.executable, "-m", "swift.sim", "--leechers", "0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "must be positive" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_ledbat_sees_the_queue_and_keeps_it_near_its_target() -> None:
    """The seeder's uplink queue may hold 1 s of data; LEDBAT (target 100 ms, RFC 6817)
    must see the queueing delay the link model creates and stop well short of filling it."""
    sc = flash_crowd(1, 512 * 1024, seeder_up=2e6, queue_s=1.0)
    app = SwiftApp(sc)
    sim = Simulation(sc, app)
    sim.run()
    assert app.verified(sim.hosts["l000"])
    up = sim.network.nodes["seeder"].up
    peak_delay = up.max_backlog * 8 / 2e6
    assert 0.02 < peak_delay < 0.3  # probed up to about the target, never near the 1 s queue
    assert up.queue_drops == 0


def test_poisson_arrivals_are_a_seeded_poisson_process() -> None:
    sc = flash_crowd(400, 1024, arrivals="poisson", rate=2.0, seed=9)
    times = [n.arrive for n in sc.nodes if n.role == "leecher"]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert times[0] == 0.0 and all(g > 0 for g in gaps)
    assert sum(gaps) / len(gaps) == pytest.approx(0.5, rel=0.15)  # mean gap 1 / rate
    assert flash_crowd(400, 1024, arrivals="poisson", rate=2.0, seed=9) == sc
    assert flash_crowd(400, 1024, arrivals="poisson", rate=2.0, seed=10) != sc
    with pytest.raises(ValueError, match="arrivals must be one of"):
        flash_crowd(2, 1024, arrivals="stampede")


def test_poisson_swarm_completes_and_times_count_from_arrival() -> None:
    sc = flash_crowd(4, 32 * 1024, arrivals=Arrivals.POISSON, rate=4.0, seed=2)
    res = run(sc)
    assert res.all_verified
    arrivals = [r.arrive for r in res.leechers]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals) and arrivals[-1] > 0
    last = max(r.arrive + r.completion_s for r in res.leechers)
    assert res.run.virtual_s == pytest.approx(last)
