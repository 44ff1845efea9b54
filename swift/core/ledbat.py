"""LEDBAT congestion control (RFC 6817 section 2.4.2), one per channel.

Sans-IO: every method takes ``now`` (seconds, float).  Delays are in
seconds.  The RTT estimator and congestion timeout follow RFC 6298 as
section 2.4.2 suggests (update_CTO).  An optional slow start (off by
default) doubles cwnd per RTT until the queuing delay passes TARGET/2 or a
loss, as libswift's SLOW_START_CONTROL did; RFC 6817 section 2.4.2 lets
implementations be no more aggressive than TCP, which slow start is not.
After a congestion timeout the window restarts at 1 MSS and slow-starts
back to half the window the timeout found (``ssthresh``), as TCP does after
an RTO (RFC 5681 3.1): growing one MSS per RTT from 1 MSS left a seeder's
channels far below their share for seconds after a receiver stalled
(docs/swift.md, "Seeder link use").
"""

from __future__ import annotations

import math
from collections import deque

from swift._fast import ledbat_on_ack


class Ledbat:
    """Sender-side LEDBAT state for one channel."""

    #: section 3.2.2: "TARGET MUST be 100 milliseconds or less"
    MAX_TARGET = 0.100
    #: libswift's TARGET (its LEDBAT_TARGET, 25 ms)
    LIBSWIFT_TARGET = 0.025
    #: s, every channel's default (RFC 7574 peers and libswift alike; the RFC
    #: allows any TARGET up to 100 ms).  25 ms leaves a competing cubic flow
    #: 89-97 % of a 10 Mbit/s link where 100 ms left 56-95 %; with the linear
    #: picker's twist (PeerConfig.picker_twist, on by default) the simulator's
    #: seeder-limited flash crowds still share (docs/ledbat.md, "The default TARGET")
    TARGET = LIBSWIFT_TARGET
    GAIN = 1.0
    #: LEDBAT++'s multiplicative-decrease constant C (draft-irtf-iccrg-ledbat-plus-plus
    #: 4.3 recommends 1): above TARGET, W shrinks by C * W * (delay/TARGET - 1) per RTT
    DECREASE = 1.0
    #: the largest divisor of GAIN on a short path (LEDBAT++ 4.2: 16)
    GAIN_DIVISOR_MAX = 16
    BASE_HISTORY = 10
    CURRENT_FILTER = 4
    INIT_CWND = 2
    MIN_CWND = 2
    ALLOWED_INCREASE = 1
    #: bytes the window never grows past.  PPSPP has no receive window, and
    #: everything waiting in the receiver's socket is in our flight: a
    #: libswift leecher's socket (SO_RCVBUF 1 MiB, i.e. 2 MiB of kernel
    #: memory) holds ~1 MB of datagrams (measured on loopback: 126 of 8 KiB,
    #: 910 of 1 KiB), so a flight below that never overruns it, however
    #: long libswift is descheduled.  Slow start had reached a 1 MB window
    #: within 30 ms toward it and overran its socket (docs/swift-perf.md,
    #: "The stall of a libswift leecher").  768 KiB in flight is 0.77 GB/s
    #: at a 1 ms loopback RTT, 7.7 MB/s per channel at 100 ms
    MAX_CWND = 768 * 1024
    #: s, the shortest time the largest flight is remembered for RFC 6817's cap
    #: (cwnd <= flightsize + ALLOWED_INCREASE MSS, flightsize taken as the
    #: largest of the last RTT): a sender's own cycle of reading a batch of ACKs
    #: and refilling its window (1-5 ms on this 2-core machine, loaded) must not
    #: look like a window it did not use.  Toward libswift on loopback (RTT
    #: 0.1-1 ms) each batch found the flight drained by the one before, and the
    #: cap cut a full window to what was left: 35 KiB to 3 KiB in 80 ms, 2 DATA
    #: per flush (docs/swift-perf.md, session 10).  On paths whose RTT is longer
    #: the RTT holds it, as before.  20 ms was tried: in the simulator (where a
    #: sender refills at once) a loss-free 6-leecher crowd on short paths then
    #: took 3 queue drops (test_swift_picker_twist.py)
    PEAK_HOLD = 0.005
    #: the increase scaled down while the base delay is young and has been shown
    #: polluted: GAIN x age / YOUNG_S, age the seconds since the first delay sample,
    #: once the base has fallen more than YOUNG_REVISION x TARGET below the base of
    #: the first CURRENT_FILTER samples (``first_delay``; docs/ledbat.md, "A base
    #: delay learnt in a standing queue" and "A gate that a clean path does not open").  A flow
    #: that joins a queue another flow keeps standing (cubic TCP's, never emptied)
    #: learns that queue as its base and reads only the queue's swing above it; its
    #: share is built by the increase below TARGET, and what it holds props up the
    #: troughs it learns its base from.  Such a base shows itself by falling, by
    #: more than 5 ms within 0.1-4.5 s in 28 of 30 testbed joins, where a flow that
    #: starts on an empty path fell 0.4-3.2 ms below its first sample and is left
    #: alone.  The reference is RFC 6817's own noise filter (the minimum of
    #: CURRENT_FILTER samples), not the first sample alone: a start-up sample
    #: read late by a busy receiver (5-7 ms spikes among 1 ms samples on the
    #: testbed) had opened the gate on a clean path.  On by default since session 15:
    #: the latecomer at 77 ms left TCP 91-96 % in 12 of 12 runs (69-95 % off), and
    #: ppspp-first never opened the gate in 18 case runs (docs/ledbat.md, "A gate
    #: that a clean path does not open")
    YOUNG_BASE = True
    #: s, how long the base delay counts as young: one of RFC 6817's base-history
    #: buckets (2.4.2: one minimum per minute), the shortest span the RFC keeps a
    #: minimum over
    YOUNG_S = 60.0
    #: the fall of the base below the first delay sample, as a fraction of TARGET, that
    #: shows the first samples carried a queue: one that moved the reading by a fifth of
    #: TARGET or more
    YOUNG_REVISION = 0.2

    def __init__(self, mss: int = 1024, target: float | None = None,
                 slow_start: bool = False, init_cwnd: int | None = None) -> None:
        self.mss = mss
        if target is not None:
            if not 0 < target <= self.MAX_TARGET:
                raise ValueError(f"LEDBAT TARGET must be in (0, 100] ms (RFC 6817 3.2.2), "
                                 f"not {target * 1000:g} ms")
            self.TARGET = target
        self.cwnd = float((init_cwnd or self.INIT_CWND) * mss)
        self.flightsize = 0
        self.current_delays: deque[float] = deque(maxlen=self.CURRENT_FILTER)
        self.base_delays: deque[float] = deque([math.inf] * self.BASE_HISTORY,
                                               maxlen=self.BASE_HISTORY)
        self.last_rollover = -math.inf
        self.cto = 1.0
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.last_ack = None  # type: float | None
        self.last_loss = -math.inf
        self.slow_start = slow_start
        #: DATA found lost, and the window halvings they caused (at most one per RTT:
        #: a burst of losses is one congestion event)
        self.losses = 0
        self.loss_events = 0
        self.acks = 0
        #: congestion timeouts fired (no ACK within a CTO)
        self.timeouts = 0
        #: after a congestion timeout: the window regrows by slow start up to
        #: half the window the timeout found (as TCP after an RTO, RFC 5681
        #: 3.1 / RFC 6298 5.7) instead of by one MSS per RTT from 1 MSS
        self.ssthresh = 0.0
        #: largest flightsize in the last RTT: the "flightsize" of the cwnd cap,
        #: so a window acknowledged in a burst is not mistaken for idleness
        self.peak_flight = 0
        self.peak_time = 0.0
        #: smallest RTT sample: ``srtt - min_rtt`` is the queue on the round
        #: trip, which the one-way delay does not see when it is the sender's
        #: own (ACKs waiting in its socket while it is short of CPU)
        self.min_rtt = math.inf
        #: MIN(base_delays), kept by :meth:`on_ack` (the only writer of base_delays)
        self._base = math.inf
        #: time of the first delay sample (-inf before it): the base delay's age, and the
        #: base delay after the first CURRENT_FILTER samples (inf before them; RFC 6817's
        #: FILTER over the first samples): how far the base has fallen since (YOUNG_BASE)
        self.history_start = -math.inf
        self.first_delay = math.inf

    # -- helpers ----------------------------------------------------------------

    @property
    def base_delay(self) -> float:
        """Minimum one-way delay over BASE_HISTORY minutes."""
        return min(self.base_delays)

    @property
    def queuing_delay(self) -> float:
        """FILTER(current_delays) - MIN(base_delays); FILTER is MIN over 4 samples."""
        if not self.current_delays:
            return 0.0
        return min(self.current_delays) - self.base_delay

    @property
    def gain(self) -> float:
        """GAIN scaled by the path (draft-irtf-iccrg-ledbat-plus-plus 4.2):
        GAIN / min(16, ceil(2 * TARGET / base RTT)), so that a short path grows no
        faster per second than one whose RTT is 2 x TARGET; GAIN until an RTT is known."""
        if not 0 < self.min_rtt < math.inf:
            return self.GAIN
        q = 2 * self.TARGET / self.min_rtt  # inf for a subnormal min_rtt: the cap, as in C
        return self.GAIN / (self.GAIN_DIVISOR_MAX if q >= self.GAIN_DIVISOR_MAX else math.ceil(q))

    def young_gain(self, now: float) -> float:
        """:attr:`gain` as the increase uses it at ``now``: with YOUNG_BASE, scaled by
        age / YOUNG_S while the base delay is younger than YOUNG_S and has fallen more
        than YOUNG_REVISION x TARGET below the base of the first CURRENT_FILTER delay
        samples (``first_delay``); else :attr:`gain`."""
        g = self.gain
        if self.YOUNG_BASE and self.first_delay - self._base > self.YOUNG_REVISION * self.TARGET:
            age = now - self.history_start
            if age < self.YOUNG_S:
                g = g * age / self.YOUNG_S if age > 0 else 0.0
        return g

    def _update_cto(self, rtt: float) -> None:
        # RFC 6298 section 2
        if self.srtt is None:
            self.srtt = rtt
            self.rttvar = rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.cto = max(0.2, self.srtt + 4 * self.rttvar)

    # -- events -----------------------------------------------------------------

    def can_send(self, nbytes: int) -> bool:
        """True when ``nbytes`` more fit in the congestion window."""
        return self.flightsize + nbytes <= self.cwnd or self.flightsize == 0

    def on_send(self, nbytes: int, now: float) -> None:
        """Account a DATA datagram put in flight."""
        if self.flightsize == 0:
            self.last_ack = now  # the congestion timer starts with data in flight
        self.flightsize += nbytes
        if self.flightsize >= self.peak_flight:
            self.peak_flight = self.flightsize
            self.peak_time = now

    def on_ack(self, delay: float, bytes_acked: int, now: float, rtt: float | None = None) -> None:
        """Section 2.4.2 "on acknowledgement" with one delay sample: in C
        (deliverykit/csrc/swift.c ``ledbat_on_ack``; the twin, with the
        section's arithmetic step by step, is swift._fast.py_ledbat_on_ack)."""
        ledbat_on_ack(self, delay, bytes_acked, now, rtt)

    def on_delivered(self, nbytes: int, now: float) -> None:
        """Data known delivered without a delay sample (a HAVE covering it,
        its ACK lost): leaves flight, no window change."""
        self.flightsize = max(0, self.flightsize - nbytes)
        self.last_ack = now
        if self.srtt is not None:
            self.cto = max(0.2, self.srtt + 4 * self.rttvar)

    def on_loss(self, nbytes: int, now: float) -> None:
        """Section 2.4.2 "on data loss": cwnd halves at most once per RTT
        (further losses within that RTT, of the same flight, leave it); the
        lost bytes leave flightsize (the sender queues them again as new
        data).  Called by the sender's loss detection from the ACK stream
        (upload.py: RACK, about 1.25 RTT after the loss; a tail loss probe
        at the end of a flight) and, last, by the 1 s loss horizon."""
        self.losses += 1
        self.slow_start = False
        self.ssthresh = 0.0  # a loss ends a timeout recovery
        rtt = self.srtt if self.srtt is not None else 1.0
        if now - self.last_loss >= rtt:
            self.cwnd = min(self.cwnd, max(self.cwnd / 2, float(self.MIN_CWND * self.mss)))
            self.last_loss = now
            self.loss_events += 1
        self.flightsize = max(0, self.flightsize - nbytes)

    def check_timeout(self, now: float) -> bool:
        """"No ACKs within a CTO": cwnd = 1 MSS, CTO doubles.  True if fired."""
        if self.flightsize > 0 and self.last_ack is not None and now - self.last_ack > self.cto:
            self.timeouts += 1
            self.ssthresh = max(self.ssthresh, self.cwnd / 2, float(self.MIN_CWND * self.mss))
            self.cwnd = float(self.mss)
            self.cto = min(60.0, 2 * self.cto)
            self.last_ack = now
            self.flightsize = 0
            return True
        return False


class OwnQueue:
    """A peer's view of the queue on its own uplink, from what its channels' delay
    samples read: one per peer, shared by its channels' :class:`Ledbat`.

    Every channel sends through the same uplink, so DATA sent at one instant waits
    in the same queue there whichever channel it is for.  A channel past its first
    CURRENT_FILTER samples notes, per delay sample, when that DATA was sent and how
    far the sample lies above its own base delay (:meth:`note`).  A channel taking
    its first samples asks how much of each was our own uplink's queue
    (:meth:`at`), from the other channels' readings of DATA sent at about the same
    time, and YOUNG_BASE's reference (``Ledbat.first_delay``) leaves it out.

    Why: a seeder's new channel whose first samples sat in the burst its own other
    channels had just queued (slow start toward a short-RTT leecher) saw the base
    fall once that burst drained, and had its increase scaled down for a minute as
    if it had joined a standing queue (docs/sim.md, "Session 18: hetero-delay's
    last leecher is a slow-start race at the seeder").  The view cannot tell such
    a burst from a queue the siblings keep standing, where the gate's restraint is
    what RFC 6817 4.4's latecomer needs, so it is off by default.  A peer with
    one channel has no other readings, so its channel's reference is RFC 6817's as
    before.  The estimate errs low, never high, where it can: per other channel the
    reading sent nearest in time (within SPAN), then the least of them, and a
    channel's reading is only its own base delay's view (a base learnt in a queue
    reads low); a reading too high (another channel's receiver's own downlink
    queue, read by every sibling at once) can only keep the gate shut, which is
    RFC 6817's behaviour."""

    __slots__ = ("readings", "young", "_next_expiry")

    #: whether a Peer gives its channels a view (off by default: in the simulated
    #: VoD swarm the gate this view keeps shut was holding back channels that join
    #: a queue their siblings keep standing, and the swarm stalled again without
    #: it; docs/ledbat.md, "The peer's own queue")
    ENABLED = False
    #: s, how far apart in send time another channel's reading may be
    SPAN = 0.005
    #: readings kept (the newest): a few RTTs of the other channels' ACKs
    KEEP = 1024
    #: s after its first DATA that a channel waits for its first samples as a
    #: young one (a receiver that never acknowledges must not keep the others
    #: noting for ever)
    WAIT = 2.0

    def __init__(self) -> None:
        #: (send time, queueing delay read, who read it), in ACK order
        self.readings: deque[tuple[float, float, object]] = deque(maxlen=self.KEEP)
        #: the channels taking their first samples -> until when they count as such.
        #: Readings are noted only while one is: the peer sends its ACKs through
        #: SendSide.on_ack then, and through the C sendside_recv otherwise
        self.young: dict[object, float] = {}
        self._next_expiry = math.inf

    def start(self, who: object, now: float) -> None:
        """``who`` sent its first DATA at ``now``: young until its first samples."""
        until = self.young[who] = now + self.WAIT
        if until < self._next_expiry:
            self._next_expiry = until

    def done(self, who: object) -> None:
        """``who`` has taken its first samples (or left)."""
        self.young.pop(who, None)

    def note(self, sent_at: float, queueing: float, who: object, now: float) -> None:
        """One delay sample of an established channel, at ``now``: DATA sent at
        ``sent_at`` read ``queueing`` seconds above ``who``'s base delay."""
        self.readings.append((sent_at, queueing, who))
        if now >= self._next_expiry:
            young = self.young = {w: t for w, t in self.young.items() if t > now}
            self._next_expiry = min(young.values(), default=math.inf)

    def at(self, sent_at: float, who: object) -> float:
        """The queue our uplink held for DATA sent at ``sent_at``, as the channels
        other than ``who`` read it (0 when none read DATA sent within SPAN of it)."""
        nearest: dict[object, tuple[float, float]] = {}
        span = self.SPAN
        for t, q, w in self.readings:
            d = abs(t - sent_at)
            if w is who or d > span:
                continue
            best = nearest.get(w)
            if best is None or d < best[0]:
                nearest[w] = (d, q)
        if not nearest:
            return 0.0
        least = min(q for _, q in nearest.values())
        return least if least > 0.0 else 0.0
