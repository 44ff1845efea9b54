"""LISP data-plane completeness (RFC 9300): echo-nonce between two xTRs, instance IDs
in the data plane, map-cache and map-server, Locator-Status-Bits, and Map-Requests
with several EID records answered record by record (RFC 9301)."""

from __future__ import annotations

import ipaddress

import pytest

from corecast.core.etr import Etr
from corecast.core.events import EchoNonceVerified, LocatorStatusChanged, RlocUnreachable
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.mapserver import MapServer, Site
from corecast.core.register import Registrar, RegistrarConfig
from corecast.core.xtr import Xtr
from corecast.wire import codec as c

# These tests exercise other behaviour: their ETRs serve every EID and trust every RLOC
# (the site checks are tested in test_corecast_etr_safety.py).
OPEN_ETR = {"eids": [(bytes(4), 0), (bytes(16), 0)], "trusted_rlocs": None}

A = ipaddress.ip_address
N = ipaddress.ip_network
RA, RB = "192.0.2.1", "192.0.2.2"  # the two xTRs' RLOCs
HOST_A, HOST_B = "10.1.0.5", "10.2.0.5"


def make_xtr(rloc: str, peer_prefix: str, peer_rloc: str, iid: int = 0,
             echo_capable: bool = False, **kw) -> Xtr:
    mc = MapCache(iid=iid)
    mc.load_static(f"{peer_prefix} {peer_rloc}{' inf echo' if echo_capable else ''}\n")
    itr = Itr(rloc, [], mc, instance_id=iid or None, fast=False)
    return Xtr(itr, Etr([], **OPEN_ETR), **kw)


def pkt(src: str, dst: str, data: bytes = b"hi") -> bytes:
    return c.build_ip(A(src).packed, A(dst).packed, 17, c.build_udp(1000, 2000, data))


def hdr(datagram) -> c.LispDataHeader:
    return c.decode_lisp_data(datagram[0])[0]


def pair(**kw):
    a = make_xtr(RA, "10.2.0.0/16", RB, echo_nonce=True, seed=1, **kw)
    b = make_xtr(RB, "10.1.0.0/16", RA, echo_nonce=True, seed=2, **kw)
    return a, b


def test_echo_nonce_round_trip():
    """RFC 9300 sec. 10.1: A sets N+E and a nonce; B forwards the packet as normal and
    echoes the nonce on its next packet to A with N set, E clear; A sees the echo."""
    a, b = pair()
    a.request_echo(RB, 0.0)
    (d,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.1)
    h = hdr(d)
    assert d[1] == (RB, 4341) and h.flags & c.FLAG_N and h.flags & c.FLAG_E
    nonce = h.nonce
    assert b.handle_data(d[0], RA, 0.2) == [(b"hi", (HOST_B, 2000))]  # forwarded as normal
    (back,) = b.handle_inner(pkt(HOST_B, HOST_A), 0.3)
    hb = hdr(back)
    assert hb.flags & c.FLAG_N and not hb.flags & c.FLAG_E and hb.nonce == nonce
    (again,) = b.handle_batch([pkt(HOST_B, HOST_A)], 0.35)  # echoed once, then plain
    assert not hdr(again).flags & c.FLAG_N
    a.handle_data(back[0], RB, 0.4)
    (ev,) = [e for e in a.events if isinstance(e, EchoNonceVerified)]
    assert ev.rloc == RB and ev.nonce == nonce and ev.rtt == pytest.approx(0.4)
    (after,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.5)  # request state over
    assert not hdr(after).flags & c.FLAG_N
    assert a.counters["echoes_verified"] == 1 and b.counters["echoes_sent"] == 1


def test_echo_nonce_unanswered_means_unreachable():
    """RFC 9300 sec. 10.1: packets keep coming from an ETR said to do echo-noncing
    (E-bit in its Map-Reply; here the static line's ``echo``) but the nonce is never
    echoed: the path is declared down at timeout.  Without that E-bit no request
    is started (test_corecast_xtr_rfc_rules.py checks)."""
    a = make_xtr(RA, "10.2.0.0/16", RB, echo_nonce=True, echo_timeout=1.0, echo_suspend=0.5,
                 seed=1, echo_capable=True)
    b = make_xtr(RB, "10.1.0.0/16", RA, echo_nonce=False)
    a.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    a.tick(0.1)  # starts the request toward RB (traffic, never verified)
    (d,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.2)
    assert hdr(d).flags & c.FLAG_E
    b.handle_data(d[0], RA, 0.3)
    (back,) = b.handle_inner(pkt(HOST_B, HOST_A), 0.4)
    assert not hdr(back).flags & c.FLAG_N
    a.handle_data(back[0], RB, 0.5)
    a.tick(1.3)
    (ev,) = [e for e in a.events if isinstance(e, RlocUnreachable)]
    assert ev.rloc == RB and a.counters["unreachable"] == 1


def test_both_requesting_suspends_and_echoes():
    """RFC 9300 sec. 10.1: both in the request state: the receiver suspends its own
    request and echoes; after the suspend timer its request resumes."""
    a, b = pair()
    a.request_echo(RB, 0.0)
    b.request_echo(RA, 0.0)
    (da,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.1)
    b.handle_data(da[0], RA, 0.1)
    (db,) = b.handle_inner(pkt(HOST_B, HOST_A), 0.2)
    assert hdr(db).nonce == hdr(da).nonce and not hdr(db).flags & c.FLAG_E
    a.handle_data(db[0], RB, 0.2)  # a's path verified
    b.tick(0.5)
    (db2,) = b.handle_inner(pkt(HOST_B, HOST_A), 0.6)
    assert not hdr(db2).flags & c.FLAG_N  # suspended (echo_suspend = 1 s)
    b.tick(1.2)
    (db3,) = b.handle_inner(pkt(HOST_B, HOST_A), 1.3)
    assert hdr(db3).flags & c.FLAG_E  # resumed
    # the outcome: a answers, b's path is verified; nobody declares the other down
    # (b's deadline moved past its suspension)
    a.handle_data(db3[0], RB, 1.3)
    (da2,) = a.handle_inner(pkt(HOST_A, HOST_B), 1.4)
    assert hdr(da2).nonce == hdr(db3).nonce
    b.handle_data(da2[0], RA, 3.05)  # after b's original deadline (0 + 3 s)
    for x, t in ((a, 3.1), (b, 3.1), (a, 20.0), (b, 20.0)):
        x.tick(t)
    assert b.counters["echoes_verified"] == 1
    assert a.counters["unreachable"] == b.counters["unreachable"] == 0


def test_instance_id_in_the_data_plane():
    """RFC 9300 sec. 5.3, 8: I-bit and 24-bit IID on every header; the ETR of
    instance 7 decapsulates IID 7 only."""
    a = make_xtr(RA, "10.2.0.0/16", RB, iid=7)
    (d,) = a.handle_batch([pkt(HOST_A, HOST_B)], 0.0)
    h = hdr(d)
    assert h.flags & c.FLAG_I and h.instance_id == 7
    etr = Etr([], instance_id=7, **OPEN_ETR)
    inner = pkt(HOST_A, HOST_B)
    for iid, ok in ((7, True), (8, False), (None, False)):
        data = c.encode_lisp_data(c.make_lisp_data(instance_id=iid)) + inner
        assert bool(etr.handle_data(data)) is ok
    assert etr.drops()["wrong_instance"] == 2
    etr0 = Etr([], instance_id=0, **OPEN_ETR)
    assert etr0.handle_data(b"\x00" * 8 + inner)  # no I-bit: instance 0


def test_map_cache_is_per_instance():
    """RFC 9300 sec. 8 / RFC 8060 sec. 4.1: the ITR of instance 7 asks for its EIDs
    in an LCAF Instance ID address and installs only records of instance 7."""
    itr = Itr(RA, [], instance_id=7, map_resolver=("192.0.2.9", 4342), fast=False)
    out = itr.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    (req_dgram,) = out
    ecm = c.decode_control(req_dgram[0])
    _ip, _s, _d, inner = c.ecm_unwrap(ecm)
    req = c.decode_control(inner)
    assert req.eid_iids == (7,) and req.eid_prefixes == (N(f"{HOST_B}/32"),)
    loc = (c.LocatorRecord(A(RB)),)
    reply = c.encode_map_reply(c.MapReply(req.nonce, (
        c.EidRecord(N("10.2.0.0/16"), (c.LocatorRecord(A("192.0.2.66")),), iid=0),
        c.EidRecord(N("10.2.0.0/16"), loc, iid=7))))
    released = itr.handle_control(reply, 0.1)
    assert [d[1] for d in released] == [(RB, 4341)]
    assert itr.mapcache.counters["other_instance"] == 1
    with pytest.raises(ValueError):
        Itr(RA, [], MapCache(), instance_id=7)


def register(ms: MapServer, prefix: str, rloc: str, iid: int, proxy: bool = True,
             now: float = 0.0, nonce: int = 1) -> list:
    cfg = RegistrarConfig((prefix,), (rloc,), ("192.0.2.9", 4342), b"k", 1, iid=iid,
                          proxy_reply=proxy)
    reg = Registrar(cfg, first_nonce=nonce)
    (msg, _dst), = reg.tick(now)
    return ms.handle(msg, (rloc, 4342), now)


def ask(ms: MapServer, eids: list[tuple[str, int]], now: float = 1.0) -> list:
    req = c.MapRequest(99, (A("192.0.2.50"),), tuple(N(f"{e}/32") for e, _ in eids),
                       eid_iids=tuple(i for _, i in eids) if any(i for _, i in eids) else ())
    return ms.handle(c.encode_map_request(req), ("192.0.2.50", 4342), now)


def test_map_server_keys_registrations_by_instance_and_prefix():
    """RFC 9301 sec. 5.6, 8.2 with RFC 8060 sec. 4.1: the same prefix registered in
    instance 0 and instance 7 maps to different RLOCs; an instance the site is not
    configured for is refused; other instances get Negative Map-Replies."""
    ms = MapServer([Site("s", {1: b"k"}, (N("10.0.0.0/8"),), iids=frozenset({0, 7}))])
    register(ms, "10.2.0.0/16", "192.0.2.10", 0)
    register(ms, "10.2.0.0/16", "192.0.2.17", 7, nonce=5)
    assert ms.counters["accepted"] == 2
    assert register(ms, "10.2.0.0/16", "192.0.2.18", 8, nonce=9) == []
    assert ms.counters["refused_no_site"] == 1
    for iid, want in ((0, "192.0.2.10"), (7, "192.0.2.17")):
        ((data, dst),) = ask(ms, [("10.2.0.1", iid)])
        rep = c.decode_control(data)
        assert dst == ("192.0.2.50", 4342)
        assert [(str(r.locators[0].locator), r.iid) for r in rep.records] == [(want, iid)]
    ((data, _),) = ask(ms, [("10.2.0.1", 9)])
    (rec,) = c.decode_control(data).records
    assert rec.locators == () and rec.iid == 9
    assert {r.get("iid", 0) for r in ms.registrations(1.0)} == {0, 7}


def test_multi_record_map_request_answered_record_by_record():
    """RFC 9301 sec. 5.2, 8.3: a Map-Request with three EID records: the record
    whose ETR asked for no proxy service goes to that ETR alone (an ECM with a
    one-record Map-Request, same nonce); the others get one proxy Map-Reply."""
    ms = MapServer([Site("s", {1: b"k"}, (N("10.0.0.0/8"),))])
    register(ms, "10.2.0.0/16", "192.0.2.10", 0, proxy=True)
    register(ms, "10.3.0.0/16", "192.0.2.11", 0, proxy=False, nonce=7)
    out = ask(ms, [("10.2.0.1", 0), ("10.3.0.1", 0), ("10.4.0.1", 0)])
    by_dst = {dst: data for data, dst in out}
    fwd = c.decode_control(by_dst[("192.0.2.11", 4342)])
    assert isinstance(fwd, c.Ecm)
    one = c.decode_control(c.ecm_unwrap(fwd)[3])
    assert one.nonce == 99 and one.eid_prefixes == (N("10.3.0.1/32"),)
    rep = c.decode_control(by_dst[("192.0.2.50", 4342)])
    assert rep.nonce == 99
    assert [str(r.prefix) for r in rep.records][0] == "10.2.0.0/16"
    assert rep.records[1].locators == ()  # 10.4.0.1: negative
    assert ms.counters["forwarded"] == 1 and ms.counters["replies"] == 1


def test_registrar_answers_only_its_instance():
    """RFC 9301 sec. 8.3: a forwarded Map-Request is answered by the ETR for its
    own instance's prefixes only."""
    reg = Registrar(RegistrarConfig(("10.3.0.0/16",), ("192.0.2.11",), ("192.0.2.9", 4342),
                                    b"k", 1, iid=7, proxy_reply=False))
    for iids, answered in (((7,), True), ((), False), ((8,), False)):
        req = c.MapRequest(5, (A("192.0.2.50"),), (N("10.3.0.1/32"),), eid_iids=iids)
        out = reg.answer(c.encode_map_request(req), 0.0)
        assert bool(out) is answered
        if out:
            assert c.decode_control(out[0][0]).records[0].iid == 7


def test_locator_status_bits():
    """RFC 9300 sec. 5.3, 10: A's site has two locators (ordinals 0, 1); when A's
    headers say locator 1 is down, B stops encapsulating to it."""
    a = make_xtr(RA, "10.2.0.0/16", RB, local_rlocs=(RA, "192.0.2.3"))
    mc = MapCache()
    mc.add(A("10.1.0.0").packed, 16, [(A(RA).packed, 1, 50), (A("192.0.2.3").packed, 1, 50)],
           float("inf"))
    b = Xtr(Itr(RB, [], mc, fast=False), Etr([], **OPEN_ETR))
    (d,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    h = hdr(d)
    assert h.flags & c.FLAG_L and h.lsb == 0b11
    b.handle_data(d[0], RA, 0.0)
    assert b.counters["lsb_changes"] == 0
    dests = {b.handle_inner(pkt(HOST_B, f"10.1.0.{i}"), 0)[0][1][0] for i in range(1, 40)}
    assert dests == {RA, "192.0.2.3"}
    down = c.encode_lisp_data(c.make_lisp_data(lsb=0b01)) + pkt(HOST_A, HOST_B)
    b.handle_data(down, RA, 1.0)
    (ev,) = [e for e in b.events if isinstance(e, LocatorStatusChanged)]
    assert ev.prefix == "10.1.0.0/16" and ev.down == ("192.0.2.3",)
    dests = {b.handle_inner(pkt(HOST_B, f"10.1.0.{i}"), 2)[0][1][0] for i in range(1, 40)}
    assert dests == {RA}


def test_lisp_data_header_with_nonce_iid_and_lsb_decodes_with_scapy():
    """The headers the xTR builds are valid RFC 9300 sec. 5.3 headers (scapy layer)."""
    from corecast.wire.layers import LISPData

    a = make_xtr(RA, "10.2.0.0/16", RB, iid=0xABCDE, echo_nonce=True, local_rlocs=(RA,), seed=3)
    a.request_echo(RB, 0)
    (d,) = a.handle_inner(pkt(HOST_A, HOST_B), 0)
    s = LISPData(d[0])
    assert s.flags.N and s.flags.E and s.flags.I and s.flags.L
    assert s.instance_id == 0xABCDE and s.lsb8 == 1 and s.nonce == hdr(d).nonce


def test_map_version_serial_order():
    """RFC 9302 sec. 6: 12-bit serial arithmetic around 69."""
    from corecast.core.xtr import newer

    assert newer(70, 69) and newer(69 + 2048, 69) and not newer((69 + 2049) % 4096, 69)
    assert newer(1, 4095) and not newer(4095, 1) and not newer(69, 69)


def versioned_pair(fast=False):
    """A (version 3) and B (version 10); each has the other's mapping with its version."""
    def one(rloc, peer_prefix, peer_rloc, mine, theirs):
        mc = MapCache()
        mc.add(A(peer_prefix.split("/")[0]).packed, 16, [(A(peer_rloc).packed, 1, 1)],
               float("inf"), map_version=theirs)
        mc.add(A("10.9.0.0").packed, 16, [(A("192.0.2.9").packed, 1, 1)], float("inf"))  # null
        itr = Itr(rloc, [], mc, map_resolver=("192.0.2.99", 4342), fast=fast)
        return Xtr(itr, Etr([], **OPEN_ETR), map_versioning=True, map_version=mine, seed=5)
    return one(RA, "10.2.0.0/16", RB, 3, 10), one(RB, "10.1.0.0/16", RA, 10, 3)


@pytest.mark.parametrize("path", ["inner", "batch-pure", "batch-C"])
def test_map_versions_in_headers(path):
    """RFC 9302 sec. 4, 6.1: V-bit with our Source and the mapping's Dest Map-Version;
    no V-bit toward a mapping with the Null Map-Version.  The batch paths (C and
    pure) use the entry's header exactly as the per-packet path does."""
    from deliverykit.fastpath import speedups

    if path == "batch-C" and speedups is None:
        pytest.skip("C fast path not built")
    a, _b = versioned_pair(fast=path == "batch-C")
    send = a.handle_inner if path == "inner" else (lambda p, now: a.handle_batch([p], now))
    (d,) = send(pkt(HOST_A, HOST_B), 0.0)
    h = hdr(d)
    assert h.flags & c.FLAG_V and not h.flags & c.FLAG_N and h.map_versions == (3, 10)
    (d0,) = send(pkt(HOST_A, "10.9.0.1"), 0.0)
    assert not hdr(d0).flags & c.FLAG_V


def test_etr_checks_dest_map_version_and_solicits_stale_itrs():
    """RFC 9302 sec. 7.1: same version delivered; newer or Null dropped; older
    delivered and the ITR (one we recently sent data to, RFC 9301 sec. 6.1) gets a
    Solicit-Map-Request naming the EID, with the D-bit (sec. 5.2), at most one
    per 3 s."""
    a, b = versioned_pair()  # b's own version is 10
    inner = pkt(HOST_A, HOST_B)
    b.handle_inner(pkt(HOST_B, HOST_A), 0.0)  # b sends to A's RLOC

    def with_versions(src_v, dst_v):
        return c.encode_lisp_data(c.make_lisp_data(map_versions=(src_v, dst_v))) + inner

    assert b.handle_data(with_versions(3, 10), RA, 0.0) == [(b"hi", (HOST_B, 2000))]
    assert b.handle_data(with_versions(3, 11), RA, 0.0) == []
    assert b.handle_data(with_versions(3, 0), RA, 0.0) == []
    out = b.handle_data(with_versions(3, 9), RA, 0.0)
    assert (b"hi", (HOST_B, 2000)) in out
    (smr_dgram,) = [d for d in out if d[1] == (RA, 4342)]
    smr = c.decode_control(smr_dgram[0])
    assert smr.smr and smr.dont_map_reply and smr.eid_prefixes == (N(f"{HOST_B}/32"),)
    assert len(b.handle_data(with_versions(3, 9), RA, 1.5)) == 1  # rate limited: no SMR
    assert len(b.handle_data(with_versions(3, 9), RA, 3.0)) == 2
    assert b.counters["v_dropped_dest_newer"] == 1 and b.counters["v_dropped_dest_null"] == 1
    assert b.counters["smr_sent"] == 2
    # the ITR that gets the SMR asks the mapping system (an SMR-invoked Map-Request)
    # and keeps using its mapping meanwhile (RFC 9301 sec. 6.1)
    (req,) = a.handle_control(smr_dgram[0], 4.0)
    assert req[1] == ("192.0.2.99", 4342)
    assert c.decode_control(c.ecm_unwrap(c.decode_control(req[0]))[3]).smr_invoked
    out = a.handle_inner(pkt(HOST_A, HOST_B), 4.0)
    assert a.itr.counters["smr_received"] == 1 and a.itr.counters["map_requests_sent"] == 1
    assert [dst for _d, dst in out] == [(RB, 4341)]


def test_etr_checks_source_map_version():
    """RFC 9302 sec. 7.2: a newer Source Map-Version makes our cached mapping of the
    source EID stale: "A Map-Request MUST be sent ... respecting rate-limitation"
    (to the map-resolver, at most once per EID-Prefix per 3 s; the mapping stays in
    use meanwhile); an older one drops the packet; a Null one is not compared."""
    _a, b = versioned_pair()  # b caches 10.1.0.0/16 (A) at version 3
    inner = pkt(HOST_A, HOST_B)

    def with_versions(src_v):
        return c.encode_lisp_data(c.make_lisp_data(map_versions=(src_v, 10))) + inner

    assert b.handle_data(with_versions(0), RA, 0.0)
    assert b.handle_data(with_versions(2), RA, 0.0) == []
    assert b.counters["v_dropped_source_older"] == 1
    out = b.handle_data(with_versions(4), RA, 1.0)
    assert (b"hi", (HOST_B, 2000)) in out and b.counters["v_source_newer"] == 1
    (req,) = [d for d in out if d[1] == ("192.0.2.99", 4342)]
    m = c.decode_control(c.ecm_unwrap(c.decode_control(req[0]))[3])
    assert m.eid_prefixes == (N(f"{HOST_A}/32"),) and not m.smr_invoked
    assert b.itr.mapcache.lookup(A(HOST_A).packed, 1.0) is not None  # still in use
    for t in (1.5, 2.0, 3.9):  # rate limited
        assert len(b.handle_data(with_versions(4), RA, t)) == 1
    assert len(b.handle_data(with_versions(4), RA, 4.0)) == 2
    # the Map-Reply with the new version replaces the mapping
    rep = c.MapReply(m.nonce, (c.EidRecord(N("10.1.0.0/16"), (c.LocatorRecord(A(RA)),),
                                           map_version=4),))
    b.handle_control(c.encode_map_reply(rep), 4.1)
    assert b.itr.mapcache.lookup(A(HOST_A).packed, 4.1).map_version == 4


def test_null_mapping_drops_versioned_packets():
    """RFC 9302 sec. 6.1: our mapping has the Null Map-Version, so V-bit packets are
    silently dropped."""
    x = make_xtr(RB, "10.1.0.0/16", RA)
    x.map_versioning = True  # versioning on, our version Null
    data = c.encode_lisp_data(c.make_lisp_data(map_versions=(1, 1))) + pkt(HOST_A, HOST_B)
    assert x.handle_data(data, RA, 0) == [] and x.counters["v_dropped_null_mapping"] == 1
