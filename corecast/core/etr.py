"""CoreCast egress tunnel router: Algorithm 2 of the paper, plus plain LISP decap.

Sans-IO: :meth:`Etr.handle_data` takes one UDP/4341 payload (LISP header +
inner IP packet) and returns datagrams ``(udp_payload, (host, port))``.

Algorithm 2 (paper section 3.5):

* payload PDU: if the hash matches, store it in the channel's payloadBuffer
  entry (one payload per channel); otherwise drop.
* header PDU: if its hash is the stored payload's hash, send a unicast UDP
  packet carrying the payload to the client EID at the port the header names;
  otherwise drop.

Option (section 3.5): a channel mapped to an intra-domain IP multicast group
sends each payload once to the group (on the first header that asks for it)
instead of one unicast copy per header; later headers for the same payload are
counted as covered by the group.

Inner packets not addressed to the reserved CoreCast range are decapsulated and
delivered natively; on the UDP (no-root) drivers that means the inner UDP
payload is sent to the inner destination address and port.

What a remote sender may not choose (RFC 9300 sections 4 and 6: an ETR
decapsulates for the EIDs of its own site): every address this core returns is
either inside the site's EID prefixes (``eids``: a plain inner destination, a
CoreCast header's client EID) or a multicast group the operator configured;
anything else is dropped and counted in ``drop_not_our_eid``.  Encapsulated
packets are accepted only from trusted RLOCs (``trusted_rlocs`` prefixes; the
outer source is passed as ``src``), the rest counted in ``drop_untrusted_rloc``;
``trusted_rlocs=None`` accepts any RLOC and must be asked for explicitly.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from corecast.core.driven import Address, Outbox, host_port
from corecast.core.mapcache import ntop
from corecast.wire.codec import CCHeader, CCPdu, decode_cc
from corecast.wire.constants import (
    AFI_ADDR_LEN,
    CORECAST_UDP_PORT,
    CORECAST_VERSION,
    HASH_LEN,
    IPPROTO_CORECAST,
    CoreCastType,
)
from corecast.wire.ip import DecodeError, decode_ip, decode_udp

Datagram = tuple[bytes, tuple[str, int]]

DROP_REASONS = (
    "malformed",  # bad LISP/IP/CoreCast bytes
    "bad_hash",  # payload whose hash does not match
    "unknown_hash",  # header for a payload we do not hold
    "unknown_channel",  # over max_channels, or not a configured channel
    "not_corecast",  # to the reserved range but not a CoreCast PDU
    "not_deliverable",  # plain inner packet that is not UDP (needs a raw driver)
    "wrong_instance",  # LISP header's Instance ID is not this ETR's (RFC 9300 section 8)
    "untrusted_rloc",  # outer source is not a trusted RLOC
    "not_our_eid",  # inner destination / client EID outside this site's EID prefixes
)


#: answers a memo keeps before it starts over: bounded memory whatever addresses a
#: remote sends, and a site's clients (45,006 in the largest simulated AS) fit
MEMO_MAX = 1 << 16


class PrefixSet:
    """A few IPv4/IPv6 prefixes ``(packed_network, prefix_len)``; ``in`` takes a packed
    address.  The prefixes never change after construction, so each answer for a
    ``bytes`` address is memoised (up to :data:`MEMO_MAX`, then the memo starts over):
    an ETR asks the same few questions for every packet (its trusted RLOC, the channel,
    each client's EID), and a site of 45,006 clients has ~20 covering prefixes."""

    __slots__ = ("_memo", "_nets")

    def __init__(self, prefixes: Sequence[tuple[bytes, int]] = ()) -> None:
        self._nets: list[tuple[int, int, int]] = []
        self._memo: dict[bytes, bool] = {}
        for net, plen in prefixes:
            bits = len(net) * 8
            mask = ((1 << plen) - 1) << (bits - plen) if plen else 0
            self._nets.append((len(net), mask, int.from_bytes(net, "big") & mask))

    def _match(self, addr: bytes | memoryview) -> bool:
        v = int.from_bytes(addr, "big")
        n = len(addr)
        return any(ln == n and v & m == net for ln, m, net in self._nets)

    def __contains__(self, addr: bytes) -> bool:
        if type(addr) is not bytes:  # a memoryview or bytearray: not hashable as a key
            return self._match(addr)
        memo = self._memo
        got = memo.get(addr)
        if got is None:
            got = self._match(addr)
            if len(memo) >= MEMO_MAX:
                memo.clear()
            memo[addr] = got
        return got

    def __bool__(self) -> bool:
        return bool(self._nets)


#: LISP data header (8) + IPv4 (20, no options): ver/IHL, total length, protocol, dst
_V4 = struct.Struct("!8xB1xH5xB6x4s")
#: inner UDP header: destination port, length
_UDP = struct.Struct("!2xHH")
#: CoreCast header PDU's fixed part (codec._CC_HEADER)
_CC_HDR = struct.Struct("!BBBBIHH")
_CC_HDR_VT = (CORECAST_VERSION & 0xF) << 4 | CoreCastType.HEADER


def header_fields(data: bytes) -> tuple[bytes, bytes, bytes, int] | None:
    """``(channel, hash, eid, port)`` of a LISP-encapsulated CoreCast header PDU in the
    layout every CoreCast source sends (IPv4 inner header without options, lengths
    that fill the datagram, UDP to the CoreCast port or IP protocol 253), or None for
    any other packet (the full decoders in :meth:`Etr.handle_inner` then decide).
    Checks exactly what ``decode_ip``, ``decode_udp`` and ``decode_cc`` check on that
    layout, so a packet it accepts decodes to the same fields there
    (tests/corecast/test_corecast_fanout.py)."""
    n = len(data)
    if type(data) is not bytes or n < 8 + 20 + 12 or data[8] != 0x45:
        return None
    _vihl, total, proto, dst = _V4.unpack_from(data, 0)
    if total != n - 8:
        return None
    if proto == 17:
        _dport, length = _UDP.unpack_from(data, 28)
        if _dport != CORECAST_UDP_PORT or length != total - 20:
            return None
        off = 36
    elif proto == IPPROTO_CORECAST:
        off = 28
    else:
        return None
    if n - off < 12:
        return None
    vt, hash_id, hlen, _flags, _seq, port, afi = _CC_HDR.unpack_from(data, off)
    if vt != _CC_HDR_VT or hlen == 0:
        return None
    known = HASH_LEN.get(hash_id)
    if known is not None and known != hlen:
        return None
    elen = AFI_ADDR_LEN.get(afi)
    h = off + 12 + hlen
    if not elen or h + elen != n:
        return None
    return dst, data[off + 12 : h], data[h:], port


@dataclass(slots=True)
class StoredPayload:
    """One ETR payloadBuffer entry."""

    hash: bytes
    seq: int
    payload: bytes
    group_sent: bool = False


class Etr(Outbox):
    """Sans-IO ETR with CoreCast demultiplexing (Algorithm 2); as a
    :class:`deliverykit.protocol.DatagramCore` it takes the LISP data port's
    datagrams (the sender's address is the outer source RLOC) and has no timer."""

    def __init__(
        self,
        corecast_prefixes: list[tuple[bytes, int]],
        channels: list[bytes] | None = None,
        max_channels: int = 1024,
        multicast: dict[bytes, tuple[str, int]] | None = None,
        instance_id: int | None = None,
        eids: Sequence[tuple[bytes, int]] = (),
        trusted_rlocs: Sequence[tuple[bytes, int]] | None = (),
    ) -> None:
        #: RFC 9300 section 8: with an Instance ID configured, only packets of that
        #: instance are decapsulated (I-bit set with this IID, or I clear for IID 0);
        #: None accepts every packet (a single-instance ETR)
        self.instance_id = instance_id
        self._cc = PrefixSet(corecast_prefixes)
        #: this site's EID prefixes: the only unicast destinations this ETR delivers to
        self.eids = PrefixSet(eids)
        #: RLOC prefixes whose encapsulated packets we accept; None = any (explicit opt-out)
        self.trusted = None if trusted_rlocs is None else PrefixSet(trusted_rlocs)
        self.allowed = set(channels) if channels is not None else None
        self.max_channels = max_channels
        self.multicast = dict(multicast or {})
        self.buffers: dict[bytes, StoredPayload] = {}
        self.counters: dict[str, int] = {
            "in_packets": 0, "cc_payloads": 0, "cc_headers": 0, "unicast_out": 0,
            "multicast_out": 0, "multicast_covered": 0, "plain_delivered": 0,
        }
        for r in DROP_REASONS:
            self.counters["drop_" + r] = 0
        #: the common header layout is read by :func:`header_fields` (False: always the
        #: full decoders; the results are the same)
        self.fast_headers = True
        #: driver address -> packed outer source RLOC (bounded, see MEMO_MAX)
        self._rlocs: dict[Address, bytes] = {}
        #: packed client EID -> its text, for the unicast copy's address (bounded)
        self._eid_text: dict[bytes, str] = {}
        #: datagrams queued for :meth:`datagrams_to_send` so far (the ETR has no timer and
        #: no events): a driver may skip its flush after a datagram that queued nothing
        #: (deliverykit.sim.pump.QUIET_COUNTER)
        self.outputs_queued = 0
        self._init_outbox()

    # ------------------------------------------------------------- DatagramCore

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        rlocs = self._rlocs
        src = rlocs.get(addr)
        if src is None:
            host, _port = host_port(addr)
            src = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
            if len(rlocs) >= MEMO_MAX:
                rlocs.clear()
            rlocs[addr] = src
        out = self.handle_data(data, now, src)
        if out:
            self._out += out
            self.outputs_queued += len(out)

    def get_timer(self, now: float) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def is_corecast(self, dst: bytes) -> bool:
        return dst in self._cc

    def trusts(self, src: bytes | None) -> bool:
        """May this packed outer source RLOC send us encapsulated packets?"""
        if self.trusted is None:
            return True
        return src is not None and src in self.trusted

    def _drop(self, reason: str) -> list[Datagram]:
        self.counters["drop_" + reason] += 1
        return []

    def instance_ok(self, data: bytes) -> bool:
        """Is this LISP data header (>= 8 bytes) of our instance (RFC 9300 sec. 8)?"""
        if self.instance_id is None:
            return True
        iid = int.from_bytes(data[4:7], "big") if data[0] & 0x08 else 0
        return iid == self.instance_id & 0xFFFFFF

    def handle_data(self, data: bytes, now: float = 0.0, src: bytes | None = None
                    ) -> list[Datagram]:
        """A LISP-encapsulated packet (UDP/4341 payload) from packed outer source RLOC ``src``."""
        self.counters["in_packets"] += 1
        if not self.trusts(src):
            return self._drop("untrusted_rloc")
        if len(data) < 8:
            return self._drop("malformed")
        if not self.instance_ok(data):  # I-bit: the 24-bit Instance ID in word 2
            return self._drop("wrong_instance")
        if self.fast_headers:
            hdr = header_fields(data)
            if hdr is not None and hdr[0] in self._cc:
                self.counters["cc_headers"] += 1
                return self._header(*hdr)
        return self.handle_inner(memoryview(data)[8:])

    def handle_inner(self, inner: bytes | memoryview) -> list[Datagram]:
        try:
            ip = decode_ip(inner)
        except DecodeError:
            return self._drop("malformed")
        if self.is_corecast(ip.dst):
            if ip.proto == IPPROTO_CORECAST:
                body = ip.payload
            elif ip.proto == 17:
                try:
                    _s, dport, body = decode_udp(ip.payload)
                except DecodeError:
                    return self._drop("malformed")
                if dport != CORECAST_UDP_PORT:
                    return self._drop("not_corecast")
            else:
                return self._drop("not_corecast")
            try:
                pdu = decode_cc(body)
            except DecodeError:
                return self._drop("malformed")
            return self._corecast(ip.dst, pdu)
        if ip.dst not in self.eids:
            return self._drop("not_our_eid")
        if ip.proto != 17:
            return self._drop("not_deliverable")
        try:
            _s, dport, body = decode_udp(ip.payload)
        except DecodeError:
            return self._drop("malformed")
        if dport == 0:
            return self._drop("malformed")
        self.counters["plain_delivered"] += 1
        return [(bytes(body), (ntop(ip.dst), dport))]

    def _corecast(self, chan: bytes, pdu: CCPdu) -> list[Datagram]:
        if not isinstance(pdu, CCHeader):
            self.counters["cc_payloads"] += 1
            if chan not in self.buffers and (
                (self.allowed is not None and chan not in self.allowed)
                or len(self.buffers) >= self.max_channels
            ):
                return self._drop("unknown_channel")
            if not pdu.verify():
                return self._drop("bad_hash")
            self.buffers[chan] = StoredPayload(pdu.hash, pdu.seq, pdu.payload)
            return []
        self.counters["cc_headers"] += 1
        return self._header(chan, pdu.hash, pdu.eid, pdu.port)

    def _header(self, chan: bytes, hash_: bytes, eid: bytes, port: int) -> list[Datagram]:
        """Algorithm 2 for a header PDU (counted in ``cc_headers`` by the caller)."""
        stored = self.buffers.get(chan)
        if stored is None or stored.hash != hash_:
            return self._drop("unknown_hash")
        group = self.multicast.get(chan)
        if group is not None:
            if stored.group_sent:
                self.counters["multicast_covered"] += 1
                return []
            stored.group_sent = True
            self.counters["multicast_out"] += 1
            return [(stored.payload, group)]
        if eid not in self.eids:
            return self._drop("not_our_eid")
        if port == 0:  # no UDP destination port 0 (the send would fail: count it here)
            return self._drop("malformed")
        self.counters["unicast_out"] += 1
        text = self._eid_text.get(eid)
        if text is None:
            if len(self._eid_text) >= MEMO_MAX:
                self._eid_text.clear()
            text = self._eid_text[eid] = ntop(eid)
        return [(stored.payload, (text, port))]

    def state_size(self) -> dict[str, int]:
        """payloadBuffer bytes (paper section 3.5: depends only on the channel count)."""
        b = sum(len(s.payload) + len(s.hash) for s in self.buffers.values())
        return {"channels": len(self.buffers), "payload_buffer_bytes": b, "total_bytes": b}

    def drops(self) -> dict[str, int]:
        return {k[5:]: v for k, v in self.counters.items() if k.startswith("drop_")}


__all__ = ["DROP_REASONS", "MEMO_MAX", "Etr", "PrefixSet", "StoredPayload", "header_fields"]
