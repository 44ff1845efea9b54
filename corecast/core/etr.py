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
from collections.abc import Sequence
from dataclasses import dataclass

from corecast.core.driven import Address, Outbox, host_port
from corecast.core.mapcache import ntop
from corecast.wire.codec import CCHeader, CCPdu, decode_cc
from corecast.wire.constants import CORECAST_UDP_PORT, IPPROTO_CORECAST
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


class PrefixSet:
    """A few IPv4/IPv6 prefixes ``(packed_network, prefix_len)``; ``in`` takes a packed address."""

    __slots__ = ("_nets",)

    def __init__(self, prefixes: Sequence[tuple[bytes, int]] = ()) -> None:
        self._nets: list[tuple[int, int, int]] = []
        for net, plen in prefixes:
            bits = len(net) * 8
            mask = ((1 << plen) - 1) << (bits - plen) if plen else 0
            self._nets.append((len(net), mask, int.from_bytes(net, "big") & mask))

    def __contains__(self, addr: bytes) -> bool:
        v = int.from_bytes(addr, "big")
        n = len(addr)
        return any(ln == n and v & m == net for ln, m, net in self._nets)

    def __bool__(self) -> bool:
        return bool(self._nets)


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
        self._init_outbox()

    # ------------------------------------------------------------- DatagramCore

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        host, _port = host_port(addr)
        src = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        self._queue(self.handle_data(data, now, src))

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
        stored = self.buffers.get(chan)
        if stored is None or stored.hash != pdu.hash:
            return self._drop("unknown_hash")
        group = self.multicast.get(chan)
        if group is not None:
            if stored.group_sent:
                self.counters["multicast_covered"] += 1
                return []
            stored.group_sent = True
            self.counters["multicast_out"] += 1
            return [(stored.payload, group)]
        if pdu.eid not in self.eids:
            return self._drop("not_our_eid")
        if pdu.port == 0:  # no UDP destination port 0 (the send would fail: count it here)
            return self._drop("malformed")
        self.counters["unicast_out"] += 1
        return [(stored.payload, (ntop(pdu.eid), pdu.port))]

    def state_size(self) -> dict[str, int]:
        """payloadBuffer bytes (paper section 3.5: depends only on the channel count)."""
        b = sum(len(s.payload) + len(s.hash) for s in self.buffers.values())
        return {"channels": len(self.buffers), "payload_buffer_bytes": b, "total_bytes": b}

    def drops(self) -> dict[str, int]:
        return {k[5:]: v for k, v in self.counters.items() if k.startswith("drop_")}


__all__ = ["DROP_REASONS", "Etr", "PrefixSet", "StoredPayload"]
