"""Frames cut by the snap length, per analyser (issue 13 item 13).

Real captures (../shared/captures: libswift peers, OOR's LISP; an ALC session
from our encoder) rewritten as ``tcpdump -s N`` would have kept them: a pcapng
whose EPBs keep N bytes of chosen frames and record their original length.
The figures those frames feed must be marked in the ``unreliable`` column,
and a whole capture must have no mark at all.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from deliverykit.analyse import UNRELIABLE, Options, load_analysers, run
from deliverykit.pcap import Reader
from m2c.wire.codec import AlcPacket, encode

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures"


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def snapped(src: Path, dst: Path, snap: int, pick) -> int:
    """Rewrite ``src`` as pcapng keeping ``snap`` bytes of the records ``pick(i, data)``
    chooses (their original length recorded), the rest whole. Returns how many were cut."""
    recs = list(Reader(src).records())
    out = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += _block(1, struct.pack("<HHI", recs[0][1], 0, 0))
    cut = 0
    for i, (ts, _lt, data, orig) in enumerate(recs):
        keep = data[:snap] if pick(i, data) and len(data) > snap else data
        cut += len(keep) < len(data)
        us = int(ts * 1e6)
        record = struct.pack("<IIIII", 0, us >> 32, us & 0xFFFFFFFF, len(keep), orig)
        out += _block(6, record + keep)
    dst.write_bytes(out)
    return cut


def analyse(path: Path, name: str, opts: dict | None = None):
    report = run(path, load_analysers([name], Options(opts or {})))
    return report, report.results[name]


def _shared(rel: str) -> Path:
    p = SHARED / rel
    if not p.exists():
        pytest.fail(f"{p} is missing (the shared captures of real peers)")
    return p


def _marks(tables: dict) -> dict[str, int]:
    return {t: sum(1 for r in rows if r.get(UNRELIABLE)) for t, rows in tables.items()}


def test_ppspp_cut_datagrams_mark_both_peers(tmp_path):
    src = _shared("libswift/ref_ls_ls_1k.pcap")
    whole, res0 = analyse(src, "ppspp")
    assert whole.stats["truncated"] == 0 and not any(_marks(res0).values())
    assert all(UNRELIABLE not in r for rows in res0.values() for r in rows)
    cap = tmp_path / "cut.pcapng"
    n = snapped(src, cap, 200, lambda i, d: i % 10 == 5 and len(d) > 1000)  # DATA datagrams
    report, res = analyse(cap, "ppspp")
    assert n > 50 and report.stats["truncated"] == n == report.seen["ppspp"].truncated
    peers = {r["peer"]: r for r in res["ppspp_peers"]}
    leecher = max(peers.values(), key=lambda r: r["chunks_received"])
    assert leecher["chunks_received"] < max(r["chunks_received"] for r in res0["ppspp_peers"])
    assert all(r[UNRELIABLE] for r in peers.values())  # the one pair: both ends
    for t in ("ppspp_messages", "ppspp_latency", "ppspp_conversations", "ppspp_throughput"):
        assert res[t] and all(r[UNRELIABLE] for r in res[t]), t
    assert any("shorter than they were on the wire" in w for w in report.warnings)


def test_corecast_cut_lisp_data_marks_its_link_only(tmp_path):
    src = _shared("oor/bc1-vB.pcap")
    _, res0 = analyse(src, "corecast")
    assert not any(_marks(res0).values())
    cap = tmp_path / "cut.pcapng"
    # the LISP data toward OOR's RLOC 10.201.0.1 cut inside the inner packet: still LISP
    n = snapped(src, cap, 14 + 20 + 8 + 8 + 24,
                lambda i, d: d[14 + 16:14 + 20] == bytes([10, 201, 0, 1]) and len(d) > 90)
    _, res = analyse(cap, "corecast")
    assert n > 0
    links = {r["rloc"]: r for r in res["corecast_links"]}
    links0 = {r["rloc"]: r for r in res0["corecast_links"]}
    assert links["10.201.0.1"][UNRELIABLE] and not links["10.201.0.3"][UNRELIABLE]
    assert links["10.201.0.1"]["ip_bytes"] == links0["10.201.0.1"]["ip_bytes"]  # wire lengths
    errs = {r["what"]: r["count"] for r in res["corecast_errors"]}
    assert errs["frames cut by the snap length"] == n
    assert not any("plausible" in w for w in errs)  # a cut packet is still LISP data


def test_m2c_cut_datagrams_mark_their_group(tmp_path):
    pk = []
    for i in range(40):
        for g, dst in ((0, "239.192.9.1"), (1, "239.192.9.2")):
            alc = encode(AlcPacket(session=0x1234, toi=0, codepoint=3, slot=i // 10, group=g,
                                   psn=i, buffer_id=0, offset=i * 1000, sbn=0, esi=i,
                                   payload=bytes(1000)))
            p = Ether() / IP(src="10.0.0.1", dst=dst) / UDP(sport=5000, dport=47000) / alc
            p.time = 1000 + i * 0.01
            pk.append(p)
    src = tmp_path / "m2c.pcap"
    wrpcap(str(src), pk)
    _, res0 = analyse(src, "m2c")
    assert len(res0["m2c_groups"]) == 2 and not any(_marks(res0).values())
    cap = tmp_path / "cut.pcapng"
    n = snapped(src, cap, 100, lambda i, d: i % 2 == 1 and i % 7 == 0)  # group 1 only
    _, res = analyse(cap, "m2c")
    assert n > 0
    g = {r["group"]: r for r in res["m2c_groups"]}
    assert g[1][UNRELIABLE] and not g[0][UNRELIABLE]
    assert all(bool(r[UNRELIABLE]) == (r["group"] == 1) for r in res["m2c_rates"])


def test_cli_text_marks(tmp_path):
    """The terminal report says how many frames were cut and flags the tables."""
    import subprocess
    import sys

    cap = tmp_path / "cut.pcapng"
    snapped(_shared("libswift/ref_ls_ls_8k.pcap"), cap, 300, lambda i, d: len(d) > 5000)
    r = subprocess.run([sys.executable, "-m", "deliverykit", "analyse", str(cap), "--no-progress",
                        "--only", "ppspp", "--only", "flows"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "UNRELIABLE)" in r.stdout and "WARNING:" in r.stdout
    assert "capture with tcpdump -s 0" in r.stdout
    assert "flows: flows (2 rows)" in r.stdout  # wire lengths: not marked


def test_packets_dropped_by_the_capture_mark_every_figure(tmp_path):
    """A pcapng whose statistics block says the kernel dropped packets: they are in no
    figure, so every row is marked and the report says how many."""
    src = _shared("libswift/ref_ls_ls_8k.pcap")
    cap = tmp_path / "d.pcapng"
    snapped(src, cap, 65535, lambda i, d: False)
    opts = struct.pack("<HHQ", 5, 8, 12) + struct.pack("<HH", 0, 0)
    cap.write_bytes(cap.read_bytes() + _block(5, struct.pack("<III", 0, 0, 0) + opts))
    report = run(cap, load_analysers(["flows", "ppspp"], Options({})))
    assert report.stats["dropped_by_capture"] == 12
    assert any("12 packets" in w and "dropped" in w for w in report.warnings)
    for name in ("flows", "ppspp"):
        rows = [r for t in report.results[name].values() for r in t]
        assert rows and all(r[UNRELIABLE] for r in rows), name


def test_ppspp_caps_mark_the_receiver_they_cut_short():
    """max-chunks below the content's chunk count: the leecher's chunk count is partial and
    says so; the seeder's row (it received no DATA) is not marked."""
    src = _shared("libswift/ref_ls_ls_1k.pcap")
    _, whole = analyse(src, "ppspp")
    _, res = analyse(src, "ppspp", {"max-chunks": "100"})
    peers = {r["peer"]: r for r in res["ppspp_peers"]}
    full = {r["peer"]: r["chunks_received"] for r in whole["ppspp_peers"]}
    (leecher,) = [p for p, n in full.items() if n]
    assert peers[leecher]["chunks_received"] < full[leecher]
    assert "max-chunks" in peers[leecher][UNRELIABLE]
    assert all(not r[UNRELIABLE] for p, r in peers.items() if p != leecher)


def _alc_capture(tmp_path: Path, n: int, slots_per_packet: float = 0.01) -> Path:
    pk = []
    for i in range(n):
        alc = encode(AlcPacket(session=0x1234, toi=0, codepoint=3, slot=0, group=0, psn=i,
                               buffer_id=0, offset=0, sbn=0, esi=i, payload=bytes(100)))
        p = Ether() / IP(src="10.0.0.1", dst="239.192.9.1") / UDP(sport=5000, dport=47000) / alc
        p.time = 1000 + i * slots_per_packet
        pk.append(p)
    path = tmp_path / "alc.pcap"
    wrpcap(str(path), pk)
    return path


def test_m2c_rate_rows_over_max_rows_are_marked(tmp_path):
    cap = _alc_capture(tmp_path, 30, slots_per_packet=1.0)  # one 0.5 s slot per packet
    _, res = analyse(cap, "m2c", {"max-rows": "10"})
    (g,) = res["m2c_groups"]
    assert g["packets"] == 30
    assert sum(r["ip_bytes"] for r in res["m2c_rates"]) < g["ip_bytes"]  # partial
    assert all("max-rows" in r[UNRELIABLE] for r in res["m2c_rates"])
    _, whole = analyse(cap, "m2c")
    assert sum(r["ip_bytes"] for r in whole["m2c_rates"]) == g["ip_bytes"]
    assert all(UNRELIABLE not in r for r in whole["m2c_rates"])


def test_corecast_headers_without_payload_mark_the_unicast_equivalent(tmp_path):
    """OOR's capture carries no CoreCast; a CoreCast header PDU whose payload is not in the
    capture leaves its channel's unicast equivalent a lower bound."""
    from corecast.wire.codec import (
        build_ip,
        decode_cc,
        encode_cc_header,
        encode_cc_payload,
        encode_lisp_data,
        make_lisp_data,
    )

    lisp = encode_lisp_data(make_lisp_data(nonce=1))
    chan, src = bytes([10, 255, 0, 1]), bytes([10, 0, 0, 9])
    h = decode_cc(encode_cc_payload(1, b"p" * 500)).hash
    hdr = build_ip(src, chan, 253, encode_cc_header(1, h, bytes([10, 1, 0, 1]), 5000))
    p = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=61000, dport=4341) / (lisp + hdr)
    cap = tmp_path / "h.pcap"
    wrpcap(str(cap), [p])
    _, res = analyse(cap, "corecast")
    (ch,) = res["corecast_channels"]
    assert ch["headers_without_known_payload"] == 1 and "lower bound" in ch[UNRELIABLE]
