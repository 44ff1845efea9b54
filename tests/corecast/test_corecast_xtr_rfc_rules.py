"""Review findings on the xTR / LISP data plane (session 2): each test names the
RFC text it holds the code to and failed before its fix."""

from __future__ import annotations

import asyncio
import ipaddress
import random
import socket

import pytest

from corecast.core.etr import Etr
from corecast.core.events import RlocUnreachable
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.xtr import Xtr
from corecast.wire import codec as c

# These tests exercise other behaviour: their ETRs serve every EID and trust every RLOC
# (the site checks are tested in test_corecast_etr_safety.py).
OPEN_ETR = {"eids": [(bytes(4), 0), (bytes(16), 0)], "trusted_rlocs": None}

A = ipaddress.ip_address
N = ipaddress.ip_network
RA, RB, RC = "192.0.2.1", "192.0.2.2", "192.0.2.3"
HOST_A, HOST_B = "10.1.0.5", "10.2.0.5"


def pkt(src: str, dst: str, data: bytes = b"hi") -> bytes:
    return c.build_ip(A(src).packed, A(dst).packed, 17, c.build_udp(1000, 2000, data))


def hdr(datagram) -> c.LispDataHeader:
    return c.decode_lisp_data(datagram[0])[0]


def make_xtr(rloc: str, static: str, iid: int = 0, resolver=None, **kw) -> Xtr:
    mc = MapCache(iid=iid)
    mc.load_static(static)
    itr = Itr(rloc, [], mc, map_resolver=resolver, instance_id=iid or None, fast=False)
    return Xtr(itr, Etr([], **OPEN_ETR), **kw)


def lisp(inner: bytes, **kw) -> bytes:
    return c.encode_lisp_data(c.make_lisp_data(**kw)) + inner


# --------------------------------------------------------------------- High


def test_event_queues_are_bounded():
    """H1. RFC 9300 sec. 10 (LSBs) and RFC 9301 sec. 6.1 (SMRs) are driven by remote
    peers: the events they raise are kept in bounded queues (the newest kept)."""
    x = make_xtr(RB, f"10.1.0.0/16 {RA},{RC}\n", max_events=16)
    for k in range(200):
        x.handle_data(lisp(pkt(HOST_A, HOST_B), lsb=1 + (k & 1)), RA, float(k))
    assert x.counters["lsb_changes"] >= 199 and len(x.events) == 16
    itr = Itr(RA, [], MapCache(), map_resolver=("192.0.2.9", 4342), fast=False, max_events=8)
    for k in range(20):
        rep = c.MapReply(k + 1, (c.EidRecord(N(f"10.{k}.0.0/16"), (c.LocatorRecord(A(RB)),)),))
        itr._requests[k + 1] = A(f"10.{k}.0.1").packed
        itr.handle_control(c.encode_map_reply(rep), 0.0)
    assert itr.counters["map_replies"] == 20 and len(itr.events) == 8


async def test_xtr_node_link_counters_are_keyed_by_rloc_only():
    """H2. RFC 9300 sec. 5.1: what an xTR delivers natively goes to inner
    (sender-chosen) addresses; the per-link counters count LISP links (RLOCs) only,
    and are capped, so a peer cannot grow them without bound."""
    from corecast.aio.nodes import LinkCounters, XtrNode

    base = random.randrange(200, 250)  # 127.base.x.y: this test's own addresses
    rloc = f"127.{base}.0.1"
    x = make_xtr(rloc, "")
    node = XtrNode(x, (f"127.{base}.0.2", 0), 0)
    await node.start()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        dport = node.t_data.get_extra_info("sockname")[1]
        for k in range(300):
            inner = pkt("10.1.0.5", f"127.{base}.{1 + k // 250}.{k % 250 + 1}")
            tx.sendto(lisp(inner), (rloc, dport))
        for _ in range(200):
            await asyncio.sleep(0.02)
            if x.etr.counters["plain_delivered"] >= 300:
                break
        assert x.etr.counters["plain_delivered"] == 300
        assert node.links.snapshot() == {} and node.delivered == [300, 300 * (2 + 28)]
    finally:
        tx.close()
        await node.close()
    lc = LinkCounters(max_hosts=4)
    for k in range(10):
        lc.add(f"127.0.0.{k + 1}", 10)
    snap = lc.snapshot()
    assert len(lc.packets) == 5 and snap["other"] == (6, 6 * 38)


def test_smr_is_rate_limited_and_keeps_the_mapping():
    """H3. RFC 9301 sec. 6.1: "the SMR responder [SHOULD] rate limit a Map-Request
    for the same EID-Prefix to no more than once every 3 seconds"; the
    SMR-invoked Map-Request (s-bit) goes through the mapping system and the cached
    mapping stays in use until its Map-Reply replaces it."""
    x = make_xtr(RA, f"10.2.0.0/16 {RB}\n", resolver=("192.0.2.9", 4342))
    smr = c.encode_map_request(c.MapRequest(7, (A(RB),), (N(f"{HOST_B}/32"),), smr=True))
    reqs = []
    for k in range(30):
        out = x.handle_control(smr, k * 0.1)
        reqs += out
        (d,) = x.handle_inner(pkt(HOST_A, HOST_B), k * 0.1)
        assert d[1] == (RB, 4341)  # still forwarding with the cached mapping
    (r,) = reqs
    assert r[1] == ("192.0.2.9", 4342)
    m = c.decode_control(c.ecm_unwrap(c.decode_control(r[0]))[3])
    assert m.smr_invoked and not m.smr and m.eid_prefixes == (N(f"{HOST_B}/32"),)
    assert len(x.handle_control(smr, 3.1)) == 1  # 3 s later: once more
    rep = c.MapReply(m.nonce, (c.EidRecord(N("10.2.0.0/16"), (c.LocatorRecord(A(RC)),)),))
    x.handle_control(c.encode_map_reply(rep), 3.2)
    (d,) = x.handle_inner(pkt(HOST_A, HOST_B), 3.3)
    assert d[1] == (RC, 4341)
    # no cached mapping: no SMR-invoked Map-Request (RFC 9301 sec. 6.1, SHOULD NOT)
    other = c.encode_map_request(c.MapRequest(8, (A(RB),), (N("10.77.0.1/32"),), smr=True))
    assert x.handle_control(other, 10.0) == []


def test_wrong_instance_packets_do_no_reachability_processing():
    """H4. RFC 9300 sec. 8: an ETR decapsulates only its instance; sec. 5.3: the
    LSBs / nonce of a packet that is dropped must not change state: a packet of
    IID 6 leaves instance 5's map-cache and echo state alone."""
    x = make_xtr(RB, f"10.1.0.0/16 {RA},{RC} echo\n", iid=5, echo_nonce=True,
                 map_versioning=True, map_version=3)
    bad = lisp(pkt(HOST_A, HOST_B), lsb=0b10, instance_id=6)
    assert x.handle_data(bad, RA, 0.0) == []
    e = x.itr.mapcache.trie.lookup(A(HOST_A).packed)[1]
    assert not e.down and x.counters["lsb_changes"] == 0
    req = lisp(pkt(HOST_A, HOST_B), nonce=77, echo=True, instance_id=6)
    assert x.handle_data(req, RA, 0.0) == [] and x.counters["echo_requests_received"] == 0
    ver = lisp(pkt(HOST_A, HOST_B), map_versions=(1, 2), instance_id=6)
    assert x.handle_data(ver, RA, 0.0) == [] and x.counters["smr_sent"] == 0
    assert x.etr.drops()["wrong_instance"] == 3
    ok = lisp(pkt(HOST_A, HOST_B), lsb=0b10, instance_id=5)
    assert x.handle_data(ok, RA, 1.0) and e.down == {A(RA).packed}


# ------------------------------------------------------------------- Medium


def test_lsbs_reach_a_mapping_installed_later():
    """M1. RFC 9300 sec. 10: Locator-Status-Bits belong to the Locator-Set of an
    EID-Prefix, not to an outer RLOC: the same bits applied again after a new
    mapping is installed mark its locator down."""
    x = make_xtr(RB, "")
    down = lisp(pkt(HOST_A, HOST_B), lsb=0b01)
    x.handle_data(down, RA, 0.0)  # no mapping yet
    x.itr.mapcache.add(A("10.1.0.0").packed, 16, [(A(RA).packed, 1, 50), (A(RC).packed, 1, 50)],
                       float("inf"))
    x.handle_data(down, RA, 1.0)
    assert x.itr.mapcache.trie.lookup(A(HOST_A).packed)[1].down == {A(RC).packed}


def test_lsb_width_is_8_bits_with_instance_id():
    """M2. RFC 9300 sec. 5.3: with the I-bit set, the LSB field is the low 8 bits;
    locators with ordinal 8 and up have no status bit and are not marked down."""
    locs = ",".join(f"192.0.2.{10 + i}" for i in range(10))
    x = make_xtr(RB, f"10.1.0.0/16 {locs}\n", iid=5)
    x.handle_data(lisp(pkt(HOST_A, HOST_B), lsb=0xFE, instance_id=5), "192.0.2.10", 0.0)
    e = x.itr.mapcache.trie.lookup(A(HOST_A).packed)[1]
    assert e.down == {A("192.0.2.10").packed}


def test_unreachable_rloc_is_retried_after_holddown():
    """M3. RFC 9300 sec. 10.1: an RLOC declared down by echo-nonce is not avoided for
    ever: after ``echo_holddown`` traffic (and so echo-noncing) resumes toward it."""
    x = make_xtr(RA, f"10.2.0.0/16 {RB},{RC} echo\n", echo_nonce=True, echo_timeout=1.0,
                 echo_suspend=0.5, echo_holddown=5.0)
    x.request_echo(RB, 0.0)
    x.handle_data(lisp(pkt(HOST_B, HOST_A)), RB, 0.5)  # traffic, never an echo
    x.tick(1.1)
    assert [e for e in x.events if isinstance(e, RlocUnreachable)]

    def dests(now):
        return {x.handle_inner(pkt(HOST_A, f"10.2.0.{i}"), now)[0][1][0] for i in range(1, 40)}

    assert dests(2.0) == {RC}
    x.tick(6.5)
    assert dests(6.6) == {RB, RC}


def test_suspended_request_extends_its_deadline():
    """M4. RFC 9300 sec. 10.1: an xTR that suspends its Echo-Nonce-request (both
    requesting) must not time out while suspended: both sides up, no
    RlocUnreachable; a suspend not shorter than the timeout is refused."""
    kw = dict(echo_nonce=True, echo_timeout=1.0, echo_suspend=0.5)
    a = make_xtr(RA, f"10.2.0.0/16 {RB} inf echo\n", seed=1, **kw)
    b = make_xtr(RB, f"10.1.0.0/16 {RA} inf echo\n", seed=2, **kw)
    a.request_echo(RB, 0.0)
    b.request_echo(RA, 0.0)
    (da,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.1)
    b.handle_data(da[0], RA, 0.1)  # b suspends, echoes
    (db,) = b.handle_inner(pkt(HOST_B, HOST_A), 0.2)
    a.handle_data(db[0], RB, 0.2)  # a verified
    (da,) = a.handle_inner(pkt(HOST_A, HOST_B), 0.3)
    b.handle_data(da[0], RA, 0.3)  # traffic from a while b is suspended
    b.tick(0.7)  # resumes
    (db,) = b.handle_inner(pkt(HOST_B, HOST_A), 0.8)
    assert hdr(db).flags & c.FLAG_E
    a.handle_data(db[0], RB, 0.8)
    b.tick(1.05)  # the old deadline (0 + 1.0) has passed
    (da,) = a.handle_inner(pkt(HOST_A, HOST_B), 1.1)
    b.handle_data(da[0], RA, 1.1)
    for x in (a, b):
        assert not [e for e in x.events if isinstance(e, RlocUnreachable)]
        assert x.counters["echoes_verified"] == 1
    with pytest.raises(ValueError):
        make_xtr(RA, "", echo_nonce=True, echo_timeout=1.0, echo_suspend=1.0)


def test_echo_requested_only_from_echo_capable_etrs():
    """M5. RFC 9300 sec. 10.1: "An ITR SHOULD set the E-bit ... when it knows the ETR
    is enabled for Echo-Noncing. This is conveyed by the E-bit in the Map-Reply."
    Traffic to a mapping without it never starts a request; a Map-Reply with E set
    (or a static line marked ``echo``) does."""
    x = make_xtr(RA, f"10.2.0.0/16 {RB}\n", resolver=("192.0.2.9", 4342), echo_nonce=True)
    x.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    x.tick(0.1)
    assert not hdr(x.handle_inner(pkt(HOST_A, HOST_B), 0.2)[0]).flags & c.FLAG_E
    assert x.counters["echo_requests_started"] == 0
    (req,) = x.handle_inner(pkt(HOST_A, "10.3.0.1"), 0.3)
    m = c.decode_control(c.ecm_unwrap(c.decode_control(req[0]))[3])
    rep = c.MapReply(m.nonce, (c.EidRecord(N("10.3.0.0/16"), (c.LocatorRecord(A(RC)),)),),
                     echo_nonce=True)
    x.handle_control(c.encode_map_reply(rep), 0.4)
    x.tick(0.5)
    (d,) = x.handle_inner(pkt(HOST_A, "10.3.0.1"), 0.6)
    assert d[1] == (RC, 4341) and hdr(d).flags & c.FLAG_E


def test_spoofed_nonces_do_not_fill_the_peer_table():
    """M6. RFC 9300 sec. 10.1: echo state is kept for RLOCs we send to and for echo
    requests; N-bit packets from arbitrary (spoofable) sources create none, and
    idle state is evicted least recently used first."""
    x = make_xtr(RA, f"10.2.0.0/16 {RB}\n", echo_nonce=True, max_peers=10)
    for k in range(100):
        x.handle_data(lisp(pkt(HOST_B, HOST_A), nonce=k + 1), f"198.51.100.{k + 1}", 0.0)
    assert len(x.peers) == 0
    for k in range(100):
        x.handle_data(lisp(pkt(HOST_B, HOST_A), nonce=k + 1, echo=True), f"198.51.100.{k + 1}", 0.0)
    assert len(x.peers) <= 10
    x.request_echo(RB, 1.0)
    (d,) = x.handle_inner(pkt(HOST_A, HOST_B), 1.1)
    assert hdr(d).flags & c.FLAG_E and len(x.peers) <= 10


def test_map_server_drops_older_map_version():
    """M7. RFC 9302 sec. 5: "A Map-Server receiving a message with an unexpected
    Map-Version number, for instance an old one, MUST silently drop the message."."""
    from corecast.core.mapserver import MapServer, Site
    from corecast.core.register import Registrar, RegistrarConfig

    ms = MapServer([Site("s", {1: b"k"}, (N("10.0.0.0/8"),))])

    def register(rloc: str, version: int, nonce: int) -> None:
        cfg = RegistrarConfig(("10.2.0.0/16",), (rloc,), ("192.0.2.9", 4342), b"k", 1,
                              map_version=version)
        (msg, _dst), = Registrar(cfg, first_nonce=nonce).tick(0.0)
        ms.handle(msg, (rloc, 4342), 0.0)

    register("192.0.2.10", 20, 1)
    register("192.0.2.11", 19, 2)  # older: dropped
    assert ms.counters["accepted"] == 1 and ms.counters["dropped_old_version"] == 1
    register("192.0.2.12", 21, 3)
    req = c.MapRequest(9, (A("192.0.2.50"),), (N("10.2.0.1/32"),))
    ((data, _),) = ms.handle(c.encode_map_request(req), ("192.0.2.50", 4342), 1.0)
    (rec,) = c.decode_control(data).records
    assert str(rec.locators[0].locator) == "192.0.2.12" and rec.map_version == 21


def test_outgoing_smrs_are_limited():
    """M8. RFC 9301 sec. 6.1: SMRs go to ITRs we recently sent data to, at most one
    every 3 s per RLOC; sec. 5.2: an SMR sets the D-bit (no Map-Reply wanted);
    RFC 9302 sec. 7.1: after 10 SMRs stale-version packets are dropped and the
    SMRs slow to one every 30 s."""
    x = make_xtr(RB, f"10.1.0.0/16 {RA}\n", map_versioning=True, map_version=10)
    stale = lisp(pkt(HOST_A, HOST_B), map_versions=(3, 9))
    out = x.handle_data(stale, "198.51.100.7", 0.0)  # never sent to: no SMR (reflection)
    assert [d for d in out if d[1][1] == 4342] == []
    x.handle_inner(pkt(HOST_B, HOST_A), 0.0)  # now we send to RA
    smrs, delivered = [], 0
    t = 0.0
    while t < 60.0:
        for data, dst in x.handle_data(stale, RA, t):
            if dst[1] == 4342:
                smrs.append((t, c.decode_control(data)))
            else:
                delivered += 1
        t = round(t + 0.5, 1)
    times = [s[0] for s in smrs]
    assert all(m.smr and m.dont_map_reply for _t, m in smrs)
    assert times[:10] == [3.0 * k for k in range(10)]
    assert times[10] - times[9] >= 30.0 - 1e-9
    assert delivered == 10 * 6 - 5  # up to the 10th SMR (at 27 s), then dropped
    assert x.counters["v_dropped_dest_stale"] > 0


def test_itr_checks_reserved_range_count_at_construction():
    """M9. The batch fast path (C and twin) handles at most 16 reserved ranges: the
    Itr refuses more at construction instead of raising on every batch."""
    ranges = [(bytes([10, k, 0, 0]), 16) for k in range(17)]
    with pytest.raises(ValueError):
        Itr(RA, ranges, fast=False)
    from corecast import _fast

    itr = Itr(RA, ranges[:16], fast=False)
    ctx = ((itr._ranges + itr._ranges[:1]),) + (None,) * 9
    with pytest.raises(ValueError):
        _fast.PyItrTable().batch([b""], 0, 0, ctx, 0.0, [], [0] * 11)


def test_map_cache_fails_over_to_backup_priority_weighted():
    """M10. RFC 9301 sec. 5.4 (Priority, Weight): locators of the best priority that
    are up share traffic by weight; when all of them are down the next priority is
    used."""
    mc = MapCache()
    mc.add(A("10.2.0.0").packed, 16, [(A(RA).packed, 1, 90), (A(RB).packed, 1, 10),
                                      (A(RC).packed, 2, 100)], float("inf"))
    e = mc.trie.lookup(A(HOST_B).packed)[1]
    picks = [e.select(A(f"10.2.{i // 250}.{i % 250}").packed)[1] for i in range(1000)]
    assert picks.count(RC) == 0 and 800 < picks.count(RA) < 980
    e.down = frozenset({A(RA).packed})
    assert {e.select(A(f"10.2.0.{i}").packed)[1] for i in range(100)} == {RB}
    e.down = frozenset({A(RA).packed, A(RB).packed})
    assert {e.select(A(f"10.2.0.{i}").packed)[1] for i in range(100)} == {RC}


def test_map_request_source_eid_with_instance_id():
    """M11. RFC 8060 sec. 4.1 in RFC 9301 sec. 5.2: the Source EID of a Map-Request
    may be an LCAF Instance ID address; our SMRs in an instance send it so."""
    m = c.MapRequest(5, (A(RA),), (N("10.2.0.1/32"),), source_eid=A("10.1.0.1"),
                     smr=True, eid_iids=(9,), source_iid=9)
    got = c.decode_control(c.encode_map_request(m))
    assert got == m
    x = make_xtr(RB, f"10.1.0.0/16 {RA}\n", iid=9, map_versioning=True, map_version=10)
    x.handle_inner(pkt(HOST_B, HOST_A), 0.0)
    out = x.handle_data(lisp(pkt(HOST_A, HOST_B), map_versions=(3, 9), instance_id=9), RA, 0.0)
    (smr,) = [c.decode_control(d) for d, dst in out if dst[1] == 4342]
    assert smr.source_iid == 9 and smr.eid_iids == (9,) and smr.source_eid == A(HOST_B)


def test_an_xtr_that_asked_us_for_an_echo_is_echo_capable():
    """M5. RFC 9300 sec. 10.1: an xTR that sent us an Echo-Nonce request (N+E) does
    echo-noncing, so we may request echoes from it too (without a Map-Reply E-bit)."""
    x = make_xtr(RA, f"10.2.0.0/16 {RB}\n", echo_nonce=True)
    x.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    x.tick(0.1)
    assert x.counters["echo_requests_started"] == 0
    x.handle_data(lisp(pkt(HOST_B, HOST_A), nonce=5, echo=True), RB, 0.2)
    x.handle_inner(pkt(HOST_A, HOST_B), 0.3)  # echoes theirs
    x.tick(0.4)
    (d,) = x.handle_inner(pkt(HOST_A, HOST_B), 0.5)
    assert hdr(d).flags & c.FLAG_E and x.counters["echo_requests_started"] == 1


def test_registrar_registers_its_map_version():
    """RFC 9302 sec. 5: the ETR's Map-Register records carry the site's Map-Version
    (``corecast etr --map-version``); out-of-range versions are refused."""
    from corecast.core.register import Registrar, RegistrarConfig

    cfg = RegistrarConfig(("10.2.0.0/16",), (RA,), ("192.0.2.9", 4342), b"k", 1, map_version=77)
    (msg, _dst), = Registrar(cfg).tick(0.0)
    assert [r.map_version for r in c.decode_control(msg).records] == [77]
    with pytest.raises(ValueError):
        Registrar(RegistrarConfig(("10.2.0.0/16",), (RA,), ("192.0.2.9", 4342), b"k", 1,
                                  map_version=4096))
    with pytest.raises(ValueError):
        Xtr(Itr(RA, [], fast=False), Etr([], **OPEN_ETR), map_versioning=True, map_version=4096)


@pytest.mark.root
async def test_raw_inside_falls_back_to_a_fresh_socket_and_never_leaks():
    """packet(7): a socket that got PACKET_RX_RING delivers into the ring only, so
    when the ring cannot be mapped the recvmmsg fallback uses a fresh socket (and
    receives); a failed bind closes the socket."""
    import os
    import struct

    from corecast.aio import raw

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = fds()
    with pytest.raises(OSError):
        raw.RawInside("cc-no-such-if", lambda got: None, set(), frames=True)
    assert fds() == before

    class NoMap(raw.RawInside):
        def _ring_setup(self, total: int = 1 << 20) -> None:
            self.sock.setsockopt(raw.SOL_PACKET, raw.PACKET_VERSION, raw.TPACKET_V2)
            self.sock.setsockopt(raw.SOL_PACKET, raw.PACKET_RX_RING,
                                 struct.pack("IIII", 1 << 16, 4, 2048, 128))
            raise OSError("mmap refused")  # as a failed mmap after the ring was set

    got: list = []
    r = NoMap("lo", got.extend, set(), frames=True)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert r.ring is None
        for _ in range(100):
            tx.sendto(b"ring-fallback", ("127.0.0.1", 9))
            await asyncio.sleep(0.02)
            if any(b"ring-fallback" in f[0] for f in got):
                break
        assert any(b"ring-fallback" in f[0] for f in got)
    finally:
        tx.close()
        r.close()


def test_smrs_have_a_global_cap():
    """M8. RFC 9301 sec. 6.1 "the SMR sender ... MUST rate limit": besides the per-RLOC
    limit a token bucket caps all SMRs (stale packets from many ITRs at once)."""
    locs = ",".join(f"192.0.2.{10 + i}" for i in range(20))
    x = make_xtr(RB, f"10.1.0.0/16 {locs}\n", map_versioning=True, map_version=10,
                 smr_per_second=3.0)
    for i in range(20):  # we send to all of them
        x._tx[A(f"192.0.2.{10 + i}").packed] = 0.0
    stale = lisp(pkt(HOST_A, HOST_B), map_versions=(3, 9))
    smrs = [d for i in range(20) for d in x.handle_data(stale, f"192.0.2.{10 + i}", 1.0)
            if d[1][1] == 4342]
    assert len(smrs) == 3 and x.counters["smr_rate_limited"] == 17


def test_instance_zero_sets_no_i_bit():
    """RFC 9300 sec. 5.3, 8: no I-bit means instance 0; Itr(instance_id=0) and the Xtr
    agree on sending none."""
    itr = Itr(RA, [], MapCache(), instance_id=0, fast=False)
    itr.mapcache.load_static(f"10.2.0.0/16 {RB}\n")
    (d,) = itr.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    assert not hdr(d).flags & c.FLAG_I
    x = Xtr(itr, Etr([], **OPEN_ETR))
    (d,) = x.handle_inner(pkt(HOST_A, HOST_B), 0.0)
    assert not hdr(d).flags & c.FLAG_I


async def test_xtr_node_sends_source_version_map_requests_from_its_control_socket():
    """RFC 9302 sec. 7.2 over real sockets: a packet whose Source Map-Version is newer
    than our mapping makes the xTR send a Map-Request (ECM) to the map-resolver from
    its control socket (where the Map-Reply comes back), and still delivers it."""
    from corecast.aio.nodes import XtrNode

    base = random.randrange(200, 250)
    rloc = f"127.{base}.0.1"
    res = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    res.bind((f"127.{base}.0.9", 0))
    res.setblocking(False)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind((f"127.{base}.3.1", 0))
    client.setblocking(False)
    mc = MapCache()
    mc.add(A("10.1.0.0").packed, 16, [(A(RA).packed, 1, 1)], float("inf"), map_version=3)
    itr = Itr(rloc, [], mc, map_resolver=res.getsockname(), control_port=0, fast=False)
    x = Xtr(itr, Etr([], **OPEN_ETR), map_versioning=True, map_version=10)
    node = XtrNode(x, (f"127.{base}.0.2", 0), 0)
    await node.start()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        inner = c.build_ip(A(HOST_A).packed, A(client.getsockname()[0]).packed, 17,
                           c.build_udp(1000, client.getsockname()[1], b"v4"))
        data_port = node.t_data.get_extra_info("sockname")[1]
        tx.sendto(lisp(inner, map_versions=(4, 10)), (rloc, data_port))
        got = delivered = None
        for _ in range(250):
            await asyncio.sleep(0.02)
            try:
                got = got or res.recvfrom(2048)
            except BlockingIOError:
                pass
            try:
                delivered = delivered or client.recv(100)
            except BlockingIOError:
                pass
            if got and delivered:
                break
        assert delivered == b"v4"
        data, src = got
        assert src == (rloc, itr.control_port)
        m = c.decode_control(c.ecm_unwrap(c.decode_control(data))[3])
        assert m.eid_prefixes == (N(f"{HOST_A}/32"),)
    finally:
        for s in (tx, res, client):
            s.close()
        await node.close()
