"""Per-channel state (RFC 7574 section 3.11): one remote peer in one swarm."""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque
from typing import Any

from swift.core.binmap import Binmap
from swift.core.chanstate import ChannelEvent, ChannelState, next_state
from swift.core.content import _Either
from swift.core.ledbat import Ledbat
from swift.wire.codec import HandshakeOptions


class RangeQueue:
    """FIFO of chunk ranges ``[lo, hi)`` (REQUESTs received, section 3.7).

    Kept as ranges so a REQUEST for a whole file costs one entry; bounded in
    chunks so a peer cannot make us hold unbounded state (section 12.6.6).
    A chunk requested twice is queued (and served) twice, in request order.

    Every operation is O(log n) per chunk it adds, serves or drops, however
    long the queue (libswift asks in thousands of single-chunk REQUESTs and
    sends a HAVE per chunk; scanning the queue per HAVE made our seeder
    CPU-bound, docs/swift.md "Seeder toward a libswift leecher"):

    * ``queued`` is a :class:`Binmap` of the chunks with at least one live
      copy queued and ``extra`` counts further copies of chunks requested
      again while queued; the usual HAVE, for a chunk already sent, is one
      lookup there.
    * Entries are ``[lo, hi, stamp]``.  Dropping a queued chunk (CANCEL, a
      HAVE) records ``dropped[chunk] = stamp`` instead of cutting it out of
      the entries; ``pop`` skips a copy whose entry is not newer than its
      chunk's drop.  ``dropped`` is folded into the entries (``_compact``)
      once it outgrows the queue, so it stays bounded by the queue limit.
    """

    __slots__ = ("q", "size", "limit", "queued", "extra", "dropped", "stamp")

    #: ``dropped`` entries tolerated beyond twice the queue before _compact
    COMPACT_AT = 1024

    def __init__(self, limit: int) -> None:
        self.q: deque[list[int]] = deque()
        self.size = 0
        self.limit = limit
        self.queued = Binmap()
        #: chunk -> live copies beyond the first (repeated REQUESTs)
        self.extra: dict[int, int] = {}
        #: chunk -> stamp of its last drop: copies in older entries are dead
        self.dropped: dict[int, int] = {}
        self.stamp = 0

    def _add_copies(self, lo: int, hi: int) -> None:
        qd = self.queued
        if hi - lo == 1:
            if qd.has(lo):
                self.extra[lo] = self.extra.get(lo, 0) + 1
            else:
                qd.add(lo)
            return
        pos = lo
        while pos < hi:  # copies of chunks already queued: count them once more
            a = qd.find_filled(pos, hi)
            if a is None:
                break
            b = qd.find_empty(a, hi)
            b = hi if b is None else b
            for c in range(a, b):
                self.extra[c] = self.extra.get(c, 0) + 1
            pos = b
        qd.set_range(lo, hi)

    def push(self, lo: int, hi: int) -> None:
        hi = min(hi, lo + max(0, self.limit - self.size))
        if lo >= hi:
            return
        if hi - lo == 1 and not self.queued.has(lo):  # libswift's REQUEST
            self.queued.add(lo)
        else:
            self._add_copies(lo, hi)
        self.stamp += 1
        self.q.append([lo, hi, self.stamp])
        self.size += hi - lo

    def push_front(self, chunks: list[int]) -> None:
        """Queue ``chunks`` (in this order) ahead of everything else: DATA the
        peer requested and lost, sent again before newer chunks."""
        for c in reversed(chunks[:max(0, self.limit - self.size)]):
            self._add_copies(c, c + 1)
            self.stamp += 1
            self.q.appendleft([c, c + 1, self.stamp])
            self.size += 1

    def pop(self) -> int | None:
        q = self.q
        dropped = self.dropped
        while q:
            r = q[0]
            if r[0] >= r[1]:
                q.popleft()
                continue
            c = r[0]
            r[0] += 1
            if r[0] >= r[1]:
                q.popleft()
            if dropped and dropped.get(c, -1) >= r[2]:
                continue  # this copy was dropped (CANCEL / HAVE)
            self.size -= 1
            n = self.extra.get(c)
            if n is None:
                self.queued.discard(c)
            elif n > 1:
                self.extra[c] = n - 1
            else:
                del self.extra[c]
            return c
        return None

    def remove(self, lo: int, hi: int) -> None:
        """Drop chunks ``[lo, hi)`` (CANCEL, or HAVE as implicit cancel, 3.8)."""
        if not self.size:
            return
        hi = min(hi, Binmap.MAX_CHUNKS)
        qd = self.queued
        if lo >= hi or not qd.any_in(lo, hi):
            return  # nothing queued in [lo, hi): the usual HAVE at a seeder
        self.stamp += 1
        pos = lo
        while (c := qd.find_filled(pos, hi)) is not None:
            self.size -= 1 + self.extra.pop(c, 0)
            qd.discard(c)
            self.dropped[c] = self.stamp
            pos = c + 1
        if not self.size:
            self.q.clear()
            self.dropped.clear()
        elif len(self.dropped) > self.COMPACT_AT + 2 * self.size:
            self._compact()

    def _compact(self) -> None:
        """Cut the dropped copies out of the entries; ``dropped`` empties.
        O(entries + dropped log dropped), run once ``dropped`` outgrows the
        queue, so amortised O(log n) per drop."""
        dropped = self.dropped
        keys = sorted(dropped)
        out: deque[list[int]] = deque()
        for lo, hi, st in self.q:
            i = bisect_left(keys, lo)
            pos = lo
            while i < len(keys) and keys[i] < hi:
                c = keys[i]
                if dropped[c] >= st:  # a dead copy: split the entry around it
                    if pos < c:
                        out.append([pos, c, st])
                    pos = c + 1
                i += 1
            if pos < hi:
                out.append([pos, hi, st])
        self.q = out
        dropped.clear()

    def clear(self) -> None:
        self.q.clear()
        self.size = 0
        self.queued.clear()
        self.extra.clear()
        self.dropped.clear()

    def __len__(self) -> int:
        return self.size


class Channel:
    """State of one channel; the Peer drives it."""

    def __init__(self, local_id: int, addr: Any, initiator: bool, now: float,
                 mss: int, queue_limit: int, slow_start: bool,
                 ledbat_target: float | None = None) -> None:
        self.local_id = local_id
        self.remote_id = 0
        self.addr = addr
        self.initiator = initiator
        #: where the channel is in its life cycle (:mod:`swift.core.chanstate`);
        #: changed only by :meth:`handle`
        self.state = ChannelState.INIT if initiator else ChannelState.REPLY
        self.opened_at = now
        self.need_hs = True
        self.hs_sent = -1.0
        self.hs_tries = 0
        #: the options of the peer's HANDSHAKE (None until it came)
        self.peer_options: HandshakeOptions | None = None
        # remote availability (HAVE and ACK), section 3.2 / 4.3
        self.peer_have = Binmap()
        self.peer_any = False
        self.peer_max = 0
        #: live UMT secure tune-in (6.1.2.4): first chunk of the first signed
        #: munro we pushed to this peer and when we last pushed one; the
        #: push ends (``munro_done``) once its HAVE/ACK shows a chunk there
        #: or later
        self.pushed_munro: tuple[int, float] | None = None
        self.munro_done = False
        self.pending_sigs: dict[int, tuple[int, bytes]] = {}
        #: what we announced to this peer with HAVE
        self.announced = Binmap()
        self.have_version = -1
        #: position in the peer's have log up to which HAVEs were sent; -1:
        #: not yet scanned (the first HAVEs come from the whole binmap)
        self.have_pos = -1
        # upload side
        self.upload = RangeQueue(queue_limit)
        self.choking = False  # we choke them
        self.send_choke: bool | None = None
        #: chunk -> (send time, bytes, send order) of the DATA in flight
        self.data_out: dict[int, tuple[float, int, int]] = {}
        #: (chunk, send time, send order) of the DATA in ``data_out``, oldest
        #: first (entries whose chunk was acknowledged since are skipped lazily)
        self.send_log: deque[tuple[int, float, int]] = deque()
        #: DATA sent so far (the send order of the last one)
        self.send_seq = 0
        #: send time and order of the newest DATA acknowledged, and its RTT:
        #: DATA sent before it and unacknowledged for longer than that RTT
        #: plus the reordering window was lost (RACK, RFC 8985 6.2)
        self.acked_sent = -1.0
        self.acked_seq = -1
        self.acked_rtt = 0.0
        #: chunks sent again while a copy was in flight: their ACK gives no
        #: RTT and does not move RACK (Karn's rule; RFC 8985 6.2 step 2)
        self.ambiguous: set[int] = set()
        #: pacing: the earliest time the next DATA may leave (upload.py)
        self.pace_at = 0.0
        #: DATA sent again because the receiver lost it (not by its request)
        self.resent = 0
        #: chunks in flight that loss repair already sent again: lost once
        #: more, they wait for the peer to ask again (it may not want them)
        self.retried: set[int] = set()
        #: RACK reordering window in quarter RTTs (RFC 8985 6.2 reo_wnd_mult):
        #: doubles when a chunk taken for lost was acknowledged after all
        #: (upload.py ``_spurious``), halves after 16 clean recoveries
        self.reo_mult = 1
        self.reo_clean = 0
        #: tail loss probes (RFC 8985 7) sent since the last ACK, and when
        self.probes = 0
        self.probe_at = 0.0
        #: the probe may be one new DATA beyond the window (RFC 8985 7.3)
        self.probe_credit = False
        #: chunks sent to this peer (their hashes need not be repeated, 5.3)
        self.sent = Binmap()
        #: what the peer has or was sent (``peer_have`` or ``sent``): the
        #: hashes it holds or has on the way, for the uncles of new DATA
        #: (5.3); one view per channel, not one per DATA
        self.known = _Either(self.peer_have, self.sent)
        #: ``ledbat_target``: LEDBAT's TARGET in s (None: Ledbat.TARGET, 25 ms)
        self.ledbat = Ledbat(mss=mss, target=ledbat_target, slow_start=slow_start,
                             init_cwnd=4 if slow_start else None)
        self.served = 0.0  # WFQ: bytes served
        # download side
        self.choked = False  # they choke us
        self.requests: dict[int, float] = {}
        #: requests answered since ``requests`` was last compacted (peer.py)
        self.req_pops = 0
        #: order in which requests were sent (served in that order, 3.7)
        self.req_seq: dict[int, int] = {}
        self.next_seq = 0
        self.last_progress = now
        self.pending_hashes: dict[int, bytes] = {}
        self.hash_order: list[tuple[int, bytes]] = []
        self.acks: list[tuple[int, int]] = []
        self.cancels: list[tuple[int, int]] = []
        self.extra_have: list[int] = []
        #: chunks whose deadline this peer missed: asked elsewhere (bounded)
        self.missed: set[int] = set()
        self.bad = 0
        self.distrusted = False
        # measurements for ranking (paper III-A)
        self.rtt = 0.5
        #: smallest request->DATA time seen: the path RTT without our own
        #: requests queued at the sender (like LEDBAT's base delay)
        self.min_rtt = 0.5
        self.rtt_var = 0.0
        self.dip = 0.1
        self.dip_var = 0.0
        self.last_data_in: float | None = None
        self.received = 0
        self.lost = 0
        self.k = 1.0
        #: chunks/s received from this peer (EWMA, updated once a second)
        self.rate = 0.0
        self.rate_mark = (now, 0)
        #: rate samples that saw data: none means start-up (slow start,
        #: requests.py); ``rate`` itself decays to exactly 0.0 on a silent
        #: channel
        self.rate_samples = 0
        # liveness (section 3.12)
        self.last_recv = now
        self.last_send = now
        self.sent_since_recv = 0
        self.pex_requested = False
        #: defective PEX_REScert certificates received (then the rest are ignored)
        self.bad_certs = 0
        #: when we last sent PEX_REQ: PEX_RES* is taken only shortly after (3.10)
        self.pex_asked: float | None = None
        self.next_pex = 0.0
        #: the flush's bookkeeping (:class:`DirtySet`): this channel's place
        #: in the Peer's channel order, and the wake-up it is filed under
        self.order = 0
        self.wake_at = math.inf

    @property
    def established(self) -> bool:
        return self.state is ChannelState.EST

    def handle(self, event: ChannelEvent) -> ChannelState:
        """Move by the transition table (:data:`swift.core.chanstate.TRANSITIONS`);
        an event the table has no entry for raises ``LocalProtocolError``."""
        self.state = next_state(self.state, event)
        return self.state

    def note_data(self, now: float, rtt: float | None) -> None:
        """Update DIP and RTT averages on a DATA arrival (eq. 1 inputs)."""
        if self.last_data_in is not None:
            d = now - self.last_data_in
            self.dip_var = 0.75 * self.dip_var + 0.25 * abs(d - self.dip)
            self.dip = 0.75 * self.dip + 0.25 * d
        self.last_data_in = now
        if rtt is not None:
            if rtt < self.min_rtt:
                self.min_rtt = rtt
            self.rtt_var = 0.75 * self.rtt_var + 0.25 * abs(rtt - self.rtt)
            self.rtt = 0.875 * self.rtt + 0.125 * rtt
        self.received += 1
        # k grows for unstable links: big variation of RTT or DIP (paper III-A)
        unstable = self.rtt_var > self.rtt or self.dip_var > 2 * self.dip
        self.k = min(8.0, self.k + 0.01) if unstable else max(1.0, self.k - 0.01)

    @property
    def loss_ratio(self) -> float:
        """Lost / received packets (paper III-A, L_r)."""
        return self.lost / max(1, self.received)


class DirtySet:
    """Which channels the Peer's next flush visits (docs/sim.md, "Hot spots" 4).

    ``Peer.datagrams_to_send`` used to visit every channel on every call;
    most had nothing to say.  A channel is visited when an event may have
    given it something to send (:meth:`mark`: a datagram from its peer, a
    new channel, a handshake to repeat), when its own deadline passed
    (:meth:`wake`: handshake back-off, the next PEX_REQ), or on a flush that
    visits every channel (:meth:`mark_all`: a chunk verified, a timer, a
    channel closed, chunks freed from flight, a late request somewhere).
    A channel that sent something stays marked: it may have more.
    """

    __slots__ = ("all", "marked", "_heap", "_seq")

    def __init__(self) -> None:
        #: the next flush visits every channel
        self.all = True
        self.marked: set[Channel] = set()
        #: (time, push count, channel) wake-ups; an entry whose time is no
        #: longer its channel's ``wake_at`` is stale and skipped
        self._heap: list[tuple[float, int, Channel]] = []
        self._seq = 0

    def mark(self, ch: Channel) -> None:
        self.marked.add(ch)

    def mark_all(self) -> None:
        self.all = True

    def wake(self, ch: Channel, at: float) -> None:
        """Visit ``ch`` at the first flush at or after ``at``."""
        if at != ch.wake_at:
            ch.wake_at = at
            self._seq += 1
            heapq.heappush(self._heap, (at, self._seq, ch))

    def take(self, now: float) -> list[Channel] | None:
        """The channels the flush at ``now`` visits, in channel order (None:
        every channel), and start over."""
        heap = self._heap
        marked = self.marked
        while heap and heap[0][0] <= now:
            at, _, ch = heapq.heappop(heap)
            if ch.wake_at == at:
                ch.wake_at = math.inf
                marked.add(ch)
        self.marked = set()
        if self.all:
            self.all = False
            return None
        return sorted(marked, key=_order)


def _order(ch: Channel) -> int:
    return ch.order
