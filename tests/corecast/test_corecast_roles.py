"""Sans-IO roles: ITR (Algorithm 1), ETR (Algorithm 2), source, client."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st

from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.core.source import Source, max_chunk_size, rtp_packet
from corecast.wire import codec as c

# These tests exercise other behaviour: their ETRs serve every EID and trust every RLOC
# (the site checks are tested in test_corecast_etr_safety.py).
OPEN_ETR = {"eids": [(bytes(4), 0), (bytes(16), 0)], "trusted_rlocs": None}

A = ipaddress.ip_address
CC = [parse_prefix("10.255.0.0/16"), parse_prefix("fd00:cc::/32")]
CHAN = A("10.255.0.1").packed
SRC = A("10.0.0.1").packed
STATIC = """
10.1.0.0/16 192.0.2.1
10.2.0.0/16 192.0.2.2
10.3.0.0/16 192.0.2.3
fd00:2::/48 192.0.2.2
"""
FIG2 = ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.3", "10.3.0.1", "10.3.0.2"]


def itr(**kw) -> Itr:
    mc = MapCache()
    mc.load_static(STATIC)
    return Itr("192.0.2.100", CC, mc, **kw)


def payload_pkt(data: bytes, seq: int = 0, chan: bytes = CHAN, h: bytes | None = None,
                udp: bool = True) -> bytes:
    pdu = c.encode_cc_payload(seq, data, 1, h)
    if udp:
        return c.build_ip(SRC if len(chan) == 4 else A("fd00::1").packed, chan, 17,
                          c.build_udp(54341, 54341, pdu))
    return c.build_ip(SRC, chan, 253, pdu)


def header_pkt(data: bytes, eid: str, port: int = 5000, seq: int = 0, chan: bytes = CHAN,
               udp: bool = True) -> bytes:
    pdu = c.encode_cc_header(seq, c.digest(1, data), A(eid).packed, port)
    src = SRC if len(chan) == 4 else A("fd00::1").packed
    if udp:
        return c.build_ip(src, chan, 17, c.build_udp(54341, 54341, pdu))
    return c.build_ip(src, chan, 253, pdu)


def kinds(out):
    """('P'|'H', rloc) for each datagram the ITR sent."""
    res = []
    for data, (host, port) in out:
        assert port == 4341 and data[:8] == b"\x00" * 8
        ip = c.decode_ip(data[8:])
        body = ip.payload if ip.proto == 253 else c.decode_udp(ip.payload)[2]
        pdu = c.decode_cc(body)
        res.append(("P" if isinstance(pdu, c.CCPayload) else "H", host))
    return res


@pytest.mark.parametrize("udp", [True, False])
def test_algorithm1_fig2_payload_once_per_rloc(udp):
    r = itr()
    assert r.handle_inner(payload_pkt(b"chunk-0", udp=udp), 0) == []  # nothing sent on payload
    out = []
    for eid in FIG2:
        out += r.handle_inner(header_pkt(b"chunk-0", eid, udp=udp), 0)
    assert kinds(out) == [("P", "192.0.2.1"), ("H", "192.0.2.1"), ("H", "192.0.2.1"),
                          ("P", "192.0.2.2"), ("H", "192.0.2.2"), ("H", "192.0.2.2"),
                          ("H", "192.0.2.2"), ("P", "192.0.2.3"), ("H", "192.0.2.3"),
                          ("H", "192.0.2.3")]
    # the payload forwarded is the source's packet byte for byte
    assert out[0][0][8:] == payload_pkt(b"chunk-0", udp=udp)
    assert r.counters["payload_copies"] == 3 and r.counters["header_copies"] == 7
    # a new payload resets servedRLOC: the next header to ETR1 carries a payload again
    r.handle_inner(payload_pkt(b"chunk-1", 1, udp=udp), 0)
    assert kinds(r.handle_inner(header_pkt(b"chunk-1", "10.1.0.1", seq=1, udp=udp), 0)) == [
        ("P", "192.0.2.1"), ("H", "192.0.2.1")]
    # old-hash headers are now unknown and dropped
    assert r.handle_inner(header_pkt(b"chunk-0", "10.1.0.2", udp=udp), 0) == []
    assert r.drops()["unknown_hash"] == 1


def test_bad_hash_payload_is_dropped_and_keeps_previous():
    r = itr()
    r.handle_inner(payload_pkt(b"good"), 0)
    assert r.handle_inner(payload_pkt(b"evil", h=c.digest(1, b"other")), 0) == []
    assert r.drops()["bad_hash"] == 1
    assert kinds(r.handle_inner(header_pkt(b"good", "10.1.0.1"), 0)) == [
        ("P", "192.0.2.1"), ("H", "192.0.2.1")]


def test_header_before_any_payload_and_unknown_channel():
    r = itr(channels=[CHAN])
    assert r.handle_inner(header_pkt(b"x", "10.1.0.1"), 0) == []
    assert r.drops()["unknown_hash"] == 1
    other = A("10.255.9.9").packed
    assert r.handle_inner(payload_pkt(b"x", chan=other), 0) == []
    assert r.drops()["unknown_channel"] == 1
    r2 = itr(max_channels=1)
    r2.handle_inner(payload_pkt(b"x"), 0)
    r2.handle_inner(payload_pkt(b"x", chan=other), 0)
    assert r2.drops()["unknown_channel"] == 1 and r2.state_size()["channels"] == 1


def test_extra_payload_after_every_n_headers_to_the_same_etr():
    r = itr(extra_payload_every=2)
    r.handle_inner(payload_pkt(b"d"), 0)
    out = []
    for i in range(6):
        out += r.handle_inner(header_pkt(b"d", f"10.2.0.{i + 1}"), 0)
    assert [k for k, _ in kinds(out)] == list("PHHPHHPHH")
    assert r.counters["extra_payload_copies"] == 2


def test_only_reserved_range_takes_corecast_path():
    r = itr()
    plain = c.build_ip(SRC, A("10.3.0.9").packed, 17, c.build_udp(1000, 2000, b"hello"))
    (data, dst), = r.handle_inner(plain, 0)
    assert dst == ("192.0.2.3", 4341) and data[8:] == plain
    # a CoreCast-looking PDU outside the reserved range is plain-encapsulated too
    looks = c.build_ip(SRC, A("10.2.0.9").packed, 253, c.encode_cc_payload(0, b"z"))
    assert r.handle_inner(looks, 0)[0][1] == ("192.0.2.2", 4341)
    # inside the range but not CoreCast: dropped and counted
    tcp = c.build_ip(SRC, CHAN, 6, b"\x00" * 20)
    assert r.handle_inner(tcp, 0) == [] and r.drops()["not_corecast"] == 1
    assert r.counters["plain_encap"] == 2


def test_served_rloc_bound_and_negative_mappings():
    r = itr(max_served=2)
    r.mapcache.load_static("10.9.0.0/16 -")
    r.handle_inner(payload_pkt(b"d"), 0)
    for eid in ("10.1.0.1", "10.2.0.1", "10.3.0.1", "10.9.0.1"):
        r.handle_inner(header_pkt(b"d", eid), 0)
    assert r.drops()["served_limit"] == 1 and r.drops()["negative_mapping"] == 1
    s = r.state_size()
    assert s["served_rlocs"] == 2 and s["served_rloc_bytes"] == 8
    assert s["payload_buffer_bytes"] == len(payload_pkt(b"d")) + 20


def test_ipv6_eids_over_ipv4_rlocs():
    r = itr()
    chan6 = A("fd00:cc::1").packed
    r.handle_inner(payload_pkt(b"six", chan=chan6), 0)
    out = r.handle_inner(header_pkt(b"six", "fd00:2::7", chan=chan6), 0)
    assert kinds(out) == [("P", "192.0.2.2"), ("H", "192.0.2.2")]
    e = Etr(CC, **OPEN_ETR)
    assert e.handle_data(out[0][0]) == []
    assert e.handle_data(out[1][0]) == [(b"six", ("fd00:2::7", 5000))]


def test_map_cache_miss_queues_requests_and_releases():
    r = Itr("192.0.2.100", CC, MapCache(), map_resolver=("192.0.2.200", 4342),
            control_port=40000, seed=3)
    r.handle_inner(payload_pkt(b"d"), 0)
    out = r.handle_inner(header_pkt(b"d", "10.1.0.1"), 0)
    (ecm, dst), = out
    assert dst == ("192.0.2.200", 4342)
    ip, sport, dport, inner = c.ecm_unwrap(c.decode_control(ecm))
    req = c.decode_control(inner)
    assert isinstance(req, c.MapRequest) and sport == 40000 and dport == 4342
    assert req.itr_rlocs == (A("192.0.2.100"),) and str(req.eid_prefixes[0]) == "10.1.0.1/32"
    assert len(r.handle_inner(header_pkt(b"d", "10.1.0.2"), 0.0)) == 1  # its own request
    assert r.handle_inner(header_pkt(b"d", "10.1.0.1", 5001), 0.5) == []  # queued, rate limited
    assert len(r.tick(1.2)) == 2  # 1/s retransmission for both EIDs
    rec = c.EidRecord(ipaddress.ip_network("10.1.0.0/16"), (c.LocatorRecord(A("192.0.2.1")),), 10)
    released = r.handle_control(c.encode_map_reply(c.MapReply(req.nonce, (rec,))), 1.5)
    assert kinds(released) == [("P", "192.0.2.1")] + [("H", "192.0.2.1")] * 3
    assert r.events[0].rlocs == ("192.0.2.1",)
    # a reply with an unknown nonce is ignored
    assert r.handle_control(c.encode_map_reply(c.MapReply(12345, (rec,))), 2) == []


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120), st.booleans())
def test_fuzz_itr_and_etr_never_raise(body, in_range):
    r = itr()
    e = Etr(CC, **OPEN_ETR)
    r.handle_inner(body, 0)
    e.handle_data(body)
    dst = CHAN if in_range else A("10.1.0.1").packed
    for proto, b in ((253, body), (17, c.build_udp(54341, 54341, body))):
        pkt = c.build_ip(SRC, dst, proto, b)
        for d, _ in r.handle_inner(pkt, 0):
            e.handle_data(d)
        e.handle_data(b"\x00" * 8 + pkt)
    assert sum(r.drops().values()) + r.counters["plain_encap"] <= r.counters["in_packets"]


# ------------------------------------------------------------------ ETR


def test_algorithm2_etr_unicast_and_drops():
    e = Etr(CC, **OPEN_ETR)
    lisp = b"\x00" * 8
    assert e.handle_data(lisp + payload_pkt(b"media")) == []
    assert e.handle_data(lisp + header_pkt(b"media", "10.2.0.3", 6000)) == [
        (b"media", ("10.2.0.3", 6000))]
    assert e.handle_data(lisp + header_pkt(b"other", "10.2.0.3")) == []
    assert e.drops()["unknown_hash"] == 1
    assert e.handle_data(lisp + payload_pkt(b"bad", h=c.digest(1, b"x"))) == []
    assert e.drops()["bad_hash"] == 1
    assert e.handle_data(lisp + header_pkt(b"media", "10.2.0.4", 6001, udp=False)) == [
        (b"media", ("10.2.0.4", 6001))]
    # plain LISP traffic is decapsulated and delivered natively
    plain = c.build_ip(SRC, A("10.2.0.9").packed, 17, c.build_udp(1, 7000, b"plain"))
    assert e.handle_data(lisp + plain) == [(b"plain", ("10.2.0.9", 7000))]
    assert e.handle_data(b"short") == [] and e.drops()["malformed"] == 1
    assert e.state_size()["payload_buffer_bytes"] == len(b"media") + 20


def test_etr_intra_domain_multicast_option():
    e = Etr(CC, multicast={CHAN: ("239.1.2.3", 5004)}, **OPEN_ETR)
    lisp = b"\x00" * 8
    e.handle_data(lisp + payload_pkt(b"m1"))
    outs = [e.handle_data(lisp + header_pkt(b"m1", f"10.2.0.{i}")) for i in range(1, 4)]
    assert outs == [[(b"m1", ("239.1.2.3", 5004))], [], []]
    assert e.counters["multicast_covered"] == 2
    e.handle_data(lisp + payload_pkt(b"m2", 1))
    assert e.handle_data(lisp + header_pkt(b"m2", "10.2.0.1", seq=1)) == [
        (b"m2", ("239.1.2.3", 5004))]


# ------------------------------------------------------------------ source, client


def test_source_paces_384kbps_1200B_every_25ms_payload_then_headers():
    s = Source("10.0.0.1", ("192.0.2.100", 9000))
    ch = s.add_channel("10.255.0.1", 384_000, 1200)
    assert ch.interval == pytest.approx(0.025)
    s.join("10.255.0.1", "10.1.0.1", 5000, True, 0)
    s.join("10.255.0.1", "10.2.0.1", 5000, True, 0)
    s.join("10.255.0.1", "10.9.0.1", 5002, False, 0)  # domain without a CoreCast ETR
    out = []
    t = 0.0
    while t < 1.0 - 1e-9:
        out += s.tick(t)
        t += 0.001
    assert s.counters["chunks"] == 40
    # payload, then one header per CoreCast destination, then plain unicast
    first = out[:4]
    assert [d for _, d in first[:3]] == [("192.0.2.100", 9000)] * 3
    pdus = [c.decode_cc(c.decode_udp(c.decode_ip(p).payload)[2]) for p, _ in first[:3]]
    assert isinstance(pdus[0], c.CCPayload) and len(pdus[0].payload) == 1200
    assert [type(p).__name__ for p in pdus[1:]] == ["CCHeader", "CCHeader"]
    assert all(p.hash == pdus[0].hash for p in pdus[1:])
    assert first[3][1] == ("10.9.0.1", 5002) and first[3][0] == pdus[0].payload
    assert s.next_deadline() == pytest.approx(1.0)


def test_source_limits_subscriptions_and_raw_transport():
    s = Source("10.0.0.1", ("192.0.2.100", 9000), transport="raw", heartbeat_timeout=10)
    assert max_chunk_size(1500, "raw") == 1500 - 36 - 20 - 32
    with pytest.raises(ValueError):
        s.add_channel("10.255.0.1", chunk_size=max_chunk_size(1500, "raw") + 1)
    s.add_channel("10.255.0.1", chunk_size=max_chunk_size(1500, "raw"))
    s.join("10.255.0.1", "10.1.0.1", 5000, True, 0)
    s.join("10.255.0.1", "10.1.0.2", 5000, True, 0)
    assert s.heartbeat("10.255.0.1", "10.1.0.1", 5000, 8)
    gone = s.expire(15)
    assert [(g.eid, g.reason) for g in gone] == [("10.1.0.2", "timeout")]
    assert s.leave("10.255.0.1", "10.1.0.1", 5000) and not s.leave("10.255.0.1", "10.1.0.1", 5000)
    s.join("10.255.0.1", "10.1.0.3", 5000, True, 20)
    (p, _), (h, _) = s.tick(20)
    assert c.decode_ip(p).proto == 253 and len(p) == 1500 - 36


def test_source_as_itr_mode_emits_lisp_directly():
    s = Source("10.0.0.1", itr=itr())
    s.add_channel("10.255.0.1")
    for eid in FIG2:
        s.join("10.255.0.1", eid, 5000, True, 0)
    out = s.tick(0)
    assert [k for k, _ in kinds(out)] == list("PHHPHHHPHH")


def test_client_order_loss_duplicates_jitter():
    cl = Client()
    for seq, t in ((0, 0.0), (1, 0.025), (3, 0.075), (2, 0.080), (3, 0.09), (5, 0.125)):
        cl.handle(rtp_packet(seq, seq * 2250, 1, b"x" * 10), t)
    st_ = cl.stats()
    assert st_["received"] == 5 and st_["duplicates"] == 1 and st_["reordered"] == 1
    assert st_["expected"] == 6 and st_["lost"] == 1 and st_["bytes"] == 110
    assert st_["jitter_ms"] > 0
    cl.handle(b"junk", 1)
    assert cl.stats()["malformed"] == 1
    # sequence wrap-around
    w = Client()
    for i, seq in enumerate((65534, 65535, 0, 1)):
        w.handle(rtp_packet(seq, i, 1, b""), i * 0.01)
    assert w.stats()["expected"] == 4 and w.stats()["lost"] == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_control_handlers_and_client_never_raise(b):
    from corecast.core.register import Registrar, RegistrarConfig

    r = Itr("192.0.2.100", CC, MapCache(), map_resolver=("192.0.2.200", 4342))
    assert r.handle_control(b, 0) == []
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), ("192.0.2.1",), ("192.0.2.9", 4342), b"k"))
    reg.tick(0)
    assert reg.handle_control(b, 0) is False
    cl = Client()
    cl.handle(b, 0.0)
    st_ = cl.stats()
    assert st_["received"] + st_["malformed"] == 1
