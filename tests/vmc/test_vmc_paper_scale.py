"""VMC at the paper's scale (issue 19 item 4): the simulator's counting mode makes the byte mode's
decisions, the paper's workloads come from stated inputs, and the paper's claims are computed as
checks. Small workloads only (the 25k+ runs are recorded in docs/vmc-sim.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vmc.core.machine import MachineConfig
from vmc.sim import SimConfig, SimResult, VmcSim, log_arrivals, staggered
from vmc.workload.synth import SCENARIOS, generate


def _run(arrivals, counting: bool, **machine) -> SimResult:
    cfg = SimConfig(origin_rate=1 << 20, machine=MachineConfig(**machine), counting=counting)
    return VmcSim(arrivals, cfg, seed=3).run()


def _same(a: SimResult, b: SimResult) -> None:
    assert a.decisions() == b.decisions()
    assert a.records == b.records  # modes, offsets, origin and client bytes, completion times
    assert a.stats == b.stats
    assert a.patches == b.patches
    assert a.virtual_time == b.virtual_time
    assert a.digests_ok == b.digests_ok == len(a.records)


@pytest.mark.parametrize("disk_budget", [1 << 30, 0])
def test_counting_mode_makes_the_byte_modes_decisions(disk_budget: int) -> None:
    arrivals = staggered(objects=4, per_object=6, size=1 << 20, seed=2)
    byte_mode = _run(arrivals, False, window=64 << 10, disk_budget=disk_budget)
    counting = _run(arrivals, True, window=64 << 10, disk_budget=disk_budget)
    _same(byte_mode, counting)
    # the workload exercises joins and (without the disk store) origin patches
    assert counting.stats["joins"] > 0
    assert (len(counting.patches) > 0) == (disk_budget == 0)


def test_counting_mode_on_a_log_workload_with_a_shared_link() -> None:
    entries = generate(SCENARIOS["high-vhigh"], 150, seed=4)
    arrivals = log_arrivals(entries)
    cfgs = [
        SimConfig(origin_rate=0.0, origin_link=3e6, counting=c,
                  machine=MachineConfig(window=8 << 20, disk_budget=0))
        for c in (False, True)
    ]
    a, b = (VmcSim(arrivals, c, seed=1).run() for c in cfgs)
    _same(a, b)
    assert b.stats["joins"] > 0


def test_counting_mode_keeps_every_request_record_past_the_ring() -> None:
    # 2,000 records is the status log's detail ring: a replay reports every request
    arrivals = staggered(objects=420, per_object=6, size=20_000, stagger=0.01, seed=1)
    res = VmcSim(arrivals, replace(SimConfig(), counting=True), seed=1).run()
    assert len(arrivals) > 2000
    assert len(res.records) == len(arrivals)
    assert res.digests_ok == len(arrivals)
