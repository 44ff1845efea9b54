"""The sender's state of one channel: requests received, DATA in flight, loss repair.

:class:`SendSide` is the part of a :class:`~swift.core.channel.Channel` the
:class:`~swift.core.upload.UploadScheduler` owns (docs/swift-peer-state.md):
the queue of chunks the peer asked for (:class:`RangeQueue`), the DATA in
flight and its send log, RACK's state (RFC 8985 6.2), the tail loss probe
(RFC 8985 7), pacing, LEDBAT (RFC 6817) and WFQ's bytes served.  Its methods
touch only this state (and the peer's availability, handed in), so it is
tested alone (tests/swift/test_swift_channel_parts.py); the scheduler decides
which channel sends and counts what happened.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque

from swift._fast import ledbat_on_ack
from swift.core.binmap import Binmap
from swift.core.content import _Either
from swift.core.ledbat import Ledbat, OwnQueue

#: bytes a channel may send back to back before pacing spaces its DATA
PACE_BURST = 65536
#: s of its own lag a channel's pacing makes up at the pacing rate when that is
#: more than ``PACE_BURST``: the sender wakes up on ACK batches and on a timer
#: asyncio rounds up to 1 ms, and a loaded machine deschedules it for
#: milliseconds.  With the credit capped at 64 KiB (8 DATA of 8 KiB) each
#: late wake-up let out one burst, the flight never passed it, and RFC 6817's
#: cap held the window at one burst plus 1 MSS (72.7 KiB toward a libswift
#: leecher on loopback, ~50 MB/s: docs/swift-perf.md, "At 8 KiB").  The same
#: figure as ``Ledbat.PEAK_HOLD`` (the sender's own cycle, 1-5 ms on this
#: 2-core machine, loaded); on the 10 Mbit/s testbed 5 ms at the pacing rate
#: is a few KiB, so ``PACE_BURST`` stays the bound there
PACE_LAG = Ledbat.PEAK_HOLD
#: RACK's reordering window grows to at most this many quarter RTTs: libswift
#: announces the DATA it did not acknowledge up to several RTTs later
REO_MULT_MAX = 64
#: s after a chunk's first loss during which loss repair keeps sending it
#: again, however often the copies are lost too.  A libswift leecher asks
#: again only when its request expires, 2 x max(1 s, 4 RTT) after it asked
#: (its HINT_TIME), and counts the chunk as outstanding until then: a chunk
#: given up after one lost copy stalled its file for up to 2 s (measured,
#: docs/swift-perf.md "The stall of a libswift leecher").  Bounded, since a
#: peer may have stopped wanting it (a live viewer past its window, a peer
#: that left); our own leecher asks again after its 0.5 s request timeout
REPAIR_FOR = 1.0


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



class SendSide:
    """What we send one peer: its requests queued, our DATA in flight, RACK,
    the tail loss probe, pacing, LEDBAT and WFQ's bytes served."""

    __slots__ = ("upload", "choking", "send_choke", "data_out", "send_log", "send_seq",
                 "acked_sent", "acked_seq", "acked_rtt", "ambiguous", "pace_at", "resent",
                 "retried", "lost_at", "given_up", "reo_mult", "reo_clean", "probes", "probe_at",
                 "probe_credit", "sent", "known", "ledbat", "served", "pace_rtt", "own",
                 "first_own")

    def __init__(self, queue_limit: int, mss: int, slow_start: bool, peer_have: Binmap,
                 ledbat_target: float | None = None, own: OwnQueue | None = None) -> None:
        #: the chunks the peer asked for (REQUESTs received, section 3.7)
        self.upload = RangeQueue(queue_limit)
        #: we choke the peer
        self.choking = False
        #: a CHOKE (True) or UNCHOKE (False) to send, None: nothing
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
        #: pacing: the earliest time the next DATA may leave
        self.pace_at = 0.0
        #: pacing's RTT (s; 0: no sample yet, LEDBAT's srtt is used): smoothed
        #: as RFC 6298's srtt, from each ACK's arrival time (the kernel's, when
        #: the driver passes it), so the time ACKs waited in our socket while
        #: we were busy does not slow our own pacing (LEDBAT's srtt keeps it:
        #: its round-trip-queue rule, the congestion timeout and RACK want it)
        self.pace_rtt = 0.0
        #: the peer's view of its uplink's queue, shared by its channels (None: this
        #: channel's LEDBAT alone, as RFC 6817 has it); and the least of this
        #: channel's first delay samples less what the view read for each, which
        #: becomes ``Ledbat.first_delay`` (YOUNG_BASE's reference) when lower
        self.own = own
        self.first_own = math.inf
        #: DATA sent again because the receiver lost it (not by its request)
        self.resent = 0
        #: chunks in flight that loss repair sent again (an ACK for one may be
        #: the original's: Karn, :meth:`spurious`)
        self.retried: set[int] = set()
        #: chunk -> when loss repair first found it lost: sent again while
        #: younger than ``REPAIR_FOR``, then left to the peer (:meth:`requeue`)
        self.lost_at: dict[int, float] = {}
        #: chunks whose repair stopped at ``REPAIR_FOR`` (left to the peer)
        self.given_up = 0
        #: RACK reordering window in quarter RTTs (RFC 8985 6.2 reo_wnd_mult):
        #: doubles when a chunk taken for lost was acknowledged after all
        #: (:meth:`spurious`), halves after 16 clean recoveries
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
        self.known = _Either(peer_have, self.sent)
        #: ``ledbat_target``: LEDBAT's TARGET in s (None: Ledbat.TARGET, 25 ms)
        self.ledbat = Ledbat(mss=mss, target=ledbat_target, slow_start=slow_start,
                             init_cwnd=4 if slow_start else None)
        #: WFQ: bytes served
        self.served = 0.0

    def choke(self) -> None:
        """Stop serving the peer (its chunks failed): CHOKE, queue dropped."""
        if not self.choking:
            self.choking = True
            self.send_choke = True
            self.upload.clear()

    def on_sent(self, i: int, size: int, now: float) -> None:
        """DATA for chunk ``i`` (``size`` bytes) left now: in flight, RACK's
        log, LEDBAT, pacing (the window over one RTT, ``pace_rtt``; up to
        ``PACE_BURST`` or ``PACE_LAG`` of the rate at once, whichever is
        more) and WFQ's bytes served."""
        self.sent.add(i)
        led = self.ledbat
        old = self.data_out.pop(i, None)
        if old is not None:  # asked again while in flight: one copy counts
            led.flightsize = max(0, led.flightsize - old[1])
        if old is not None or i in self.retried:
            if len(self.ambiguous) > 4096:  # bound: normally emptied by the ACKs
                self.ambiguous.clear()
            self.ambiguous.add(i)
        elif self.lost_at:
            self.lost_at.pop(i, None)  # asked for again since: a loss repair starts afresh
        seq = self.send_seq = self.send_seq + 1
        if seq == 1 and self.own is not None:
            self.own.start(self, now)  # young until its first delay samples (OwnQueue)
        self.data_out[i] = (now, size, seq)
        self.send_log.append((i, now, seq))
        self.probe_credit = False
        led.on_send(size, now)
        rtt = self.pace_rtt or led.srtt
        if rtt:  # pacing: the window over one RTT; the credit: PACE_BURST or PACE_LAG
            per_byte = rtt / led.cwnd
            credit = PACE_BURST * per_byte
            if credit < PACE_LAG:
                credit = PACE_LAG
            self.pace_at = max(self.pace_at, now - credit) + size * per_byte
        self.served += size

    def on_ack(self, lo: int, hi: int, delay_us: int, now: float,
               arrived: float | None = None) -> int:
        """ACK (8.7): retire acknowledged DATA, one LEDBAT delay sample.
        ``arrived``: when the datagram carrying it arrived (the kernel's
        time; None or later than ``now``: ``now``), for pacing's RTT.
        Returns how many of the chunks loss repair sent again had arrived
        after all (:meth:`spurious`)."""
        if delay_us >= 1 << 63:
            delay_us -= 1 << 64  # libswift clocks may run behind: signed sample
        acked = 0
        rtt = None
        sent_at = 0.0
        do = self.data_out
        newest, nseq = self.acked_sent, self.acked_seq
        amb = self.ambiguous
        spurious = self.spurious(lo, hi, now) if self.retried else 0
        for c in range(lo, hi) if hi - lo <= len(do) else [c for c in do if lo <= c < hi]:
            x = do.pop(c, None)
            if x is not None:
                acked += x[1]
                if amb and c in amb:  # sent twice: whose ACK is this? (Karn)
                    amb.discard(c)
                    continue
                sent_at = x[0]
                rtt = now - sent_at
                q = x[2] if len(x) > 2 else 0
                if x[0] > newest or (x[0] == newest and q > nseq):
                    newest, nseq = x[0], q  # RACK.segment (RFC 8985 6.2 step 2)
                    self.acked_rtt = rtt
        self.acked_sent, self.acked_seq = newest, nseq
        if rtt is not None:
            prt = (arrived - sent_at if arrived is not None and sent_at <= arrived <= now
                   else rtt)
            p = self.pace_rtt
            self.pace_rtt = prt if not p else 0.875 * p + 0.125 * prt
        if acked:  # Ledbat.on_ack without its frame (once per ACK; the C function it calls)
            led = self.ledbat
            delay = delay_us / 1e6
            ledbat_on_ack(led, delay, acked, now, rtt)
            own = self.own
            if own is not None and own.young:  # the peer's view of its uplink (OwnQueue)
                if led.acks > led.CURRENT_FILTER:
                    if rtt is not None:
                        own.note(sent_at, delay - led._base, self, now)
                elif self in own.young:  # YOUNG_BASE's reference less our own queue
                    adj = delay - own.at(sent_at, self) if rtt is not None else delay
                    if adj < self.first_own:
                        self.first_own = adj
                    if self.first_own < led.first_delay:
                        led.first_delay = self.first_own
                    if led.acks == led.CURRENT_FILTER:
                        own.done(self)
        return spurious

    def delivered_by_have(self, lo: int, hi: int, now: float) -> int:
        """A HAVE covering DATA whose ACK was lost retires it without a delay
        sample: DATA sent before the newest DATA acknowledged (its ACK came,
        this one's did not), or older than a congestion timeout.  Returns
        :meth:`spurious`'s count.

        Not by "older than 1.5 RTT" alone: libswift puts its HAVE before the
        ACK of the same chunk in one datagram, so with the smoothed RTT once
        below the real one every HAVE retired its chunk first, the ACK then
        gave LEDBAT no delay sample and the RTT estimate never recovered
        (test_swift_seeder_fastpath.py)."""
        do = self.data_out
        spurious = self.spurious(lo, hi, now) if self.retried else 0
        if not do or (hi - lo == 1 and lo not in do):
            return spurious  # libswift's HAVE right after the ACK for the same chunk
        led = self.ledbat
        old = now - max(1.5 * (led.srtt or 0.5), led.cto)
        newest, nseq = self.acked_sent, self.acked_seq
        # data_out is in send order ((time, seq) ascending: on_sent puts a chunk
        # sent again at the end), so what a HAVE may retire is a prefix of it,
        # empty while every DATA before the newest acknowledged was acknowledged
        # too: no walk over the HAVE's range (a libswift HAVE names a whole bin)
        hits = []
        for c, x in do.items():
            t = x[0]
            if not (t < newest or t < old
                    or (t == newest and (x[2] if len(x) > 2 else 0) < nseq)):
                break
            if lo <= c < hi:
                hits.append(c)
        for c in hits:
            led.on_delivered(do.pop(c)[1], now)
        return spurious

    def spurious(self, lo: int, hi: int, now: float) -> int:
        """An ACK or HAVE for chunks loss repair queued again: the original
        DATA arrived if the copy is still queued or left too recently to be
        the one acknowledged (RFC 8985 6.2 step 4 learns reordering from
        DSACK; this is our DSACK).  Then the reordering window doubles,
        beyond the RFC's one RTT (up to ``REO_MULT_MAX`` quarter RTTs):
        libswift acknowledges only the newest DATA of each burst it reads
        and announces the rest by HAVE, under load several RTTs later
        (measured: 30-80 ms after a 20 ms window at a 14 ms RTT), which made
        thousands of chunks of a 50 MiB transfer look lost (needless
        copies, LEDBAT halved every RTT).  A peer that acknowledges every
        DATA in order keeps the quarter RTT.  Returns how many were spurious."""
        retried = self.retried
        do = self.data_out
        young = now - 0.5 * (self.ledbat.srtt or 0.0)
        hits = [c for c in (range(lo, hi) if hi - lo <= 64 else list(retried))
                if lo <= c < hi and c in retried]
        if not hits:
            return 0
        retried.difference_update(hits)
        for c in hits:
            self.lost_at.pop(c, None)  # arrived: repair done
        spurious = sum(1 for c in hits if (x := do.get(c)) is None or x[0] > young)
        if spurious:
            self.reo_mult = min(2 * self.reo_mult, REO_MULT_MAX)
            self.reo_clean = 0
        return spurious

    def rack_pending(self) -> bool:
        """DATA was acknowledged since the oldest DATA in the log left: RACK
        (:meth:`detect_losses`) has something to judge."""
        log = self.send_log
        return bool(log) and self.acked_sent >= log[0][1]

    def detect_losses(self, now: float, peer_have: Binmap) -> list[int]:
        """RACK (RFC 8985 6.2): DATA sent before the newest acknowledged DATA
        (by send time, then send order: a window sent in one burst shares
        one time) and outstanding for longer than that DATA's RTT plus the
        reordering window (a quarter RTT, more once reordering was seen:
        :meth:`spurious`) was lost, unless the peer announced the chunk (in
        ``peer_have``: a HAVE without an ACK; libswift acknowledges only the
        newest DATA of a burst).  So a loss is found about 1.25 RTT after it
        was sent.  Amortised O(1) per DATA sent.  Returns the lost chunks
        (their hashes forgotten: sent again they carry their full uncles)."""
        log = self.send_log
        do = self.data_out
        led = self.ledbat
        rack_t, rack_seq = self.acked_sent, self.acked_seq
        wait = self.acked_rtt + self.reo_mult * 0.25 * (led.srtt or 0.0)  # RACK.rtt + reo_wnd
        lost = []
        while log:
            c, t, q = log[0]
            x = do.get(c)
            if x is None or x[0] != t:
                log.popleft()  # acknowledged, or sent again since
                continue
            if not (t < rack_t or (t == rack_t and q < rack_seq)) or t + wait > now:
                break  # sent after the newest acknowledged, or not overdue yet
            log.popleft()
            del do[c]
            if peer_have.has(c):
                led.on_delivered(x[1], now)  # announced by HAVE: it arrived
                continue
            led.on_loss(x[1], now)
            lost.append(c)
        if lost:
            self.reo_clean += 1
            if self.reo_clean >= 16:  # 16 recoveries without a spurious one (RFC 8985 6.2)
                self.reo_mult = max(1, self.reo_mult // 2)
                self.reo_clean = 0
            # DATA sent after these and still in flight either arrived or is
            # found lost here later
            self.forget_hashes(lost)
        return lost

    def rack_due(self) -> float | None:
        """When the oldest DATA in flight, if sent before the newest
        acknowledged DATA, becomes overdue for RACK (None: none is)."""
        log = self.send_log
        do = self.data_out
        while log:
            c, t, q = log[0]
            x = do.get(c)
            if x is None or x[0] != t:
                log.popleft()  # acknowledged, or sent again since (as detect_losses)
                continue
            if t < self.acked_sent or (t == self.acked_sent and q < self.acked_seq):
                # the same sum as detect_losses, so at this time it finds the loss
                return t + (self.acked_rtt + self.reo_mult * 0.25 * (self.ledbat.srtt or 0.0))
            return None
        return None

    def expire(self, now: float) -> None:
        """DATA unacknowledged for max(1 s, 2 CTO) counts as lost (LEDBAT)."""
        if self.data_out:
            horizon = now - max(1.0, 2 * self.ledbat.cto)
            old = [c for c, x in self.data_out.items() if x[0] < horizon]
            for c in old:
                self.ledbat.on_loss(self.data_out.pop(c)[1], now)
            self.forget_hashes(old)

    def congestion_timeout(self, now: float) -> list[int]:
        """LEDBAT's congestion timeout: the peer stopped acknowledging, so
        everything in flight is lost.  Returns those chunks, in send order,
        for :meth:`requeue` (a tail whose probes were lost too has no later
        ACK to show RACK the loss)."""
        if not self.ledbat.check_timeout(now):
            return []
        lost = self.in_flight()
        self.forget_hashes(lost)
        self.data_out.clear()
        self.send_log.clear()
        return lost

    def tail_probe(self, now: float) -> bool:
        """Tail loss probe (RFC 8985 7): no ACK for two RTTs with DATA in
        flight (backing off while unanswered): True when a probe is due now;
        then one more DATA may go beyond the window, the next queued chunk
        (7.3: new data first; ``probe_credit``) or, with none queued, the
        newest DATA again (:meth:`probe_chunk`).  Its ACK shows what came
        before it was lost (:meth:`detect_losses`) instead of the peer's
        request timeout finding out seconds later."""
        led = self.ledbat
        if not self.send_log or not led.srtt or led.last_ack is None:
            return False
        if led.last_ack > self.probe_at:
            self.probes = 0
        pto = max(2 * led.srtt, 0.01) * (1 << min(self.probes, 6))
        if now - max(led.last_ack, self.probe_at) < pto:
            return False
        self.probes += 1
        self.probe_at = now
        self.forget_hashes(self.in_flight())
        return True

    def probe_chunk(self) -> int | None:
        """The probe :meth:`tail_probe` found due: with chunks queued, credit
        for one beyond the window (None); else the newest DATA in flight,
        taken out of flight to be sent again (through :meth:`requeue`, which
        gives a repair copy up after ``REPAIR_FOR``).  A lost repair copy
        at the tail is probed like any DATA: no later ACK shows its loss."""
        if len(self.upload):
            self.probe_credit = True
            return None
        do = self.data_out
        for c, t, _ in reversed(self.send_log):
            x = do.get(c)
            if x is not None and x[0] == t:
                del do[c]
                led = self.ledbat
                led.flightsize = max(0, led.flightsize - x[1])  # the probe takes its place
                return c
        return None

    def in_flight(self) -> list[int]:
        """Chunks of the DATA in flight, in send order."""
        do = self.data_out
        return [c for c, t, _ in self.send_log if (x := do.get(c)) is not None and x[0] == t]

    def forget_hashes(self, chunks: list[int]) -> None:
        """DATA lost, or maybe lost: the hashes it carried may not have
        arrived, so later DATA must not count on them (5.3).  Without this a
        lost datagram made every later sibling unverifiable at the peer."""
        for c in chunks:
            self.sent.discard(c)

    def requeue(self, chunks: list[int], have: Binmap, peer_have: Binmap, now: float) -> int:
        """Queue lost DATA again, first in line (the peer asked for it):
        chunks we ``have`` and the peer does not, as often as they are lost
        while their first loss is younger than ``REPAIR_FOR``; older, the
        peer may no longer want them and asks again if it does (each copy
        is found lost by RACK or the tail loss probe, about an RTT after it
        left, and LEDBAT halves at most once per RTT: no storm).  Returns how
        many were queued."""
        if self.choking or not chunks:
            return 0
        retried = self.retried
        lost_at = self.lost_at
        again = []
        for c in chunks:
            retried.discard(c)
            first = lost_at.setdefault(c, now)
            if now - first > REPAIR_FOR:
                del lost_at[c]  # given up: the peer's re-request starts afresh
                self.given_up += 1
            elif have.has(c) and not peer_have.has(c):
                again.append(c)
            else:
                del lost_at[c]
        if len(retried) > 4096:  # bound: lost retries are normally removed above
            retried.clear()
        if len(lost_at) > 4096:  # bound: normally emptied by the ACKs (spurious)
            lost_at.clear()
        retried.update(again)
        if again:
            self.upload.push_front(again)
            self.resent += len(again)
        return len(again)
