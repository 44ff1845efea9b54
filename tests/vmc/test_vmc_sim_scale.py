"""vmc.sim at the paper's scale (issue 19 items 3-4): the replay always moves its clock forward (no
event storm at one virtual instant), and its cost per request does not grow with the workload."""

from __future__ import annotations

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
