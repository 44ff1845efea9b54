"""Multicast across a snooping bridge: two receivers get the group, a leave prunes a port."""

from __future__ import annotations

import contextlib
import socket
import struct
import time

import pytest

from deliverykit.testbed import Tbf, Testbed, read_pcap

GROUP, PORT = "239.1.2.3", 5000


def member(ready, done, my_ip: str, leave_after: int | None) -> tuple[int, float | None]:
    """Join GROUP on my_ip; after ``leave_after`` datagrams drop membership (socket stays open).

    Runs until the ``done`` event is set (at most 30 s).
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", PORT))
    mreq = struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton(my_ip))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    ready.set()
    s.settimeout(0.1)
    n, left_at = 0, None
    end = time.monotonic() + 30
    while time.monotonic() < end and not done.wait(0):
        if left_at is not None:
            time.sleep(0.1)
            continue
        try:
            s.recv(2048)
        except TimeoutError:
            continue
        n += 1
        if n == leave_after:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)
            left_at = time.time()  # wall clock, as in the pcap timestamps
    return n, left_at


def sender(count: int, interval: float) -> float:
    """Send ``count`` datagrams to GROUP (the route 224.0.0.0/4 picks the interface)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    for i in range(count):
        s.sendto(i.to_bytes(4, "big") + bytes(96), (GROUP, PORT))
        time.sleep(interval)
    return time.time()


def group_times(path) -> list[float]:
    """Timestamps of UDP frames to GROUP in a pcap (the capture filter already selects them)."""
    dst = socket.inet_aton(GROUP)
    return [ts for ts, frame in read_pcap(path) if frame[30:34] == dst]


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.tool("tcpdump")
def test_leave_prunes_bridge_port_within_a_second(tmp_path) -> None:
    with Testbed() as tb:
        lan = tb.bridge("lan")
        hosts, ends = {}, {}
        for i, name in enumerate(["s", "r1", "r2", "r3"], start=1):
            h = tb.host(name)
            port = tb.attach(h, lan, f"10.0.3.{i}/24")
            tb.mroute(h, port.a)
            hosts[name], ends[name] = h, port.a
        tb.settle(lan)
        with contextlib.ExitStack() as stack:
            for name in ("r1", "r2", "r3"):
                stack.enter_context(tb.capture(hosts[name], ends[name], tmp_path / f"{name}.pcap",
                                               filter=f"udp and dst host {GROUP}"))
            ready1, ready2, done = tb.event(), tb.event(), tb.event()
            r1 = tb.spawn(hosts["r1"], member, ready1, done, "10.0.3.2", None)
            r2 = tb.spawn(hosts["r2"], member, ready2, done, "10.0.3.3", 30)
            assert ready1.wait(10) and ready2.wait(10)
            send_end = tb.run(hosts["s"], sender, 200, 0.01, timeout=60)
            time.sleep(0.2)  # let the last datagrams arrive
            done.set()
            n1, _ = r1.result(timeout=30)
            n2, left_at = r2.result(timeout=30)
        at_r1 = group_times(tmp_path / "r1.pcap")
        at_r2 = group_times(tmp_path / "r2.pcap")
        at_r3 = group_times(tmp_path / "r3.pcap")
    assert n1 >= 170 and len(at_r1) >= 170  # the member that stayed got the stream
    assert n2 == 30 and left_at is not None
    assert send_end > left_at + 1.5  # the group kept flowing well after the leave
    # r2's port carried the group before the leave and nothing a second after it
    assert len(at_r2) >= 30
    print(f"last group frame at r2: {max(at_r2) - left_at:+.3f} s after the leave")
    late = [t - left_at for t in at_r2 if t > left_at + 1.0]
    assert late == [], f"{len(late)} group frames reached r2 more than 1 s after its leave"
    # snooping: a host that never joined never saw the group
    assert at_r3 == []


def count_group(ready, done, my_ip: str, port: int) -> tuple[int, float]:
    """Join GROUP:port, count payload bytes until ``done``: (bytes, seconds first->last)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("", port))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton(my_ip)))
    ready.set()
    s.settimeout(0.1)
    total, first, last = 0, None, 0.0
    end = time.monotonic() + 30
    while time.monotonic() < end and not done.wait(0):
        try:
            data = s.recv(4096)
        except TimeoutError:
            continue
        last = time.monotonic()
        if first is None:
            first = last
        else:
            total += len(data)  # bytes after the first datagram, over first->last
    return total, last - (first or last)


def blast_group(port: int, rate_bps: float, seconds: float, size: int = 1000) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    interval = size * 8 / rate_bps
    start = time.monotonic()
    for i in range(int(seconds / interval)):
        if i % 10 == 0:
            wait = start + i * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        s.sendto(bytes(size), (GROUP, port))


@pytest.mark.root
def test_tbf_on_a_bridge_port_shapes_only_that_receiver() -> None:
    rate = 2_000_000
    with Testbed() as tb:
        lan = tb.bridge("lan")
        s, r1, r2 = tb.host("s"), tb.host("r1"), tb.host("r2")
        ps = tb.attach(s, lan, "10.0.3.1/24")
        p1 = tb.attach(r1, lan, "10.0.3.2/24")
        tb.attach(r2, lan, "10.0.3.3/24")
        tb.mroute(s, ps.a)
        tb.shape(p1.b, tbf=Tbf(rate_bps=rate, limit_pkts=20))  # bridge -> r1 only
        tb.settle(lan)
        ready1, ready2, done = tb.event(), tb.event(), tb.event()
        t1 = tb.spawn(r1, count_group, ready1, done, "10.0.3.2", 5001)
        t2 = tb.spawn(r2, count_group, ready2, done, "10.0.3.3", 5001)
        assert ready1.wait(10) and ready2.wait(10)
        tb.run(s, blast_group, 5001, 2 * rate, 2.0, timeout=60)
        time.sleep(0.2)
        done.set()
        (b1, s1), (b2, s2) = t1.result(30), t2.result(30)
    # wire bytes = payload + 42 (UDP, IP, Ethernet headers) per 1000-byte datagram
    r1_rate = b1 * 8 * 1042 / 1000 / s1
    r2_rate = b2 * 8 * 1042 / 1000 / s2
    assert abs(r1_rate - rate) / rate < 0.15, r1_rate
    assert r2_rate > 1.6 * rate, r2_rate  # the unshaped receiver gets the offered 2x
