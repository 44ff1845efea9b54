"""The ITR's batch data path (``ItrTable.batch`` in deliverykit/csrc/corecast.c and its
twin ``corecast._fast.PyItrTable.batch``): same datagrams, same state and the same
counters as Algorithm 1 run packet by packet (paper section 3.4; RFC 9300 section 5)."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given, settings, strategies as st

from corecast import _fast
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.wire import codec as c
from deliverykit.fastpath import speedups

C = pytest.mark.skipif(speedups is None or not hasattr(speedups, "cc_itr_table"),
                       reason="deliverykit._speedups not built (setup.py build_ext --inplace)")
A = ipaddress.ip_address
CC = [parse_prefix("10.255.0.0/16"), parse_prefix("fd00:cc::/32")]
CHANS = [A("10.255.0.1").packed, A("10.255.0.2").packed, A("fd00:cc::1").packed]
SRC4, SRC6 = A("10.0.0.1").packed, A("fd00::1").packed
STATIC = """
10.1.0.0/16 192.0.2.1
10.2.0.0/16 192.0.2.2
10.3.0.0/24 192.0.2.3 5
10.4.0.0/16 192.0.2.4,192.0.2.5
10.5.0.0/16 -
fd00:2::/48 192.0.2.2
"""
EIDS = ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.3.0.1", "10.4.0.1", "10.5.0.1", "10.9.0.1",
        "fd00:2::1", "fd00:3::1"]
DATA = [b"chunk-a", b"chunk-b", b"chunk-c" * 20]
OWN = A("192.0.2.100").packed


def make(fast, **kw) -> Itr:
    mc = MapCache()
    mc.load_static(STATIC)
    return Itr("192.0.2.100", CC, mc, fast=fast, **kw)


def _ip(src: bytes, dst: bytes, proto: int, body: bytes) -> bytes:
    return c.build_ip(src, dst, proto, body)


@st.composite
def packets(draw):
    """A mix of payload PDUs, header PDUs (good, stale and unknown hashes), plain
    packets, truncated packets and things that are not IP at all."""
    kind = draw(st.sampled_from(["payload", "payload", "bad-payload", "header", "header",
                                 "header", "header", "plain", "junk"]))
    chan = draw(st.sampled_from(CHANS))
    src = SRC4 if len(chan) == 4 else SRC6
    udp = draw(st.booleans())
    data = draw(st.sampled_from(DATA))
    seq = draw(st.integers(0, 3))
    hid = draw(st.sampled_from([1, 1, 2]))  # SHA-1 mostly, SHA-256 too
    if kind == "payload":
        pdu = c.encode_cc_payload(seq, data, hid)
    elif kind == "bad-payload":
        pdu = c.encode_cc_payload(seq, data, hid, c.digest(hid, b"not the payload"))
    elif kind == "header":
        pdu = c.encode_cc_header(seq, c.digest(hid, data), A(draw(st.sampled_from(EIDS))).packed,
                                 draw(st.sampled_from([5000, 5001])), hid)
    elif kind == "plain":
        dst = A(draw(st.sampled_from(EIDS))).packed
        return _ip(SRC4 if len(dst) == 4 else SRC6, dst, 17, c.build_udp(1, 2, data))
    else:
        return draw(st.binary(max_size=60))
    pkt = _ip(src, chan, 17 if udp else 253, c.build_udp(54341, 54341, pdu) if udp else pdu)
    if draw(st.integers(0, 9)) == 0:
        pkt = pkt[: draw(st.integers(0, len(pkt)))]
    return pkt


def ether(pkt: bytes) -> bytes:
    et = b"\x86\xdd" if pkt[:1] and pkt[0] >> 4 == 6 else b"\x08\x00"
    return b"\x02" * 6 + b"\x04" * 6 + et + pkt


def state(itr: Itr) -> dict:
    return {k: (b.hash, b.seq, b.packet, dict(b.served or {})) for k, b in itr.buffers.items()}


@C
@settings(max_examples=250, deadline=None)
@given(st.lists(packets(), max_size=40), st.lists(st.integers(1, 8), min_size=1, max_size=8),
       st.sampled_from([0, 2]), st.floats(0, 10))
def test_batch_c_twin_and_per_packet_agree(pkts, cuts, extra, now):
    """C batch == pure batch == handle_inner one packet at a time: outputs, counters,
    payloadBuffer/servedRLOC state, map-cache counters."""
    a, b, ref = (make(f, extra_payload_every=extra) for f in (True, False, False))
    ref_out = []
    for p in pkts:
        ref_out += ref.handle_inner(p, now)
    for itr in (a, b):
        out, i, k = [], 0, 0
        while i < len(pkts):  # batches of varying size
            n = cuts[k % len(cuts)]
            out += itr.handle_batch(pkts[i:i + n], now)
            i, k = i + n, k + 1
        assert out == ref_out
        assert itr.counters == ref.counters
        assert state(itr) == state(ref)
        assert itr.mapcache.counters == ref.mapcache.counters


@C
@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(packets(), st.binary(max_size=40)), max_size=30))
def test_batch_on_ethernet_frames(pkts):
    """l2=14: AF_PACKET frames; non-IP skipped, frames to the ITR itself or to
    multicast counted and skipped, the rest as inner packets."""
    frames = []
    for p in pkts:
        frames.append((ether(p), ("to-s", 2048)) if len(p) > 20 else (p, ("to-s", 0)))
    frames.append((ether(_ip(SRC4, OWN, 17, c.build_udp(1, 4342, b"x"))), ("to-s", 2048)))
    frames.append((ether(_ip(SRC4, A("224.0.0.5").packed, 89, b"ospf")), ("to-s", 2048)))
    a, b, ref = make(True), make(False), make(False)
    ref_out = []
    skipped = 0  # to the ITR itself or multicast (a generated packet may be one too)
    for f, _ in frames:
        if len(f) >= 34 and f[12:14] == b"\x08\x00":
            if f[30:34] != OWN and f[30] < 224:
                ref_out += ref.handle_inner(_fast.l2_inner(f), 1.0)
            else:
                skipped += 1
        elif len(f) >= 54 and f[12:14] == b"\x86\xdd":
            if f[38] != 0xFF and not (f[38] == 0xFE and f[39] & 0xC0 == 0x80):
                ref_out += ref.handle_inner(_fast.l2_inner(f), 1.0)
            else:
                skipped += 1
    for itr in (a, b):
        assert itr.handle_batch(frames, 1.0, l2=14) == ref_out
        assert itr.counters == ref.counters
        assert itr.frame_counters["to_self"] == skipped >= 2
    assert a.frame_counters == b.frame_counters


def _copy_of(itr: Itr, make_table) -> object:
    """A new table (C or twin) holding what ``itr``'s table holds, through the
    table's methods only: the map-cache attaches it, channels are added and given
    their payload, the servedRLOC entries copied into the table's own dicts."""
    t = make_table()
    itr.mapcache.attach(t)
    for ch, b in itr.buffers.items():
        t.add_channel(ch)
        if b.served is not None:
            t.set_payload(ch, b.hash, b.seq, b.packet)
            t.channel(ch)[3].update(b.served)
    return t


def _table_state(t) -> tuple:
    return t.entries(), {ch: t.channel(ch)[:3] + (dict(t.channel(ch)[3] or {}),)
                         for ch in t.channels()}


@C
@settings(max_examples=200, deadline=None)
@given(st.lists(packets(), max_size=30), st.integers(0, 30))
def test_table_batch_c_equals_twin_directly(pkts, start):
    """The two tables holding identical copies of one ITR's state, from any start."""
    warm = make(False)
    for p in pkts[: len(pkts) // 2]:
        warm.handle_inner(p, 0.0)
    mc = warm.mapcache
    # one mapping with its own header (map-versioning, RFC 9302): it replaces the default
    mc.update(mc.trie.lookup(A("10.2.0.1").packed)[1], lisp_header=c.encode_lisp_data(
        c.make_lisp_data(map_versions=(3, 9))))
    results = []
    for make_table in (speedups.cc_itr_table, _fast.py_cc_itr_table):
        t = _copy_of(warm, make_table)
        ctx = (warm._ranges, warm.lisp_header, 4341, 0, 65536, (OWN,),
               {A("192.0.2.1").packed: b"\x80" + b"\x00" * 7}, c.digest, False, True)
        out, ctr = [], [0] * 11
        i = t.batch(pkts, start, 0, ctx, 0.0, out, ctr)
        results.append((i, out, ctr, _table_state(t)))
    assert results[0] == results[1]


@C
def test_table_batch_rejects_bad_arguments():
    itr = make(True)
    ctx = (itr._ranges, b"\x00" * 8, 4341, 0, 10, (), {}, c.digest, False, True)
    for make_table in (speedups.cc_itr_table, _fast.py_cc_itr_table):
        t = make_table()
        with pytest.raises(ValueError):
            t.batch([], 0, 3, ctx, 0.0, [], [0] * 11)
        with pytest.raises(ValueError):
            t.batch([], 0, 0, ctx, 0.0, [], [0] * 3)
        with pytest.raises(ValueError):
            t.set_entry(b"\x01\x02\x03", 8, (), (), 1.0, None)
        with pytest.raises(ValueError):
            t.remove_entry(b"\x01\x02\x03\x04", 33)
        with pytest.raises(TypeError):
            t.set_entry(b"\x01\x02\x03\x04", 8, (b"\x01\x01\x01\x01",), (), 1.0, None)
        with pytest.raises(KeyError):
            t.set_payload(b"\x0a\xff\x00\x09", b"h", 1, b"p")
    t = speedups.cc_itr_table()
    with pytest.raises(TypeError):
        t.batch(["text"], 0, 0, ctx, 0.0, [], [0] * 11)
    with pytest.raises(TypeError):
        t.batch([], 0, 0, ctx[:5], 0.0, [], [0] * 11)


@pytest.mark.parametrize("fast", [False] + ([True] if speedups is not None else []))
def test_table_entries_follow_add_update_and_remove(fast):
    """The map-cache is the only writer of the table's entries: every add, update
    (an own header, a locator marked down) and removal (explicit, a TTL-0 record, an
    expired entry) reaches the table; the table masks host bits as the trie does."""
    itr = make(fast)
    mc, t = itr.mapcache, itr.path.table
    rows = {(net, plen): tuple(rest) for net, plen, *rest in t.entries()}
    assert len(rows) == 6 and rows[(A("10.4.0.0").packed, 16)][:2] == (
        (A("192.0.2.4").packed, A("192.0.2.5").packed), ("192.0.2.4", "192.0.2.5"))
    assert rows[(A("10.5.0.0").packed, 16)][:2] == ((), ())  # negative
    e = mc.add(A("10.6.1.1").packed, 16, [(A("192.0.2.6").packed, 1, 100)], 50.0)
    assert (A("10.6.0.0").packed, 16, (A("192.0.2.6").packed,), ("192.0.2.6",), 50.0, None,
            0) in t.entries()
    mc.update(e, lisp_header=b"\x88" + bytes(7))
    assert [r[5] for r in t.entries() if r[0] == A("10.6.0.0").packed] == [b"\x88" + bytes(7)]
    assert mc.remove(A("10.6.0.0").packed, 16) and len(t) == 6
    assert mc.lookup(A("10.3.0.1").packed, 10.0) is None  # expired (5 s TTL): removed
    assert len(t) == 5 == len(mc.trie)
    assert mc.trie.get(A("10.3.0.0").packed, 24) is None
    assert all(r[0] != A("10.3.0.0").packed for r in t.entries())


@C
@pytest.mark.parametrize("fn", ["C", "pure"])
def test_cc_blast_sends_items_in_order_cycling(fn):
    """The benchmark sender: exactly ``count`` datagrams, the items in order,
    wrapping around (C and twin send the same sequence)."""
    blast = speedups.cc_blast if fn == "C" else _fast.py_cc_blast
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(5)
        port = rx.getsockname()[1]
        items = [(bytes([i]) * (i + 1), ("127.0.0.1", port)) for i in range(5)]
        assert blast(tx, items, 12, 30.0) == 12
        got = [rx.recv(100) for _ in range(12)]
        assert got == [items[i % 5][0] for i in range(12)]
        assert blast(tx, [], 5, 1.0) == 0
        with pytest.raises((TypeError, ValueError)):
            blast(tx, [(b"x", ("not-an-address", 1))], 1, 1.0)
    finally:
        rx.close()
        tx.close()


@st.composite
def rings(draw):
    """A fake TPACKET_V2 ring: slots owned by the kernel or by user space, some frames
    cut short (snaplen < len) or pointing past their slot."""
    import struct

    fs, nr = draw(st.sampled_from([(64, 4), (128, 6), (256, 3)]))
    ring = bytearray(fs * nr)
    for i in range(nr):
        if not draw(st.booleans()):
            continue  # kernel-owned (status 0)
        mac = draw(st.sampled_from([32, 48, 66]))
        data = draw(st.binary(max_size=fs))
        snap = len(data)
        tp_len = snap + draw(st.sampled_from([0, 0, 0, 5]))
        o = i * fs
        struct.pack_into("=IIIH", ring, o, draw(st.sampled_from([1, 1, 3])), tp_len, snap, mac)
        room = max(0, fs - mac)
        ring[o + mac:o + mac + min(snap, room)] = data[:room]
    return ring, fs, nr


@C
@settings(max_examples=300, deadline=None)
@given(rings(), st.integers(0, 5), st.integers(0, 8))
def test_cc_ring_read_c_equals_twin(r, start, most):
    """packet(7) TPACKET_V2 RX ring reader: same frames, next slot, truncated count and
    the same slots given back to the kernel."""
    ring, fs, nr = r
    start %= nr
    a, b = bytearray(ring), bytearray(ring)
    got_c = speedups.cc_ring_read(a, fs, nr, start, most)
    got_p = _fast.py_cc_ring_read(b, fs, nr, start, most)
    assert got_c == got_p and a == b
    with pytest.raises(ValueError):
        speedups.cc_ring_read(a, fs, nr + 1, 0, 1)
    with pytest.raises(ValueError):
        _fast.py_cc_ring_read(b, fs, nr + 1, 0, 1)


# ------------------------------------------------------------ twin without C
# (these run whether or not the extension is built)


@settings(max_examples=150, deadline=None)
@given(st.lists(packets(), max_size=40), st.lists(st.integers(1, 8), min_size=1, max_size=8),
       st.sampled_from([0, 2]), st.floats(0, 10))
def test_batch_twin_and_per_packet_agree(pkts, cuts, extra, now):
    """The pure twin batch == handle_inner one packet at a time (paper sec. 3.4,
    RFC 9300 sec. 5): outputs, counters, payloadBuffer/servedRLOC state."""
    b, ref = make(False, extra_payload_every=extra), make(False, extra_payload_every=extra)
    ref_out = []
    for p in pkts:
        ref_out += ref.handle_inner(p, now)
    out, i, k = [], 0, 0
    while i < len(pkts):
        n = cuts[k % len(cuts)]
        out += b.handle_batch(pkts[i:i + n], now)
        i, k = i + n, k + 1
    assert out == ref_out and b.counters == ref.counters and state(b) == state(ref)
    assert b.mapcache.counters == ref.mapcache.counters


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(packets(), st.binary(max_size=40)), max_size=30))
def test_batch_twin_on_ethernet_frames(pkts):
    """l2=14 with the twin alone: the same as handle_inner on the IP part."""
    frames = [(ether(p), ("to-s", 2048)) for p in pkts if len(p) > 20]
    ref, b = make(False), make(False)
    ref_out = []
    for f, _ in frames:
        if f[12:14] == b"\x08\x00":
            if len(f) >= 34 and f[30:34] != OWN and f[30] < 224:
                ref_out += ref.handle_inner(_fast.l2_inner(f), 1.0)
        elif len(f) >= 54 and f[38] != 0xFF and not (f[38] == 0xFE and f[39] & 0xC0 == 0x80):
            ref_out += ref.handle_inner(_fast.l2_inner(f), 1.0)
    assert b.handle_batch(frames, 1.0, l2=14) == ref_out and b.counters == ref.counters


def _tables():
    tables = [("pure", _fast.py_cc_itr_table)]
    if speedups is not None and hasattr(speedups, "cc_itr_table"):
        tables.append(("C", speedups.cc_itr_table))
    return tables


@pytest.mark.parametrize("bad", ["text", memoryview(b"\x45" + b"\x00" * 30), (), ("text", 1),
                                 bytearray(b"\x45" + b"\x00" * 30)])
def test_table_batch_edge_frames_same_in_c_and_twin(bad):
    """C and twin agree on what a frame may be (bytes or (bytes, addr)): anything
    else is a TypeError, raised before any counter or output changes, after the
    good frames before it were handled."""
    itr = make(False)
    good = _ip(SRC4, A("10.1.0.1").packed, 17, c.build_udp(1, 2, b"x"))
    results = []
    for _name, make_table in _tables():
        t = make_table()
        itr.mapcache.attach(t)
        ctx = (itr._ranges, b"\x00" * 8, 4341, 0, 10, (), {}, c.digest, False, True)
        out, ctr = [], [0] * 11
        with pytest.raises(TypeError):
            t.batch([good, bad, good], 0, 0, ctx, 0.0, out, ctr)
        results.append((out, ctr))
    assert all(r == results[0] for r in results)
    assert len(results[0][0]) == 1 and results[0][1] == [0] * 11


def test_digest_that_mutates_its_inputs_is_safe():
    """A digest callable that empties the frames list, removes the mapping in use,
    installs 300 more (the C table's arrays move) and adds 100 channels while the
    batch runs: no crash (the C loop holds its own references and re-reads the table
    after digest), and C and twin give the same results and state."""
    chan = CHANS[0]
    pay = _ip(SRC4, chan, 253, c.encode_cc_payload(1, b"data", 1))
    hdr_pkt = _ip(SRC4, chan, 253, c.encode_cc_header(1, c.digest(1, b"data"), A("10.1.0.1").packed,
                                                      5000, 1))
    results = []
    for _name, make_table in _tables():
        mc = MapCache()
        mc.load_static(STATIC)
        w = Itr("192.0.2.100", CC, mc, fast=False)
        w.handle_inner(pay, 0.0)
        t = _copy_of(w, make_table)
        frames = [hdr_pkt, pay, hdr_pkt, pay, hdr_pkt]

        def evil(hid, data, frames=frames, mc=mc, t=t):
            frames.clear()
            mc.remove(A("10.1.0.0").packed, 16)
            for k in range(300):
                mc.add(bytes([10, 7, k // 256, k % 256]), 32, [(A("192.0.2.7").packed, 1, 1)],
                       1e9)
            for k in range(100):
                t.add_channel(bytes([10, 255, 1, k]))
            return c.digest(hid, data)

        ctx = (w._ranges, w.lisp_header, 4341, 0, 65536, (OWN,), {}, evil, False, True)
        out, ctr = [], [0] * 11
        i = t.batch(frames, 0, 0, ctx, 0.0, out, ctr)
        results.append((i, out, ctr, _table_state(t)))
    assert all(r == results[0] for r in results)
    assert results[0][0] == 2 and results[0][2][9] == 1  # stopped at the miss it caused


def test_cc_ring_read_rejects_overflowing_sizes():
    """frame_size * frame_nr that overflows is a ValueError in C and twin (never an
    out-of-bounds read)."""
    import sys

    ring = bytearray(4096)
    fns = [_fast.py_cc_ring_read]
    if speedups is not None and hasattr(speedups, "cc_ring_read"):
        fns.append(speedups.cc_ring_read)
    for fn in fns:
        with pytest.raises(ValueError):
            fn(ring, 1 << 32, sys.maxsize // (1 << 31), 0, 1)


@pytest.mark.parametrize("fn", [name for name, _f in _tables()])
def test_ethernet_padding_is_trimmed(fn):
    """AF_PACKET frames shorter than 60 bytes come padded (IEEE 802.3 minimum frame):
    the IP total length (IPv4) / payload length (IPv6) says where the packet ends,
    so the encapsulated inner packet (RFC 9300 sec. 5.1) carries no padding, on the
    fast path and the slow path alike."""
    itr = make(fn == "C")
    small = _ip(SRC4, A("10.1.0.1").packed, 17, c.build_udp(1, 2, b"x"))  # 29 bytes
    miss = _ip(SRC4, A("10.9.0.1").packed, 17, c.build_udp(1, 2, b"y"))  # no mapping: slow
    small6 = _ip(SRC6, A("fd00:2::1").packed, 17, c.build_udp(1, 2, b"z"))
    frames = [ether(small) + b"\x00" * 17, ether(miss) + b"\xee" * 17, ether(small6) + b"\x00" * 9]
    out = itr.handle_batch(frames, 0.0, l2=14)
    assert [d[0][8:] for d in out] == [small, small6]
    assert [bytes(p) for p in itr.mapcache.pending[A("10.9.0.1").packed].packets] == [miss]
    assert _fast.l2_inner(ether(small) + b"\x00" * 17) == small
