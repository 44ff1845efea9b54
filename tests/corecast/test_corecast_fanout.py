"""The ETR's and the client's fast paths (issue 18: the 100,000-client simulation) give
exactly what the full decoders give, on sockets and in the simulator alike.

The ETR reads a CoreCast header PDU in the layout every source sends with one
``struct`` call (:func:`corecast.core.etr.header_fields`) and memoises its prefix
answers; the client reads an in-order RTP chunk without the general path's calls.
Each is compared here with the full path on valid packets and on random mutations
of them (bit flips, truncations, trailing bytes): the same datagrams out, the same
counters."""

from __future__ import annotations

import ipaddress
import random

from corecast.core.client import Client
from corecast.core.etr import MEMO_MAX, Etr, PrefixSet, header_fields
from corecast.core.maptrie import parse_prefix
from corecast.core.source import rtp_packet
from corecast.wire import codec as c
from corecast.wire.constants import CORECAST_UDP_PORT, HashId

A = ipaddress.ip_address
CC = [parse_prefix("10.255.0.0/16")]
SITE = [parse_prefix("10.2.0.0/16"), parse_prefix("10.3.1.0/24")]
ITR = ("192.0.2.100", 4341)
CHAN = A("10.255.0.1").packed
SRC = A("10.0.0.1").packed


def _lisp(inner: bytes, iid: int | None = None) -> bytes:
    if iid is None:
        return b"\x80\x00\x00\x00\x00\x00\x00\x00" + inner
    return b"\x88\x00\x00\x00" + iid.to_bytes(3, "big") + b"\x00" + inner


def _inner(pdu: bytes, udp: bool, chan: bytes = CHAN) -> bytes:
    if udp:
        return c.build_ip(SRC, chan, 17, c.build_udp(CORECAST_UDP_PORT, CORECAST_UDP_PORT, pdu))
    return c.build_ip(SRC, chan, 253, pdu)


def _packets(rnd: random.Random) -> list[bytes]:
    """Payloads and headers of a few chunks, both transports, both hashes, IPv4 and
    IPv6 client EIDs inside and outside the site, a plain packet, a wrong channel."""
    out = []
    for seq in range(4):
        for udp in (True, False):
            for hid in (HashId.SHA1, HashId.SHA256):
                media = rnd.randbytes(40 + seq)
                h = c.digest(hid, media)
                out.append(_lisp(_inner(c.encode_cc_payload(seq, media, hid, h), udp)))
                for eid in ("10.2.0.3", "10.3.1.200", "10.4.0.1", "2001:db8::1"):
                    port = rnd.choice((5000, 0, 65535))
                    pdu = c.encode_cc_header(seq, h, A(eid).packed, port, hid)
                    out.append(_lisp(_inner(pdu, udp)))
                # a header for a channel outside the reserved range: plain LISP
                out.append(_lisp(_inner(c.encode_cc_header(seq, h, A("10.2.0.3").packed, 9, hid),
                                        udp, A("10.2.0.7").packed)))
    out.append(_lisp(c.build_ip(SRC, A("10.2.0.9").packed, 17, c.build_udp(1, 7777, b"x"))))
    return out


def _mutate(rnd: random.Random, pkt: bytes) -> bytes:
    b = bytearray(pkt)
    kind = rnd.randrange(4)
    if kind == 0:
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
    elif kind == 1:
        del b[rnd.randrange(len(b)):]
    elif kind == 2:
        b += rnd.randbytes(rnd.randint(1, 20))
    else:  # one byte of the headers the fast path reads set to anything
        i = rnd.randrange(min(len(b), 8 + 20 + 8 + 12))
        b[i] = rnd.randrange(256)
    return bytes(b)


def _pair(**kw: object) -> tuple[Etr, Etr]:
    fast = Etr(CC, eids=SITE, trusted_rlocs=[parse_prefix("192.0.2.100/32")], **kw)  # type: ignore[arg-type]  # kw: the options the test varies
    slow = Etr(CC, eids=SITE, trusted_rlocs=[parse_prefix("192.0.2.100/32")], **kw)  # type: ignore[arg-type]  # kw: the options the test varies
    slow.fast_headers = False
    return fast, slow


def test_fast_header_path_equals_the_full_decoders_on_valid_and_mutated_packets():
    rnd = random.Random(18)
    for kw in ({}, {"instance_id": 7}, {"multicast": {CHAN: ("239.1.1.1", 5000)}}):
        fast, slow = _pair(**kw)
        base = _packets(rnd)
        taken = 0
        for i in range(4000):
            pkt = base[i % len(base)] if i < 2 * len(base) else _mutate(rnd, rnd.choice(base))
            if "instance_id" in kw and i % 3 == 0 and len(pkt) > 8:
                pkt = _lisp(pkt[8:], 7)  # the I-bit and this ETR's Instance ID
            taken += header_fields(pkt) is not None
            fast.datagram_received(pkt, ITR, 0.0)
            slow.datagram_received(pkt, ITR, 0.0)
            assert fast.datagrams_to_send(0.0) == slow.datagrams_to_send(0.0), (i, pkt.hex())
        assert fast.counters == slow.counters
        assert {k: v.hash for k, v in fast.buffers.items()} == {
            k: v.hash for k, v in slow.buffers.items()}
        assert taken > 500 and fast.counters["unicast_out"] + fast.counters["multicast_out"] > 0
        assert fast.counters["drop_malformed"] > 0 and fast.counters["drop_not_our_eid"] > 0


def test_untrusted_senders_never_reach_the_fast_path():
    fast, slow = _pair()
    media = b"m" * 30
    h = c.digest(1, media)
    pay = _lisp(_inner(c.encode_cc_payload(0, media, 1, h), True))
    hdr = _lisp(_inner(c.encode_cc_header(0, h, A("10.2.0.3").packed, 5000), True))
    for e in (fast, slow):
        e.datagram_received(pay, ITR, 0.0)
        e.datagram_received(hdr, ("192.0.2.101", 4341), 0.0)
        e.datagram_received(hdr, ITR, 0.0)
    assert fast.datagrams_to_send(0) == slow.datagrams_to_send(0) == [
        (media, ("10.2.0.3", 5000))]
    assert fast.counters == slow.counters and fast.counters["drop_untrusted_rloc"] == 1


def test_prefix_memo_is_bounded_and_right():
    ps = PrefixSet([parse_prefix("10.2.0.0/16")])
    for i in range(MEMO_MAX + 100):
        addr = (0x0A000000 + i * 7).to_bytes(4, "big")
        assert (addr in ps) == (addr[:2] == b"\x0a\x02")
        assert len(ps._memo) <= MEMO_MAX
    assert memoryview(b"\x0a\x02\x00\x01") in ps  # not hashable as a key: computed
    assert A("2001:db8::1").packed not in ps


def _chunks(rnd: random.Random, n: int) -> list[bytes]:
    """RTP chunks in order, with reordering, duplicates, gaps, wraps and junk."""
    seqs: list[int] = []
    s = rnd.randrange(65536)
    for _ in range(n):
        r = rnd.random()
        if r < 0.8:
            s += 1
        elif r < 0.9:
            s += rnd.randint(2, 40)
        else:
            s -= rnd.randint(0, 50)
        seqs.append(s & 0xFFFF)
    out = [rtp_packet(q, q * 2250, 1, b"x" * rnd.randint(0, 30)) for q in seqs]
    out += [b"", b"\x00" * 20, b"\x80" * 11]
    rnd.shuffle(out[-40:])
    return out


def test_client_fast_path_counts_as_the_general_path():
    rnd = random.Random(7)
    for window in (1, 16, 4096):
        fast = Client(window=window, keep_digests=False, accept={"10.2.0.1"})
        slow = Client(window=window, keep_digests=False, accept={"10.2.0.1"})
        slow.fast_path = False
        for i, d in enumerate(_chunks(rnd, 3000)):
            addr = ("10.2.0.1", 4341) if i % 97 else ("10.9.9.9", 1)
            now = i * 0.025 + rnd.random() * 0.01
            fast.datagram_received(d, addr, now)
            slow.datagram_received(d, addr, now)
        assert fast.stats() == slow.stats()
        assert (fast._seen_bits, fast.jitter, fast.last_at) == (
            slow._seen_bits, slow.jitter, slow.last_at)
        assert fast.rejected > 0 and fast.malformed > 0 and fast.duplicates > 0
        if window < 4096:
            assert fast.too_old > 0
            continue
        assert fast.received > 500 and fast.reordered > 0
        assert fast.rejected > 0 and fast.malformed > 0
