"""The seeder's per-ACK path, made cheaper, against the plain versions it replaced.

At 1 KiB chunks toward a libswift leecher (one ``HAVE bin, ACK i`` datagram
per chunk) ``Ledbat.on_ack`` and ``SendSide.delivered_by_have`` run once per
chunk.  ``on_ack`` now keeps MIN(base_delays) and the path's GAIN instead of
recomputing them, and ``delivered_by_have`` looks at the front of the DATA in
flight instead of walking the HAVE's range.  Both must give exactly what the
plain versions (kept here as the reference) give.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings, strategies as st
from swift_support import ledbat_side_by_side, ledbat_state

from deliverykit.fastpath import have_c
from swift._fast import ledbat_on_ack, py_ledbat_on_ack
from swift.core.binmap import Binmap
from swift.core.ledbat import Ledbat
from swift.core.sendside import SendSide


def _reference_on_ack(self: Ledbat, delay: float, bytes_acked: int, now: float,
                      rtt: float | None) -> None:
    """RFC 6817 2.4.2 with the module's additions, every quantity recomputed
    (the code before the per-ACK lookups were hoisted)."""
    self.acks += 1
    bd = self.base_delays
    lr = self.last_rollover
    if lr == -math.inf or int(now // 60) != int(lr // 60):
        self.last_rollover = now
        bd.append(delay)
    elif delay < bd[-1]:
        bd[-1] = delay
    cur = self.current_delays
    cur.append(delay)
    qd = min(cur) - min(bd)
    off_target = (self.TARGET - qd) / self.TARGET
    flight = self.flightsize
    if now - self.peak_time > max(self.srtt or 1.0, self.PEAK_HOLD):
        self.peak_flight = flight
        self.peak_time = now
    cap_flight = max(flight, self.peak_flight)
    if rtt is not None and rtt < self.min_rtt:
        self.min_rtt = rtt
    rq = self.srtt - self.min_rtt if self.srtt is not None and rtt is not None else 0.0
    calm = qd < self.TARGET / 2 and rq < self.TARGET / 2
    recovering = not self.slow_start and self.cwnd < self.ssthresh and calm
    if recovering:
        self.cwnd = min(self.ssthresh, self.cwnd + bytes_acked)
    elif self.slow_start and calm:
        self.cwnd += bytes_acked
    else:
        if self.slow_start:
            self.cwnd = max(self.cwnd / 2, float(self.MIN_CWND * self.mss))
        self.slow_start = False
        if off_target < 0:
            w = self.cwnd / self.mss
            per_rtt = max(self.gain + self.DECREASE * w * off_target, -w / 2)
            self.cwnd += per_rtt * bytes_acked * self.mss / self.cwnd
        elif rq <= self.TARGET:
            self.cwnd += self.gain * off_target * bytes_acked * self.mss / self.cwnd
    if self.slow_start or recovering:
        self.cwnd = min(self.cwnd, 2 * cap_flight + self.ALLOWED_INCREASE * self.mss)
    else:
        self.cwnd = min(self.cwnd, cap_flight + self.ALLOWED_INCREASE * self.mss)
    self.cwnd = max(min(self.cwnd, float(self.MAX_CWND)), float(self.MIN_CWND * self.mss))
    self.flightsize = max(0, flight - bytes_acked)
    if rtt is not None:
        self._update_cto(rtt)
    elif self.srtt is not None:
        self.cto = max(0.2, self.srtt + 4 * self.rttvar)
    self.last_ack = now


#: one event: (seconds since the last, kind 0 send / 1 ack / 2 loss / 3 timeout check,
#: delay ms, with an RTT sample)
events = st.lists(st.tuples(st.floats(0, 30), st.integers(0, 3), st.floats(0, 200),
                            st.booleans()), min_size=1, max_size=300)


def _run_side_by_side(on_ack, evs, slow_start, target, seed) -> None:
    """Same window, flight, RTT estimate and delay history after every event,
    through slow start, loss, timeouts, a TARGET changed after the handshake
    (handshake.py does that) and minute rollovers of the base delay."""
    fast = Ledbat(mss=1024, slow_start=slow_start)
    ref = Ledbat(mss=1024, slow_start=slow_start)
    # the reference is the arithmetic without Ledbat.YOUNG_BASE (on by default since
    # session 15); C and twin with it on: tests/swift/test_swift_ledbat_young.py
    fast.YOUNG_BASE = False

    def set_target() -> None:
        fast.TARGET = ref.TARGET = target

    # (the reference predates YOUNG_BASE's state: tests/swift/test_swift_ledbat_young.py)
    ledbat_side_by_side(fast, ref, on_ack, _reference_on_ack, evs, seed, set_target,
                        young=False)


@settings(max_examples=150, deadline=None)
@given(events, st.booleans(), st.sampled_from([0.025, 0.1]), st.integers(0, 2**32))
def test_python_twin_equals_the_plain_arithmetic(evs, slow_start, target, seed) -> None:
    _run_side_by_side(py_ledbat_on_ack, evs, slow_start, target, seed)


@pytest.mark.skipif(not have_c(), reason="the C extension is not built")
@settings(max_examples=300, deadline=None)
@given(events, st.booleans(), st.sampled_from([0.025, 0.1]), st.integers(0, 2**32))
def test_c_ledbat_on_ack_equals_the_plain_arithmetic(evs, slow_start, target, seed) -> None:
    """The C version (what Ledbat.on_ack runs) against the same reference."""
    assert ledbat_on_ack is not py_ledbat_on_ack
    _run_side_by_side(ledbat_on_ack, evs, slow_start, target, seed)


def test_c_ledbat_on_ack_refuses_a_broken_ledbat() -> None:
    """A flight size that is not an int, or a missing attribute: an error, no crash."""
    led = Ledbat(mss=1024)
    led.flightsize = "x"  # type: ignore[assignment]  # the broken state under test
    with pytest.raises(TypeError):
        ledbat_on_ack(led, 0.001, 1024, 1.0, 0.01)
    with pytest.raises((AttributeError, TypeError)):
        ledbat_on_ack(object(), 0.001, 1024, 1.0, 0.01)


def _reference_delivered_by_have(s: SendSide, lo: int, hi: int, now: float) -> None:
    """The walk over the HAVE's range (or over all DATA in flight) it replaced."""
    do = s.data_out
    if hi - lo == 1 and lo not in do:
        return
    led = s.ledbat
    old = now - max(1.5 * (led.srtt or 0.5), led.cto)
    newest, nseq = s.acked_sent, s.acked_seq
    for c in (range(lo, hi) if hi - lo <= len(do) else list(do)):
        x = do.get(c)
        if x is not None and lo <= c < hi and (
                x[0] < newest or x[0] < old or (x[0] == newest and x[2] < nseq)):
            del do[c]
            led.on_delivered(x[1], now)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 300))
def test_delivered_by_have_retires_what_the_range_walk_retired(seed, n) -> None:
    """DATA sent in bursts (several at one instant), some sent again, ACKs
    in any order, then HAVEs of bins: the same DATA leave flight, and the
    same bytes leave LEDBAT's flight size, as with the walk over the range."""
    rnd = random.Random(seed)
    sides = [SendSide(1000, 1024, False, Binmap()) for _ in range(2)]
    now = 1000.0
    for _ in range(n):
        now += rnd.choice((0.0, 0.0, 0.0005, 0.002, 0.4))
        op = rnd.random()
        if op < 0.55:
            c = rnd.randrange(256)
            for s in sides:
                s.on_sent(c, 1024, now)
        elif op < 0.8:
            c = rnd.randrange(256)
            delay = rnd.randrange(10_000)
            for s in sides:
                s.on_ack(c, c + 1, delay, now)
        else:
            k = rnd.randrange(6)
            lo = rnd.randrange(256) >> k << k
            hi = lo + (1 << k)
            sides[0].delivered_by_have(lo, hi, now)
            _reference_delivered_by_have(sides[1], lo, hi, now)
        a, b = sides
        assert list(a.data_out.items()) == list(b.data_out.items())
        assert (a.acked_sent, a.acked_seq) == (b.acked_sent, b.acked_seq)
        assert ledbat_state(a.ledbat) == ledbat_state(b.ledbat)
