"""Per-channel state (RFC 7574 section 3.11): one remote peer in one swarm.

A :class:`Channel` is the identity of a channel (IDs, address, who
initiated, its life-cycle state) and one part per owner of the rest
(docs/swift-peer-state.md), as aioquic keeps recovery and congestion control
out of the connection: each part owns its fields and the logic that only
touches them, and is tested alone (tests/swift/test_swift_channel_parts.py).

===================  ==========================  ==========================
part (attribute)     class                       owner
===================  ==========================  ==========================
``hs``               :class:`HandshakeState`      Peer (handshake)
``liveness``         :class:`Liveness`            Peer (timers, 3.12)
``remote``           :class:`RemoteHave`          Peer (HAVE and ACK in)
``ann``              :class:`AnnounceState`       Announcer (HAVE, ACK out)
``down``             :class:`DownloadSide`        RequestScheduler
``path``             :class:`PathEstimate`        RequestScheduler (ranking)
``verify``           :class:`VerifyState`         Verifier (INTEGRITY in)
``send``             :class:`~swift.core.sendside.SendSide`  UploadScheduler
``pex``              :class:`PexState`            Pex
``tunein``           :class:`TuneInState`         TuneIn
===================  ==========================  ==========================
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from deliverykit.protocol import Address
from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.core.chanstate import ChannelEvent, ChannelState, next_state
from swift.core.ledbat import OwnQueue
from swift.core.picker import Availability
from swift.core.sendside import SendSide
from swift.wire.codec import HandshakeOptions, supported_set
from swift.wire.constants import MsgType

#: profile "auto": seconds from our first (RFC 7574) handshake to the one in
#: the libswift dialect, which libswift answers (it drops the first unanswered)
AUTO_SECOND_TRY = 0.5


@dataclass(slots=True)
class HandshakeState:
    """Our HANDSHAKE to the peer and the peer's options (3.1, 7)."""

    #: when the channel was opened
    opened_at: float
    #: a HANDSHAKE is due (the initiator's until answered; the reply once)
    need: bool = True
    #: when our last HANDSHAKE went out (-1: never)
    sent_at: float = -1.0
    #: HANDSHAKEs sent
    tries: int = 0
    #: the options of the peer's HANDSHAKE (None until it came)
    options: HandshakeOptions | None = None

    def backoff(self, auto: bool) -> float:
        """Seconds before our unanswered handshake goes out again: 2, 4, 8, 8...;
        under profile "auto" (``auto``) the second one, in the libswift
        dialect, is another handshake rather than a retransmission and
        follows after ``AUTO_SECOND_TRY``."""
        if self.tries == 1 and auto:
            return AUTO_SECOND_TRY
        return min(8.0, 2.0 ** self.tries)

    def sent(self, now: float, again: bool) -> None:
        """A HANDSHAKE went out now; ``again``: another is due until answered."""
        self.need = again
        self.sent_at = now
        self.tries += 1

    def takes(self, t: MsgType) -> bool:
        """Whether the peer takes message type ``t``: its Supported Messages
        option (7.10) lists it, or it sent none (then it takes every one)."""
        o = self.options
        sup = None if o is None else o.supported
        return sup is None or t in supported_set(sup)

    @property
    def discard_window(self) -> int | None:
        """The peer's live discard window in chunks (7.9), None: not given."""
        o = self.options
        return None if o is None else o.discard_window


@dataclass(slots=True)
class Liveness:
    """When the peer was last heard and spoken to (3.12)."""

    last_recv: float
    last_send: float
    #: datagrams sent since the peer was last heard
    sent_since_recv: int = 0

    def heard(self, now: float) -> None:
        self.last_recv = now
        self.sent_since_recv = 0

    def spoke(self, now: float) -> None:
        self.last_send = now
        self.sent_since_recv += 1

    def dead(self, now: float, dead_after: float) -> bool:
        """Silent for ``dead_after`` s while we sent three datagrams (3.12)."""
        return now - self.last_recv > dead_after and self.sent_since_recv >= 3


class RemoteHave:
    """What the peer announced it has (HAVE and ACK, 3.2, 4.3)."""

    __slots__ = ("have", "some", "top")

    def __init__(self) -> None:
        #: the chunks the peer announced
        self.have = Binmap()
        #: it announced anything at all
        self.some = False
        #: one past the highest chunk it announced
        self.top = 0

    def add(self, lo: int, hi: int, availability: Availability | None,
            window: int | None = None) -> bool:
        """The peer has ``[lo, hi)``: count the newly announced chunks in
        ``availability`` (who has what, over every channel) and, live, keep
        only the last ``window`` chunks below the top (its discard window,
        6.2).  True when something was new."""
        if hi > Binmap.MAX_CHUNKS:  # 64-bit addressing (live): beyond any binmap
            hi = Binmap.MAX_CHUNKS
        ph = self.have
        if hi - lo == 1:  # one chunk (libswift's HAVE i, ACK i): test-and-set
            if not ph.add_new(lo):
                return False  # nothing new: libswift's ACK repeats what its HAVE announced
            if availability is not None:
                availability.add_range(lo, hi, 1)
        else:
            if lo >= hi or ph.find_empty(lo, hi) is None:
                return False  # nothing new: libswift's HAVE repeats what its ACK announced
            pos = lo
            while pos < hi and availability is not None:  # newly announced chunks only
                a = ph.find_empty(pos, hi)
                if a is None:
                    break
                b = ph.find_filled(a, hi)
                b = hi if b is None else b
                availability.add_range(a, b, 1)
                pos = b
            ph.set_range(lo, hi)
        self.some = True
        if hi > self.top:
            self.top = hi
            if window is not None and window < B.NONE32 and hi > window:
                ph.reset_range(0, hi - window)  # sliding discard window (6.2)
        return True

    def withdraw(self, availability: Availability | None) -> None:
        """The channel closed: its chunks leave ``availability``."""
        if availability is None:
            return
        for lo, hi in self.have.ranges():
            availability.add_range(lo, hi, -1)


class AnnounceState:
    """What we announced to the peer, and the ACKs and HAVEs queued for it."""

    __slots__ = ("announced", "version", "pos", "acks", "extra_have", "have_at", "have_due")

    def __init__(self) -> None:
        #: what we announced to this peer with HAVE
        self.announced = Binmap()
        #: the Announcer's version at the last HAVEs (-1: none yet)
        self.version = -1
        #: position in our HAVE log up to which HAVEs were sent; -1: not yet
        #: scanned (the first HAVEs come from the whole binmap)
        self.pos = -1
        #: (chunk, one-way delay in us) of the DATA to acknowledge (8.7)
        self.acks: list[tuple[int, int]] = []
        #: chunks to announce by HAVE outside the log (libswift's dialect)
        self.extra_have: list[int] = []
        #: when our last HAVE went to this peer (-inf: never); a HAVE that
        #: would go alone waits until ``have_at + have_interval`` (config.py)
        self.have_at = -math.inf
        #: when HAVEs waiting for that interval are due (inf: none waiting)
        self.have_due = math.inf

    def restart(self) -> None:
        """Our reply was lost, and the HAVEs it carried: announce everything again."""
        self.announced = Binmap()
        self.pos = self.version = -1

    def take_acks(self, single: bool) -> list[tuple[int, int, int]]:
        """The queued ACKs as ``(lo, hi, delay)`` ranges in chunk order, each
        with the delay of its last chunk (``single``: one chunk each, as
        libswift takes them); the queue empties."""
        acks = sorted(self.acks)
        self.acks.clear()
        out: list[tuple[int, int, int]] = []
        if not acks:
            return out
        lo, d = acks[0]
        hi = lo + 1
        for c, dl in acks[1:] + [(-1, 0)]:
            if c == hi and not single:
                hi += 1
                d = dl
                continue
            out.append((lo, hi, d))
            lo, hi, d = c, c + 1, dl
        return out


class ChangeCount:
    """A count read and bumped by several modules (an instance attribute:
    a class attribute changed per request would invalidate the
    interpreter's caches of every ``DownloadSide`` attribute)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


#: bumped by every change of any channel's ``requests`` (in this process):
#: the end game's walk is memoised while it stays the same
#: (``RequestScheduler._late``), a tick that changes it visits every channel
REQUEST_CHANGES = ChangeCount()


class DownloadSide:
    """Our requests to the peer (3.7, 3.8) and its choke.

    The requests are a FIFO in three parallel lists (docs/swift-perf.md,
    session 19: lists, not ``array``s, whose item stores parse their
    argument: those cost ~5k instructions per chunk more than the dicts), in
    request order but for a re-asked chunk, which keeps its slot with a newer
    time and sequence number: slot ``k`` in ``[ends[0], ends[1])`` holds chunk
    ``chunk[k]`` (``FREE``: answered, dropped or skipped since), asked at
    ``sent[k]`` with sequence number ``seq[k]`` (``NOSEQ``: taken by
    :meth:`skipped`); ``slot`` maps each chunk asked to its slot and is the
    only dict (``c in slot``, ``len(slot)``: what is asked).  The head is
    always a live slot (or ``ends`` is ``[0, 0]``); slots past the tail are
    unused.  When the tail reaches the end of the lists the live slots move
    to the front in order, and the lists double when at least half of them
    is live.  Chunks are >= 0.  ``requests`` and ``req_seq`` are read-only
    views in the shape of the two dicts this replaced."""

    __slots__ = ("choked", "slot", "chunk", "sent", "seq", "ends", "next_seq", "last_progress",
                 "missed", "cancels")

    #: ``chunk[k]`` of a slot no longer asked; ``seq[k]`` taken by :meth:`skipped`
    FREE = -1
    NOSEQ = -1
    #: slots of the first lists (they double as needed)
    FIRST = 16

    def __init__(self, now: float) -> None:
        #: the peer chokes us
        self.choked = False
        #: chunk -> its slot in the lists below, for every chunk asked
        self.slot: dict[int, int] = {}
        #: per slot: the chunk, when it was asked, its sequence number (the
        #: order in which requests were sent: served in that order, 3.7)
        self.chunk: list[int] = []
        self.sent: list[float] = []
        self.seq: list[int] = []
        #: [head, tail): the slots in use, oldest first
        self.ends = [0, 0]
        self.next_seq = 0
        #: when the peer last delivered (or requests were first made)
        self.last_progress = now
        #: chunks whose deadline this peer missed: asked elsewhere (bounded)
        self.missed: set[int] = set()
        #: ``[lo, hi)`` ranges to CANCEL
        self.cancels: list[tuple[int, int]] = []

    # -- readers ----------------------------------------------------------------

    @property
    def requests(self) -> Mapping[int, float]:
        """chunk -> when it was asked, oldest slot first (read-only view)."""
        return RequestsView(self)

    @property
    def req_seq(self) -> Mapping[int, int]:
        """chunk -> its request's sequence number, for those :meth:`skipped`
        has not taken, oldest slot first (read-only view)."""
        return SeqView(self)

    def chunks(self) -> list[int]:
        """The chunks asked, oldest slot first."""
        chunk = self.chunk
        h, t = self.ends
        return [c for k in range(h, t) if (c := chunk[k]) >= 0]

    def items(self) -> list[tuple[int, float]]:
        """(chunk, when asked) of each request, oldest slot first."""
        chunk, sent = self.chunk, self.sent
        h, t = self.ends
        return [(c, sent[k]) for k in range(h, t) if (c := chunk[k]) >= 0]

    def sent_at(self, c: int) -> float | None:
        """When chunk ``c`` was asked (None: it is not)."""
        k = self.slot.get(c)
        return None if k is None else self.sent[k]

    # -- writers ----------------------------------------------------------------

    def _room(self) -> int:
        """The tail is at the end of the lists: move the live slots to the
        front (in order) and double the lists when at least half of them
        is live.  Returns the new tail."""
        chunk, sent, seq, slot, ends = self.chunk, self.sent, self.seq, self.slot, self.ends
        n = 0
        for k in range(ends[0], ends[1]):
            c = chunk[k]
            if c >= 0:
                if k != n:
                    chunk[n] = c
                    sent[n] = sent[k]
                    seq[n] = seq[k]
                    slot[c] = n
                n += 1
        cap = len(chunk)
        if 2 * n >= cap:
            more = max(cap, self.FIRST)
            chunk.extend([-1] * more)
            sent.extend([0.0] * more)
            seq.extend([-1] * more)
        ends[0] = 0
        ends[1] = n
        return n

    def _advance(self) -> None:
        """The head slot was freed: move the head to the next live slot
        (none left: the lists start again from slot 0)."""
        chunk, ends = self.chunk, self.ends
        h, t = ends
        while h < t and chunk[h] < 0:
            h += 1
        if h == t:
            ends[0] = ends[1] = 0
        else:
            ends[0] = h

    def ask(self, c: int, now: float) -> None:
        """Chunk ``c`` is requested now (its slot keeps its place if re-asked)."""
        REQUEST_CHANGES.n += 1
        k = self.slot.get(c)
        if k is None:
            ends = self.ends
            k = ends[1]
            if k == len(self.chunk):
                k = self._room()
            ends[1] = k + 1
            self.chunk[k] = c
            self.slot[c] = k
        self.sent[k] = now
        self.seq[k] = self.next_seq
        self.next_seq += 1

    def ask_all(self, chunks: list[int], now: float) -> bool:
        """:meth:`ask` for each of ``chunks`` in order (one frame per flush,
        not per chunk); True when one of them was asked already (re-asked:
        its slot keeps its place, so the requests may be out of order now)."""
        slot, chunk, sent, seq, ends = self.slot, self.chunk, self.sent, self.seq, self.ends
        q = self.next_seq
        t = ends[1]
        cap = len(chunk)
        again = False
        for c in chunks:
            k = slot.get(c)
            if k is None:
                if t == cap:
                    ends[1] = t
                    t = self._room()
                    cap = len(chunk)
                k = t
                t += 1
                chunk[k] = c
                slot[c] = k
            else:
                again = True
            sent[k] = now
            seq[k] = q
            q += 1
        ends[1] = t
        self.next_seq = q
        REQUEST_CHANGES.n += len(chunks)
        return again

    def drop(self, c: int) -> None:
        """Chunk ``c`` is no longer asked of this peer (it must be asked)."""
        REQUEST_CHANGES.n += 1
        k = self.slot.pop(c)
        self.chunk[k] = -1
        if k == self.ends[0]:
            self._advance()

    def clear(self) -> None:
        REQUEST_CHANGES.n += 1
        self.slot.clear()
        ends = self.ends
        ends[0] = ends[1] = 0

    def skipped(self, i: int) -> list[int]:
        """DATA for chunk ``i`` came: requests are served in order, so ones
        asked for before it (beyond a reordering margin of one) were lost or
        skipped; they are dropped and returned.  Takes ``i``'s sequence
        number (a second call for it finds nothing)."""
        s = self.slot.get(i)
        if s is None:
            return []
        seq = self.seq
        seq_i = seq[s]
        seq[s] = -1
        h = self.ends[0]
        if seq_i < 0 or s == h:
            return []
        chunk = self.chunk
        gone = [k for k in range(h, s)
                if chunk[k] >= 0 and (q := seq[k]) >= 0 and seq_i - q > 1]
        if not gone:
            return []
        REQUEST_CHANGES.n += 1
        slot = self.slot
        older = []
        for k in gone:
            c = chunk[k]
            older.append(c)
            del slot[c]
            chunk[k] = -1
        if gone[0] == h:
            self._advance()
        return older

    def answered(self, i: int) -> float | None:
        """Chunk ``i`` came: its request leaves; when it was asked (None: not)."""
        k = self.slot.pop(i, None)
        if k is None:
            return None
        REQUEST_CHANGES.n += 1
        chunk = self.chunk
        chunk[k] = -1
        ends = self.ends
        if k == ends[0]:  # _advance inlined: this runs once per chunk received
            h, t = k + 1, ends[1]
            while h < t and chunk[h] < 0:
                h += 1
            if h == t:
                ends[0] = ends[1] = 0
            else:
                ends[0] = h
        return self.sent[k]


class RequestsView(Mapping[int, float]):
    """``DownloadSide.requests``: chunk -> when asked, oldest slot first
    (read-only; for tests and readers not yet moved to the lists)."""

    __slots__ = ("_d",)

    def __init__(self, d: DownloadSide) -> None:
        self._d = d

    def __getitem__(self, c: int) -> float:
        return self._d.sent[self._d.slot[c]]

    def __contains__(self, c: object) -> bool:
        return c in self._d.slot

    def __len__(self) -> int:
        return len(self._d.slot)

    def __iter__(self) -> Iterator[int]:
        return iter(self._d.chunks())

    def __repr__(self) -> str:
        return f"RequestsView({dict(self._d.items())!r})"


class SeqView(Mapping[int, int]):
    """``DownloadSide.req_seq``: chunk -> sequence number for the requests
    whose number :meth:`DownloadSide.skipped` has not taken (read-only)."""

    __slots__ = ("_d",)

    def __init__(self, d: DownloadSide) -> None:
        self._d = d

    def __getitem__(self, c: int) -> int:
        q = self._d.seq[self._d.slot[c]]
        if q < 0:
            raise KeyError(c)
        return q

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __iter__(self) -> Iterator[int]:
        d = self._d
        seq, chunk = d.seq, d.chunk
        h, t = d.ends
        return iter([c for k in range(h, t) if (c := chunk[k]) >= 0 and seq[k] >= 0])


class PathEstimate:
    """Measurements of the path from the peer for ranking (paper III-A, eq. 1)."""

    __slots__ = ("rtt", "min_rtt", "rtt_var", "dip", "dip_var", "last_data_in", "received",
                 "lost", "k", "rate", "rate_mark", "rate_samples")

    def __init__(self, now: float) -> None:
        #: request->DATA time, smoothed
        self.rtt = 0.5
        #: smallest request->DATA time seen: the path RTT without our own
        #: requests queued at the sender (like LEDBAT's base delay)
        self.min_rtt = 0.5
        self.rtt_var = 0.0
        #: DATA inter-arrival time, smoothed
        self.dip = 0.1
        self.dip_var = 0.0
        self.last_data_in: float | None = None
        #: chunks verified from this peer, and requests it lost
        self.received = 0
        self.lost = 0
        #: eq. 1's k: grows for unstable links
        self.k = 1.0
        #: chunks/s received from this peer (EWMA, updated once a second)
        self.rate = 0.0
        self.rate_mark = (now, 0)
        #: rate samples that saw data: none means start-up (slow start,
        #: requests.py); ``rate`` itself decays to exactly 0.0 on a silent
        #: channel
        self.rate_samples = 0

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

    def sample_rate(self, now: float) -> None:
        """The rate sample since the last one (EWMA over halves)."""
        t0, n0 = self.rate_mark
        if now > t0:
            r = (self.received - n0) / (now - t0)
            self.rate = r if self.rate == 0 else 0.5 * self.rate + 0.5 * r
            if self.received > n0:
                # a sample that saw data ends the start-up window growth;
                # the one taken right after connect never does
                self.rate_samples += 1
        self.rate_mark = (now, self.received)

    def window(self, max_outstanding: int) -> int:
        """Requests to keep outstanding: what the peer delivers in max(0.5 s,
        4 RTT), as libswift's HINT planning, from the rate measurement.
        The plan horizon: 4 x the path RTT without queueing (min RTT), or the
        smoothed RTT (which includes data queued on the path) capped at 1 s:
        the smoothed RTT also counts our own requests waiting at the sender,
        so uncapped it would grow that queue without bound."""
        plan = max(0.25, 4 * self.min_rtt, min(1.0, self.rtt))
        rate = self.rate if self.rate > 0 else 32 / plan
        window = int(min(max_outstanding, max(8, plan * rate * 1.5)))
        if not self.rate_samples:
            # no rate sample yet (the first 0.5 s): grow like slow start, one
            # more request per chunk delivered, so a fast peer is not held
            # at the initial guess for the whole first period
            window = min(max_outstanding, max(window, 2 * self.received))
        return window

    @property
    def loss_ratio(self) -> float:
        """Lost / received packets (paper III-A, L_r)."""
        return self.lost / max(1, self.received)


class VerifyState:
    """The hashes and signatures that came ahead of the peer's DATA (5.3,
    6.1), and its record of chunks that failed (12.7)."""

    __slots__ = ("hashes", "hash_order", "sigs", "bad", "distrusted")

    #: INTEGRITY messages kept per datagram at most
    MAX_HASHES = 4096
    #: SIGNED_INTEGRITY messages kept at most
    MAX_SIGS = 64

    def __init__(self) -> None:
        #: bin -> hash of the INTEGRITY messages since the last DATA
        self.hashes: dict[int, bytes] = {}
        #: (bin, hash) in arrival order
        self.hash_order: list[tuple[int, bytes]] = []
        #: bin -> (timestamp, signature) of SIGNED_INTEGRITY messages
        self.sigs: dict[int, tuple[int, bytes]] = {}
        #: chunks from this peer that failed verification
        self.bad = 0
        #: a chunk failed: on probation, one request at a time
        self.distrusted = False

    def add_hash(self, lo: int, hi: int, h: bytes) -> None:
        """INTEGRITY for chunks ``[lo, hi)``; ignored unless they form a bin.
        The cap is on ``hash_order``, which grows with every message
        (``hashes`` is keyed by bin, so it is never longer): a peer repeating
        one bin without DATA must not grow it forever."""
        w = hi - lo
        if w > 0 and not (w & (w - 1)) and lo % w == 0 and len(self.hash_order) < self.MAX_HASHES:
            b = B.make(w.bit_length() - 1, lo // w)
            self.hashes[b] = h
            self.hash_order.append((b, h))

    def add_sig(self, lo: int, hi: int, ts: int, sig: bytes) -> None:
        """SIGNED_INTEGRITY for ``[lo, hi)`` (a bin, else ignored); bounded,
        oldest out: the signature sent right before a DATA (6.1.1, 6.1.2.3)
        must never be the one dropped."""
        w = hi - lo
        if w > 0 and not (w & (w - 1)) and lo % w == 0:
            key = B.make(w.bit_length() - 1, lo // w)
            sigs = self.sigs
            if key not in sigs and len(sigs) >= self.MAX_SIGS:
                del sigs[next(iter(sigs))]
            sigs[key] = (ts, sig)

    def clear(self) -> None:
        """The DATA they came for was judged: they go."""
        self.hashes.clear()
        self.hash_order.clear()
        self.sigs.clear()

    def blame(self) -> int:
        """A chunk from the peer failed: distrusted; the number failed so far."""
        self.bad += 1
        self.distrusted = True
        return self.bad


@dataclass(slots=True)
class PexState:
    """Peer exchange with the peer (3.10)."""

    #: the peer asked for peers (PEX_REQ): answer at the next flush
    requested: bool = False
    #: when we last sent PEX_REQ: PEX_RES* is taken only shortly after (3.10)
    asked: float | None = None
    #: when we ask it for peers next
    next_req: float = 0.0
    #: defective PEX_REScert certificates received (then the rest are ignored)
    bad_certs: int = 0

    def answer_expected(self, now: float, window: float) -> bool:
        """A PEX_RES* now answers our PEX_REQ (sent at most ``window`` s ago)."""
        return self.asked is not None and now - self.asked <= window


@dataclass(slots=True)
class TuneInState:
    """Live UMT secure tune-in (6.1.2.4): first chunk of the first signed
    munro we pushed to this peer and when we last pushed one; the push ends
    (``done``) once its HAVE/ACK shows a chunk there or later."""

    pushed: tuple[int, float] | None = None
    done: bool = False

    def due(self, lo: int, peer_top: int, now: float, alone: bool) -> bool:
        """Whether a datagram to the peer carries the munro whose first chunk
        is ``lo`` now (then it is noted as pushed).  Over once the peer's
        announcements reach ``peer_top`` past the first munro pushed;
        ``alone`` (the datagram carries nothing else): only the first push,
        or a repeat after 1 s of silence."""
        first = lo if self.pushed is None else self.pushed[0]
        if peer_top > first:
            self.done = True  # the peer knows this munro or a later one
            return False
        if alone and self.pushed is not None and now - self.pushed[1] < 1.0:
            return False
        self.pushed = (first, now)
        return True


class Channel:
    """One channel: its identity and one part per owner (module docstring);
    the Peer drives it."""

    __slots__ = ("local_id", "remote_id", "addr", "initiator", "state", "hs", "liveness",
                 "remote", "ann", "down", "path", "verify", "send", "pex", "tunein",
                 "order", "wake_at")

    def __init__(self, local_id: int, addr: Address, initiator: bool, now: float,
                 mss: int, queue_limit: int, slow_start: bool,
                 ledbat_target: float | None = None, own: OwnQueue | None = None) -> None:
        self.local_id = local_id
        self.remote_id = 0
        self.addr = addr
        self.initiator = initiator
        #: where the channel is in its life cycle (:mod:`swift.core.chanstate`);
        #: changed only by :meth:`handle`
        self.state = ChannelState.INIT if initiator else ChannelState.REPLY
        self.hs = HandshakeState(now)
        self.liveness = Liveness(now, now)
        self.remote = RemoteHave()
        self.ann = AnnounceState()
        self.down = DownloadSide(now)
        self.path = PathEstimate(now)
        self.verify = VerifyState()
        self.send = SendSide(queue_limit, mss, slow_start, self.remote.have, ledbat_target, own)
        self.pex = PexState()
        self.tunein = TuneInState()
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

    def idle(self, now: float) -> bool:
        """True when a flush at ``now`` would visit no channel: none marked,
        not every channel, no wake-up due."""
        heap = self._heap
        return not self.marked and not self.all and not (heap and heap[0][0] <= now)

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
