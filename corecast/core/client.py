"""CoreCast client: receives the stream and reports order, loss, jitter, bytes.

Chunks are RTP packets (RFC 3550 section 5.1).  Loss follows RFC 3550
appendix A.3 (expected = highest extended sequence - first + 1); jitter is the
interarrival jitter estimator of section 6.4.1 / appendix A.8, in RTP clock
units and milliseconds.

Which chunks arrived is kept in a sliding window over the last ``window``
extended sequence numbers (the client's buffer, in chunks): a bitmap whose
bit k says the newest number minus k arrived.  Duplicates and reordering inside
the window are counted exactly as a set of every number would count them; a
chunk older than the window is dropped and counted (``too_old``).  The state is
the same size whatever the stream's length (a set grew ~129 B per chunk).
"""

from __future__ import annotations

import builtins
import hashlib
import struct
from dataclasses import dataclass, field
from typing import TypedDict

from corecast.core.driven import Address, Outbox, host_port
from corecast.core.events import SenderRejected
from corecast.core.source import RTP_CLOCK, RTP_HEADER_LEN

#: rejected senders reported by a :class:`SenderRejected` event (later ones only counted)
MAX_REJECT_EVENTS = 16
#: the default sliding window: sequence numbers the client remembers (its buffer, in chunks)
WINDOW = 4096
#: sequence number and timestamp of an RTP fixed header (after its first two bytes)
_SEQ_TS = struct.Struct("!HI")


class ClientStats(TypedDict):
    """:meth:`Client.stats`: a receiver's counters as the roles print them (JSON)."""

    received: int
    bytes: int
    #: highest extended sequence number - first + 1 (RFC 3550 A.3)
    expected: int
    lost: int
    duplicates: int
    reordered: int
    malformed: int
    rejected: int
    too_old: int
    #: interarrival jitter (RFC 3550 6.4.1) in milliseconds
    jitter_ms: float
    first_seq: int | None
    last_seq: int | None


class ChunkError(ValueError):
    """A datagram that is not an RTP chunk."""


@dataclass(slots=True)
class Client(Outbox):
    """A receiver's accounting; as a :class:`deliverykit.protocol.DatagramCore` it
    takes the stream's datagrams from the senders in :attr:`accept` (None: any),
    counts the others in ``rejected`` (a :class:`SenderRejected` event for each of
    the first 16 hosts), sends nothing and has no timer."""

    clock: int = RTP_CLOCK
    keep_digests: bool = True
    received: int = 0
    bytes: int = 0
    duplicates: int = 0
    reordered: int = 0
    malformed: int = 0
    rejected: int = 0  # datagrams from a sender the client did not join through (not accounted)
    too_old: int = 0  # chunks from before the window: dropped, not accounted
    first_seq: int | None = None
    max_ext: int = -1
    jitter: float = 0.0
    _last_transit: float | None = None
    #: sequence numbers remembered for duplicate detection (the client's buffer, in chunks)
    window: int = WINDOW
    #: bit k set: extended sequence number ``max_ext - k`` arrived (k < window)
    _seen_bits: int = 0
    _window_mask: int = field(default=0, repr=False)
    digests: dict[int, builtins.bytes] = field(default_factory=dict)
    first_at: float | None = None
    last_at: float | None = None
    #: hosts the stream may come from (canonical text); None accepts every sender
    accept: set[str] | None = None
    _rejected_hosts: set[str] = field(default_factory=set, repr=False)
    #: the next chunk in order is accounted without the general path's calls (False:
    #: always the general path; the counters are the same)
    fast_path: bool = True
    #: events queued so far (a client sends nothing and has no timer): a driver may skip
    #: its flush after a datagram that queued none (deliverykit.sim.pump.QUIET_COUNTER)
    outputs_queued: int = 0

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError("the client's window must hold at least one chunk")
        self._window_mask = (1 << self.window) - 1
        self._init_outbox()

    def datagram_received(self, data: builtins.bytes, addr: Address, now: float) -> None:
        if type(addr) is tuple and len(addr) >= 2 and type(addr[0]) is str \
                and type(addr[1]) is int:
            host = addr[0]  # what host_port would return, without the call
        else:
            host, _port = host_port(addr)
        if self.accept is not None and host not in self.accept:
            self.rejected += 1
            if len(self._rejected_hosts) < MAX_REJECT_EVENTS and host not in self._rejected_hosts:
                self._rejected_hosts.add(host)
                self._event(SenderRejected(host))
                self.outputs_queued += 1
            return
        self.handle(data, now)

    def get_timer(self, now: float) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    @staticmethod
    def parse(data: builtins.bytes) -> tuple[int, int, int, builtins.bytes]:
        """(seq, timestamp, ssrc, media) of an RTP chunk."""
        if len(data) < RTP_HEADER_LEN or data[0] >> 6 != 2:
            raise ChunkError("not an RTP packet")
        _b0, _pt, seq, ts, ssrc = struct.unpack_from("!BBHII", data, 0)
        return seq, ts, ssrc, data[RTP_HEADER_LEN:]

    def _extend(self, seq16: int) -> int:
        if self.max_ext < 0:
            return seq16
        base = self.max_ext & ~0xFFFF
        cand = base | seq16
        if cand - self.max_ext > 0x8000:
            cand -= 0x10000
        elif self.max_ext - cand > 0x8000:
            cand += 0x10000
        return cand

    def handle(self, data: builtins.bytes, now: float) -> int | None:
        """Account one datagram; returns its extended sequence number."""
        last = self.max_ext
        if self.fast_path and last >= 0 and len(data) >= RTP_HEADER_LEN and data[0] >> 6 == 2:
            seq16, ts = _SEQ_TS.unpack_from(data, 2)
            if seq16 == (last + 1) & 0xFFFF:
                # the next chunk in order: what _extend, _mark and the lines below do
                # for it (ext = last + 1 across the 16-bit wrap too; first_seq and
                # first_at are already set; nothing is reordered)
                ext = self.max_ext = last + 1
                bits = self._seen_bits << 1 if self.window > 1 else 0
                self._seen_bits = (bits | 1) & self._window_mask
                self._accept(data, ext, ts, now)
                return ext
        try:
            seq16, ts, _ssrc, _media = self.parse(data)
        except ChunkError:
            self.malformed += 1
            return None
        ext = self._extend(seq16)
        if not self._mark(ext):
            return ext
        if self.first_seq is None or ext < self.first_seq:
            self.first_seq = ext
        if ext < self.max_ext:
            self.reordered += 1
        else:
            self.max_ext = ext
        if self.first_at is None:
            self.first_at = now
        self._accept(data, ext, ts, now)
        return ext

    def _accept(self, data: builtins.bytes, ext: int, ts: int, now: float) -> None:
        """Count a new chunk: bytes, its digest (if kept), the interarrival
        jitter (RFC 3550 A.8) and when it came."""
        self.received += 1
        self.bytes += len(data)
        if self.keep_digests:
            self.digests[ext] = hashlib.sha1(data).digest()
        transit = now * self.clock - ts
        if self._last_transit is not None:
            d = abs(transit - self._last_transit)
            self.jitter += (d - self.jitter) / 16.0
        self._last_transit = transit
        self.last_at = now

    def _mark(self, ext: int) -> bool:
        """Record ``ext`` in the window; False (and counted) for a duplicate or a
        number from before the window."""
        if self.max_ext < 0 or ext > self.max_ext:
            shift = ext - self.max_ext if self.max_ext >= 0 else self.window
            bits = self._seen_bits << shift if shift < self.window else 0
            self._seen_bits = (bits | 1) & self._window_mask
            return True
        k = self.max_ext - ext
        if k >= self.window:
            self.too_old += 1
            return False
        if self._seen_bits >> k & 1:
            self.duplicates += 1
            return False
        self._seen_bits |= 1 << k
        return True

    def stats(self) -> ClientStats:
        expected = 0 if self.first_seq is None else self.max_ext - self.first_seq + 1
        return {
            "received": self.received,
            "bytes": self.bytes,
            "expected": expected,
            "lost": max(0, expected - self.received),
            "duplicates": self.duplicates,
            "reordered": self.reordered,
            "malformed": self.malformed,
            "rejected": self.rejected,
            "too_old": self.too_old,
            "jitter_ms": round(self.jitter / self.clock * 1000.0, 3),
            "first_seq": self.first_seq,
            "last_seq": None if self.max_ext < 0 else self.max_ext,
        }
