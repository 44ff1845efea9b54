"""``ReceiverCC.LOSS_EVENTS`` (session 17, off by default): one loss event per
congestion episode, as a TCP flow sharing the queue sees them.

Against one long TCP stream at 1 Mb/s (docs/m2c-results.md) the drop-tail queue is
full most of the time and our evenly spaced packets keep finding it full: a loss
every few hundred milliseconds, and with one loss event per ARTT the window halved
~0.8 times a second.  A TCP sender sees its next loss event only after a reduction
has drained the queue and it fills again.  With the switch, a loss starts a loss event
only once the queue drained since the last one began (``EVENT_DRAIN``), or after
``EVENT_SPAN`` when it never drains.

These tests drive the real ReceiverCC by hand: base-group packets only (no epoch
timer, no joins), each arriving at its due time plus a scripted queueing delay (with
a small jitter: another flow's packets between ours, so the hole rule never takes
our losses for loss on the link), every ``LOSS_EVERY``-th packet lost.  The queue is
empty for the first second (the sender clock anchors on it), then full.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from m2c.core.groups import RateSchedule, make_schedule
from m2c.core.receiver_cc import ReceiverCC

PACKET_BITS = 1500 * 8
LOSS_EVERY = 10
FULL = 0.30
"""a full 25-packet queue at 1 Mb/s, seconds"""
JITTER = (0.0, 0.015, 0.005, 0.025)
TSD = 8.0
"""a long TSD (sub_TSI 4 s), so that ``EVENT_SPAN`` (at least one sub_TSI) is longer
than the drain cycles below"""
DRAIN_S = 0.6
"""how long a drain takes (slow enough for the arrivals to keep their order)"""
END = 14.0
"""within the sender clock's offset window (8 TSD), so the empty first second stays its
minimum"""


def _schedule() -> RateSchedule:
    return make_schedule("wave", min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                         tsd=TSD, k=2)


def _first_due_after(t: float) -> int:
    """The first base PSN due at ``t`` or later."""
    sched, psn = _schedule(), 0
    while sched.time_of(0, psn) < t:
        psn += 1
    return psn


def _run(queue: Callable[[float], float], on: bool, end: float = END,
         lose_from: float = 1.6, lose: Callable[[float, int], bool] | None = None,
         min_lost: int = 20) -> tuple[ReceiverCC, list[float]]:
    """Feed base packets with queueing delay ``queue(due)``, every ``LOSS_EVERY``-th
    from ``lose_from`` lost (or those ``lose(due, psn)`` names); returns the receiver
    and the times at which loss events began."""
    if lose is None:
        def lose(due: float, psn: int) -> bool:
            return due >= lose_from and psn % LOSS_EVERY == 0
    sched = _schedule()
    cc = ReceiverCC(sched)
    cc.LOSS_EVENTS = on
    cc.start(0.0)
    events: list[float] = []
    psn, last = 0, -1.0
    # the join's first packet comes 0.4 s after it (an ARTT like the testbed's)
    while sched.time_of(0, psn) < 0.4:
        psn += 1
    while True:
        due = sched.time_of(0, psn)
        if due > end:
            break
        t = due + 0.010 + queue(due) + JITTER[psn % len(JITTER)]
        assert t > last, "the scripted arrivals keep their order (a FIFO path)"
        last = t
        if not lose(due, psn):
            before = cc.loss_events
            cc.on_packet(t, 0, psn)
            if cc.loss_events > before:
                events.append(t)
        psn += 1
    assert cc.offset is not None and cc.random_losses == 0
    assert cc.loss.lost >= min(min_lost, (end - lose_from) * 2)
    return cc, events


def _full(due: float) -> float:
    """Empty for the first second, then full for good (it never drains)."""
    return 0.0 if due < 1.0 else min(FULL, (due - 1.0) * 0.6)


def _sawtooth(period: float = 3.0, drain_to: float = 0.15) -> Callable[[float], float]:
    """Full, then every ``period`` s a reduction drains the queue to ``drain_to`` over
    ``DRAIN_S`` and it fills again over 0.3 s (a TCP sawtooth seen from the queue)."""
    def q(due: float) -> float:
        if due < 1.5:
            return _full(due)
        x = (due - 1.5) % period
        down = period - DRAIN_S - 0.3
        if x < down:
            return FULL
        if x < down + DRAIN_S:
            return FULL - (FULL - drain_to) * (x - down) / DRAIN_S
        return drain_to + (FULL - drain_to) * (x - down - DRAIN_S) / 0.3
    return q


def _drains(period: float = 3.0, end: float = END) -> list[float]:
    """When each sawtooth's queue has fallen by ``EVENT_DRAIN`` of the full queue."""
    out, k = [], 0
    while True:
        t = (1.5 + k * period + (period - DRAIN_S - 0.3)
             + DRAIN_S * ReceiverCC.EVENT_DRAIN * FULL / (FULL - 0.15))
        if t > end:
            return out
        out.append(t)
        k += 1


def test_off_one_loss_event_per_artt() -> None:
    """The reference: with the queue always full, a loss event every ARTT or so (a
    loss every ~0.47 s, events at most one ARTT, 0.4 s, apart)."""
    cc, events = _run(_full, on=False)
    assert len(events) >= 12
    assert all(b - a >= 0.4 - 1e-9 for a, b in zip(events, events[1:], strict=False))
    assert cc.episode_losses == 0


def test_on_queue_never_drains_one_event_per_span() -> None:
    """With the switch and a queue that never drains: one loss event per EVENT_SPAN (one
    sub_TSI here, 4 s), not none: the span bounds how long an episode lasts."""
    cc, events = _run(_full, on=True)
    sub_tsi = TSD / 2
    assert 3 <= len(events) <= 4  # at ~1.6 s, then at most one per 4 s until 14 s
    gaps = [b - a for a, b in zip(events, events[1:], strict=False)]
    assert all(sub_tsi - 1e-9 <= g < sub_tsi + 0.5 for g in gaps), gaps
    assert cc.episode_losses > 10


def test_on_one_event_per_drain() -> None:
    """A queue drained every 3 s (TCP's reduction): one loss event per drain, the first
    loss after each drain, and none in between."""
    off, ev_off = _run(_sawtooth(), on=False)
    cc, events = _run(_sawtooth(), on=True)
    drains = _drains()
    assert len(ev_off) >= 12
    assert len(events) == 1 + len(drains)
    for d, e in zip(drains, events[1:], strict=False):
        # after the drain; within two loss intervals (~0.94 s) of it
        assert d <= e <= d + 2 * LOSS_EVERY / (256e3 / PACKET_BITS) + 0.1, (d, e)


def test_on_loss_dropped_before_the_drain_is_the_old_episode() -> None:
    """A packet lost at the full queue just before a drain began is declared lost three
    packets later, after the drain showed: it belongs to the episode already answered
    (the trace's case: packets lost while the queue stayed full, declared as it
    drained).  The first loss met by the drained-and-refilled queue starts the next."""
    # the first loss event; a loss 0.1 s before the first drain shows; one after it
    lost = {_first_due_after(t) for t in (1.6, _drains()[0] - 0.1, 4.6)}

    def lose(due: float, psn: int) -> bool:
        return psn in lost

    cc, events = _run(_sawtooth(), on=True, lose=lose, min_lost=3)
    assert cc.loss.lost == 3
    assert len(events) == 2 and events[1] > 4.6, events
    assert cc.episode_losses == 1
    _, off = _run(_sawtooth(), on=False, lose=lose, min_lost=3)
    assert len(off) == 3  # off, each of the three starts one


def test_on_shallow_dip_is_no_drain() -> None:
    """A dip of half ``EVENT_DRAIN`` (jitter, another flow's burst) is no drain: the
    events are the never-draining queue's."""
    shallow = _sawtooth(drain_to=FULL * (1 - ReceiverCC.EVENT_DRAIN / 2))
    _, events = _run(shallow, on=True)
    _, never = _run(_full, on=True)
    assert len(events) == len(never)


def test_on_first_loss_starts_an_event() -> None:
    """No event before: the first loss starts one at once, as off."""
    _, on = _run(_full, on=True)
    _, off = _run(_full, on=False)
    assert on[0] == off[0]


@pytest.mark.parametrize("on", [False, True])
def test_switch_is_per_instance_and_off_by_default(on: bool) -> None:
    assert ReceiverCC.LOSS_EVENTS is False
    cc, _ = _run(_full, on=on, end=3.0)
    assert cc.LOSS_EVENTS is on
    assert ReceiverCC.LOSS_EVENTS is False
