"""``ReceiverCC.PAIR_ONE`` (session 16): the packet-pair estimate and the clock's anchor
from the first base pair, so the jump to the estimate comes one pair interval sooner.

Off (the reference behaviour): the clock is anchored on ``AGREE`` (3) agreeing packets,
i.e. the first pair and the second pair's even packet, and the estimate is in after two
agreeing samples, so the jump comes on the second pair.  On: a base pair (an even base
PSN and its odd successor, back to back) anchors the clock and its one sample is the
estimate.  The forgery guard stays: one packet, or two that are no base pair, anchor
nothing.
"""

from __future__ import annotations

import pytest

from m2c import sim
from m2c.core.events import Join
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC

PACKET_BITS = 1500 * 8


def _schedule():
    # the simulator's session: 256 kb/s to 8 Mb/s of 1,500-byte packets, TSD 2 s, K 2
    return make_schedule("wave", min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                         tsd=2.0, k=2)


def _pair(cc: ReceiverCC, m: int, gap: float, delay: float = 0.02) -> list:
    """Base pair m as a pairing sender sends it (PSN 2m held until 2m+1 is due), the odd
    packet ``gap`` after the even one at the receiver; the actions it produced."""
    t = cc.schedule.time_of(0, 2 * m + 1) + delay
    return cc.on_packet(t, 0, 2 * m) + cc.on_packet(t + gap, 0, 2 * m + 1)


@pytest.fixture
def one(monkeypatch):
    monkeypatch.setattr(ReceiverCC, "PAIR_ONE", True)


def test_off_the_first_pair_anchors_nothing_and_the_second_jumps():
    assert ReceiverCC.PAIR_ONE is False  # the default
    cc = ReceiverCC(_schedule(), pairs=True)
    cc.start(0.0)
    gap = PACKET_BITS / 6e6
    assert _pair(cc, 0, gap) == []
    assert cc.offset is None and cc.capacity is None
    joins = _pair(cc, 1, gap)
    assert cc.capacity == pytest.approx(6e6 / PACKET_BITS)
    assert joins and all(isinstance(a, Join) for a in joins)


@pytest.mark.parametrize("rate_bps", [1e6, 2e6, 6e6])
def test_on_the_first_pair_anchors_the_clock_and_jumps_to_its_estimate(one, rate_bps):
    cc = ReceiverCC(_schedule(), pairs=True)
    cc.start(0.0)
    joins = _pair(cc, 0, PACKET_BITS / rate_bps)
    assert cc.offset is not None and cc.anchors == 1
    assert cc.capacity == pytest.approx(rate_bps / PACKET_BITS)
    assert joins and all(isinstance(a, Join) for a in joins)
    # up to the first level whose cumulative rate reaches the estimate, no further
    ts = cc.schedule.time_of(0, 1) + 0.02 + PACKET_BITS / rate_bps - cc.offset
    lvl = cc.level(ts)
    assert cc.schedule.cum_rate(lvl, ts) >= cc.capacity
    assert cc.schedule.cum_rate(lvl - 1, ts) < cc.capacity
    # later pairs that agree keep the estimate; nothing more is joined at once
    assert _pair(cc, 1, PACKET_BITS / rate_bps) == []
    assert cc.capacity == pytest.approx(rate_bps / PACKET_BITS)


def test_on_no_jump_when_the_base_group_alone_loads_the_estimate_over_half(one):
    """0.5 Mb/s (41.7 packets/s): the base group's 28 packets/s is more than
    ``PAIR_LOAD`` of it, so the estimate only caps the start-up batches (as off)."""
    cc = ReceiverCC(_schedule(), pairs=True)
    cc.start(0.0)
    assert _pair(cc, 0, PACKET_BITS / 0.5e6) == []
    assert cc.capacity == pytest.approx(0.5e6 / PACKET_BITS)


def test_on_one_packet_or_two_that_are_no_base_pair_anchor_nothing(one):
    sched = _schedule()
    gap = PACKET_BITS / 2e6
    # one (forged or not) packet
    cc = ReceiverCC(sched, pairs=True)
    cc.start(0.0)
    assert cc.on_packet(sched.time_of(0, 1) + 0.02, 0, 1) == [] and cc.offset is None
    # an odd base PSN then its even successor: two pairs' halves, not one pair
    cc = ReceiverCC(sched, pairs=True)
    cc.start(0.0)
    t = sched.time_of(0, 3) + 0.02
    assert cc.on_packet(t, 0, 1) + cc.on_packet(t + gap, 0, 2) == [] and cc.offset is None
    # an even and an odd PSN that are not successors
    cc = ReceiverCC(sched, pairs=True)
    cc.start(0.0)
    t = sched.time_of(0, 5) + 0.02
    assert cc.on_packet(t, 0, 2) + cc.on_packet(t + gap, 0, 5) == [] and cc.offset is None
    # a pair whose first packet was lost: the clock waits for the next pair
    cc = ReceiverCC(sched, pairs=True)
    cc.start(0.0)
    assert cc.on_packet(sched.time_of(0, 1) + 0.02, 0, 1) == []
    assert cc.offset is None
    assert _pair(cc, 1, gap) and cc.offset is not None


def test_on_without_pairs_or_for_webrc_nothing_changes(one):
    """The stream sender sends no pairs: AGREE packets anchor, as before; WEBRC takes no
    pair estimate at all."""
    for cc in (ReceiverCC(_schedule()), ReceiverCC(_schedule(), controller="webrc",
                                                   pairs=True)):
        cc.start(0.0)
        _pair(cc, 0, PACKET_BITS / 2e6)
        assert cc.offset is None and cc.capacity is None


def _first_join(rate: float) -> float:
    res = sim.run(sim.file_transfer(1, 256 << 10, down_bps=rate, delay=0.02, core_bps=100e6,
                                    seed=0, duration=60))
    r = res.receivers[0]
    assert r.verified, r.end
    assert res.membership_s[0] == 0.0  # the base group's join
    return res.membership_s[1]  # the first join above it


def test_in_the_simulator_the_jump_comes_one_pair_interval_sooner(monkeypatch):
    """One 6 Mb/s receiver alone: the first pair leaves the sender at 53 ms (PSN 1's due
    time), the second at 124 ms.  The joined rate leaves the base group after the second
    pair with the switch off, after the first with it on (virtual time)."""
    off = _first_join(6e6)
    monkeypatch.setattr(ReceiverCC, "PAIR_ONE", True)
    on = _first_join(6e6)
    assert off > 0.124 and on < 0.124, (off, on)
    assert 0.05 < off - on < 0.1, (off, on)
