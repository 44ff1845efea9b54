"""Pacing of a sender whose own cycle is longer than its pacing interval (issue 15,
our seeder toward a libswift leecher at 8 KiB on loopback).

Two findings of the session-11 trace (docs/swift-perf.md, "At 8 KiB"), each
tested on the sans-IO sender (:class:`~swift.core.sendside.SendSide` and its
LEDBAT), with times as arguments:

* **The pacing credit.**  A channel's pacing allowed at most ``PACE_BURST``
  (64 KiB) back to back, however late the sender woke up.  Its wake-ups are
  the ACK batches and a timer that asyncio rounds up to 1 ms, and a loaded
  2-core machine deschedules it for milliseconds: with 8 KiB DATA (8 datagrams
  a burst) pacing then let out at most 64 KiB per wake-up, the flight never
  passed ~64 KiB, and RFC 6817's cap (cwnd <= flight + 1 MSS) held the window
  there: 72.7 KiB, 9 DATA, in every slow repeat traced.  The credit now
  covers the sender's own lag up to ``PACE_LAG`` (5 ms, ``Ledbat.PEAK_HOLD``:
  the same cycle) at the pacing rate; a longer silence still gets
  ``PACE_BURST``.
* **The RTT pacing spreads the window over** leaves out the time an ACK
  waited in our own socket while we were busy: it is taken from the ACK's
  arrival time (the kernel's, when the driver reads it), not from when the
  core handled it.  LEDBAT's smoothed RTT keeps the handling time (its
  round-trip-queue rule, the congestion timeout and RACK want it).
"""

from __future__ import annotations

import pytest

from swift.core.binmap import Binmap
from swift.core.ledbat import Ledbat
from swift.core.sendside import PACE_BURST, PACE_LAG, SendSide

MSS = 8192
SIZE = 8300  # an 8 KiB DATA datagram with its header and a few uncle hashes


def _side(cwnd: float, srtt: float) -> SendSide:
    s = SendSide(100000, MSS, False, Binmap())
    led = s.ledbat
    led.cwnd = cwnd
    led.srtt = srtt
    led.min_rtt = srtt
    return s


def _burst(s: SendSide, now: float, first: int) -> int:
    """DATA sent at ``now`` while pacing (and the window) allow: upload_data's loop."""
    n = 0
    while s.pace_at <= now and s.ledbat.can_send(MSS) and n < 10000:
        s.on_sent(first + n, SIZE, now)
        n += 1
    return n


def test_a_late_wakeup_makes_up_its_lag_at_the_pacing_rate() -> None:
    """400 KiB window over 1 ms (400 MB/s): a sender that wakes 3 ms after its
    pacing time (its own lag, below PACE_LAG) may send what the rate allowed
    in those 3 ms, up to its window; before, at most PACE_BURST (8 DATA)."""
    cwnd = 400 * 1024.0
    s = _side(cwnd, 0.001)
    t0 = 100.0
    sent = _burst(s, t0, 0)
    s.ledbat.flightsize = 0  # everything acknowledged meanwhile (the window is not the test)
    on_time = _burst(s, s.pace_at, sent)  # woken at its pacing time: one DATA
    assert on_time == 1
    sent += on_time
    s.ledbat.flightsize = 0
    late = s.pace_at + 0.003
    assert 0.003 < PACE_LAG
    again = _burst(s, late, sent)
    rate = cwnd / 0.001
    assert again * SIZE >= min(cwnd, 0.003 * rate) - SIZE, (again, sent)


def test_a_long_silence_still_starts_with_one_burst() -> None:
    """After a silence longer than PACE_LAG the credit is PACE_LAG at the rate
    (or PACE_BURST, whichever is more), not the whole silence."""
    s = _side(4096 * 1024.0, 0.001)  # a window far larger than any burst
    t0 = 100.0
    _burst(s, t0, 0)
    s.ledbat.flightsize = 0
    n = _burst(s, t0 + 1.0, 1000)
    rate = s.ledbat.cwnd / 0.001
    assert n * SIZE <= max(PACE_BURST, PACE_LAG * rate) + 2 * SIZE
    # on a slow path (10 Mbit/s-like: 20 KiB over 25 ms) PACE_BURST stays the bound
    slow = _side(20 * 1024.0, 0.025)
    _burst(slow, t0, 0)
    slow.ledbat.flightsize = 0
    m = _burst(slow, t0 + 1.0, 1000)
    assert m * SIZE <= PACE_BURST + 2 * SIZE


def test_the_cap_no_longer_pins_a_late_sender_at_one_burst() -> None:
    """The trace's loop: a 1 ms path, the sender wakes every 2 ms (its lag),
    reads the ACKs of everything in flight, then sends what pacing and the
    window allow.  In congestion avoidance below TARGET the window must grow;
    before, RFC 6817's cap held it at one PACE_BURST plus 1 MSS (72.7 KiB in
    the live trace) because the flight never passed one burst."""
    s = _side(256 * 1024.0, 0.001)
    led = s.ledbat
    led.slow_start = False
    now = 100.0
    nxt = 0
    sent_at: list[tuple[int, float]] = []
    for _ in range(400):
        for c, t in sent_at:  # the batch of ACKs: 1 ms path, read at the wake-up
            s.on_ack(c, c + 1, 500, now, t + 0.001)
        sent_at = []
        n = _burst(s, now, nxt)
        sent_at = [(nxt + k, now) for k in range(n)]
        nxt += n
        now += 0.002
    assert led.cwnd > PACE_BURST + 2 * MSS, led.cwnd


def test_pacing_rtt_leaves_out_the_time_an_ack_waited_for_us() -> None:
    """An ACK that arrived 0.5 ms after its DATA left but was handled 2 ms
    after: pacing spreads the window over 0.5 ms, LEDBAT's RTT keeps 2 ms."""
    s = _side(64 * 1024.0, 0.0)
    s.ledbat.srtt = None
    t0 = 100.0
    s.on_sent(0, SIZE, t0)
    s.on_ack(0, 1, 400, t0 + 0.002, t0 + 0.0005)
    assert s.pace_rtt == pytest.approx(0.0005)
    assert s.ledbat.srtt == pytest.approx(0.002)  # handling time: CTO, RACK, queue rule
    # consecutive DATA are spaced by size * pace_rtt / cwnd (past the burst credit)
    t1 = t0 + 1.0
    times = []
    for i in range(1, 200):
        s.on_sent(i, SIZE, t1)
        times.append(s.pace_at)
    per_byte = 0.0005 / s.ledbat.cwnd
    assert times[-1] - times[-2] == pytest.approx(SIZE * per_byte)


def test_without_an_arrival_time_the_handling_time_is_the_arrival() -> None:
    """Cores driven without kernel times (the simulator, old drivers): as before."""
    s = _side(64 * 1024.0, 0.0)
    s.ledbat.srtt = None
    t0 = 100.0
    s.on_sent(0, SIZE, t0)
    s.on_ack(0, 1, 400, t0 + 0.002)
    assert s.pace_rtt == pytest.approx(0.002)
    assert s.ledbat.srtt == pytest.approx(0.002)


def test_an_arrival_after_the_handling_time_is_ignored() -> None:
    """A driver's arrival time later than ``now`` (clock trouble) is not
    believed: the handling time stands."""
    s = _side(64 * 1024.0, 0.0)
    s.ledbat.srtt = None
    t0 = 100.0
    s.on_sent(0, SIZE, t0)
    s.on_ack(0, 1, 400, t0 + 0.002, t0 + 0.5)
    assert s.pace_rtt == pytest.approx(0.002)


def test_ledbat_peak_hold_is_the_pacing_lag() -> None:
    """One figure for the sender's own cycle (docs/ledbat.md, PEAK_HOLD)."""
    assert PACE_LAG == Ledbat.PEAK_HOLD
