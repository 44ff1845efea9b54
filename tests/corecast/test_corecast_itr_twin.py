"""One ITR data path (issue 16 item 2): its state has one owner, a typed
:class:`corecast._fast.ItrPath` that the Itr reads and sets through its attributes;
the map-cache entries and the payloadBuffer live in its table (C ``ItrTable`` or the
twin ``PyItrTable``), changed only through the table's methods, whose ``batch`` loop
receives the rest laid out by ``ItrPath.ctx()``; the implementation is chosen once
(no run-time patching); and C and twin give the same bytes, destinations, counters
and state on the same packets, for every option of Algorithm 1 and both framings."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st

from corecast import _fast
from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.core.xtr import Xtr
from corecast.wire import codec as c
from deliverykit.fastpath import speedups

C = pytest.mark.skipif(speedups is None or not hasattr(speedups, "cc_itr_table"),
                       reason="deliverykit._speedups not built (setup.py build_ext --inplace)")
A = ipaddress.ip_address
CC = [parse_prefix("10.255.0.0/16"), parse_prefix("fd00:cc::/32")]
CHANS = [A("10.255.0.1").packed, A("10.255.0.2").packed, A("fd00:cc::1").packed]
OWN = A("192.0.2.100").packed
STATIC = """
10.1.0.0/16 192.0.2.1
10.2.0.0/16 192.0.2.2
10.3.0.0/24 192.0.2.3
10.4.0.0/16 192.0.2.4,192.0.2.5
10.5.0.0/16 -
fd00:2::/48 192.0.2.2
"""
EIDS = ["10.1.0.1", "10.1.0.2", "10.1.0.3", "10.2.0.1", "10.3.0.1", "10.4.0.1", "10.5.0.1",
        "fd00:2::1", "192.0.2.100"]
DATA = [b"chunk-a" * 3, b"chunk-b" * 50]


def make(fast: bool, extra: int, max_served: int, lookup: str = "trie",
         check_hash: bool = True) -> Itr:
    mc = MapCache()
    mc.load_static(STATIC)
    return Itr("192.0.2.100", CC, mc, fast=fast, extra_payload_every=extra,
               max_served=max_served, lookup=lookup, check_hash=check_hash)


@st.composite
def packet(draw):
    kind = draw(st.sampled_from(["payload", "header", "header", "header", "plain", "junk"]))
    chan = draw(st.sampled_from(CHANS))
    src = A("10.0.0.1" if len(chan) == 4 else "fd00::1").packed
    data = draw(st.sampled_from(DATA))
    if kind == "payload":
        pdu = c.encode_cc_payload(draw(st.integers(0, 2)), data, 1)
    elif kind == "header":
        pdu = c.encode_cc_header(0, c.digest(1, data), A(draw(st.sampled_from(EIDS))).packed,
                                 5000, 1)
    elif kind == "plain":
        dst = A(draw(st.sampled_from(EIDS))).packed
        return c.build_ip(A("10.0.0.1" if len(dst) == 4 else "fd00::1").packed, dst, 17,
                          c.build_udp(1, 2, data))
    else:
        return draw(st.binary(max_size=48))
    udp = draw(st.booleans())
    return c.build_ip(src, chan, 17 if udp else 253,
                      c.build_udp(54341, 54341, pdu) if udp else pdu)


def frame(pkt: bytes) -> bytes:
    """An Ethernet frame as AF_PACKET hands it over (short ones padded to 60 bytes)."""
    et = b"\x86\xdd" if pkt[:1] and pkt[0] >> 4 == 6 else b"\x08\x00"
    f = b"\x02" * 6 + b"\x04" * 6 + et + pkt
    return f + bytes(max(0, 60 - len(f)))


def state(itr: Itr) -> tuple:
    return (itr.counters, itr.frame_counters, itr.mapcache.counters,
            {k: (b.hash, b.seq, b.packet, dict(b.served or {})) for k, b in itr.buffers.items()},
            itr.path.table.entries())


def test_the_itr_state_has_one_owner():
    itr = make(False, 0, 65536)
    assert isinstance(itr.path, _fast.ItrPath)
    itr.lisp_header = b"\x80" + bytes(7)
    itr.own = (OWN, A("10.0.0.2").packed)
    itr.extra_payload_every = 3
    itr.data_port = 4999
    assert itr.path.ctx()[1:6] == (b"\x80" + bytes(7), 4999, 3, 65536,
                                   (OWN, A("10.0.0.2").packed))
    itr.headers_by_rloc[A("192.0.2.1").packed] = b"\x88" + bytes(7)
    assert itr.path.headers_by_rloc is itr.headers_by_rloc
    # the map-cache's entries are in the ITR's table, kept in step by the map-cache
    assert itr.mapcache.tables == [itr.path.table]
    assert len(itr.path.table) == len(itr.mapcache.trie) == 6
    # an xTR's echo-nonce/LSB header reaches the batch path (it sets itr.lisp_header)
    x = Xtr(make(False, 0, 65536), Etr([]), local_rlocs=("192.0.2.100",))
    assert x.itr.path.lisp_header == x.itr.lisp_header != make(False, 0, 65536).lisp_header


@pytest.mark.parametrize("fast", [False, None] + ([True] if speedups is not None else []))
def test_choosing_the_implementation_patches_nothing(fast):
    mc = MapCache()
    walk = mc.trie.walk
    itr = Itr("192.0.2.100", CC, mc, fast=fast)
    assert mc.trie.walk is walk  # the map-cache's own walk, whatever the ITR runs
    want = {False: _fast.py_cc_itr_table, None: _fast.cc_itr_table,
            True: getattr(speedups, "cc_itr_table", None)}[fast]
    assert itr.impl.table is want
    c_table = type(speedups.cc_itr_table()) if speedups is not None else None
    assert isinstance(itr.path.table, _fast.PyItrTable if fast is False else
                      c_table if fast or _fast.cc_itr_table is not _fast.py_cc_itr_table
                      else _fast.PyItrTable)


@C
@settings(max_examples=150, deadline=None)
@given(st.lists(packet(), min_size=1, max_size=40), st.sampled_from([0, 1, 2, 3]),
       st.sampled_from([1, 2, 65536]), st.booleans(), st.booleans(), st.integers(1, 8),
       st.sampled_from(["trie", "linear"]), st.booleans())
def test_c_and_twin_same_bytes_counters_and_state(pkts, extra, max_served, l2, echo, chunk,
                                                  lookup, check_hash):
    """Also for the section 6 ablations (linear lookup, no per-client hash check); the
    linear search gives the trie's answers, so the same bytes as the trie path."""
    itrs = [make(True, extra, max_served, lookup, check_hash),
            make(False, extra, max_served, lookup, check_hash),
            make(False, extra, max_served, "trie", check_hash)]
    for itr in itrs:
        if echo:  # an echo-nonce header toward one RLOC (RFC 9300 10.1) replaces the default
            itr.headers_by_rloc[A("192.0.2.1").packed] = c.encode_lisp_data(
                c.make_lisp_data(nonce=0xABCDEF, echo=True))
    frames = [frame(p) if l2 else p for p in pkts]
    outs: list[list] = [[], [], []]
    for k, itr in enumerate(itrs):
        for i in range(0, len(frames), chunk):  # recvmmsg batches of `chunk`
            outs[k] += itr.handle_batch(frames[i:i + chunk], 1.0, l2=14 if l2 else 0)
    assert outs[0] == outs[1] == outs[2]
    assert state(itrs[0]) == state(itrs[1]) == state(itrs[2])
    # and the batch path agrees with Algorithm 1 run packet by packet on the twin
    ref = make(False, extra, max_served, "trie", check_hash)
    if echo:
        ref.headers_by_rloc.update(itrs[1].headers_by_rloc)
    want = []
    for p in pkts:
        if l2 and p[:1] and p[0] >> 4 in (4, 6) and len(p) >= 20 and (
                p[16:20] == OWN if p[0] >> 4 == 4 else False):
            continue  # a frame to the ITR itself is not forwarded
        if l2 and not (p[:1] and p[0] >> 4 in (4, 6) and len(frame(p)) >= (34 if p[0] >> 4 == 4
                                                                           else 54)):
            continue  # not an IP frame: skipped by the frame reader
        want += ref.handle_inner(_fast.l2_inner(frame(p)) if l2 else p, 1.0)
    assert outs[1] == want


def _chunk(data: bytes, eids: list[str]) -> list[bytes]:
    """One CoreCast chunk on channel 10.255.0.1: its payload PDU, then a header per EID."""
    src, chan = A("10.0.0.1").packed, CHANS[0]
    out = [c.build_ip(src, chan, 253, c.encode_cc_payload(1, data, 1))]
    return out + [c.build_ip(src, chan, 253, c.encode_cc_header(0, c.digest(1, data),
                                                               A(e).packed, 5000, 1))
                  for e in eids]


@pytest.mark.parametrize("fast", [False] + ([True] if speedups is not None else []))
def test_the_linear_table_follows_the_map_cache(fast):
    """The linear search follows every change of the map-cache: a more specific
    mapping installed between batches is used at once, as the trie would, and one
    removed is no longer used."""
    itr = make(fast, 0, 65536, "linear")
    plain = c.build_ip(A("10.0.0.1").packed, A("10.1.0.9").packed, 17, c.build_udp(1, 2, b"x"))
    assert itr.handle_batch([plain], 1.0)[0][1] == ("192.0.2.1", itr.data_port)
    itr.mapcache.load_static("10.1.0.0/24 192.0.2.9\n")
    assert itr.handle_batch([plain], 1.0)[0][1] == ("192.0.2.9", itr.data_port)
    assert itr.mapcache.remove(A("10.1.0.0").packed, 24)
    assert itr.handle_batch([plain], 1.0)[0][1] == ("192.0.2.1", itr.data_port)


@pytest.mark.parametrize("fast", [False] + ([True] if speedups is not None else []))
def test_without_the_per_client_hash_check_headers_go_out_with_the_buffered_payload(fast):
    """The ablation skips each header's hash comparison: a header naming another
    payload's hash goes out (Algorithm 1 drops it as unknown_hash), in the batch
    path and in the per-packet path alike; a channel with no payload yet still drops."""
    on, off = make(fast, 0, 65536), make(fast, 0, 65536, check_hash=False)
    stale = c.build_ip(A("10.0.0.1").packed, CHANS[0], 253, c.encode_cc_header(
        0, c.digest(1, b"an older chunk"), A("10.1.0.1").packed, 5000, 1))
    for itr in (on, off):  # no payload yet: dropped either way
        assert itr.handle_batch([stale], 1.0) == [] and itr.counters["drop_unknown_hash"] == 1
    pkts = _chunk(DATA[0], ["10.1.0.1"]) + [stale]
    assert len(on.handle_batch(pkts, 1.0)) == 2 and on.counters["drop_unknown_hash"] == 2
    out = off.handle_batch(pkts, 1.0)
    assert [d for d, _ in out[1:]] == [off.lisp_header + pkts[1], off.lisp_header + stale]
    assert off.counters["drop_unknown_hash"] == 1
    assert off.handle_inner(stale, 1.0) == [(off.lisp_header + stale, out[0][1])]


PREFIXES = [("10.1.0.0", 16), ("10.1.0.0", 24), ("10.1.0.1", 32), ("10.2.0.0", 16),
            ("0.0.0.0", 0), ("fd00:2::", 48), ("fd00::", 8), ("10.1.0.77", 20)]
RLOCS = [A("192.0.2.1").packed, A("192.0.2.2").packed, A("2001:db8::1").packed]


@st.composite
def table_op(draw):
    """One random operation on an ITR table: an entry set or removed, a channel added,
    a payload set, or a batch of packets."""
    kind = draw(st.sampled_from(["set", "set", "remove", "channel", "payload", "batch",
                                 "batch"]))
    if kind in ("set", "remove"):
        net, plen = draw(st.sampled_from(PREFIXES))
        if kind == "remove":
            return ("remove", A(net).packed, plen)
        rl = tuple(draw(st.lists(st.sampled_from(RLOCS), max_size=2, unique=True)))
        return ("set", A(net).packed, plen, rl, tuple(str(A(r)) for r in rl),
                draw(st.sampled_from([0.5, 2.0, float("inf")])),
                draw(st.sampled_from([None, b"\x80" + bytes(7), b"\x88" + bytes(7)])))
    if kind == "channel":
        return ("channel", draw(st.sampled_from(CHANS)))
    if kind == "payload":
        data = draw(st.sampled_from(DATA))
        return ("payload", draw(st.sampled_from(CHANS)), c.digest(1, data), draw(
            st.integers(0, 5)), c.build_ip(A("10.0.0.1").packed, CHANS[0], 253,
                                           c.encode_cc_payload(0, data, 1)))
    return ("batch", draw(st.lists(packet(), max_size=12)), draw(st.booleans()),
            draw(st.sampled_from([0, 2])), draw(st.booleans()))


@C
@settings(max_examples=200, deadline=None)
@given(st.lists(table_op(), min_size=1, max_size=25))
def test_c_and_twin_tables_agree_after_random_operations(ops):
    """The C table and its twin, given the same random sequence of operations
    (entries set, replaced and removed, channels added, payloads set, batches run
    with either lookup and any option), give the same datagrams, counters, stop
    index and errors, and hold the same entries (with hit counters) and channels."""
    tables = [speedups.cc_itr_table(), _fast.PyItrTable()]
    ranges = tuple(Itr("192.0.2.100", CC, fast=False).path.ranges)
    for op in ops:
        results = []
        for t in tables:
            try:
                if op[0] == "set":
                    r: object = t.set_entry(*op[1:])
                elif op[0] == "remove":
                    r = t.remove_entry(*op[1:])
                elif op[0] == "channel":
                    r = t.add_channel(op[1])
                elif op[0] == "payload":
                    r = t.set_payload(*op[1:])
                else:
                    pkts, linear, extra, check = op[1:]
                    ctx = (ranges, b"\x00" * 8, 4341, extra, 2, (OWN,),
                           {RLOCS[1]: b"\x08" + bytes(7)}, c.digest, linear, check)
                    out: list = []
                    ctr = [0] * 11
                    i = t.batch(pkts, 0, 0, ctx, 1.0, out, ctr)
                    r = (i, out, ctr)
            except KeyError as e:
                r = ("KeyError", type(e))
            results.append((r, t.entries(), len(t), {
                ch: t.channel(ch)[:3] + (dict(t.channel(ch)[3] or {}),) for ch in t.channels()}))
        assert results[0] == results[1], op


@C
@settings(max_examples=100, deadline=None)
@given(st.lists(packet(), min_size=1, max_size=40), st.sampled_from([0, 2]),
       st.sampled_from([1, 65536]), st.booleans(), st.integers(1, 8), st.booleans())
def test_the_batch_path_into_a_txbatch_gives_the_same_datagrams(pkts, extra, max_served, l2,
                                                                chunk, echo):
    """handle_batch_into a TxBatch (C, or the twin) appends handle_batch's LISP data
    datagrams in its order and returns the others; same counters and state, for the C
    table (which appends references, no bytes) and the twin table (which appends pairs)."""
    from deliverykit.fastpath import py_tx_batch

    frames = [frame(p) if l2 else p for p in pkts]

    def fresh(fast: bool) -> Itr:
        itr = make(fast, extra, max_served)
        if echo:
            itr.headers_by_rloc[A("192.0.2.1").packed] = c.encode_lisp_data(
                c.make_lisp_data(nonce=0xABCDEF, echo=True))
        return itr

    ref = fresh(True)
    want: list = []
    for i in range(0, len(frames), chunk):
        want += ref.handle_batch(frames[i:i + chunk], 1.0, l2=14 if l2 else 0)
    for fast in (True, False):
        for make_tx in (speedups.tx_batch, py_tx_batch):
            itr = fresh(fast)
            data: list = []
            other: list = []
            for i in range(0, len(frames), chunk):
                tx = make_tx()
                other += itr.handle_batch_into(frames[i:i + chunk], 1.0, tx,
                                               l2=14 if l2 else 0)
                data += tx.items()
                assert sum(p for p, _ in tx.counts().values()) == len(tx)
            assert data == [d for d in want if d[1][1] == itr.data_port]
            assert other == [d for d in want if d[1][1] != itr.data_port]
            assert state(itr) == state(ref)
