"""Receiver congestion control against forged-but-valid packets (issue 5 review,
item 1).  The LCT/M2C checksum is no authentication: anyone who knows the
public TSI can send a packet with any PSN.  One such packet must not move the
sender clock (RFC 3738 4.2: PSNs follow the sender's schedule) nor blind the
loss estimate that drives LOSSP/REQN (RFC 3738 3.2.2.1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from m2c.core.groups import WaveSchedule
from m2c.core.receiver_cc import LossTracker, ReceiverCC

DELAY = 0.01
FAR = 0xFFFFFFFF


def run_base(controller: str, t_end: float, forged: list[tuple[float, int]],
             drop_every: int = 10) -> tuple[ReceiverCC, int, int]:
    """Base-group packets due before ``t_end`` arrive DELAY later, every
    ``drop_every``-th one lost; ``forged`` holds (arrival time, PSN) of forged
    packets on the same channel.  Returns (receiver, genuine sent, dropped)."""
    s = WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)
    rx = ReceiverCC(s, controller=controller)
    rx.start(0.0)
    events = [(s.time_of(0, p) + DELAY, p, True) for p in range(s.index(0, t_end))]
    events += [(t, p, False) for t, p in forged]
    events.sort(key=lambda e: e[0])
    dropped = 0
    for t, p, genuine in events:
        if genuine and p % drop_every == drop_every - 1:
            dropped += 1
            continue
        rx.on_packet(t, 0, p)
        while rx.next_timer() is not None and rx.next_timer() <= t:
            rx.on_timer(rx.next_timer())
    return rx, sum(1 for e in events if e[2]), dropped


@pytest.mark.parametrize("controller", ["webrc", "m2c"])
@pytest.mark.parametrize("psn", [FAR, 5_000, 2**31])
def test_one_forged_psn_neither_moves_the_clock_nor_hides_loss(controller, psn):
    rx, sent, dropped = run_base(controller, 30.0, [(5.0, psn)])
    assert abs(rx.offset - DELAY) < 0.05, rx.offset  # was -1.85e8 with PSN 0xFFFFFFFF
    assert rx.implausible == 1
    # every genuine loss is still seen (the last few may still be pending reordering)
    assert dropped - 1 <= rx.loss.lost <= dropped
    assert rx.loss.duplicates == 0
    if controller == "webrc":
        assert 0.03 < rx.ctl.lossp < 0.3  # ~10 %, not 1e-9


def test_forged_first_packet_does_not_anchor_the_clock():
    rx, sent, dropped = run_base("webrc", 10.0, [(0.001, FAR), (0.002, FAR - 7)])
    assert abs(rx.offset - DELAY) < 0.05
    assert dropped - 1 <= rx.loss.lost <= dropped
    assert rx.loss.received == sent - dropped


def test_offset_is_a_windowed_minimum():
    """A sample with an early due time inside the window still counts, but only
    for OFFSET_WINDOW_TSD: the offset then returns to the genuine one."""
    s = WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)
    rx = ReceiverCC(s)
    rx.start(0.0)
    for p in range(s.index(0, 30.0)):
        t = s.time_of(0, p) + DELAY
        rx.on_packet(t, 0, p)
        if p == s.index(0, 5.0):
            rx.on_packet(t, 0, s.index(0, 5.0) + 15)  # plausible but early: 1.5 s ahead
            assert rx.offset < -1.0
    assert abs(rx.offset - DELAY) < 0.05


def test_loss_tracker_ignores_a_lone_far_psn_either_way():
    for far in (10 + 4097 + 5, FAR):
        lt = LossTracker()
        for p in range(10):
            lt.on_packet(0, p)
        assert lt.on_packet(0, far) == 0 and lt.strays == 1
        for p in range(10, 40):
            if p % 10 != 5:
                lt.on_packet(0, p)
        assert lt.lost == 3 and lt.duplicates == 0 and lt.received == 37
    lt = LossTracker()
    lt.on_packet(0, 100_000)  # first packet forged far ahead
    for p in range(3):
        lt.on_packet(0, p)
    # three genuine packets in a row resync the channel (a jump back this time)
    assert lt.expected[0] == 3 and lt.resyncs == 1 and lt.duplicates == 0


def test_loss_tracker_resyncs_after_a_genuine_outage():
    lt = LossTracker()
    for p in range(100):
        lt.on_packet(0, p)
    for p in range(10_100, 10_110):
        lt.on_packet(0, p)
    assert lt.resyncs == 1 and lt.lost == 10_000 and lt.received == 110 and lt.strays == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 20_000), min_size=1, max_size=200))
def test_loss_tracker_accounts_every_packet(psns):
    lt = LossTracker()
    for p in psns:
        assert lt.on_packet(0, p) >= 0
    assert lt.received + lt.duplicates + lt.strays == len(psns)
    assert lt.lost >= 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 20), st.integers(0, 2**32 - 1)), max_size=20))
def test_receiver_cc_survives_arbitrary_forged_psns(forged):
    rx, sent, dropped = run_base("webrc", 20.0, forged, drop_every=1000)
    # a forged packet can only be accepted within the plausibility window, so the
    # clock stays within PLAUSIBLE_TSD of the truth and nothing runs away
    assert abs(rx.offset - DELAY) <= rx.plausible + 0.05
    assert rx.loss.lost <= sent  # was ~4.29e9 after one PSN 0xFFFFFFFF
