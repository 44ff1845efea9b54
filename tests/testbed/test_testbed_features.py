"""Device features in a namespace (ethtool -K through pyroute2), and what the ITR
bench relies on: with tx-udp-segmentation off, a UDP GSO message is cut into
its datagrams before the veth peer, whose rx counter then counts each one."""

from __future__ import annotations

import socket
import time

import pytest

from deliverykit.testbed import Testbed


def _send_gso(dst: str, segments: int, size: int) -> int:
    from deliverykit.fastpath import py_send_gso

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        return py_send_gso(s, [(bytes([i]) * size, (dst, 9)) for i in range(segments)], 64)
    finally:
        s.close()


@pytest.mark.root
def test_udp_segmentation_off_makes_the_peer_count_every_datagram():
    with Testbed(prefix="dkfeat") as tb:
        a, b = tb.host("a"), tb.host("b")
        # no IPv6 on the link: the kernel's own MLD reports and router solicitations
        # after link-up would land in a counting window (one did: 41 for 40)
        off = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
        tb.sysctl(a, off)
        tb.sysctl(b, off)
        link = tb.link(a, b, "192.0.2.1/24", "192.0.2.2/24")
        feats = tb.features(a, link.a)
        assert "tx-udp-segmentation" in feats
        # resolve the neighbour first: a message queued behind ARP would be counted in
        # the next window
        c0 = tb.counters(b, link.b)["rx_packets"]
        assert tb.run(a, _send_gso, "192.0.2.2", 1, 10) == 1
        for _ in range(200):  # bounded: 2 s at most
            if tb.counters(b, link.b)["rx_packets"] > c0:
                break
            time.sleep(0.01)
        counts = {}
        for seg_off in (False, True):
            if seg_off:
                after = tb.features(a, link.a, tx_udp_segmentation=False)
                assert after["tx-udp-segmentation"] is False
            c0 = tb.counters(b, link.b)
            assert tb.run(a, _send_gso, "192.0.2.2", 40, 1000) == 40
            c1 = tb.counters(b, link.b)
            counts[seg_off] = c1["rx_packets"] - c0["rx_packets"]
        # with the offload the veth hands the message whole (fewer packets counted);
        # without it every datagram crosses on its own
        assert counts[True] == 40
        if feats["tx-udp-segmentation"]:  # veth has had the offload since Linux 5.x
            assert counts[False] < 40
        with pytest.raises(KeyError, match="no feature"):
            tb.features(a, link.a, tx_no_such_feature=True)
