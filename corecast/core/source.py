"""CoreCast source node S (paper section 3.3).

* Channels, each with a reserved EID and a ``chanDstList`` of subscribers
  ``(client EID, UDP port, domain has a CoreCast ETR?)``, maintained by the
  out-of-band subscription service (join, leave, heartbeat; a subscriber that
  misses heartbeats for ``heartbeat_timeout`` seconds is removed).
* Chunking: each chunk (``chunk_size`` bytes, the paper's D) is an RTP packet
  (RFC 3550 header + media) so clients can measure order, loss and jitter; the
  chunk size is checked against the path MTU after every header CoreCast and
  LISP add (:func:`max_chunk_size`).
* Pacing at the channel bit rate: one chunk every ``chunk_size * 8 / bitrate``
  seconds (384 kb/s with 1,200-byte chunks is one every 25 ms).
* For each chunk: one payload packet to the channel EID, then one header packet
  per CoreCast subscriber; subscribers whose domain has no CoreCast ETR get the
  chunk by plain unicast.
* Source-as-ITR mode (section 3.4): with ``itr=`` the source runs Algorithm 1
  itself and emits LISP-encapsulated payloads and headers directly.

Inner packets are ``IP(src=source EID, dst=channel EID)`` followed by either
``UDP(54341 -> 54341)`` (no-root default) or nothing with IP protocol 253
(RFC 3692 experimental, raw sockets).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from corecast.core.driven import Address, Outbox, earliest, just_after
from corecast.core.events import ChannelFinished, ClientJoined, ClientLeft, CorecastEvent
from corecast.core.mapcache import ntop
from corecast.wire.codec import cc_payload_overhead, digest, encode_cc_header, encode_cc_payload
from corecast.wire.constants import (
    CORECAST_UDP_PORT,
    IPPROTO_CORECAST,
    LISP_DATA_HEADER_LEN,
    UDP_HEADER_LEN,
    Afi,
    HashId,
)
from corecast.wire.ip import build_ip, build_udp

if TYPE_CHECKING:
    from corecast.core.itr import Itr

Datagram = tuple[bytes, tuple[str, int]]
Media = Callable[[int, int], "bytes | None"]

RTP_HEADER_LEN = 12
RTP_CLOCK = 90_000  # RFC 3551 video clock; any fixed rate works for jitter


def pattern_media(seed: str = "corecast") -> Media:
    """Deterministic media: chunk ``seq`` is SHAKE-128(seed:seq) (checkable at clients)."""

    def media(seq: int, n: int) -> bytes:
        return hashlib.shake_128(f"{seed}:{seq}".encode()).digest(n)

    return media


def rtp_packet(seq: int, ts: int, ssrc: int, media: bytes, pt: int = 96) -> bytes:
    """RFC 3550 section 5.1 fixed header (V=2, no CSRC) + media."""
    return struct.pack("!BBHII", 0x80, pt & 0x7F, seq & 0xFFFF, ts & 0xFFFFFFFF, ssrc) + media


def max_chunk_size(mtu: int = 1500, transport: str = "udp", ipv6_outer: bool = False,
                   ipv6_inner: bool = False, hash_id: int = HashId.SHA1) -> int:
    """Largest chunk D whose LISP-encapsulated payload packet fits ``mtu``."""
    outer = (40 if ipv6_outer else 20) + UDP_HEADER_LEN + LISP_DATA_HEADER_LEN
    inner = (40 if ipv6_inner else 20) + (UDP_HEADER_LEN if transport == "udp" else 0)
    return mtu - outer - inner - cc_payload_overhead(hash_id)


#: a header PDU's port and AFI fields (codec._CC_HEADER's last two)
_PORT_AFI = struct.Struct("!HH")


@dataclass(slots=True)
class Subscriber:
    eid: bytes
    port: int
    corecast: bool
    last_seen: float
    #: this subscriber's port and AFI as its header PDUs carry them (between the
    #: chunk's sequence number and its hash)
    port_afi: bytes = field(init=False, repr=False, default=b"")

    def __post_init__(self) -> None:
        self.port_afi = _PORT_AFI.pack(self.port, Afi.IPV4 if len(self.eid) == 4 else Afi.IPV6)


@dataclass(slots=True)
class Channel:
    """One channel: reserved EID, rate, chunk size and its chanDstList."""

    eid: bytes
    bitrate: float
    chunk_size: int
    media: Media
    ssrc: int
    next_due: float
    seq: int = 0
    finished: bool = False
    dst: dict[tuple[bytes, int], Subscriber] = field(default_factory=dict)
    sent_digests: dict[int, bytes] = field(default_factory=dict)

    @property
    def interval(self) -> float:
        return self.chunk_size * 8 / self.bitrate


class Source(Outbox):
    """Sans-IO CoreCast source; a :class:`deliverykit.protocol.DatagramCore`: its timer
    is the next chunk due (while :attr:`streaming`), the next subscriber whose heartbeats
    stopped, and in source-as-ITR mode the ITR's Map-Request retransmissions; the
    datagrams it receives are the ITR's LISP control messages (source-as-ITR mode)."""

    def __init__(
        self,
        eid: str,
        itr_inside: tuple[str, int] | None = None,
        transport: str = "udp",
        hash_id: int = HashId.SHA1,
        itr: Itr | None = None,
        heartbeat_timeout: float = 300.0,
        mtu: int = 1500,
        keep_digests: int = 100_000,
    ) -> None:
        if transport not in ("udp", "raw"):
            raise ValueError("transport is 'udp' or 'raw'")
        if itr is None and itr_inside is None:
            raise ValueError("give the ITR's inside address, or an Itr for source-as-ITR mode")
        self.eid = ipaddress.ip_address(eid).packed
        self.itr_inside = itr_inside
        self.transport = transport
        self.hash_id = hash_id
        self.itr = itr
        self.heartbeat_timeout = heartbeat_timeout
        self.mtu = mtu
        self.keep_digests = keep_digests
        self.channels: dict[bytes, Channel] = {}
        self.events: list[object] = []
        self.counters = {"chunks": 0, "payload_packets": 0, "header_packets": 0,
                         "unicast_packets": 0, "bytes_to_itr": 0, "bytes_unicast": 0}
        #: datagrams received that this source has no use for (no ITR of its own)
        self.unexpected = 0
        #: channels are paced by the timer (:meth:`get_timer`); False holds them until
        #: :meth:`start_streaming`
        self.streaming = True
        #: no subscriber was last seen before this (a lower bound, exact while
        #: :attr:`_floor_exact`): :meth:`expire` and :meth:`next_expiry` visit the
        #: subscribers only when one may have expired or the bound is stale
        self._seen_floor = math.inf
        self._floor_exact = True
        self._init_outbox()

    # ------------------------------------------------------------- channels

    def add_channel(self, eid: str, bitrate: float = 384_000, chunk_size: int = 1200,
                    media: Media | None = None, start: float = 0.0, ssrc: int | None = None
                    ) -> Channel:
        e = ipaddress.ip_address(eid)
        if e.version != (4 if len(self.eid) == 4 else 6):
            raise ValueError("channel EID and source EID must be the same family")
        limit = max_chunk_size(self.mtu, self.transport, False, e.version == 6, self.hash_id)
        if not RTP_HEADER_LEN < chunk_size <= limit:
            raise ValueError(f"chunk size must be {RTP_HEADER_LEN + 1}..{limit} for MTU {self.mtu}")
        ch = Channel(e.packed, float(bitrate), chunk_size, media or pattern_media(str(e)),
                     ssrc if ssrc is not None else int.from_bytes(e.packed[-4:], "big"), start)
        self.channels[e.packed] = ch
        return ch

    def _chan(self, channel: str | bytes) -> Channel:
        key = channel if isinstance(channel, bytes) else ipaddress.ip_address(channel).packed
        ch = self.channels.get(key)
        if ch is None:
            raise KeyError(f"no channel {channel!r}")
        return ch

    # ------------------------------------------------------------- subscriptions

    def join(self, channel: str | bytes, eid: str, port: int, corecast: bool, now: float
             ) -> ClientJoined:
        ch = self._chan(channel)
        a = ipaddress.ip_address(eid)
        if len(a.packed) != len(ch.eid):
            raise ValueError("client EID family differs from the channel's")
        if not 0 < port < 65536:
            raise ValueError("bad port")
        key = (a.packed, port)
        old = ch.dst.get(key)
        if old is not None and old.last_seen <= self._seen_floor:
            self._floor_exact = False
        ch.dst[key] = Subscriber(a.packed, port, corecast, now)
        if now < self._seen_floor:
            self._seen_floor = now
        ev = ClientJoined(ntop(ch.eid), str(a), port, corecast)
        self.events.append(ev)
        self._event(ev)
        return ev

    def heartbeat(self, channel: str | bytes, eid: str, port: int, now: float) -> bool:
        ch = self._chan(channel)
        sub = ch.dst.get((ipaddress.ip_address(eid).packed, port))
        if sub is None:
            return False
        if sub.last_seen <= self._seen_floor:
            self._floor_exact = False  # it may have been the earliest
        sub.last_seen = now
        return True

    def leave(self, channel: str | bytes, eid: str, port: int) -> bool:
        ch = self._chan(channel)
        sub = ch.dst.pop((ipaddress.ip_address(eid).packed, port), None)
        if sub is not None:
            if sub.last_seen <= self._seen_floor:
                self._floor_exact = False
            ev = ClientLeft(ntop(ch.eid), eid, port, "leave")
            self.events.append(ev)
            self._event(ev)
        return sub is not None

    def expire(self, now: float) -> list[ClientLeft]:
        """Remove the subscribers whose heartbeats stopped (``now - last_seen`` over the
        timeout).  Every subscriber was last seen at or after :attr:`_seen_floor`, so
        while ``now - floor`` is within the timeout nothing can expire and no
        subscriber is visited (the simulator's sources, with an infinite timeout, never
        visit one)."""
        timeout = self.heartbeat_timeout
        if now - self._seen_floor <= timeout:
            return []
        out = []
        floor = math.inf
        for ch in self.channels.values():
            for key, sub in list(ch.dst.items()):
                if now - sub.last_seen > timeout:
                    del ch.dst[key]
                    out.append(ClientLeft(ntop(ch.eid), ntop(sub.eid), sub.port, "timeout"))
                elif sub.last_seen < floor:
                    floor = sub.last_seen
        self._seen_floor, self._floor_exact = floor, True
        self.events.extend(out)
        for ev in out:
            self._event(ev)
        return out

    # ------------------------------------------------------------- data

    def _inner(self, ch: Channel, pdu: bytes) -> bytes:
        if self.transport == "udp":
            udp = build_udp(CORECAST_UDP_PORT, CORECAST_UDP_PORT, pdu)
            return build_ip(self.eid, ch.eid, 17, udp)
        return build_ip(self.eid, ch.eid, IPPROTO_CORECAST, pdu)

    def _header_packets(self, ch: Channel, h: bytes, subs: list[Subscriber]) -> list[bytes]:
        """The chunk's inner header packets, one per subscriber in ``subs``: for each,
        ``_inner(ch, encode_cc_header(ch.seq, h, eid, port, hash_id))``.  The subscribers
        of a channel have EIDs of one family, so every packet has the same length and
        the same IP and UDP headers (checksum included) and the same header PDU up to
        its sequence number: the first packet is built in full and the others from its
        head, each subscriber's port and AFI, the hash and its EID."""
        s0 = subs[0]
        first = self._inner(ch, encode_cc_header(ch.seq, h, s0.eid, s0.port, self.hash_id))
        head = first[: len(first) - len(s0.port_afi) - len(h) - len(s0.eid)]
        pkts = [first]
        pkts += [head + s.port_afi + h + s.eid for s in subs[1:]]
        return pkts

    def _to_itr(self, pkt: bytes, now: float, out: list[Datagram]) -> None:
        self.counters["bytes_to_itr"] += len(pkt)
        if self.itr is not None:
            out.extend(self.itr.handle_inner(pkt, now))
        else:
            assert self.itr_inside is not None
            out.append((pkt, self.itr_inside))

    def emit_chunk(self, ch: Channel, now: float) -> list[Datagram]:
        """One chunk: payload packet, then a header per CoreCast subscriber,
        and plain unicast to the others."""
        media = ch.media(ch.seq, ch.chunk_size - RTP_HEADER_LEN)
        if media is None:
            ch.finished = True
            self._event(ChannelFinished(ntop(ch.eid), ch.seq))
            return []
        ts = round(ch.seq * ch.interval * RTP_CLOCK)
        chunk = rtp_packet(ch.seq, ts, ch.ssrc, media)
        h = digest(self.hash_id, chunk)
        if self.keep_digests:
            ch.sent_digests[ch.seq] = h
            if len(ch.sent_digests) > self.keep_digests:
                ch.sent_digests.pop(next(iter(ch.sent_digests)))
        out: list[Datagram] = []
        cc_subs = [s for s in ch.dst.values() if s.corecast]
        if cc_subs:
            payload = self._inner(ch, encode_cc_payload(ch.seq, chunk, self.hash_id, h))
            headers = self._header_packets(ch, h, cc_subs)
            self.counters["payload_packets"] += 1
            self.counters["header_packets"] += len(cc_subs)
            if self.itr is not None:
                # source-as-ITR: the ITR's inside interface takes the chunk as one batch
                # (Itr.handle_batch: Algorithm 1 on the C path where it is built, the
                # very path the socket drivers feed; per packet what handle_inner does)
                headers.insert(0, payload)
                self.counters["bytes_to_itr"] += sum(map(len, headers))
                out += self.itr.handle_batch(headers, now)
            else:
                self._to_itr(payload, now, out)
                for pkt in headers:
                    self._to_itr(pkt, now, out)
        for s in ch.dst.values():
            if not s.corecast:
                out.append((chunk, (ntop(s.eid), s.port)))
                self.counters["unicast_packets"] += 1
                self.counters["bytes_unicast"] += len(chunk)
        ch.seq += 1
        self.counters["chunks"] += 1
        return out

    def tick(self, now: float) -> list[Datagram]:
        """Emit every chunk that is due (pacing at each channel's bit rate)."""
        out: list[Datagram] = []
        for ch in self.channels.values():
            if ch.finished:
                continue
            if now - ch.next_due > 10 * ch.interval:  # far behind: do not burst
                ch.next_due = now
            while ch.next_due <= now and not ch.finished:
                out.extend(self.emit_chunk(ch, now))
                ch.next_due += ch.interval
        return out

    def next_deadline(self) -> float | None:
        due = [c.next_due for c in self.channels.values() if not c.finished]
        return min(due) if due else None

    def start_streaming(self, now: float) -> None:
        """Pace the channels from ``now`` on (none is due before it)."""
        for ch in self.channels.values():
            ch.next_due = max(ch.next_due, now)
        self.streaming = True

    def next_expiry(self) -> float | None:
        """When the next subscriber has missed its heartbeats: just after
        ``last_seen + heartbeat_timeout`` (:meth:`expire` removes it once
        ``now - last_seen`` exceeds the timeout)."""
        if math.isinf(self.heartbeat_timeout):
            return None
        if not self._floor_exact:
            self._seen_floor = min((s.last_seen for ch in self.channels.values()
                                    for s in ch.dst.values()), default=math.inf)
            self._floor_exact = True
        if math.isinf(self._seen_floor):  # exact here: infinite only with no subscriber
            return None
        return just_after(self._seen_floor + self.heartbeat_timeout)

    # ------------------------------------------------------------- DatagramCore

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        """A LISP control message for the source's own ITR (source-as-ITR mode); a
        source without one counts it in :attr:`unexpected`."""
        if self.itr is None:
            self.unexpected += 1
            return
        self._queue(self.itr.handle_control(data, now))

    def get_timer(self, now: float) -> float | None:
        return earliest(self.next_deadline() if self.streaming else None, self.next_expiry(),
                        self.itr.get_timer(now) if self.itr is not None else None)

    def handle_timer(self, now: float) -> None:
        if self.streaming:
            self._queue(self.tick(now))
        self.expire(now)
        if self.itr is not None:
            self._queue(self.itr.tick(now))

    def next_event(self) -> CorecastEvent | None:
        ev = super().next_event()
        if ev is None and self.itr is not None:
            return self.itr.next_event()
        return ev
