"""Longest-prefix trie, map-cache, map-server and ETR registration."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import struct

from hypothesis import given, settings, strategies as st

from corecast.core.mapcache import MapCache
from corecast.core.mapserver import MapServer, Site
from corecast.core.maptrie import PrefixTrie, parse_prefix
from corecast.core.register import Registrar, RegistrarConfig
from corecast.wire import codec as c

N = ipaddress.ip_network
A = ipaddress.ip_address


# ------------------------------------------------------------------ trie


@st.composite
def prefixes_and_probe(draw):
    v6 = draw(st.booleans())
    bits = 128 if v6 else 32
    nets = draw(st.lists(st.tuples(st.integers(0, 2**bits - 1), st.integers(0, bits)),
                         max_size=30))
    probes = draw(st.lists(st.integers(0, 2**bits - 1), min_size=1, max_size=10))
    # probes near stored prefixes exercise deep matches
    probes += [n for n, _ in nets[:5]]
    return bits, nets, probes


@settings(max_examples=200, deadline=None)
@given(prefixes_and_probe())
def test_trie_matches_linear_longest_prefix(args):
    bits, nets, probes = args
    cls = ipaddress.IPv6Network if bits == 128 else ipaddress.IPv4Network
    trie: PrefixTrie[str] = PrefixTrie()
    table = {}
    for i, (n, plen) in enumerate(nets):
        net = cls((n, plen), strict=False)
        trie.insert(net.network_address.packed, plen, str(i))
        table[net] = str(i)
    assert len(trie) == len(table)
    for p in probes:
        a = ipaddress.ip_address(p) if bits == 32 else ipaddress.IPv6Address(p)
        best = max((net for net in table if a in net), key=lambda n: n.prefixlen, default=None)
        got = trie.lookup(a.packed)
        if best is None:
            assert got is None
        else:
            assert got == (best.prefixlen, table[best])
    # removing everything empties the trie
    for net in list(table):
        assert trie.remove(net.network_address.packed, net.prefixlen)
    assert len(trie) == 0 and trie.lookup(b"\x00" * (bits // 8)) is None


def test_trie_families_are_separate_and_items_roundtrip():
    t: PrefixTrie[int] = PrefixTrie()
    t.insert(*parse_prefix("0.0.0.0/0"), 1)
    t.insert(*parse_prefix("2001:db8::/32"), 2)
    assert t.lookup(A("10.0.0.1").packed) == (0, 1)
    assert t.lookup(A("2001:db8::1").packed) == (32, 2)
    assert t.lookup(A("2001:db9::1").packed) is None
    assert sorted((str(ipaddress.ip_address(a)), p, v) for a, p, v in t.items()) == [
        ("0.0.0.0", 0, 1), ("2001:db8::", 32, 2)]
    assert not t.remove(*parse_prefix("10.0.0.0/8"))


# ------------------------------------------------------------------ map-cache


def test_mapcache_ttl_negative_and_static_file():
    mc = MapCache()
    mc.load_static("""
        # prefix rlocs ttl
        10.1.0.0/16 192.0.2.1
        10.1.2.0/24 192.0.2.2,192.0.2.3 60
        10.9.0.0/16 -
        2001:db8::/32 2001:db8:ffff::1
    """, now=0)
    e = mc.lookup(A("10.1.2.3").packed, 1.0)
    assert e is not None and e.plen == 24 and set(e.rloc_strs) == {"192.0.2.2", "192.0.2.3"}
    assert mc.lookup(A("10.1.2.3").packed, 61.0).plen == 16  # /24 expired -> the /16
    assert mc.counters["expired"] == 1
    assert mc.lookup(A("10.9.0.1").packed, 0).negative
    assert mc.lookup(A("2001:db8::5").packed, 0).rloc_strs == ("2001:db8:ffff::1",)
    assert mc.lookup(A("11.0.0.1").packed, 0) is None


def test_mapcache_priority_255_unusable_and_weights():
    mc = MapCache()
    e = mc.add(*parse_prefix("10.0.0.0/8"), [(A("192.0.2.1").packed, 255, 100),
                                              (A("192.0.2.2").packed, 2, 0),
                                              (A("192.0.2.3").packed, 1, 50),
                                              (A("192.0.2.4").packed, 1, 50)], 100)
    # priority 255 is never kept; the priority-2 backup is kept for failover (RFC 9301
    # sec. 5.4) but carries no traffic while a priority-1 locator is up
    assert e.rloc_strs == ("192.0.2.3", "192.0.2.4", "192.0.2.2")
    picks = {e.select(A(f"10.0.{i}.1").packed)[1] for i in range(50)}
    assert picks == {"192.0.2.3", "192.0.2.4"}


def test_mapcache_pending_is_bounded_and_counted():
    mc = MapCache(pending_per_eid=3, max_pending_eids=2, max_retries=2, holddown=30)
    a, b, d = A("10.0.0.1").packed, A("10.0.0.2").packed, A("10.0.0.3").packed
    assert all(mc.enqueue(a, b"p%d" % i, 0) for i in range(3))
    assert not mc.enqueue(a, b"x", 0)
    assert mc.enqueue(b, b"y", 0)
    assert not mc.enqueue(d, b"z", 0)
    assert mc.counters["drop_queue_full"] == 1 and mc.counters["drop_too_many_pending"] == 1
    # rate limit 1/s, then give up after max_retries and hold down
    assert mc.should_request(a, 0.0) and not mc.should_request(a, 0.5)
    assert mc.should_request(a, 1.0) and mc.should_request(a, 2.0)
    assert not mc.should_request(a, 3.0)
    assert mc.counters["drop_gave_up"] == 3
    assert not mc.enqueue(a, b"late", 4.0)
    # resolution releases the queue
    rec = c.EidRecord(N("10.0.0.0/24"), (c.LocatorRecord(A("192.0.2.9")),), 1)
    events, released = mc.install_records((rec,), 5.0)
    assert events[0].rlocs == ("192.0.2.9",) and events[0].ttl == 60.0
    assert (b, [b"y"]) in released


# ------------------------------------------------------------------ map-server


def _ms():
    return MapServer([Site("as1", {0: b"psk-1", 7: b"psk-7"}, (N("10.1.0.0/16"),)),
                      Site("as2", {0: b"psk-2"}, (N("2001:db8:2::/48"),))])


def test_register_notify_request_reply_roundtrip():
    ms = _ms()
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), ("192.0.2.1",), ("192.0.2.100", 4342),
                                    b"psk-1"))
    (msg, dst), = reg.tick(0.0)
    assert dst == ("192.0.2.100", 4342)
    (notify, ndst), = ms.handle(msg, ("192.0.2.1", 61000), 0.0)
    assert ndst == ("192.0.2.1", 4342)  # RFC 9301 8.2: to port 4342, not the source port
    assert reg.handle_control(notify, 0.1) and reg.registered
    assert ms.counters["accepted"] == 1 and ms.counters["notifies"] == 1
    # a Map-Request (inside an ECM) resolves from the registration
    mr = c.MapRequest(77, (A("192.0.2.50"),), (N("10.1.3.4/32"),))
    ecm = c.ecm_wrap(c.encode_map_request(mr), A("192.0.2.50").packed, A("10.1.3.4").packed, 40000)
    (rep, rdst), = ms.handle(ecm, ("192.0.2.50", 40000), 1.0)
    assert rdst == ("192.0.2.50", 40000)
    r = c.decode_control(rep)
    assert r.nonce == 77 and r.records[0].prefix == N("10.1.0.0/16")
    assert [str(x.locator) for x in r.records[0].locators] == ["192.0.2.1"]
    assert not r.records[0].authoritative  # proxy reply
    # unknown EID: negative reply, natively forward, least specific hole
    (rep, _), = ms.handle(c.encode_map_request(c.MapRequest(78, (A("192.0.2.50"),),
                                                            (N("10.2.0.1/32"),))),
                          ("192.0.2.50", 40001), 1.0)
    neg = c.decode_control(rep).records[0]
    assert neg.locators == () and neg.action == 1 and neg.ttl == 15
    assert neg.prefix.overlaps(N("10.1.0.0/16")) is False and N("10.2.0.1/32").subnet_of(neg.prefix)
    # registration expires (T-bit: record TTL 3 minutes)
    (rep, _), = ms.handle(c.encode_map_request(mr), ("192.0.2.50", 40000), 181.0)
    assert c.decode_control(rep).records[0].locators == ()


def test_bad_hmac_wrong_site_replay_and_probe_are_refused_and_counted():
    ms = _ms()
    rec = c.EidRecord(N("10.1.0.0/16"), (c.LocatorRecord(A("192.0.2.1")),), 3)
    good = c.MapRegister(5, (rec,), 0, 2, want_map_notify=True)
    bad = bytearray(c.sign(good, b"psk-1"))
    bad[20] ^= 0xFF  # flip a bit of the MAC
    assert ms.handle(bytes(bad), ("192.0.2.1", 1), 0) == []
    assert ms.handle(c.sign(good, b"psk-2"), ("192.0.2.1", 1), 0) == []  # another site's key
    assert ms.counters["refused_auth"] == 2
    other = c.MapRegister(5, (c.EidRecord(N("10.9.0.0/16"), (), 3),), 0, 2)
    assert ms.handle(c.sign(other, b"psk-1"), ("192.0.2.1", 1), 0) == []
    assert ms.counters["refused_no_site"] == 1
    none_alg = c.MapRegister(5, (rec,), 0, 0)
    assert ms.handle(c.encode_map_register(none_alg), ("192.0.2.1", 1), 0) == []
    assert ms.counters["refused_algorithm"] == 1
    assert ms.handle(c.sign(good, b"psk-1"), ("192.0.2.1", 1), 0) != []
    assert ms.handle(c.sign(good, b"psk-1"), ("192.0.2.1", 1), 0) == []  # same nonce again
    assert ms.counters["refused_replay"] == 1
    # with an xTR-ID the nonce must increase
    x = c.MapRegister(10, (rec,), 7, 1, xtr_id=b"x" * 16, site_id=b"s" * 8)
    assert ms.handle(c.sign(x, b"psk-7"), ("192.0.2.1", 1), 0) == []  # no M-bit: no notify
    assert ms.counters["accepted"] == 2
    y = c.MapRegister(9, (rec,), 7, 1, xtr_id=b"x" * 16, site_id=b"s" * 8)
    ms.handle(c.sign(y, b"psk-7"), ("192.0.2.1", 1), 0)
    assert ms.counters["refused_replay"] == 2
    probe = c.MapRequest(1, (A("192.0.2.1"),), (N("10.1.0.1/32"),), probe=True)
    assert ms.handle(c.encode_map_request(probe), ("192.0.2.1", 1), 0) == []
    assert ms.counters["dropped_probe"] == 1
    for junk in (b"", b"\x30", b"\x30" + b"\x00" * 30, b"\xf0abc"):
        assert ms.handle(junk, ("192.0.2.1", 1), 0) == []


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_mapserver_never_raises(b):
    ms = _ms()
    ms.handle(b, ("192.0.2.1", 1), 0.0)
    ms.handle(b"\x80\x00\x00\x00" + b, ("192.0.2.1", 1), 0.0)  # as an ECM payload


def _independent_register(nonce: int, key16: int | None, key_id: int, alg: int, psk: bytes,
                          digestmod, auth_len: int, xtr: bytes | None) -> bytes:
    """Map-Register bytes assembled straight from the RFC 9301 figure (not our codec)."""
    flags = 0x08000000 | 0x00000100  # P-bit, M-bit
    if xtr is not None:
        flags |= 0x02000000
    head = struct.pack("!IQ", (3 << 28) | flags | 1, nonce)
    keyfield = struct.pack("!H", key16) if key16 is not None else struct.pack("!BB", key_id, alg)
    record = struct.pack("!IBBHHH", 3, 1, 24, 0, 0, 1) + bytes([10, 1, 7, 0])
    record += struct.pack("!BBBBHH", 1, 100, 255, 0, 0x0005, 1) + bytes([192, 0, 2, 7])
    tail = (xtr + b"\x01" * 8) if xtr is not None else b""
    zero = head + keyfield + struct.pack("!H", auth_len) + b"\x00" * auth_len + record + tail
    mac = hmac.new(psk, zero, digestmod).digest()[:auth_len]
    return head + keyfield + struct.pack("!H", auth_len) + mac + record + tail


def test_accepts_registrations_built_by_other_implementations():
    """RFC 9301 (Key ID + Algorithm ID, truncated MAC, xTR-ID) and RFC 6833 era senders
    (16-bit Key ID, some sending the full 20-byte SHA-1 HMAC) are accepted."""
    ms = _ms()
    cases = [
        _independent_register(1, None, 7, 2, b"psk-7", hashlib.sha256, 16, b"\x42" * 16),
        _independent_register(2, 1, 0, 1, b"psk-1", hashlib.sha1, 20, None),
        _independent_register(3, 1, 0, 1, b"psk-1", hashlib.sha1, 12, None),
        _independent_register(4, 2, 0, 2, b"psk-1", hashlib.sha256, 32, None),
    ]
    for i, b in enumerate(cases):
        out = ms.handle(b, ("192.0.2.7", 50000 + i), float(i))
        assert len(out) == 1, ms.counters
        notify = out[0][0]
        assert notify[0] >> 4 == 4 and notify[4:12] == b[4:12]  # same nonce
        # the Map-Notify verifies with the same independent computation
        alen = struct.unpack_from("!H", notify, 14)[0]
        assert alen == struct.unpack_from("!H", b, 14)[0]
        zeroed = notify[:16] + b"\x00" * alen + notify[16 + alen:]
        dm = hashlib.sha256 if notify[13] == 2 else hashlib.sha1
        psk = b"psk-7" if notify[12] == 7 else b"psk-1"
        assert hmac.new(psk, zeroed, dm).digest()[:alen] == notify[16:16 + alen]
    assert ms.counters["accepted"] == 4
    assert ms.registrations(5.0)[0]["rlocs"] == ["192.0.2.7"]


def test_registrar_retransmits_with_backoff_then_refreshes():
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), ("192.0.2.1",), ("192.0.2.100", 4342),
                                    b"psk-1", interval=60.0))
    sent = []
    t = 0.0
    while t < 20:
        for m, _ in reg.tick(t):
            sent.append((t, c.decode_control(m).nonce))
        t += 0.25
    times = [s[0] for s in sent]
    assert times[:4] == [0.0, 1.0, 3.0, 7.0]  # after 1 s, then doubling (RFC 9301 5.7)
    nonces = [n for _, n in sent]
    assert nonces == sorted(set(nonces))  # a new, larger nonce every time (RFC 9301 5.6)
    ms = _ms()
    (m, _), = reg.tick(100.0)
    (notify, _), = ms.handle(m, ("192.0.2.1", 1), 100.0)
    bad = bytearray(notify)
    bad[-1] ^= 1
    assert not reg.handle_control(bytes(bad), 100.0) and reg.counters["bad_notify"] == 1
    assert reg.handle_control(notify, 100.0)
    assert reg.tick(150.0) == []
    (refresh, _), = reg.tick(160.0)
    assert c.decode_control(refresh).nonce > c.decode_control(m).nonce


def test_registration_survives_a_lost_map_notify():
    """The first Map-Notify is lost: the retransmission (new nonce) is accepted by the
    map-server, which refuses exact repeats as replays, and its Map-Notify registers."""
    ms = _ms()
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), ("192.0.2.1",), ("192.0.2.100", 4342),
                                    b"psk-1"))
    (m1, _), = reg.tick(0.0)
    assert len(ms.handle(m1, ("192.0.2.1", 61000), 0.0)) == 1  # its Map-Notify is lost
    assert ms.handle(m1, ("192.0.2.1", 61000), 0.5) == []  # a replay of it is refused
    (m2, _), = reg.tick(1.0)
    (notify, _), = ms.handle(m2, ("192.0.2.1", 61000), 1.0)
    assert reg.handle_control(notify, 1.1) and reg.registered
    # a late Map-Notify for the first copy is also accepted as proof
    reg2 = Registrar(RegistrarConfig(("10.1.0.0/16",), ("192.0.2.1",), ("192.0.2.100", 4342),
                                     b"psk-1"), first_nonce=100)
    (a, _), = reg2.tick(0.0)
    (b, _), = reg2.tick(1.0)
    (late, _), = _ms().handle(a, ("192.0.2.1", 1), 1.5)
    assert reg2.handle_control(late, 1.6) and reg2.registered


def test_without_proxy_bit_the_map_request_is_forwarded_and_the_etr_answers():
    """RFC 9301 8.3: no P-bit -> the map-server forwards the ECM to the ETR, which sends an
    authoritative Map-Reply to the ITR-RLOC at the inner source port."""
    ms = _ms()
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), ("192.0.2.1",), ("192.0.2.100", 4342),
                                    b"psk-1", proxy_reply=False))
    (m, _), = reg.tick(0.0)
    (notify, _), = ms.handle(m, ("192.0.2.1", 61000), 0.0)
    assert reg.handle_control(notify, 0.0)
    mr = c.MapRequest(99, (A("192.0.2.50"),), (N("10.1.3.4/32"),))
    ecm = c.ecm_wrap(c.encode_map_request(mr), A("192.0.2.50").packed, A("10.1.3.4").packed, 40000)
    (fwd, dst), = ms.handle(ecm, ("192.0.2.50", 40000), 1.0)
    assert dst == ("192.0.2.1", 4342) and ms.counters["forwarded"] == 1
    (rep, rdst), = reg.answer(fwd, 1.0)
    assert rdst == ("192.0.2.50", 40000)
    r = c.decode_control(rep)
    assert r.nonce == 99 and r.records[0].authoritative
    assert r.records[0].prefix == N("10.1.0.0/16")
    # a plain Map-Request is wrapped into an ECM by the map-server
    (fwd2, _), = ms.handle(c.encode_map_request(mr), ("192.0.2.50", 40001), 1.0)
    (rep2, rdst2), = reg.answer(fwd2, 1.0)
    assert rdst2 == ("192.0.2.50", 40001)
    # an RLOC probe straight to the ETR gets a probe reply; EIDs not ours get nothing
    probe = c.MapRequest(7, (A("192.0.2.50"),), (N("10.1.0.1/32"),), probe=True)
    (pr, pdst), = reg.answer(c.encode_map_request(probe), 1.0, 50000)
    assert c.decode_control(pr).probe and pdst == ("192.0.2.50", 50000)
    other = c.MapRequest(8, (A("192.0.2.50"),), (N("10.2.0.1/32"),))
    assert reg.answer(c.encode_map_request(other), 1.0) == []
    assert reg.answer(b"garbage", 1.0) == []
