"""Scapy layers vs fast codec: same bytes both ways; every decoder fuzzed."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scapy.layers.inet import IP, UDP
from scapy.packet import raw
from strategies_corecast import cc_header, cc_payload, map_register, map_reply, map_request

from corecast.wire import codec as c, layers as L

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def s_addr(a, iid=0):
    if iid:
        kw = {"inner_ipv4": str(a)} if a.version == 4 else {"inner_afi": 2, "inner_ipv6": str(a)}
        return L.LISPAddr(afi=16387, instance_id=iid, **kw)
    if a is None:
        return L.LISPAddr(afi=0)
    if a.version == 4:
        return L.LISPAddr(afi=1, ipv4=str(a))
    return L.LISPAddr(afi=2, ipv6=str(a))


def s_loc(loc: c.LocatorRecord):
    fl = (4 if loc.local else 0) | (2 if loc.probed else 0) | (1 if loc.reachable else 0)
    return L.LISPLocator(priority=loc.priority, weight=loc.weight, m_priority=loc.m_priority,
                         m_weight=loc.m_weight, loc_flags=fl, locator=s_addr(loc.locator))


def s_rec(r: c.EidRecord):
    return L.LISPEidRecord(ttl=r.ttl, eid_mask_len=r.prefix.prefixlen, act=r.action,
                           A=int(r.authoritative), map_version=r.map_version,
                           eid_prefix=s_addr(r.prefix.network_address, r.iid),
                           locators=[s_loc(x) for x in r.locators])


def s_request(m: c.MapRequest):
    fl = sum(b for b, on in ((32, m.authoritative), (16, m.map_data_present), (8, m.probe),
                             (4, m.smr), (2, m.pitr), (1, m.smr_invoked)) if on)
    kw = {}
    if m.map_reply_record is not None:
        kw["map_reply_record"] = s_rec(m.map_reply_record)
    return L.LISPMapRequest(
        flags=fl, L=int(m.local_xtr), D=int(m.dont_map_reply), nonce=m.nonce,
        source_eid=s_addr(m.source_eid, m.source_iid), itr_rlocs=[s_addr(a) for a in m.itr_rlocs],
        records=[L.LISPMapRequestPrefix(eid_mask_len=p.prefixlen,
                                        eid_prefix=s_addr(p.network_address,
                                                          m.eid_iids[i] if m.eid_iids else 0))
                 for i, p in enumerate(m.eid_prefixes)], **kw)


def s_reply(m: c.MapReply):
    fl = (4 if m.probe else 0) | (2 if m.echo_nonce else 0) | (1 if m.security else 0)
    return L.LISPMapReply(flags=fl, nonce=m.nonce, records=[s_rec(r) for r in m.records])


def s_register(m: c.MapRegister):
    common = dict(nonce=m.nonce, key_id=m.key_id, algorithm_id=m.algorithm_id,
                  auth_data=m.auth_data, records=[s_rec(r) for r in m.records])
    if m.xtr_id is not None:
        common.update(xtr_id=m.xtr_id, site_id=m.site_id)
    if m.msg_type == 3:
        fl = (8 if m.proxy_reply else 0) | (4 if m.security else 0) | (
            2 if m.xtr_id is not None else 0) | (1 if m.rtr else 0)
        fl2 = (16 if m.eid_notify else 0) | (8 if m.use_ttl else 0) | (4 if m.merge else 0) | (
            1 if m.want_map_notify else 0)
        return L.LISPMapRegister(flags=fl, flags2=fl2, **common)
    return L.LISPMapNotify(type=m.msg_type, flags=(2 if m.xtr_id is not None else 0) | int(m.rtr),
                           **common)


def s_cc(p):
    if isinstance(p, c.CCPayload):
        return L.CoreCastPayload(hash_id=p.hash_id, flags=p.flags, seq=p.seq, hash=p.hash,
                                 data=p.payload)
    kw = {"eid": str(ipaddress.IPv4Address(p.eid))} if len(p.eid) == 4 else {
        "eid6": str(ipaddress.IPv6Address(p.eid))}
    return L.CoreCastHeader(hash_id=p.hash_id, flags=p.flags, seq=p.seq, dport=p.port,
                            eid_afi=1 if len(p.eid) == 4 else 2, hash=p.hash, **kw)


@FAST
@given(map_request)
def test_map_request_same_bytes(m):
    b = c.encode_map_request(m)
    assert raw(s_request(m)) == b
    assert c.decode_control(b) == m
    assert raw(L.LISPControl(b)) == b


@FAST
@given(map_reply)
def test_map_reply_same_bytes(m):
    b = c.encode_map_reply(m)
    assert raw(s_reply(m)) == b
    assert c.decode_control(b) == m
    assert raw(L.LISPControl(b)) == b


@FAST
@given(map_register())
def test_map_register_notify_same_bytes(m):
    b = c.encode_map_register(m)
    assert raw(s_register(m)) == b
    assert c.decode_control(b) == m
    assert raw(L.LISPControl(b)) == b


@FAST
@given(st.one_of(cc_payload(), cc_header()))
def test_corecast_pdu_same_bytes(p):
    b = c.encode_cc(p)
    assert raw(s_cc(p)) == b
    assert c.decode_cc(b) == p
    assert raw(L.CoreCast(b)) == b


@FAST
@given(st.integers(0, 255), st.integers(0, 2**24 - 1), st.integers(0, 2**32 - 1),
       st.binary(max_size=64))
def test_lisp_data_same_bytes(flags, nonce, word2, inner):
    h = c.LispDataHeader(flags, nonce, word2)
    b = c.encode_lisp_data(h)
    parsed = L.LISPData(b)
    assert raw(parsed) == b
    assert c.decode_lisp_data(b + inner)[0] == h
    # scapy built from meaningful fields gives the same bytes
    f = parsed.flags
    assert int(f) == flags >> 2 and parsed.KK == flags & 3
    if h.flags & c.FLAG_I:
        assert parsed.instance_id == h.instance_id and parsed.lsb8 == h.lsb
    else:
        assert parsed.lsb == h.lsb
    if h.map_versions is not None:
        assert (parsed.src_map_version, parsed.dst_map_version) == h.map_versions
    else:
        assert parsed.nonce == nonce


def test_lisp_data_binds_both_ways_and_builds_meaningful_headers():
    inner = IP(src="10.1.0.1", dst="10.2.0.1") / UDP(sport=1, dport=2) / b"x"
    pkt = IP(raw(IP(dst="192.0.2.1") / UDP(sport=61000, dport=4341) /
                 L.LISPData(flags="N+L+I", nonce=0xABCDEF, instance_id=77, lsb8=3) / inner))
    assert pkt[L.LISPData].nonce == 0xABCDEF and pkt[L.LISPData].instance_id == 77
    assert pkt[L.LISPData].payload.dst == "10.2.0.1"
    h = c.make_lisp_data(nonce=0xABCDEF, instance_id=77, lsb=3)
    assert raw(pkt[L.LISPData])[:8] == c.encode_lisp_data(h)
    back = IP(raw(IP(dst="192.0.2.1") / UDP(sport=4341, dport=61000) / raw(pkt[L.LISPData])))
    assert back.haslayer(L.LISPData)
    v = c.make_lisp_data(map_versions=(5, 4095))
    assert L.LISPData(c.encode_lisp_data(v)).dst_map_version == 4095


def test_corecast_over_raw_ip_and_udp_dissects():
    pl = c.encode_cc_payload(7, b"hello")
    p = IP(raw(IP(src="10.0.0.1", dst="10.255.0.1", proto=253) / raw(pl)))
    assert p[L.CoreCastPayload].data == b"hello" and p[L.CoreCastPayload].seq == 7
    hd = c.encode_cc_header(7, c.digest(1, b"hello"), bytes([10, 1, 0, 1]), 5004)
    u = IP(raw(IP() / UDP(sport=54341, dport=54341) / hd))
    assert u[L.CoreCastHeader].eid == "10.1.0.1" and u[L.CoreCastHeader].dport == 5004


def test_header_size_matches_docs():
    # docs/wire-corecast.md: header PDU 36 bytes for SHA-1 + IPv4 EID; payload overhead 32
    assert c.cc_header_len(1, 4) == 36
    assert c.cc_header_len(1, 16) == 48
    assert c.cc_payload_overhead(1) == 32


# ----------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=400, deadline=None)


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_decode_control(b):
    try:
        m = c.decode_control(b)
    except c.DecodeError:
        return
    assert m is not None


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_decode_cc(b):
    try:
        c.decode_cc(b)
    except c.DecodeError:
        pass


@FUZZ
@given(st.binary(max_size=120))
def test_fuzz_decode_ip_udp_lisp(b):
    for fn in (c.decode_ip, c.decode_udp, c.decode_lisp_data):
        try:
            fn(b)
        except c.DecodeError:
            pass


@FUZZ
@given(st.binary(max_size=120))
def test_fuzz_ecm_unwrap(b):
    try:
        c.ecm_unwrap(c.Ecm(b))
    except c.DecodeError:
        pass


@FUZZ
@given(map_register(), st.integers(0, 200), st.binary(min_size=1, max_size=1))
def test_fuzz_mutated_register(m, pos, byte):
    b = bytearray(c.encode_map_register(m))
    if b:
        b[pos % len(b)] = byte[0]
    try:
        c.decode_control(bytes(b))
    except c.DecodeError:
        pass


@pytest.mark.parametrize("alg,n", [(1, 12), (2, 16), (3, 16)])
def test_auth_lengths_and_verify(alg, n):
    rec = c.EidRecord(ipaddress.ip_network("10.1.0.0/16"),
                      (c.LocatorRecord(ipaddress.ip_address("192.0.2.1")),))
    m = c.MapRegister(9, (rec,), 1, alg, want_map_notify=True)
    b = c.sign(m, b"secret")
    d = c.decode_control(b)
    assert len(d.auth_data) == n
    assert c.verify_auth(d, b"secret")
    assert not c.verify_auth(d, b"wrong")
    tampered = bytearray(b)
    tampered[-1] ^= 1
    assert not c.verify_auth(c.decode_control(bytes(tampered)), b"secret")
