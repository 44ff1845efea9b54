"""dissectors/corecast.lua against corecast.wire (paper section 3.2, our layout).

* A real run: corecast.deploy's Fig. 2 deployment on loopback (source, ITR,
  map-server, ETRs, clients) is captured on the ITR->ETR links (LISP data,
  UDP 4341), over both CoreCast transports (inner UDP 54341 and inner IP
  protocol 253).  Wireshark's own ``lisp-data`` shows the LISP header and hands
  the inner IP packet on; every CoreCast field must equal scapy's decode.
* Hypothesis PDUs over real UDP (port preference), over raw IPv4/IPv6 with
  protocol 253 (root), and inside LISP to an ephemeral port (``-d ...,lisp-data``).
* Malformed PDUs: a Malformed expert item iff corecast.wire.codec rejects it.
"""

from __future__ import annotations

import hashlib
import random
import socket

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw
from wslua_support import (
    UdpPair,
    capture,
    compare_scapy,
    jint,
    malformed,
    scratch,
    tshark_json,
    wait_packets,
)

from corecast.wire import codec, layers
from corecast.wire.constants import IPPROTO_CORECAST
from deliverykit.pcap import Reader

LUA = ["corecast.lua"]


def cc_layer(pkt):
    """The CoreCastPayload / CoreCastHeader layer scapy found, or None."""
    for cls in (layers.CoreCastPayload, layers.CoreCastHeader):
        if cls in pkt:
            return pkt[cls]
    return None


#: every example is a real capture and tshark runs: report the failing
#: example as generated instead of shrinking it through dozens of captures
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)

# ---------------------------------------------------------------------------
# strategies

pdus = st.one_of(
    st.builds(lambda seq, data, hid, flags: codec.encode_cc_payload(seq, data, hid, None, flags),
              st.integers(0, 2**32 - 1), st.binary(max_size=300), st.sampled_from([1, 2]),
              st.integers(0, 255)),
    st.builds(lambda seq, hid, eid, port, flags: codec.encode_cc_header(
                  seq, hashlib.new("sha1" if hid == 1 else "sha256", eid).digest(),
                  eid, port, hid, flags),
              st.integers(0, 2**32 - 1), st.sampled_from([1, 2]),
              st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16)),
              st.integers(0, 65535), st.integers(0, 255)),
)


@st.composite
def bad_pdus(draw) -> bytes:
    """Valid PDUs cut, extended or with one header byte changed; or random bytes."""
    kind = draw(st.integers(0, 3))
    if kind == 3:
        return draw(st.binary(min_size=1, max_size=60))
    w = bytearray(draw(pdus))
    if kind == 0:
        return bytes(w[: draw(st.integers(1, len(w)))])
    if kind == 1:
        return bytes(w) + draw(st.binary(min_size=1, max_size=8))
    i = draw(st.integers(0, 11))
    w[i] = draw(st.integers(0, 255))
    return bytes(w)


def _check_pdus(frames: list[dict], payloads: list[bytes], where: str) -> None:
    assert len(frames) == len(payloads)
    for k, (f, data) in enumerate(zip(frames, payloads)):
        node = f.get("corecast")
        assert isinstance(node, dict), f"{where} frame {k + 1}: not CoreCast"
        assert not malformed(node), f"{where} frame {k + 1}: {node}"
        pkt = layers.CoreCast(data)
        assert Raw not in pkt, where
        compare_scapy(pkt, node, "corecast", f"{where} frame {k + 1}")


# ---------------------------------------------------------------------------
# a real run


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@pytest.mark.slow
@pytest.mark.parametrize("transport", ["udp", "raw"])
def test_fig2_run_inside_lisp_matches_scapy(transport):
    """corecast.deploy's real loopback run, as Wireshark shows it: lisp-data,
    inner ip, (inner udp), corecast; every CoreCast field equals scapy's."""
    from corecast.deploy import check, run_fig2

    base = random.Random().randint(100, 250)
    with scratch() as tmp:
        pcap = tmp / "fig2.pcap"
        with capture(pcap, f"udp port 4341 and net 127.{base}.0.0/16"):
            r = run_fig2(8, transport=transport, base=base)
            wait_packets(pcap, 8 * (r["ases"] + r["clients"]))
        assert check(r) == [], check(r)
        frames = tshark_json(pcap, LUA, proto="lisp-data corecast rtp")
        raw = [(f.src, f.payload) for f in Reader(pcap)]
    assert len(frames) == len(raw)
    n_cc = 0
    n_pay = n_hdr = 0
    for k, (layers_, (_src, payload)) in enumerate(zip(frames, raw)):
        pkt = UDP(sport=4341, dport=4341) / layers.LISPData(payload)
        cc = cc_layer(pkt)
        if cc is None:  # the warm-up packets: plain LISP, not CoreCast
            assert "corecast" not in layers_, f"frame {k + 1}"
            continue
        n_cc += 1
        n_pay += isinstance(cc, layers.CoreCastPayload)
        n_hdr += isinstance(cc, layers.CoreCastHeader)
        assert "lisp-data" in layers_, f"frame {k + 1}: no outer LISP header"
        node = layers_["corecast"]
        assert not malformed(node), f"frame {k + 1}: {node}"
        compare_scapy(cc, node, "corecast", f"frame {k + 1}")
        if isinstance(cc, layers.CoreCastPayload):  # the chunk is RTP (corecast.payload table)
            rtp = layers_.get("rtp")
            assert isinstance(rtp, dict), f"frame {k + 1}: payload not handed to RTP"
            assert jint(rtp["rtp.seq"]) == int.from_bytes(bytes(cc.data)[2:4], "big")
    # one payload per ETR per chunk, one header per client per chunk (Fig. 2)
    assert n_pay == 8 * r["ases"] and n_hdr == 8 * r["clients"], (n_pay, n_hdr)
    assert n_cc == n_pay + n_hdr


# ---------------------------------------------------------------------------
# generated PDUs over UDP, raw IP and LISP


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@settings(max_examples=2, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(payloads=st.lists(pdus, min_size=10, max_size=30))
def test_generated_pdus_over_udp_raw_ip_and_lisp(payloads):
    with scratch() as tmp:
        _generated(tmp, payloads)


def _lisp_wrap(pdu: bytes, k: int) -> bytes:
    """LISP data header (N=1, nonce k) + inner IPv4 or IPv6 + (UDP 54341) + PDU."""
    v6 = k % 2 == 1
    udp = k % 4 < 2
    proto = 17 if udp else IPPROTO_CORECAST
    body = codec.build_udp(54341, 54341, pdu) if udp else pdu
    if v6:
        inner = bytes(IPv6(src="fd00::1", dst="fd00::ff", nh=proto) / Raw(body))
    else:
        inner = codec.build_ip(bytes([10, 0, 0, 1]), bytes([10, 255, 0, 1]), proto, body)
    return bytes([0x80, 0, 0, k & 0xFF, 0, 0, 0, 0]) + inner


def _generated(tmp, payloads: list[bytes]) -> None:
    udp, lisp = UdpPair(), UdpPair()
    r4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_CORECAST)
    r6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_CORECAST)
    pcap = tmp / "cc.pcap"
    bpf = (f"(udp and host 127.0.0.1 and (port {udp.port_b} or port {lisp.port_b})) "
           f"or ip proto {IPPROTO_CORECAST} or ip6 proto {IPPROTO_CORECAST}")
    try:
        with capture(pcap, bpf):
            for k, p in enumerate(payloads):
                udp.send(True, p)
                r4.sendto(p, ("127.0.0.1", 0))
                r6.sendto(p, ("::1", 0))
                lisp.send(True, _lisp_wrap(p, k))
            wait_packets(pcap, 4 * len(payloads))
    finally:
        udp.close()
        lisp.close()
        r4.close()
        r6.close()
    frames = tshark_json(pcap, LUA, "-o", f"corecast.udp_port:{udp.port_b}",
                         "-d", f"udp.port=={lisp.port_b},lisp-data",
                         proto="lisp-data corecast")
    caught = list(Reader(pcap))
    # other processes may send protocol-253 traffic on lo: keep only ours
    ours = [i for i, f in enumerate(caught)
            if f.dport in (udp.port_b, lisp.port_b) or (f.proto == IPPROTO_CORECAST
                                                        and f.src in ("127.0.0.1", "::1"))]
    frames = [frames[i] for i in ours]
    caught = [caught[i] for i in ours]
    assert len(caught) == 4 * len(payloads)
    by_kind: dict[str, list] = {"udp": [], "ip4": [], "ip6": [], "lisp": []}
    for f, fr in zip(caught, frames):
        kind = ("lisp" if f.dport == lisp.port_b else "udp" if f.proto == 17
                else "ip6" if ":" in f.src else "ip4")
        by_kind[kind].append(fr)
    for kind in ("udp", "ip4", "ip6"):
        _check_pdus(by_kind[kind], payloads, kind)
    for fr in by_kind["lisp"]:
        assert "lisp-data" in fr
    _check_pdus(by_kind["lisp"], payloads, "lisp")


# ---------------------------------------------------------------------------
# malformed


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@settings(max_examples=2, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(samples=st.lists(bad_pdus(), min_size=40, max_size=60))
def test_malformed_expert_iff_codec_rejects(samples):
    with scratch() as tmp:
        pair = UdpPair()
        pcap = tmp / "bad.pcap"
        try:
            with capture(pcap, f"udp and host 127.0.0.1 and port {pair.port_b}"):
                for s in samples:
                    pair.send(True, s)
                wait_packets(pcap, len(samples))
        finally:
            pair.close()
        frames = tshark_json(pcap, LUA, "-o", f"corecast.udp_port:{pair.port_b}",
                             "--disable-heuristic", "corecast_udp", proto="corecast")
    assert len(frames) == len(samples)
    for k, (f, s) in enumerate(zip(frames, samples)):
        node = f.get("corecast")
        assert isinstance(node, dict), f"sample {k} not dissected"
        try:
            codec.decode_cc(s)
            bad = False
        except codec.DecodeError:
            bad = True
        assert malformed(node) == bad, f"sample {k} {s.hex()}: {node}"


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
def test_strict_heuristic_claims_only_valid_pdus():
    """On ports not configured, only complete well-formed PDUs are claimed."""
    rng = random.Random(3)
    good = [codec.encode_cc_payload(i, rng.randbytes(50)) for i in range(5)]
    junk = [rng.randbytes(rng.randint(1, 80)) for _ in range(40)]
    junk += [good[0] + b"x", good[1][:-1],  # lengths must account for every byte
             codec.encode_cc_header(1, bytes(20), bytes(4), 9)[:-1]]
    with scratch() as tmp:
        pair = UdpPair()
        pcap = tmp / "heur.pcap"
        try:
            with capture(pcap, f"udp and host 127.0.0.1 and port {pair.port_b}"):
                for s in junk + good:
                    pair.send(True, s)
                wait_packets(pcap, len(junk) + len(good))
        finally:
            pair.close()
        frames = tshark_json(pcap, LUA, "-o", "corecast.udp_port:0", proto="corecast")
    assert len(frames) == len(junk) + len(good)
    for f, s in zip(frames, junk):
        if "corecast" in f:  # only if the random bytes happen to be a valid PDU
            codec.decode_cc(s)
    assert all("corecast" in f for f in frames[-5:])
