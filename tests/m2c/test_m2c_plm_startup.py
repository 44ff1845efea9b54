"""Packet-pair start-up (PLM, Legout and Biersack, SIGMETRICS 2000) for the m2c controller.

Issue 18: a 6 Mb/s receiver of `m2c experiment many` spent ~0.75 s climbing from
the 256 kb/s base group (19 % of its link-ideal time), and slow receivers joined
up to twice their link in start-up.  The sender now emits its base packets in
back-to-back pairs; a receiver measures its bottleneck from a pair's spacing at
arrival (median of the first three), joins at once up to it, and its start-up
batches stop there.  The first two tests run one receiver in the simulator (the
`many` experiment's 100 Mb/s backbone); the others feed ReceiverCC directly.
"""

from __future__ import annotations

import pytest

from m2c import sim
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC

PACKET_BITS = 1500 * 8


def _alone(rate: float, size: int, delay: float = 0.02) -> sim.ReceiverResult:
    res = sim.run(sim.file_transfer(1, size, down_bps=rate, delay=delay, core_bps=100e6,
                                    seed=0, duration=200))
    r = res.receivers[0]
    assert r.verified, r.end
    return r


def test_fast_receiver_reaches_its_link_rate_early():
    """6 Mb/s (500 packets/s), 20 ms: the joined rate passed 0.9x the link at 0.65 s
    before (batches of 4 levels every 2 ARTT); with the pair estimate at ~0.25 s."""
    link = 6e6 / PACKET_BITS
    r = _alone(6e6, 2 << 20)
    reach = next((t for t, _lvl, cum, *_ in r.trace if cum >= 0.9 * link), None)
    assert reach is not None and reach <= 0.4, reach


def test_slow_receiver_does_not_overshoot_into_sustained_loss():
    """0.5 Mb/s (41.7 packets/s): before, start-up joined 86 packets/s (2.06x the link)
    and kept it for 1.6 s, the queue overflowed (22 packets lost by 2.7 s); now the
    joins stop at the estimate, at most one level above it."""
    link = 0.5e6 / PACKET_BITS
    r = _alone(0.5e6, 512 << 10)
    early = [e for e in r.trace if e[0] <= 3.0]
    assert early
    peak = max(cum for _t, _lvl, cum, *_ in early)
    assert peak <= 1.5 * link, peak
    lost_by_3s = early[-1][4]
    assert lost_by_3s <= 2, lost_by_3s


def _schedule():
    # the simulator's session: 256 kb/s to 8 Mb/s of 1,500-byte packets, TSD 2 s, K 2
    return make_schedule("wave", min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                         tsd=2.0, k=2)


def _feed_pairs(cc: ReceiverCC, gap: float, pairs: int, delay: float = 0.02,
                lose_even: frozenset[int] = frozenset()) -> None:
    """Base packets as a pairing sender sends them: PSN 2m held until 2m+1 is due, the
    odd one ``gap`` later at the receiver (its time at the bottleneck)."""
    sched = cc.schedule
    cc.start(0.0)
    for m in range(pairs):
        t = sched.time_of(0, 2 * m + 1) + delay
        if m not in lose_even:
            cc.on_packet(t, 0, 2 * m)
        cc.on_packet(t + gap, 0, 2 * m + 1)


@pytest.mark.parametrize("rate_bps", [0.5e6, 2e6, 6e6])
def test_capacity_is_the_median_of_the_first_pairs(rate_bps):
    cc = ReceiverCC(_schedule(), pairs=True)
    _feed_pairs(cc, PACKET_BITS / rate_bps, 8)
    assert cc.capacity == pytest.approx(rate_bps / PACKET_BITS)
    assert len(cc.pair_samples) == ReceiverCC.PAIR_SAMPLES


def test_pairs_whose_first_packet_was_lost_give_nothing():
    cc = ReceiverCC(_schedule(), pairs=True)
    _feed_pairs(cc, PACKET_BITS / 2e6, 8, lose_even=frozenset(range(8)))
    assert cc.pair_samples == [] and cc.capacity is None


def test_unspread_pairs_give_nothing():
    """A token bucket holding tokens for both packets (the testbed's tbf) passes a pair
    unspread: no bottleneck is seen, the climb stays as it was."""
    cc = ReceiverCC(_schedule(), pairs=True)
    _feed_pairs(cc, 10e-6, 8)
    assert cc.pair_samples == [] and cc.capacity is None


def test_no_probe_without_pairs_or_for_webrc():
    """The stream sender sends no pairs (ReceiverCC's default); WEBRC keeps RFC 3738."""
    for cc in (ReceiverCC(_schedule()), ReceiverCC(_schedule(), controller="webrc",
                                                   pairs=True)):
        _feed_pairs(cc, PACKET_BITS / 2e6, 8)
        assert cc.capacity is None
