"""The Peer passes a datagram's arrival time (the driver's, when it has the kernel's)
to pacing's RTT (SendSide.on_ack ``arrived``), so the time an ACK waited for our loop
does not slow our own pacing (docs/swift-perf.md, "At 8 KiB (session 11)")."""

from __future__ import annotations

import pytest
from swift_support import LEECH_ADDR, SEED_ADDR, started_pair


def test_the_peer_gives_pacing_the_acks_arrival_time() -> None:
    """The leecher's ACKs reach the seeder core 2 ms after they arrived (the
    driver says when): pacing's RTT leaves those 2 ms out, LEDBAT's keeps them."""
    s, lp, now = started_pair(256)
    sch = next(iter(s.channels.values()))
    hold = 0.002
    for _ in range(40):
        now += 0.001
        for d, dst in s.datagrams_to_send(now):
            if dst == LEECH_ADDR:
                lp.datagram_received(d, SEED_ADDR, now + 0.0005)  # 0.5 ms path
        for d, dst in lp.datagrams_to_send(now + 0.0005):
            if dst == SEED_ADDR:  # arrived 1 ms after the DATA left, handled 2 ms later
                s.datagram_received(d, LEECH_ADDR, now + 0.001 + hold, now + 0.001)
        now += hold
    assert sch.send.ledbat.srtt is not None
    assert sch.send.pace_rtt == pytest.approx(0.001, abs=0.0003)
    assert sch.send.ledbat.srtt > sch.send.pace_rtt + 0.0008  # (smoothed from the start)
