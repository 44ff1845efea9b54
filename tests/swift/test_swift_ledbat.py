"""LEDBAT (RFC 6817 section 2.4.2) driven by a fake clock."""

import pytest

from swift.core.ledbat import Ledbat

#: an RTT of 2 x TARGET: LEDBAT++'s GAIN is then the RFC's (one MSS per RTT at no queue;
#: test_swift_ledbat_yield.py checks it on shorter paths)
RTT = 0.2


def _run(led: Ledbat, delay: float, rounds: int, t0: float = 0.0) -> float:
    now = t0
    for _ in range(rounds):
        n = max(1, int(led.cwnd // led.mss))
        for _ in range(n):
            led.on_send(led.mss, now)
        now += RTT
        for _ in range(n):
            led.on_ack(delay, led.mss, now, rtt=RTT)
    return now


def test_grows_without_queuing_and_shrinks_over_target() -> None:
    led = Ledbat(mss=1000)
    now = _run(led, 0.010, 50)
    big = led.cwnd
    assert big > 20 * 1000  # ~1 MSS per RTT of growth
    # queuing delay 150 ms > TARGET: off_target < 0, cwnd falls
    _run(led, 0.160, 30, now)
    assert led.cwnd < big
    assert led.queuing_delay > led.TARGET


def test_cwnd_bounded_by_flightsize_and_min() -> None:
    led = Ledbat(mss=1000)
    for _ in range(100):  # acks without data in flight cannot inflate cwnd
        led.on_ack(0.01, 1000, 1.0)
    assert led.cwnd <= 2 * 1000 + 1000
    led.on_send(1000, 1.0)
    led.on_loss(1000, 2.0)
    assert led.cwnd >= led.MIN_CWND * led.mss


def test_loss_halves_once_per_rtt_and_timeout_resets() -> None:
    led = Ledbat(mss=1000)
    _run(led, 0.01, 40)
    c = led.cwnd
    led.on_loss(0, 100.0)
    assert abs(led.cwnd - c / 2) < 1
    led.on_loss(0, 100.001)  # same RTT: no second halving
    assert abs(led.cwnd - c / 2) < 1
    led.on_send(1000, 200.0)
    assert not led.check_timeout(200.0)
    assert led.check_timeout(200.0 + led.cto + 0.01)
    assert led.cwnd == 1000


def test_base_delay_rolls_over_minutes() -> None:
    led = Ledbat()
    led.on_send(1024, 0)
    led.on_ack(0.5, 1024, 1.0)
    assert led.base_delay == 0.5
    for m in range(1, 12):  # after BASE_HISTORY minutes the old minimum expires
        led.on_send(1024, m * 60.0)
        led.on_ack(0.8, 1024, m * 60.0 + 1)
    assert led.base_delay == 0.8


@pytest.mark.parametrize("kernel", [True, False])
def test_ack_delay_uses_kernel_arrival_time(kernel) -> None:
    """RFC 7574 8.7: with ``delay_from_kernel`` the one-way delay in an ACK is
    measured when the DATA arrived (SO_TIMESTAMPNS); by default when our
    event loop handled it (the receive-buffer wait counts as queuing)."""
    import os

    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer, PeerConfig
    from swift.wire import codec as C
    from swift.wire.constants import MsgType

    data = os.urandom(8 * 1024)
    t = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)],
                         PeerConfig().hash_func)
    s = Peer(Content.seeded(t, MemoryStorage(data)), PeerConfig(seed=1))
    lp = Peer(Content(MerkleTree.for_root(t.root_hash), MemoryStorage()),
              PeerConfig(seed=2, delay_from_kernel=kernel))
    S, L = ("10.0.0.1", 1), ("10.0.0.2", 2)
    lp.connect(S, 100.0)
    now = 100.0
    acks = []
    for _ in range(200):
        now += 0.01
        for d, _ in s.datagrams_to_send(now):
            msgs = C.decode_datagram(d, lp.ctx).messages
            if any(m.type == MsgType.DATA for m in msgs):
                lp.datagram_received(d, S, now + 0.5, arrived=now + 0.1)  # loop was 0.4 s late
            else:
                lp.datagram_received(d, S, now)
        for d, _ in lp.datagrams_to_send(now + 0.5):
            acks += [m for m in C.decode_datagram(d, s.ctx).messages if m.type == MsgType.ACK]
            s.datagram_received(d, L, now + 0.5)
        if acks:
            break
    assert acks
    want = 100_000 if kernel else 500_000
    assert all(abs(a.delay - want) < 2_000 for a in acks), [a.delay for a in acks]


def test_timeout_recovers_by_slow_start_to_half_the_old_window() -> None:
    """After a congestion timeout cwnd restarts at 1 MSS and doubles per RTT
    up to half the window the timeout found (RFC 5681 3.1), then LEDBAT's
    additive growth takes over; a repeated timeout keeps that threshold."""
    led = Ledbat(mss=1000)
    now = _run(led, 0.010, 60)
    before = led.cwnd
    assert before > 30 * 1000
    led.on_send(1000, now)
    assert led.check_timeout(now + led.cto + 0.01)
    assert led.cwnd == 1000 and led.timeouts == 1
    assert led.ssthresh == before / 2
    led.on_send(1000, now + 10)
    assert led.check_timeout(now + 10 + led.cto + 0.01)  # again: threshold held
    assert led.ssthresh == before / 2
    now = _run(led, 0.010, 5, now + 20)  # 5 RTTs of doubling: 1 -> ~half
    assert led.cwnd >= before / 2 - 1000
    plain = Ledbat(mss=1000)  # without the threshold: one MSS per RTT
    plain.cwnd = 1000.0
    _run(plain, 0.010, 5, 0.0)
    assert plain.cwnd < 8 * 1000


def test_loss_ends_timeout_recovery() -> None:
    led = Ledbat(mss=1000)
    now = _run(led, 0.010, 60)
    led.on_send(1000, now)
    assert led.check_timeout(now + led.cto + 0.01)
    led.on_send(1000, now + 2)
    led.on_loss(1000, now + 3)
    assert led.ssthresh == 0.0
    _run(led, 0.010, 5, now + 4)
    assert led.cwnd < 8 * 1000


def test_no_recovery_growth_over_half_target() -> None:
    """Recovery slow start stops while queuing delay is over TARGET/2."""
    led = Ledbat(mss=1000)
    now = _run(led, 0.010, 60)
    led.on_send(1000, now)
    assert led.check_timeout(now + led.cto + 0.01)
    _run(led, 0.010 + 0.8 * led.TARGET, 5, now + 2)
    assert led.cwnd < 8 * 1000
