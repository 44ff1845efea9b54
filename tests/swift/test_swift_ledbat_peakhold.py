"""RFC 6817's window cap, and a sender whose own cycle is longer than the path's RTT.

RFC 6817 2.4.2 caps the window at what is in flight plus ALLOWED_INCREASE
MSS, so that a sender that does not use its window does not grow it.  Our
LEDBAT takes "in flight" as the largest flight of the last RTT.  Toward a
libswift leecher on loopback the RTT (0.1-1 ms) is shorter than our seeder's
own cycle of reading a batch of ACKs and refilling its window, so each batch
found the flight drained by the one before and the cap cut a full window to
what was left: 35 KiB to 3 KiB within 80 ms, 2 DATA per flush
(docs/swift-perf.md, session 10).  The largest flight is now remembered for at
least ``Ledbat.PEAK_HOLD``; on longer paths the RTT holds it, as before.
"""

from __future__ import annotations

from swift.core.ledbat import Ledbat

MSS = 1024


def _full_window_then_batches(rtt: float, gaps: list[float]) -> Ledbat:
    """A full 64 KiB window on a path of ``rtt``; a batch of 60 ACKs drains it
    (the sender busy reading them) ``gaps[0]`` s later, then a batch of 2 ACKs
    after each further gap, with no refill in between."""
    led = Ledbat(mss=MSS)
    led.slow_start = False
    now = 100.0
    for _ in range(64):
        led.on_send(MSS, now)
    led.cwnd = float(64 * MSS)
    led.on_ack(0.0001, MSS, now + rtt, rtt)  # an RTT estimate
    for k, gap in enumerate(gaps):
        now += gap
        for _ in range(60 if k == 0 else 2):
            led.on_ack(0.0001, MSS, now, rtt)
    return led


def test_a_window_limited_sender_keeps_its_window_across_drained_batches() -> None:
    """0.3 ms path, batches 1 ms apart: the window stays (it was cut to ~3 KiB)."""
    led = _full_window_then_batches(0.0003, [0.001, 0.001])
    assert led.cwnd >= 64 * MSS


def test_the_cap_still_follows_a_flight_that_stays_low() -> None:
    """RFC 6817's cap itself stays: once the hold has passed with the flight still
    low (nothing sent since), the window comes down to it."""
    led = _full_window_then_batches(0.0003, [0.001, 0.001, Ledbat.PEAK_HOLD * 1.5])
    assert led.cwnd <= 4 * MSS + Ledbat.ALLOWED_INCREASE * MSS


def test_on_a_long_path_the_rtt_holds_the_flight_as_before() -> None:
    """50 ms path: within an RTT the largest flight holds, after it the cap applies."""
    within = _full_window_then_batches(0.050, [0.010, 0.030])
    assert within.cwnd >= 64 * MSS
    after = _full_window_then_batches(0.050, [0.010, 0.030, 0.060])
    assert after.cwnd <= 4 * MSS + Ledbat.ALLOWED_INCREASE * MSS
