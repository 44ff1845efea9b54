"""A peer's view of its own uplink's queue (``swift.core.ledbat.OwnQueue``).

LEDBAT's young-base gate (``Ledbat.YOUNG_BASE``) scales a channel's increase down
for a minute once its base delay has fallen more than YOUNG_REVISION x TARGET below
the base of its first samples: the sign of a flow that joined a queue someone else
keeps standing.  A seeder's new channel whose first samples sat in the queue the
seeder's other channels had just filled showed the same sign, though that queue
was its own (docs/sim.md, "Session 18: hetero-delay's last leecher is a slow-start
race at the seeder").  With the peer's view, the other channels' readings of DATA
sent at the same moments are taken out of the reference, and the gate stays shut.

These tests drive real ``SendSide`` objects (DATA sent, ACKs with one-way delay
samples) on one synthetic uplink whose queue fills and drains; the swarm-level
effect is in tests/swift/test_swift_sim_own_queue.py.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import pytest

from swift.core.binmap import Binmap
from swift.core.ledbat import Ledbat, OwnQueue
from swift.core.sendside import SendSide

MSS = 1024


def test_at_takes_each_other_channel_nearest_reading_then_the_least() -> None:
    own = OwnQueue()
    a, b, c = object(), object(), object()
    own.note(1.000, 0.030, a, 0.0)
    own.note(1.0015, 0.038, a, 0.0)   # a's nearest to 1.002
    own.note(1.0019, 0.050, b, 0.0)   # b's nearest
    own.note(1.0021, 0.001, c, 0.0)   # the asker's own reading never counts
    assert own.at(1.002, c) == pytest.approx(0.038)
    assert own.at(1.002, a) == pytest.approx(0.001)  # b's 0.050 and c's 0.001: the least


def test_at_is_zero_without_readings_near_in_time_and_never_negative() -> None:
    own = OwnQueue()
    a, b = object(), object()
    assert own.at(1.0, b) == 0.0
    own.note(1.0, 0.040, a, 0.0)
    assert own.at(1.0 + OwnQueue.SPAN * 1.01, b) == 0.0
    assert own.at(1.0 + OwnQueue.SPAN * 0.99, b) == pytest.approx(0.040)
    own.note(2.0, -0.002, a, 0.0)  # a sample below a base learnt earlier in a queue
    assert own.at(2.0, b) == 0.0


def test_readings_are_bounded() -> None:
    own = OwnQueue()
    a = object()
    for i in range(3 * OwnQueue.KEEP):
        own.note(i * 1e-3, 0.01, a, 0.0)
    assert len(own.readings) == OwnQueue.KEEP


# -- two channels of one seeder on one uplink ------------------------------------------

#: s, one-way delay of each channel's path without a queue (the receiver's clock
#: offset included: the two bases differ, as they do between real receivers)
BASE = {"A": 0.005, "C": 0.060}
#: s, ACK return time after the DATA arrived
BACK = {"A": 0.005, "C": 0.050}


def _queue(t: float) -> float:
    """The uplink's queue (s) met by DATA sent at ``t``: empty, then 38 ms while A's
    slow start has filled it (1.00-1.10 s), then empty again."""
    return 0.038 if 1.0 <= t < 1.1 else 0.0


def _run(own_a: OwnQueue | None, own_c: OwnQueue | None, sends: dict[str, list[float]],
         queue: Callable[[float], float] = _queue,
         back: dict[str, float] | None = None) -> dict[str, SendSide]:
    """Each channel's DATA sent at the given times, one chunk each; its ACK comes
    back with the one-way delay sample (base + queue at the send time); ACKs are
    handled in arrival order across both channels."""
    sides = {"A": SendSide(1000, MSS, False, Binmap(), own=own_a),
             "C": SendSide(1000, MSS, False, Binmap(), own=own_c)}
    back = back or BACK
    events: list[tuple[float, int, str, Callable[[float], None]]] = []
    n = 0
    for name, times in sends.items():
        side = sides[name]
        for i, t in enumerate(times):
            one_way = BASE[name] + queue(t)

            def sent(now: float, side: SendSide = side, i: int = i) -> None:
                side.on_sent(i, MSS, now)

            def acked(now: float, side: SendSide = side, i: int = i, d: float = one_way) -> None:
                side.on_ack(i, i + 1, round(d * 1e6), now)

            heapq.heappush(events, (t, n, name, sent))
            heapq.heappush(events, (t + one_way + back[name], n + 1, name, acked))
            n += 2
    while events:
        now, _, _, f = heapq.heappop(events)
        f(now)
    return sides


def _sends() -> dict[str, list[float]]:
    # A: established before the queue (its first samples on the empty uplink), then
    # one DATA every 0.5 ms through the queue; C: its first four DATA in A's queue,
    # then more once the queue has drained
    a = [0.5 + k * 0.01 for k in range(8)] + [1.0 + k * 0.0005 for k in range(200)]
    c = [1.02, 1.03, 1.04, 1.05] + [1.2 + k * 0.01 for k in range(20)]
    return {"A": a, "C": c}


def _gate_open(led: Ledbat, now: float) -> bool:
    return led.young_gain(now) < led.gain


def test_a_queue_our_own_channels_filled_does_not_open_the_young_base_gate() -> None:
    own = OwnQueue()
    c = _run(own, own, _sends())["C"].ledbat
    assert c.acks == 24
    assert c._base == pytest.approx(BASE["C"])
    assert c.first_delay == pytest.approx(BASE["C"], abs=1e-6)
    assert not _gate_open(c, 2.0)


def test_without_the_view_the_same_channel_opens_the_gate() -> None:
    c = _run(None, None, _sends())["C"].ledbat
    assert c.first_delay == pytest.approx(BASE["C"] + 0.038, abs=1e-6)
    assert c.first_delay - c._base > Ledbat.YOUNG_REVISION * Ledbat.TARGET
    assert _gate_open(c, 2.0)


def test_a_channel_alone_keeps_rfc_6817s_reference() -> None:
    # C alone on the peer: no other channel's readings, the same state as without a view
    sends = {"A": [], "C": _sends()["C"]}
    with_view = _run(OwnQueue(), OwnQueue(), sends)["C"].ledbat
    without = _run(None, None, sends)["C"].ledbat
    for attr in ("first_delay", "_base", "cwnd", "acks", "history_start"):
        assert getattr(with_view, attr) == getattr(without, attr), attr
    assert _gate_open(with_view, 2.0)


def test_readings_of_another_peer_do_not_count() -> None:
    # A and C on two peers (two views): C's uplink held no queue of A's making
    c = _run(OwnQueue(), OwnQueue(), _sends())["C"].ledbat
    assert _gate_open(c, 2.0)


def test_a_sibling_whose_acks_come_later_cannot_help_and_the_gate_acts_as_before() -> None:
    # A's ACKs for DATA sent with C's first four arrive after C's: nothing to read yet
    own = OwnQueue()
    c = _run(own, own, _sends(), back={"A": 0.2, "C": BACK["C"]})["C"].ledbat
    assert c.first_delay == pytest.approx(BASE["C"] + 0.038, abs=1e-6)
    assert _gate_open(c, 2.0)


def test_the_gate_still_opens_for_a_queue_no_channel_of_ours_saw_fill() -> None:
    # A standing queue met by both channels' first samples (cubic TCP's, there
    # before the peer sent anything): A's base is learnt in it too, so A reads no
    # queue of ours and C's reference keeps the whole fall
    own = OwnQueue()
    c = _run(own, own, _sends(), queue=lambda t: 0.030 if t < 1.15 else 0.0)["C"].ledbat
    assert c.first_delay == pytest.approx(BASE["C"] + 0.030, abs=1e-6)
    assert _gate_open(c, 2.0)
