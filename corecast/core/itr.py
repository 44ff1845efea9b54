"""CoreCast ingress tunnel router: Algorithm 1 of the paper, plus plain LISP.

Sans-IO: :meth:`Itr.handle_inner` takes one inner IP packet (as it arrives on
the ITR's inside interface) and ``now``, and returns datagrams to send as
``(udp_payload, (host, port))``; the LISP data header is part of the payload
and the driver's socket (or raw-socket driver) adds the outer IP/UDP header
(RFC 9300 section 5.1).

Which path a packet takes (paper section 3.3): only packets whose destination
EID is in the reserved CoreCast range enter Algorithm 1; every other packet is
plain LISP-encapsulated to the RLOC of its destination EID.

Algorithm 1 (section 3.4), exactly:

* payload PDU: identify the channel by the destination EID; if the hash matches
  the locally computed hash, overwrite the channel's ``payloadBuffer`` entry
  (hash, payload packet) and allocate a fresh, empty ``servedRLOC`` set;
  otherwise drop.  Nothing is sent.
* header PDU: if its hash is the hash in ``payloadBuffer`` (else drop), look up
  the client EID's RLOC in the map-cache (longest-prefix match in a trie); if
  the RLOC is not in ``servedRLOC`` send the payload to it and add it; then
  send the header, both LISP-encapsulated.

Option (section 3.4, last paragraph): ``extra_payload_every = n`` re-sends the
payload after every ``n`` headers to the same ETR so a lost payload packet
affects fewer clients.

Ablations (section 6, ``corecast experiment overhead``): ``lookup="linear"`` makes
the batch path find a client EID's mapping by scanning the map-cache's prefixes,
longest first (the paper's explanation of its +52 % CPU), instead of walking the
trie; ``check_hash=False`` skips each header's hash comparison (a channel with no
payload yet still drops its headers).  Both give the same answers as the defaults
on traffic whose headers name the buffered payload.

A header whose client EID is not in the map-cache waits (bounded) for a
Map-Request/Map-Reply round trip; when it resolves, Algorithm 1 runs again on
it (so a payload that changed meanwhile makes it an unknown-hash drop).

Every drop has a counter; state is bounded (channels, RLOCs per channel,
pending packets) and :meth:`Itr.state_size` reports it.
"""

from __future__ import annotations

import ipaddress
import random
from collections import deque
from dataclasses import dataclass

from corecast import _fast
from corecast._fast import Frame, TxSink
from corecast.core.driven import Address, Outbox
from corecast.core.events import MappingInstalled
from corecast.core.mapcache import MapCache, ntop
from corecast.wire.codec import digest, encode_lisp_data, make_lisp_data
from corecast.wire.constants import (
    LISP_CONTROL_PORT,
    LISP_DATA_PORT,
)
from corecast.wire.ip import DecodeError
from corecast.wire.lispctl import MapReply, MapRequest, decode_control, ecm_wrap, encode_map_request

Datagram = tuple[bytes, tuple[str, int]]

#: Drop reasons, each with its own counter.
DROP_REASONS = (
    "malformed",  # not an IP packet, or a CoreCast PDU that does not parse
    "not_corecast",  # addressed to the reserved range but not a CoreCast PDU
    "bad_hash",  # payload PDU whose hash does not match its payload
    "unknown_hash",  # header PDU whose hash is not the channel's current payload
    "unknown_channel",  # channel not configured / over max_channels
    "served_limit",  # servedRLOC set for the payload is full
    "negative_mapping",  # map-cache says drop / no locator for the EID
    "pending",  # could not queue while resolving (counted by the map-cache too)
)


@dataclass(frozen=True, slots=True)
class ChannelBuffer:
    """One ``payloadBuffer`` entry (paper Fig. 3), as :attr:`Itr.buffers` shows it
    (the state itself is in the ITR's table, ``Itr.path.table``)."""

    eid: bytes
    hash: bytes = b""
    seq: int = -1
    packet: bytes = b""  #: the payload packet as received, sent on to each ETR
    #: servedRLOC: rloc -> headers sent since its payload copy (None: no payload yet)
    served: dict[bytes, int] | None = None


class Itr(Outbox):
    """Sans-IO ITR with CoreCast demultiplexing (Algorithm 1).

    A :class:`deliverykit.protocol.DatagramCore`: a datagram from an address in
    :attr:`inside` is an inner IP packet from this domain (the inside interface),
    any other is a LISP control message (Map-Reply, SMR); the timer is the next
    Map-Request retransmission (RFC 9301 section 5.3).  The socket drivers feed the
    inside interface in batches through :meth:`receive_batch` (the fast path), so
    their control socket never forwards what a remote sends it."""

    def __init__(
        self,
        rloc: str | bytes,
        corecast_prefixes: list[tuple[bytes, int]],
        mapcache: MapCache | None = None,
        map_resolver: tuple[str, int] | None = None,
        control_port: int = LISP_CONTROL_PORT,
        data_port: int = LISP_DATA_PORT,
        extra_payload_every: int = 0,
        channels: list[bytes] | None = None,
        max_channels: int = 1024,
        max_served: int = 65536,
        instance_id: int | None = None,
        seed: int | None = None,
        fast: bool | None = None,
        max_events: int = 1024,
        smr_interval: float = 3.0,
        lookup: _fast.Lookup | str = _fast.Lookup.TRIE,
        check_hash: bool = True,
    ) -> None:
        import ipaddress

        self.rloc = rloc if isinstance(rloc, bytes) else ipaddress.ip_address(rloc).packed
        #: Instance ID (RFC 9300 section 8): the I-bit and 24-bit IID in every data
        #: header, the map-cache holds this instance's mappings, and Map-Requests name
        #: it in an LCAF Instance ID address (RFC 8060 section 4.1)
        self.instance_id = instance_id or 0
        self.mapcache = mapcache or MapCache(iid=self.instance_id)
        if self.mapcache.iid != self.instance_id:
            raise ValueError("the map-cache belongs to another instance")
        self.map_resolver = map_resolver
        self.control_port = control_port
        self.max_channels = max_channels
        self.allowed = set(channels) if channels is not None else None
        #: nonces: reproducible with a seed, else from the OS CSPRNG (RFC 9301 sec. 5.2)
        self._rng = random.Random(seed) if seed is not None else random.SystemRandom()
        # reserved range as (network, mask) byte pairs for the classifier
        ranges = []
        for net, plen in corecast_prefixes:
            bits = len(net) * 8
            mask = ((1 << plen) - 1) << (bits - plen) if plen else 0
            m = mask.to_bytes(len(net), "big")
            ranges.append((bytes(a & b for a, b in zip(net, m)), m))
        if len(ranges) > _fast.MAX_RANGES:  # what the batch fast path (C and twin) takes
            raise ValueError(f"at most {_fast.MAX_RANGES} reserved CoreCast ranges")
        #: C fast path or pure twin, chosen once (fast=None: what deliverykit.fastpath picked)
        self.impl = _fast.BatchImpl.choose(fast)
        table = self.impl.table()
        self.mapcache.attach(table)  # the map-cache keeps the table's entries in step
        #: the data path's state, owned here once: the table (map-cache entries and
        #: payloadBuffer), headers, port, options, own addresses (the attributes of
        #: the same names read and set it)
        self.path = _fast.ItrPath(
            tuple(ranges), table,
            # the I-bit only for a non-zero instance (no I-bit means instance 0; the Xtr agrees)
            encode_lisp_data(make_lisp_data(instance_id=self.instance_id or None)),
            data_port, extra_payload_every, max_served, (self.rloc,), {}, digest,
            _fast.Lookup(lookup), check_hash)
        #: AF_PACKET frames seen by :meth:`handle_batch` with ``l2=14``
        self.frame_counters = {"ip": 0, "to_self": 0}
        self._requests: dict[int, bytes] = {}  # Map-Request nonce -> EID
        #: bounded: remote Map-Replies drive it; the oldest are dropped
        self.events: deque[MappingInstalled] = deque(maxlen=max_events)
        #: RFC 9301 sec. 6.1: at most one SMR-invoked Map-Request per EID-Prefix per
        #: ``smr_interval`` (bounded, oldest forgotten)
        self.smr_interval = smr_interval
        self._smr_last: dict[tuple[bytes, int], float] = {}
        self.counters: dict[str, int] = {
            "in_packets": 0, "plain_encap": 0, "cc_payloads": 0,
            "payload_copies": 0, "extra_payload_copies": 0, "header_copies": 0,
            "released": 0, "map_replies": 0, "map_requests_sent": 0, "smr_received": 0,
            "smr_rate_limited": 0, "smr_no_mapping": 0, "smr_invoked_requests": 0,
        }
        for r in DROP_REASONS:
            self.counters["drop_" + r] = 0
        self.counters["reply_records_refused"] = 0
        #: remote addresses whose datagrams are inner packets (the inside interface
        #: where it shares one address with the control port, as in the simulator)
        self.inside: set[tuple[str, int]] = set()
        self._init_outbox()

    # ----------------------------------------------------------------- the path's state

    @property
    def _ranges(self) -> tuple[tuple[bytes, bytes], ...]:
        return self.path.ranges

    @property
    def buffers(self) -> dict[bytes, ChannelBuffer]:
        """``payloadBuffer``: channel EID -> its entry (a copy; the servedRLOC dicts
        are the table's own)."""
        t = self.path.table
        return {ch: ChannelBuffer(ch, *row) for ch in t.channels()
                if (row := t.channel(ch)) is not None}  # every channel has its row

    @property
    def lisp_header(self) -> bytes:
        """The default LISP data header."""
        return self.path.lisp_header

    @lisp_header.setter
    def lisp_header(self, value: bytes) -> None:
        self.path.lisp_header = value

    @property
    def headers_by_rloc(self) -> dict[bytes, bytes]:
        """LISP data headers that replace ``lisp_header`` toward one RLOC (bytes key)."""
        return self.path.headers_by_rloc

    @property
    def data_port(self) -> int:
        return self.path.data_port

    @data_port.setter
    def data_port(self, value: int) -> None:
        self.path.data_port = value

    @property
    def extra_payload_every(self) -> int:
        return self.path.extra_payload_every

    @extra_payload_every.setter
    def extra_payload_every(self, value: int) -> None:
        self.path.extra_payload_every = value

    @property
    def max_served(self) -> int:
        return self.path.max_served

    @max_served.setter
    def max_served(self, value: int) -> None:
        self.path.max_served = value

    @property
    def lookup(self) -> _fast.Lookup:
        """The batch path's EID-to-RLOC lookup: the trie, or the section 6 ablation's
        linear search (the per-packet path always walks the trie: same answers)."""
        return self.path.lookup

    @property
    def check_hash(self) -> bool:
        """Algorithm 1's per-client hash check (False: the section 6 ablation)."""
        return self.path.check_hash

    @property
    def own(self) -> tuple[bytes, ...]:
        """The ITR's own addresses (AF_PACKET frames to them are not forwarded)."""
        return self.path.own

    @own.setter
    def own(self, value: tuple[bytes, ...]) -> None:
        self.path.own = tuple(value)

    # ----------------------------------------------------------------- helpers

    def is_corecast(self, dst: bytes) -> bool:
        return any(len(n) == len(dst) and all(d & mm == nn for d, mm, nn in zip(dst, m, n))
                   for n, m in self._ranges)

    def _drop(self, reason: str) -> list[Datagram]:
        self.counters["drop_" + reason] += 1
        return []

    def _resolve(self, eid: bytes, packet: bytes, now: float, out: list[Datagram]) -> None:
        """Queue ``packet`` until ``eid`` resolves and ask the map-resolver."""
        if not self.mapcache.enqueue(eid, packet, now):
            self.counters["drop_pending"] += 1
            return
        if self.map_resolver is not None and self.mapcache.should_request(eid, now):
            out.append(self._map_request(eid))

    def _map_request(self, eid: bytes, smr_invoked: bool = False) -> Datagram:
        import ipaddress

        nonce = self._rng.getrandbits(64)
        self._requests[nonce] = eid
        if len(self._requests) > 4 * self.mapcache.max_pending_eids:
            self._requests.pop(next(iter(self._requests)))
        addr = ipaddress.ip_address(eid)
        req = MapRequest(
            nonce, (ipaddress.ip_address(self.rloc),),
            (ipaddress.ip_network(f"{addr}/{addr.max_prefixlen}"),), source_eid=None,
            eid_iids=(self.instance_id,) if self.instance_id else (), smr_invoked=smr_invoked,
        )
        msg = encode_map_request(req)
        src = self.rloc if len(self.rloc) == len(eid) else (b"\x00" * len(eid))
        self.counters["map_requests_sent"] += 1
        assert self.map_resolver is not None
        return ecm_wrap(msg, src, eid, self.control_port), self.map_resolver

    # ----------------------------------------------------------------- data path

    def handle_inner(self, pkt: bytes, now: float) -> list[Datagram]:
        """One inner IP packet from the inside interface -> datagrams to send."""
        self.counters["in_packets"] += 1
        r = self.impl.parse(pkt, self.path.ranges)
        if r[0] == 2:
            return self._cc_header(pkt, r[1], r[2], r[3], now)
        if r[0] == 0:
            return self._plain(pkt, r[1], now)
        if r[0] == 1:
            return self._cc_payload(pkt, r[1], r[2], r[3], r[4], r[5])
        return self._drop("malformed" if r[1] == 1 else "not_corecast")

    def handle_batch(self, frames: list[Frame], now: float, l2: int = 0) -> list[Datagram]:
        """A batch of inner IP packets (``l2=0``) or AF_PACKET Ethernet frames
        (``l2=14``), each bytes or a ``(bytes, addr)`` pair as recv_batch returns
        them -> datagrams to send, in order.  Same results and counters as
        :meth:`handle_inner` per packet: the fast path (``cc_itr_batch``, C or its
        twin) takes payload PDUs of known channels, plain packets and header PDUs
        that hit the map-cache, and hands every other packet (a new channel's
        first payload, misses, most drops) to :meth:`handle_inner`."""
        out: list[Datagram] = []
        self._batch(frames, now, l2, out, out)
        return out

    def handle_batch_into(self, frames: list[Frame], now: float, data: TxSink,
                          l2: int = 0) -> list[Datagram]:
        """:meth:`handle_batch`, its LISP data datagrams appended to ``data`` (a
        ``TxBatch``: the C batch loop appends without a Python object per
        datagram) in the order :meth:`handle_batch` returns them; returns the
        others (Map-Requests, for the control socket), in order."""
        other: list[Datagram] = []
        self._batch(frames, now, l2, data, other)
        return other

    def _batch(self, frames: list[Frame], now: float, l2: int, data: TxSink,
               other: list[Datagram]) -> None:
        """The batch loop: the fast path appends to ``data``; what the Python core
        makes for a packet it takes goes to ``data`` when bound for LISP data and to
        ``other`` otherwise (the same list when both are one)."""
        ctx = self.path.ctx()
        ctr = [0] * len(_fast.CTR_NAMES)
        n = len(frames)
        batch = self.path.table.batch
        dp = self.data_port
        i = batch(frames, 0, l2, ctx, now, data, ctr)
        while i < n:
            item = frames[i]
            p = item[0] if isinstance(item, tuple) else item
            for d in self.handle_inner(_fast.l2_inner(p) if l2 else p, now):
                (data if d[1][1] == dp else other).append(d)
            i = batch(frames, i + 1, l2, ctx, now, data, ctr)
        for name, v in zip(_fast.CTR_NAMES, ctr):
            if v:
                counters, key = self._ctr_target[name]
                counters[key] += v

    @property
    def _ctr_target(self) -> dict[str, tuple[dict[str, int], str]]:
        """Where each of the batch path's counters (CTR_NAMES) is added."""
        c = self.counters
        return {"in_packets": (c, "in_packets"), "plain_encap": (c, "plain_encap"),
                "header_copies": (c, "header_copies"), "payload_copies": (c, "payload_copies"),
                "extra_payload_copies": (c, "extra_payload_copies"),
                "drop_unknown_hash": (c, "drop_unknown_hash"), "cc_payloads": (c, "cc_payloads"),
                "drop_bad_hash": (c, "drop_bad_hash"),
                "mapcache_hits": (self.mapcache.counters, "hits"),
                "l2_to_self": (self.frame_counters, "to_self"),
                "l2_ip": (self.frame_counters, "ip")}

    def _plain(self, pkt: bytes, dst: bytes, now: float) -> list[Datagram]:
        entry = self.mapcache.lookup(dst, now)
        if entry is None:
            out: list[Datagram] = []
            self._resolve(dst, pkt, now, out)
            return out
        if entry.negative:
            return self._drop("negative_mapping")
        r, rs = entry.select(dst)
        self.counters["plain_encap"] += 1
        lh = entry.lisp_header if entry.lisp_header is not None else self.lisp_header
        if self.headers_by_rloc:
            lh = self.headers_by_rloc.get(r, lh)
        return [(lh + pkt, (rs, self.data_port))]

    def _cc_payload(self, pkt: bytes, chan: bytes, hash_id: int, h: bytes, p0: int,
                    seq: int) -> list[Datagram]:
        self.counters["cc_payloads"] += 1
        table = self.path.table
        if table.channel(chan) is None:
            if (self.allowed is not None and chan not in self.allowed) or len(
                    table.channels()) >= self.max_channels:
                return self._drop("unknown_channel")
            table.add_channel(chan)
        if digest(hash_id, memoryview(pkt)[p0:]) != h:
            return self._drop("bad_hash")
        table.set_payload(chan, h, seq, pkt)  # with a fresh servedRLOC for every new payload
        return []

    def _cc_header(self, pkt: bytes, chan: bytes, h: bytes, eid: bytes, now: float
                   ) -> list[Datagram]:
        buf = self.path.table.channel(chan)
        if buf is None or not buf[0] or (self.path.check_hash and buf[0] != h):
            if buf is None and self.allowed is not None and chan not in self.allowed:
                return self._drop("unknown_channel")
            return self._drop("unknown_hash")
        _hash, _seq, payload, served = buf
        entry = self.mapcache.lookup(eid, now)
        if entry is None:
            out: list[Datagram] = []
            self._resolve(eid, pkt, now, out)
            return out
        if not entry.rlocs:
            return self._drop("negative_mapping")
        rloc, rs = entry.select(eid)
        if served is None:  # no payload buffered (a set hash always comes with its servedRLOC)
            return self._drop("unknown_hash")
        c = self.counters
        n = self.extra_payload_every
        lh = entry.lisp_header if entry.lisp_header is not None else self.lisp_header
        if self.headers_by_rloc:
            lh = self.headers_by_rloc.get(rloc, lh)
        if rloc in served:
            count = served[rloc]
            if not n or count < n:
                if n:
                    served[rloc] = count + 1
                c["header_copies"] += 1
                return [(lh + pkt, (rs, self.data_port))]
            c["extra_payload_copies"] += 1
        elif len(served) >= self.max_served:
            return self._drop("served_limit")
        else:
            c["payload_copies"] += 1
        served[rloc] = 1
        c["header_copies"] += 1
        dest = (rs, self.data_port)
        return [(lh + payload, dest), (lh + pkt, dest)]

    # ----------------------------------------------------------------- control

    def handle_control(self, data: bytes, now: float) -> list[Datagram]:
        """A UDP/4342 message for the ITR (Map-Reply); returns released traffic."""
        try:
            msg = decode_control(data)
        except DecodeError:
            self.counters["drop_malformed"] += 1
            return []
        if isinstance(msg, MapRequest) and msg.smr:
            return self._smr(msg, now)
        if not isinstance(msg, MapReply) or msg.nonce not in self._requests:
            self.counters["drop_malformed"] += 1
            return []
        eid = self._requests.pop(msg.nonce)
        self.counters["map_replies"] += 1
        # RFC 9301 sec. 5.4: a record answers our request only if its prefix covers the EID we
        # asked for; an unrelated one would steer traffic for EIDs nobody asked about (a
        # reply for 10.2.0.9 installing 198.51.100.0/24 -> some RLOC): counted, not installed
        records = [r for r in msg.records if _covers(r.prefix, eid)]
        self.counters["reply_records_refused"] += len(msg.records) - len(records)
        events, released = self.mapcache.install_records(records, now, msg.echo_nonce)
        self.events.extend(events)
        for ev in events:
            self._event(ev)
        out: list[Datagram] = []
        for _eid, pkts in released:
            for p in pkts:
                self.counters["released"] += 1
                self.counters["in_packets"] -= 1  # not a new arrival
                out.extend(self.handle_inner(p, now))
        return out

    def _smr(self, msg: MapRequest, now: float) -> list[Datagram]:
        """A Solicit-Map-Request (RFC 9301 section 6.1; RFC 9302 section 7.1 sends
        one when our Dest Map-Version is stale).  SMRs are not authenticated, so the
        cached mapping stays in use: for each EID record we hold a live mapping of,
        an SMR-invoked Map-Request (s-bit) goes through the mapping system (the
        map-resolver), at most once per EID-Prefix every ``smr_interval`` (3 s, the
        RFC's recommendation); its Map-Reply replaces the mapping.  No mapping: no
        Map-Request (SHOULD NOT)."""
        self.counters["smr_received"] += 1
        if self.map_resolver is None:  # a static mapping has nowhere to be refreshed from
            return []
        out: list[Datagram] = []
        for i, p in enumerate(msg.eid_prefixes):
            iid = msg.eid_iids[i] if msg.eid_iids else 0
            if iid != self.instance_id:
                continue
            eid = p.network_address.packed
            hit = self.mapcache.trie.lookup(eid)
            if hit is None or hit[1].expires <= now:
                self.counters["smr_no_mapping"] += 1
                continue
            out += self.refresh(eid, now, smr_invoked=True)
        return out

    def refresh(self, eid: bytes, now: float, smr_invoked: bool = False) -> list[Datagram]:
        """Ask the mapping system again for the live mapping covering ``eid``
        while it stays in use (an SMR, RFC 9301 sec. 6.1; a newer Source
        Map-Version, RFC 9302 sec. 7.2): at most one Map-Request per EID-Prefix
        every ``smr_interval``.  The Map-Reply replaces the mapping."""
        if self.map_resolver is None:
            return []
        hit = self.mapcache.trie.lookup(eid)
        if hit is None or hit[1].expires <= now:
            return []
        key = (hit[1].prefix, hit[1].plen)
        if now - self._smr_last.get(key, float("-inf")) < self.smr_interval:
            self.counters["smr_rate_limited"] += 1
            return []
        self._smr_last.pop(key, None)
        self._smr_last[key] = now
        if len(self._smr_last) > 4 * self.mapcache.max_pending_eids:
            self._smr_last.pop(next(iter(self._smr_last)))
        if smr_invoked:
            self.counters["smr_invoked_requests"] += 1
        return [self._map_request(eid, smr_invoked=smr_invoked)]

    def tick(self, now: float) -> list[Datagram]:
        """Retransmit Map-Requests for EIDs still unresolved (1/s, RFC 9301 5.3)."""
        if self.map_resolver is None:
            return []
        return [self._map_request(eid) for eid in self.mapcache.due_requests(now)]

    # ----------------------------------------------------------------- DatagramCore

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        if addr in self.inside:
            self._queue(self.handle_inner(data, now))
        else:
            self._queue(self.handle_control(data, now))

    def receive_batch(self, frames: list[Frame], now: float, l2: int = 0) -> None:
        """A batch from the inside interface (:meth:`handle_batch`), sent on by
        :meth:`datagrams_to_send`."""
        self._queue(self.handle_batch(frames, now, l2))

    def get_timer(self, now: float) -> float | None:
        if self.map_resolver is None:
            return None
        return self.mapcache.next_request_at()

    def handle_timer(self, now: float) -> None:
        self._queue(self.tick(now))

    # ----------------------------------------------------------------- state

    def state_size(self) -> dict[str, int]:
        """Bytes of CoreCast state, counted as the paper's section 3.5 model does:
        per channel the payload and its hash, plus one RLOC per servedRLOC entry."""
        bufs = self.buffers.values()
        payload_bytes = sum(len(b.packet) + len(b.hash) for b in bufs)
        served = sum(len(b.served or ()) for b in bufs)
        rloc_len = len(self.rloc)
        return {
            "channels": len(self.buffers),
            "payload_buffer_bytes": payload_bytes,
            "served_rlocs": served,
            "served_rloc_bytes": served * rloc_len,
            "total_bytes": payload_bytes + served * rloc_len,
            "mapcache_entries": len(self.mapcache.trie),
            "pending_packets": self.mapcache.pending_packets(),
        }

    def drops(self) -> dict[str, int]:
        return {k[5:]: v for k, v in self.counters.items() if k.startswith("drop_")}


def host_of(addr: bytes) -> str:
    return ntop(addr)


__all__ = ["Itr", "ChannelBuffer", "Datagram", "DROP_REASONS"]


def _covers(prefix: ipaddress.IPv4Network | ipaddress.IPv6Network, eid: bytes) -> bool:
    """Does ``prefix`` contain the packed address ``eid`` (same family)?"""
    if prefix.version != (4 if len(eid) == 4 else 6):
        return False
    return ipaddress.ip_address(eid) in prefix
