"""Packet-pair start-up, session 12: the estimate from two agreeing pairs (``PAIR_AGREE``).

After session 9 the lossless 4.5-6 Mb/s receivers of the 1,000-receiver run (4 MB)
were 1.113x their link-ideal time at the median and none within 1.10x: a fixed
climb of ~0.25-0.30 s, of which the third base pair (~0.05-0.1 s of base traffic)
is waited for even when the first two pairs already agree.  Two samples that agree
within 10 % now give the estimate (the smaller); the third, when it comes, gives the
median, which lies between them.  The simulator case replays the
crowd's r711 alone (its name and the crowd's sender uplink delay, as session 9 did).
"""

from __future__ import annotations

import crowd

from m2c.core.events import Join
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.experiments.many import draw_links

PACKET_BITS = 1500 * 8


def _schedule():
    # the simulator's session: 256 kb/s to 8 Mb/s of 1,500-byte packets, TSD 2 s, K 2
    return make_schedule("wave", min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                         tsd=2.0, k=2)


def _feed(cc: ReceiverCC, gaps: list[float], delay: float = 0.02) -> list[object]:
    """Base pairs as a pairing sender sends them, the odd packet ``gaps[m]`` after the
    even one; returns the events of the packets and of the epoch timers run between
    the pairs."""
    sched, out = cc.schedule, list[object]()
    cc.start(0.0)
    for m, gap in enumerate(gaps):
        t = sched.time_of(0, 2 * m + 1) + delay
        out += cc.on_timer(t - 1e-3)
        out += cc.on_packet(t, 0, 2 * m)
        out += cc.on_packet(t + gap, 0, 2 * m + 1)
    return out


def test_two_agreeing_pairs_give_the_estimate_and_the_third_the_median():
    cc = ReceiverCC(_schedule(), pairs=True)
    rate = 4e6 / PACKET_BITS
    _feed(cc, [1 / rate, 1 / (1.05 * rate)])
    first_two = cc.pair_samples[:]
    assert cc.capacity == min(first_two)
    cc = ReceiverCC(_schedule(), pairs=True)
    _feed(cc, [1 / rate, 1 / (1.05 * rate), 1 / (2 * rate)])
    assert len(cc.pair_samples) == ReceiverCC.PAIR_SAMPLES
    assert cc.capacity == sorted(cc.pair_samples)[1]
    assert min(first_two) <= cc.capacity <= max(first_two)


def test_two_pairs_that_disagree_wait_for_the_third():
    """One pair spread by another packet between (or a compressed one) must not set the
    estimate alone: 4 and 5 Mb/s (25 % apart) wait for the median of three."""
    cc = ReceiverCC(_schedule(), pairs=True)
    rate = 4e6 / PACKET_BITS
    _feed(cc, [1 / rate, 1 / (1.25 * rate)])
    assert cc.capacity is None
    cc = ReceiverCC(_schedule(), pairs=True)
    _feed(cc, [1 / rate, 1 / (1.25 * rate), 1 / (1.1 * rate)])
    assert cc.capacity is not None and abs(cc.capacity - 1.1 * rate) < 1e-6 * rate


def test_the_jump_follows_two_agreeing_samples():
    """The jump to the estimate (many levels at once) comes after two agreeing samples
    (on the packet that completes the estimate since ``PAIR_AT_ONCE``; at the next
    epoch before), before the third pair; the third still refines it."""
    cc = ReceiverCC(_schedule(), pairs=True)
    rate = 4e6 / PACKET_BITS
    events = _feed(cc, [1 / rate] * 2)
    assert cc.capacity is not None
    sched = cc.schedule
    t = sched.time_of(0, 5) + 0.02
    events += cc.on_timer(t - 1e-3)
    jumped = [e for e in events if isinstance(e, Join)]
    assert len(jumped) > 3  # the jump: many levels at once
    cc.on_packet(t, 0, 4)
    cc.on_packet(t + 1 / rate, 0, 5)
    assert len(cc.pair_samples) == ReceiverCC.PAIR_SAMPLES
    assert cc.capacity is not None and abs(cc.capacity - rate) < 1e-6 * rate


def test_r711_reaches_its_link_sooner():
    """r711 of the 1,000-receiver draw (5.83 Mb/s, 44 ms, lossless), alone as in the
    crowd, 4 MB: 1.126x its link-ideal time with three samples, 1.112x with two."""
    rate, _, loss = crowd.link("r711", draw_links(1000, 0))
    assert loss == 0.0 and rate > 5.5e6
    res = crowd.replay("r711", 4_000_000, before_s14=True)
    assert crowd.ratio(res, "r711", 4_000_000) < 1.12
