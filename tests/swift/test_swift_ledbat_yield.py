"""LEDBAT that yields fast once the queue passes TARGET (issue 15 item 6).

RFC 6817's linear controller takes at most GAIN x off_target MSS off the
window per RTT: facing cubic TCP that keeps a 300 ms queue (off_target
-1.5 at TARGET 100 ms) it needed 7-15 s to leave a 10 Mbit/s window
(docs/ledbat.md).  draft-irtf-iccrg-ledbat-plus-plus section 4.3 (the
remedy RFC 6817 4.4 leaves open: "a multiplicative decrease of the
congestion window") decreases by ``W * (delay/TARGET - 1)`` per RTT, at most
half the window.  Sans-IO: the controller alone, fed delay samples and a
clock, one ACK per MSS, an RTT per round.
"""

from __future__ import annotations

import pytest

from swift.core.ledbat import Ledbat

MSS = 1000
RTT = 0.05


def _round(led: Ledbat, delay: float, now: float) -> float:
    """One RTT: a window sent, then acknowledged with one-way ``delay`` each."""
    n = max(1, int(led.cwnd // MSS))
    for _ in range(n):
        led.on_send(MSS, now)
    now += RTT
    for _ in range(n):
        led.on_ack(delay, MSS, now, rtt=RTT)
    return now


def _grown(target: float = 0.025, rounds: int = 60) -> tuple[Ledbat, float]:
    led = Ledbat(mss=MSS, target=target, slow_start=False)
    now = 0.0
    for _ in range(rounds):  # no queue: the window grows
        now = _round(led, 0.001, now)
    return led, now


@pytest.mark.parametrize("over", [1.2, 2.0, 10.0])
def test_above_target_the_window_falls_multiplicatively_at_most_by_half_per_rtt(
        over: float) -> None:
    led, now = _grown()
    w = led.cwnd
    assert w >= 20 * MSS
    now = _round(led, 0.001 + over * led.TARGET, now)
    # one RTT at delay/TARGET = over: W * (over - 1) off, at most W/2 (LEDBAT++ 4.3);
    # the linear rule took GAIN * (over - 1) MSS, under 10 MSS even at 10 x TARGET
    want = w - min(w * (over - 1), w / 2)
    assert led.cwnd == pytest.approx(want, rel=0.1)
    assert led.cwnd >= w / 2 - MSS


def test_a_standing_queue_far_over_target_is_left_within_a_few_rtts() -> None:
    """Cubic keeping a 300 ms queue against a 100 ms TARGET: from a 10 Mbit/s window
    (tens of MSS) to the minimum in a few RTTs, not in 15 s."""
    led, now = _grown(target=0.100, rounds=300)
    assert led.cwnd >= 60 * MSS
    rounds = 0
    while led.cwnd > led.MIN_CWND * MSS and rounds < 50:
        now = _round(led, 0.001 + 0.250, now)
        rounds += 1
    assert led.cwnd == led.MIN_CWND * MSS
    assert rounds <= 10


def test_below_target_growth_is_unchanged() -> None:
    """Below TARGET the RFC's increase stands: GAIN * off_target MSS per RTT."""
    led, now = _grown()
    w = led.cwnd
    now = _round(led, 0.001 + 0.5 * led.TARGET, now)  # off_target 0.5 (base 1 ms)
    assert led.cwnd - w == pytest.approx(0.5 * led.GAIN * MSS, rel=0.2)


@pytest.mark.parametrize("base_rtt, target, gain", [
    (0.020, 0.025, 1 / 3),  # the testbed: 20 ms, ceil(2 * 25 / 20) = 3
    (0.100, 0.025, 1.0),  # a long path: one MSS per RTT, as RFC 6817
    (0.0002, 0.025, 1 / 16),  # loopback: at most 16 times slower
    (0.020, 0.100, 1 / 10),
])
def test_gain_scales_with_the_base_rtt(base_rtt: float, target: float, gain: float) -> None:
    """draft-irtf-iccrg-ledbat-plus-plus 4.2: GAIN = 1 / min(16, ceil(2 * TARGET / base)),
    so a flow on a short path grows no faster per second than one on a path of 2 x TARGET
    (one MSS per RTT at a 20 ms RTT is 2.5 times the growth TCP gets at 50 ms)."""
    led = Ledbat(mss=MSS, target=target, slow_start=False)
    now = 0.0
    for _ in range(20):
        n = max(1, int(led.cwnd // MSS))
        for _ in range(n):
            led.on_send(MSS, now)
        now += base_rtt
        for _ in range(n):
            led.on_ack(0.001, MSS, now, rtt=base_rtt)
    assert led.gain == pytest.approx(gain)
    w = led.cwnd
    n = int(w // MSS)
    for _ in range(n):
        led.on_send(MSS, now)
    now += base_rtt
    for _ in range(n):
        led.on_ack(0.001, MSS, now, rtt=base_rtt)
    assert led.cwnd - w == pytest.approx(gain * MSS * n * MSS / w, rel=0.1)


def test_a_burst_of_losses_in_one_rtt_is_one_loss_event() -> None:
    """``losses`` counts DATA found lost, ``loss_events`` the halvings (at most one per
    RTT, RFC 6817 2.4.2): one drop at the bottleneck can cost a window of DATA at the
    receiver (siblings unverifiable without the hashes it carried, docs/ledbat.md), and
    the window reacts once."""
    led, now = _grown()
    w = led.cwnd
    for k in range(10):
        led.on_loss(MSS, now + k * RTT / 20)
    assert led.losses == 10 and led.loss_events == 1
    assert led.cwnd == pytest.approx(w / 2)
    led.on_loss(MSS, now + 2 * RTT)
    assert led.loss_events == 2
