"""The `corecast` analyser for `deliverykit analyse`, on a capture of our own traffic."""

from __future__ import annotations

import ipaddress

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from corecast.analysis import Analyser
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.core.source import Source
from corecast.wire import codec as c
from deliverykit.pcap import Reader


def ETH():
    """Fixed MACs: scapy would otherwise ARP for every destination while building."""
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def test_analyser_counts_payloads_headers_per_rloc_and_control(tmp_path):
    mc = MapCache()
    mc.load_static("10.1.0.0/16 192.0.2.1\n10.2.0.0/16 192.0.2.2\n")
    itr = Itr("192.0.2.100", [parse_prefix("10.255.0.0/16")], mc)
    src = Source("10.0.0.1", itr=itr)
    src.add_channel("10.255.0.1")
    for eid in ("10.1.0.1", "10.1.0.2", "10.2.0.1"):
        src.join("10.255.0.1", eid, 5000, True, 0)
    frames = []
    for t in range(3):
        for data, (host, port) in src.tick(t * 0.025):
            frames.append(ETH() / IP(src="192.0.2.100", dst=host) / UDP(sport=61000, dport=port)
                          / data)
    plain = c.build_ip(bytes([10, 0, 0, 1]), bytes([10, 2, 0, 9]), 17, c.build_udp(1, 2, b"p"))
    (d, (h, p)), = itr.handle_inner(plain, 0)
    frames.append(ETH() / IP(src="192.0.2.100", dst=h) / UDP(sport=61000, dport=p) / d)
    reg = c.sign(c.MapRegister(1, (c.EidRecord(ipaddress.ip_network("10.1.0.0/16")),), 0, 2),
                 b"k")
    frames.append(ETH() / IP() / UDP(sport=61001, dport=4342) / reg)
    frames.append(ETH() / IP() / UDP(sport=61002, dport=4341) / (b"\x00" * 8 + b"\x45junk"))
    path = tmp_path / "itr.pcap"
    wrpcap(str(path), frames)
    a = Analyser({})
    for f in Reader(path):
        if a.accepts(f):
            a.feed(f)
    t = a.tables()
    links = {r["rloc"]: r for r in t["corecast_links"]}
    assert links["192.0.2.1"]["payload_packets"] == 3 and links["192.0.2.1"]["header_packets"] == 6
    assert links["192.0.2.2"]["payload_packets"] == 3 and links["192.0.2.2"]["plain_packets"] == 1
    # eq. 3 per link, for one ETR with k clients: (H_L + P_CC) + (H_L + H_CC) k per payload
    from corecast import plan

    s = plan.our_sizes("udp")
    assert links["192.0.2.1"]["bytes_per_payload"] == (s.h_l + s.p_cc(1200)) + (s.h_l + s.h_cc) * 2
    ch, = t["corecast_channels"]
    assert ch["payload_packets"] == 6 and ch["distinct_payloads"] == 3 and ch["header_packets"] == 9
    assert (ch["seq_first"], ch["seq_last"]) == (0, 2)
    ctl = {r["message"]: r["packets"] for r in t["lisp_control"]}
    assert ctl["Map-Register"] == 1 and ctl["undecodable"] == 1
