"""Re-sync to a restarted sender's clock (review 2, finding 4).

``m2c send --resume`` restarts the sender with a new clock: its PSNs no
longer fit the receiver's sender-time estimate.  The receiver must re-anchor
before the driver's slot watch (max(20, 2 TSD) s, RFC 3738 3.2.3.8) ends the
session, also with TSD > 5 s, and the packets that re-anchor it must be
reported plausible (the driver compares ``implausible`` before/after
``on_packet`` to decide what it decodes)."""

from __future__ import annotations

import pytest

from m2c.core.groups import WaveSchedule
from m2c.core.receiver_cc import ReceiverCC

DELAY = 0.01


def feed(rx: ReceiverCC, s: WaveSchedule, t0: float, t1: float, shift: float) -> list[bool]:
    """Base-group packets arriving in [t0, t1) local time from a sender whose clock
    reads local time - ``shift``; returns, per packet, whether the receiver found it plausible."""
    verdicts = []
    p = s.index(0, t0 - shift)
    while True:
        t = s.time_of(0, p) + shift + DELAY
        if t >= t1 + DELAY:
            return verdicts
        before = rx.implausible
        rx.on_packet(t, 0, p)
        verdicts.append(rx.implausible == before)
        while rx.next_timer() is not None and rx.next_timer() <= t:
            rx.on_timer(rx.next_timer())
        p += 1


@pytest.mark.parametrize("tsd", [6.0, 12.0, 1.0])
def test_restarted_sender_resyncs_before_the_slot_watch(tsd):
    s = WaveSchedule(10.0, 1000.0, tsd=tsd, k=2)
    rx = ReceiverCC(s, controller="webrc")
    rx.start(0.0)
    # the receiver joined a sender that had run for 10 TSD already
    assert all(feed(rx, s, 0.0, 30.0, -10 * tsd)[3:])
    assert rx.anchors == 1
    # the sender restarts 2 s later with its clock reset: at local time 32 it is
    # at sender time 0.5 again (a jump of 31.5 s + 10 TSD, beyond PLAUSIBLE_TSD)
    shift = 31.5
    watch = max(20.0, 2 * tsd)
    verdicts = feed(rx, s, 32.0, 32.0 + watch, shift)
    assert rx.anchors == 2, "no re-sync before the driver's slot watch fired"
    first_ok = verdicts.index(True)
    # re-synced within min(4 TSD, watch / 2) of the last plausible packet (t = 30)
    t_first = s.time_of(0, s.index(0, 32.0 - shift) + first_ok) + shift + DELAY
    assert t_first - 30.0 <= min(4 * tsd, watch / 2) + 1.0
    assert t_first - 30.0 + tsd < watch  # before a watch counted from a slot change
    # everything after the packet that re-anchored is plausible, that one included
    assert all(verdicts[first_ok:])
    assert rx.implausible == first_ok
    assert abs(rx.offset - (shift + DELAY)) < 0.05
    # the new clock is the one used: its loss accounting restarted cleanly
    assert rx.loss.lost == 0 and rx.loss.duplicates == 0


def test_reanchor_window_is_half_the_slot_watch_at_most():
    for tsd in (0.5, 1.0, 5.0, 6.0, 10.0, 30.0):
        rx = ReceiverCC(WaveSchedule(10.0, 1000.0, tsd=tsd, k=2))
        watch = max(20.0, 2 * tsd)
        assert rx.reanchor_after <= watch / 2
        assert rx.reanchor_after <= 4 * tsd
        # the watch counts from the last slot change, up to one TSD before the last
        # plausible packet: the re-sync still comes first, with room to spare
        assert tsd + rx.reanchor_after < watch
    assert ReceiverCC(WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)).reanchor_after == 4.0
    long_tsd = WaveSchedule(10.0, 1000.0, tsd=6.0, k=2)
    assert ReceiverCC(long_tsd, slot_timeout=8.0).reanchor_after == 1.0


def test_one_forged_far_packet_still_does_not_resync():
    """The shorter wait does not weaken the forgery rule: one packet (or two that
    agree) never re-anchor; the genuine stream keeps the clock."""
    s = WaveSchedule(10.0, 1000.0, tsd=6.0, k=2)
    rx = ReceiverCC(s, controller="m2c")
    rx.start(0.0)
    feed(rx, s, 0.0, 10.0, 0.0)
    before = rx.implausible
    rx.on_packet(10.5, 0, 2**31)
    rx.on_packet(10.6, 0, 2**31 + 1)
    assert rx.implausible == before + 2
    assert all(feed(rx, s, 10.7, 30.0, 0.0))
    assert rx.anchors == 1
