"""The jump to the packet-pair estimate on the packet that completes it (``PAIR_AT_ONCE``).

Session 12, second part: the time of the lossless 3-6 Mb/s receivers of the
1,000-receiver draw (4 MB, seed 0) over their link-ideal time, replayed alone as
in the crowd and split by their arrivals: headers and FEC 0.34-0.36 s (the 1.063x
floor), 0.10 s before the first packet (the sender's uplink and the first base
pair), a link idle for 0.10-0.16 s between the first packet and a full link, and
0.02-0.13 s idle after loss events.  Of the climb, 30 ms (r711) was the wait from
the packet that completed the estimate to the next 50 ms start-up epoch, where
the jump was made: it is now made at once.  The conditions are the epoch's
(no loss, no lag, the link lightly loaded by us while sampling: ``PAIR_LOAD``).
"""

from __future__ import annotations

import crowd
import pytest

from m2c import sim
from m2c.core.events import Join
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.experiments import fairness
from m2c.experiments.many import draw_links

SIZE = 4_000_000
LINKS = draw_links(1000, 0)
PACKET_BITS = 1500 * 8


def _schedule():
    # the simulator's session: 256 kb/s to 8 Mb/s of 1,500-byte packets, TSD 2 s, K 2
    return make_schedule("wave", min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                         tsd=2.0, k=2)


def _pairs(cc: ReceiverCC, gaps: list[float], delay: float = 0.02):
    """Base pairs as a pairing sender sends them (no epoch timer run): the events
    each packet returned, with its arrival time."""
    sched, out = cc.schedule, []
    cc.start(0.0)
    for m, gap in enumerate(gaps):
        t = sched.time_of(0, 2 * m + 1) + delay
        out.append((t, cc.on_packet(t, 0, 2 * m)))
        out.append((t + gap, cc.on_packet(t + gap, 0, 2 * m + 1)))
    return out


def test_the_jump_comes_with_the_packet_that_completes_the_estimate():
    cc = ReceiverCC(_schedule(), pairs=True)
    rate = 4e6 / PACKET_BITS
    out = _pairs(cc, [1 / rate] * 2)
    assert cc.capacity is not None
    t_last, last = out[-1]
    joins = [e for e in last if isinstance(e, Join)]
    assert len(joins) > 3  # the jump, many levels at once, with no epoch timer run
    assert all(not ev for _, ev in out[:-1])
    assert all(cc.pending[j.channel][0] == t_last for j in joins)
    ts = cc.sender_time(t_last)
    assert ts is not None
    sched = cc.schedule
    lvl = cc.level(ts)
    # up to the first level that reaches the estimate (the groups decay), no further
    assert sched.cum_rate(lvl, ts) >= cc.capacity > sched.cum_rate(lvl - 1, ts)
    # the one jump is made: the next epoch adds at most one level
    assert len([e for e in cc.on_timer(t_last + cc.epoch) if isinstance(e, Join)]) <= 1


def test_without_at_once_the_jump_waits_for_the_epoch(monkeypatch):
    monkeypatch.setattr(ReceiverCC, "PAIR_AT_ONCE", False)
    cc = ReceiverCC(_schedule(), pairs=True)
    rate = 4e6 / PACKET_BITS
    out = _pairs(cc, [1 / rate] * 2)
    assert cc.capacity is not None and all(not ev for _, ev in out)
    t = out[-1][0] + cc.epoch
    assert len([e for e in cc.on_timer(t) if isinstance(e, Join)]) > 3


def test_a_link_we_loaded_while_sampling_gets_no_jump():
    """A link 1.5x the base group's rate: the base group alone loads it beyond
    ``PAIR_LOAD`` of the estimate, so the estimate only caps the start-up batches,
    on the packet as at the epoch."""
    sched = _schedule()
    cc = ReceiverCC(sched, pairs=True)
    base = sched.cum_rate(0, 0.0)
    out = _pairs(cc, [1 / (1.5 * base)] * 2)
    assert cc.capacity is not None and cc.capacity < 2 * base
    assert all(not ev for _, ev in out)


def test_no_jump_after_a_loss_event():
    """A loss event before the estimate is in: no samples are taken after it, and no
    jump is made on a packet."""
    rate = 4e6 / PACKET_BITS
    cc = ReceiverCC(_schedule(), pairs=True)
    assert any(isinstance(e, Join) for _, ev in _pairs(cc, [1 / rate] * 3) for e in ev)
    cc = ReceiverCC(_schedule(), pairs=True)
    cc.loss_events = 1  # as after a loss event (its cause is not what is tested here)
    assert all(not ev for _, ev in _pairs(cc, [1 / rate] * 3))
    assert cc.capacity is None


def _crowd(name: str) -> tuple[sim.TransferResult, float]:
    """Receiver ``name`` of the 1,000-receiver draw (seed 0) alone, as in the crowd
    (its name and the crowd's sender uplink delay: session 9); and its ratio."""
    res = crowd.replay(name, SIZE, before_s14=True)
    return res, crowd.ratio(res, name, SIZE)


@pytest.mark.parametrize("name", ["r978", "r394"])
def test_fast_lossless_receiver_is_helped(monkeypatch, name):
    """r978 (5.77 Mb/s, 35 ms) and r394 (4.66 Mb/s, 23 ms), lossless: 1.126x and
    1.117x as in the crowd with the jump at the epoch, 1.115x and 1.098x at once."""
    assert LINKS.loss[int(name[1:]) - 1] == 0.0
    res, now = _crowd(name)
    monkeypatch.setattr(ReceiverCC, "PAIR_AT_ONCE", False)
    res_before, before = _crowd(name)
    assert now < before - 0.005, (now, before)
    assert now < 1.12
    for r in (res, res_before):
        assert r.run.fates["loss"] == 0 and r.receivers[0].random_losses == 0


@pytest.mark.parametrize("name", ["r757", "r390"])
def test_slow_lossless_links_with_full_queues_are_left_alone(name):
    """r757 (0.55 Mb/s) and r390 (0.81 Mb/s), lossless, whose 25-packet queues stay
    full while draining: nothing taken for link loss, and no worse than before
    (1.067x and 1.080x)."""
    res, ratio = _crowd(name)
    r = res.receivers[0]
    assert r.random_losses == 0 and r.drain_losses == 0 and r.loss_events > 0
    assert ratio < 1.085


def test_m2c_against_m2c_shares_stay_fair():
    """Two sessions on a shared 4 Mb/s link (paper 7.3), 2 MB, seeds 1-3: the second
    pair of each is spread by the other session's packets or the jump is made by
    both; either way the shares while both run stay fair (Jain 0.994-1.0 before)."""
    for seed in (1, 2, 3):
        row = fairness.run_one(4e6, 2_000_000, 0.0, seed)
        assert row["a_verified"] and row["b_verified"]
        assert row["jain"] >= 0.98, row
        assert row["link_use"] >= 0.95, row
