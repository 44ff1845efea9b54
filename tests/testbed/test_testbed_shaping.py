"""Link shaping measured at the receiver: netem delay and loss, Gilbert-Elliott bursts, tbf rate.

Tolerances are physical, not speed claims: a delay is never shorter than
configured and a loaded 2-core VM may add tens of milliseconds; loss bounds
are six binomial standard deviations wide (plus a fixed seed).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import time

import pytest

from deliverykit.testbed import Netem, Tbf, Testbed
from deliverykit.testbed.errors import TestbedError
from deliverykit.testbed.impair import GilbertElliott, Impairer

PORT = 7100
STAMP = struct.Struct("!Id")  # sequence number, time.monotonic() at send


def receive(ready, count: int, idle: float = 1.0,
            first: float = 10.0) -> list[tuple[int, float, float]]:
    """(seq, one-way delay, arrival time) per datagram, until ``count`` or ``idle`` s of silence."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", PORT))
    ready.set()
    s.settimeout(first)  # the first datagram
    out: list[tuple[int, float, float]] = []
    try:
        while len(out) < count:
            data = s.recv(65536)
            now = time.monotonic()
            seq, sent = STAMP.unpack_from(data)
            out.append((seq, now - sent, now))
            s.settimeout(idle)
    except TimeoutError:
        pass
    return out


def send(dst: str, count: int, interval: float, size: int = 200) -> int:
    """``count`` stamped datagrams, paced at ``interval`` seconds (in batches of 10)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = bytes(size - STAMP.size)
    start = time.monotonic()
    for seq in range(count):
        if seq % 10 == 0:
            delay = start + seq * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        s.sendto(STAMP.pack(seq, time.monotonic()) + pad, (dst, PORT))
    return count


def steady_rate(arrivals: list[float], size: int) -> float:
    """Wire bit rate of the arrivals after the first 0.3 s (past tbf's initial burst)."""
    steady = [t for t in sorted(arrivals) if t >= min(arrivals) + 0.3]
    assert len(steady) > 50, len(steady)
    return (len(steady) - 1) * (size + 42) * 8 / (steady[-1] - steady[0])


def pair(tb: Testbed):
    a, b = tb.host("a"), tb.host("b")
    link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
    return a, b, link


def measure(tb, src, dst_host, dst_ip, count, interval, size=200, expect=None, first=10.0):
    """Send ``count`` datagrams from src; receive up to ``expect`` (default ``count``)."""
    ready = tb.event()
    rx = tb.spawn(dst_host, receive, ready, expect or count, 1.0, first)
    assert ready.wait(10)
    tb.run(src, send, dst_ip, count, interval, size, timeout=120)
    return rx.result(timeout=60)


@pytest.mark.root
def test_netem_delay_one_direction() -> None:
    with Testbed() as tb:
        a, b, link = pair(tb)
        tb.shape(link.a, netem=Netem(delay_ms=20))
        forward = [d for _, d, _ in measure(tb, a, b, "10.0.1.2", 40, 0.01)]
        back = [d for _, d, _ in measure(tb, b, a, "10.0.1.1", 40, 0.01)]
    assert len(forward) == 40 and len(back) == 40
    print(f"delay 20 ms: min {min(forward):.4f} median {statistics.median(forward):.4f}"
          f" back {statistics.median(back):.4f}")
    assert min(forward) >= 0.0195  # never earlier than configured
    assert statistics.median(forward) < 0.020 + 0.030  # generous: a shared 2-core VM
    assert statistics.median(back) < 0.010  # the other direction is not delayed


@pytest.mark.root
def test_netem_loss_rate() -> None:
    n = 2000
    with Testbed() as tb:
        a, b, link = pair(tb)
        tb.shape(link.a, netem=Netem(loss_pct=10, seed=7))
        got = measure(tb, a, b, "10.0.1.2", n, 0.0005)
        stats = tb.unshape(link.a)
    loss = 1 - len(got) / n
    # binomial sd at p=0.1, n=2000 is 0.67 %: +-4 % is six of them
    print(f"netem loss 10 %: measured {loss:.3f}; impairer {stats}")
    assert 0.06 <= loss <= 0.14, (loss, stats)
    assert len({seq for seq, _, _ in got}) == len(got)  # no duplicates


@pytest.mark.root
@pytest.mark.slow
def test_gilbert_elliott_loss_is_bursty() -> None:
    n = 3000
    with Testbed() as tb:
        a, b, link = pair(tb)
        # p=5 %, r=40 %: stationary loss 5/45 = 11 %, mean burst 1/r = 2.5 frames
        tb.shape(link.a, netem=Netem(gemodel=(5, 40, 100, 0), seed=11))
        got = {seq for seq, _, _ in measure(tb, a, b, "10.0.1.2", n, 0.0005)}
    lost = [seq not in got for seq in range(n)]
    bursts, run = [], 0
    for flag in lost + [False]:
        if flag:
            run += 1
        elif run:
            bursts.append(run)
            run = 0
    print(f"gemodel: loss {sum(lost) / n:.3f}, mean burst {statistics.mean(bursts):.2f}")
    assert 0.05 <= sum(lost) / n <= 0.18
    # independent loss at 11 % would give mean runs of 1.12
    assert statistics.mean(bursts) >= 1.7, bursts


@pytest.mark.root
def test_tbf_caps_udp_flood() -> None:
    rate = 4_000_000
    size = 1200  # payload; 1242 bytes on the wire with UDP, IP and Ethernet headers
    with Testbed() as tb:
        a, b, link = pair(tb)
        tb.shape(link.a, tbf=Tbf(rate_bps=rate, limit_pkts=25))
        # offer twice the rate for 2 s
        offered_interval = (size + 42) * 8 / (2 * rate)
        got = measure(tb, a, b, "10.0.1.2", int(2.0 / offered_interval), offered_interval, size)
        counters = tb.tbf_counters(a, link.a)
        with pytest.raises(TestbedError, match="no tbf"):
            tb.tbf_counters(b, link.b)  # the other end is not shaped
    assert got, "nothing arrived"
    # tc's counters: what arrived left the tbf, and twice the rate into a 25-packet
    # queue overflows it
    assert counters["packets"] >= len(got) and counters["drops"] > 0, counters
    # rate over the arrivals after the first 0.3 s of sending (past the initial burst)
    measured = steady_rate([t for _, _, t in got], size)
    print(f"tbf {rate} bit/s: measured {measured:.0f}")
    assert abs(measured - rate) / rate < 0.15, measured


@pytest.mark.root
@pytest.mark.slow
def test_netem_with_tbf_child() -> None:
    rate = 2_000_000
    size = 1000
    with Testbed() as tb:
        a, b, link = pair(tb)
        tb.shape(link.a, netem=Netem(delay_ms=10), tbf=Tbf(rate_bps=rate, limit_pkts=50))
        interval = (size + 42) * 8 / (2 * rate)
        got = measure(tb, a, b, "10.0.1.2", int(2.0 / interval), interval, size)
    delays = [d for _, d, _ in got]
    assert min(delays) >= 0.0095
    measured = steady_rate([t for _, _, t in got], size)
    print(f"netem+tbf {rate} bit/s: measured {measured:.0f}")
    assert abs(measured - rate) / rate < 0.15, measured


@pytest.mark.root
def test_unshape_restores_the_link() -> None:
    with Testbed() as tb:
        a, b, link = pair(tb)
        tb.shape(link.a, netem=Netem(delay_ms=50))
        tb.unshape(link.a)
        assert "htb" not in tb.exec(a, ["tc", "qdisc", "show", "dev", link.a.ifname]).stdout
        delays = [d for _, d, _ in measure(tb, a, b, "10.0.1.2", 10, 0.01)]
    assert len(delays) == 10 and statistics.median(delays) < 0.040


# --- no root needed: parameter checks and the impairer's decisions --------------------


def test_parameter_validation() -> None:
    with pytest.raises(ValueError):
        Netem(loss_pct=120)
    with pytest.raises(ValueError):
        Netem(reorder_pct=10)  # netem reorders only delayed packets
    with pytest.raises(ValueError):
        Netem(loss_pct=1, gemodel=(1, 10, 100, 0))
    with pytest.raises(ValueError):
        Tbf(rate_bps=0)
    with pytest.raises(ValueError):
        Tbf(rate_bps=1_000_000, limit_pkts=10, latency_ms=50)
    assert Tbf(rate_bps=4_000_000).burst == 5000
    assert Tbf(rate_bps=4_000_000, limit_pkts=25).limit_bytes == 25 * 1514
    assert Netem(delay_ms=20, jitter_ms=2, gemodel=(1, 10, 100, 0)).tc_args() == [
        "limit", "1000", "delay", "20ms", "2ms", "loss", "gemodel", "1%", "10%", "100%", "0%"]


def impairer(**kw) -> Impairer:
    ns = argparse.Namespace(seed=1, delay_ms=0.0, jitter_ms=0.0, loss_pct=0.0, gemodel=None,
                            duplicate_pct=0.0, reorder_pct=0.0, corrupt_pct=0.0, rate_bps=0.0,
                            limit_pkts=1000)
    for k, v in kw.items():
        setattr(ns, k, v)
    return Impairer(ns)


def test_impairer_decisions() -> None:
    frame = bytes(100)
    dup = impairer(duplicate_pct=100)
    assert len(dup.admit(frame, 0.0, 0)) == 2
    delayed = impairer(delay_ms=20, jitter_ms=5)
    whens = [delayed.admit(frame, 1.0, 0)[0][0] for _ in range(200)]
    assert all(1.015 <= w <= 1.025 for w in whens) and len(set(whens)) > 100
    reorder = impairer(delay_ms=20, reorder_pct=100)
    assert reorder.admit(frame, 1.0, 0)[0][0] == 1.0
    corrupt = impairer(corrupt_pct=100)
    (_, bad), = corrupt.admit(frame, 0.0, 0)
    assert bad[:14] == frame[:14] and sum(bin(x).count("1") for x in bad) == 1
    assert impairer(limit_pkts=5).admit(frame, 0.0, 5) == []
    paced = impairer(rate_bps=8000)  # 100-byte frames: 0.1 s each
    assert [paced.admit(frame, 0.0, 0)[0][0] for _ in range(3)] == [0.0, 0.1, 0.2]


def test_gilbert_elliott_stationary_loss() -> None:
    import random

    ge, rng = GilbertElliott(5, 40, 100, 0), random.Random(3)
    losses = sum(ge.lose(rng) for _ in range(100_000))
    assert abs(losses / 100_000 - 5 / 45) < 0.01


@pytest.mark.root
def test_netem_duplicate_and_reorder() -> None:
    n = 400
    with Testbed() as tb:
        a, b, link = pair(tb)
        tb.shape(link.a, netem=Netem(delay_ms=20, duplicate_pct=50, reorder_pct=25, seed=5))
        got = measure(tb, a, b, "10.0.1.2", n, 0.002, expect=2 * n)
    seqs = [seq for seq, _, _ in got]
    dups = len(seqs) - len(set(seqs))
    # binomial sd at p=0.5, n=400 is 10: +-60 is six of them
    assert 140 <= dups <= 260, dups
    out_of_order = sum(1 for x, y in zip(seqs, seqs[1:]) if y < x)
    undelayed = sum(1 for _, d, _ in got if d < 0.015)
    assert out_of_order > 20 and undelayed > 50, (out_of_order, undelayed)


@pytest.mark.root
def test_netem_on_a_jumbo_link_keeps_big_frames() -> None:
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24", mtu=9000)
        tb.shape(link.a, netem=Netem(delay_ms=5))
        got = measure(tb, a, b, "10.0.1.2", 20, 0.005, size=8000)
    assert len(got) == 20 and min(d for _, d, _ in got) >= 0.0045


@pytest.mark.root
def test_netem_corrupt_frames_fail_their_checksums() -> None:
    with Testbed() as tb:
        a, b, link = pair(tb)
        measure(tb, a, b, "10.0.1.2", 3, 0.01)  # resolve ARP before corrupting everything
        tb.shape(link.a, netem=Netem(corrupt_pct=100))
        got = measure(tb, a, b, "10.0.1.2", 20, 0.01, first=1.5)
        stats = tb.unshape(link.a)
    assert got == []  # each frame had one bit flipped past its Ethernet header
    if stats is not None:  # userspace impairer: it did send them
        assert stats["corrupted"] >= 20 and stats["sent"] >= 20
