"""Trace method of Table 1 / Fig. 6 and the Table 1 CoreCast row from eqs. 3 and 5."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from corecast import plan
from corecast.experiments import trace


def ETH():
    """Fixed MACs: scapy would otherwise ARP for every destination while building."""
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def test_matrix_invariants_and_corecast_per_as():
    peers = trace.load_csv("ip,asn,bytes\n10.0.0.1,1,100\n10.0.0.2,1,200\n10.0.1.1,2,300\n"
                           "10.0.2.1,3,400\n")
    out = trace.analyse(peers, d=100)
    tot = out["totals"]["p2p"]
    vol = 1000
    # every row sums to the volume; the diagonal (self) is excluded from both kinds
    assert 0 < (tot["TT_GB"] + tot["LT_GB"]) * 1e9 <= 4 * vol
    one_as = trace.analyse([trace.Peer(p.ip, 7, p.bytes) for p in peers], d=100)
    assert one_as["totals"]["p2p"]["TT_GB"] == 0
    apart = trace.analyse([trace.Peer(p.ip, i, p.bytes) for i, p in enumerate(peers)], d=100)
    assert apart["totals"]["p2p"]["LT_GB"] == 0
    # CoreCast per AS follows eqs. 3 and 5 with N = volume / D payloads
    s = plan.our_sizes("udp")
    n = vol / 100
    as1 = next(r for r in out["per_as"] if r["asn"] == 1)
    assert as1["clients"] == 2
    per_chunk = (s.h_l + s.p_cc(100)) + (s.h_l + s.h_cc) * 2
    assert as1["cc_transit_ours"] == pytest.approx(n * per_chunk)
    assert as1["cc_local_ours"] == pytest.approx(n * (s.h_i + 100) * 2)
    assert sum(r["cc_transit_paper"] for r in out["per_as"]) == pytest.approx(
        n * plan.eq3_transit(plan.PAPER, 100, 3, 4))


def test_pcap_input_with_prefix_to_as_table(tmp_path):
    mon = "192.0.2.10"
    pk = [ETH() / IP(src="198.51.100.1", dst=mon) / UDP() / (b"x" * 100),
          ETH() / IP(src="198.51.100.1", dst=mon) / UDP() / (b"x" * 50),
          ETH() / IP(src="203.0.113.5", dst=mon) / UDP() / (b"x" * 10),
          ETH() / IP(src=mon, dst="203.0.113.5") / UDP() / (b"x" * 999)]
    path = tmp_path / "t.pcap"
    wrpcap(str(path), pk)
    peers = {p.ip: p for p in trace.load_pcap(str(path), mon,
                                              "198.51.100.0/24 AS64500\n203.0.113.0/24 64501\n")}
    assert peers["198.51.100.1"].asn == 64500 and peers["198.51.100.1"].bytes == 128 + 78
    assert peers["203.0.113.5"].asn == 64501 and peers["203.0.113.5"].bytes == 38
    assert mon not in peers


def test_synthetic_run_writes_csv_json_and_cdf(tmp_path, capsys):
    assert trace.main(["--synthetic", "--quick", "--out", str(tmp_path), "--duration", "600"]) == 0
    assert (tmp_path / "per_as.csv").read_text().startswith("asn,clients,")
    assert (tmp_path / "fig6_cdf.png").stat().st_size > 1000
    assert "synthetic input" in capsys.readouterr().out


def test_table1_corecast_row_from_the_papers_counts():
    t = plan.table1_corecast_row()
    assert t["payloads"] == pytest.approx(396_000)
    assert round(t["paper"]["LT_GB"]) == 895  # matches the paper's LT
    assert round(t["paper"]["TT_GB"]) == 156  # the paper prints 131: explained by `plan`
