"""Receiver-driven congestion control (paper section 3.2; RFC 3738 section 3.2).

The receiver joins cumulatively (level l only after levels 0..l-1), never
leaves a group before it goes quiescent (leave by waiting), measures loss
from the per-group sequence numbers and the multicast round-trip time from
join latencies as WEBRC does, and asks a pluggable *rate controller* for its
target rate.  At each epoch it joins the next level if the cumulative rate
after the join stays within the target.

Rate controllers (:mod:`m2c.core.controllers`, registered by name):

``webrc``  RFC 3738's equation-based controller: LOSSP from the two-filter
           W/X/Y/Z estimator (3.2.2.1), ARTT (3.2.2.2), REQN (3.2.2.3), slow
           start with SSR_P / TRR_P (3.2.2.6), TRATE (3.2.2.7).
``webrc-rfc`` the same equation with RFC 3738's own join rules and every MUST of
           3.2.3.6 and 3.2.2.6 (one join at a time, no join while JOINING, the
           four start-up exits); ``webrc`` and ``m2c`` use our faster join logic
           (several levels per start-up epoch, joins while one is pending).
``m2c``    M2C's TCP-like window (Lucas et al., Global Internet 2009), as far
           as we could reconstruct it without the M2C paper itself: a
           congestion window in packets grows by one per received packet in
           slow start and by 1/cwnd in congestion avoidance, halves once per
           loss event (one per ARTT, and none while the joined rate is still
           above the target, i.e. the previous reduction has not taken effect,
           for up to one sub_TSI: about one reduction per congestion episode, as
           TCP's one per window of data), and gives the target rate cwnd / ARTT.
           *Fast start*: the window starts at the rate already received on
           the base group times the RTT (not at 1 packet), so a late receiver
           ramps up from where the session is.  Not reconstructed: M2C's exact
           fairness constants, its RTT filter (we use WEBRC's) and any join
           timing rule beyond "one join per epoch, none during a loss event or
           a pending join".
           *Packet pairs* (ours, after PLM: Legout and Biersack, SIGMETRICS
           2000): the file sender sends its base packets in back-to-back pairs;
           the spacing of a pair at arrival is one packet's time at the
           bottleneck.  The median of the first ``PAIR_SAMPLES`` gives the
           estimate; the receiver joins at once up to it (if its own traffic
           loaded the link lightly while sampling, ``PAIR_LOAD``) and, until the
           first loss, joins back up to it whenever its groups have decayed
           below it, one level per epoch above it.  Loss still halves the window.
           *Random loss* (ours): a loss seen with no queue (``RANDOM_LOSS_PKTS``), or
           one that left a hole in a busy link's back-to-back departures while our
           packets fill that link (``HOLE_SLACK``, after Biaz's inter-arrival rule),
           or one seen while our packets alone fill a link we send below and both
           packets around it queued well below the fullest queue seen
           (``DRAIN_OVER``, after Spike), is loss on the link, not congestion: it
           starts no loss event.

Sender clock: PSNs are the sender's schedule indices, so every packet tells
the sender time at which it was due (``schedule.time_of``); the receiver keeps
a windowed minimum of ``now - due`` as its clock offset (one-way delay
included).  The checksum is no authentication, so a PSN is trusted only if it
is plausible: its due time lies within ``PLAUSIBLE_TSD`` time slots of the
current sender-time estimate (the PSN is near the index expected now, RFC 3738
4.2's per-channel packet sequence numbers follow the schedule).  Implausible
packets are dropped before they reach the offset, the loss tracker or the RTT
estimator.  The clock is first anchored (and re-anchored, after
``REANCHOR_TSD`` slots without one plausible packet) only when ``AGREE``
packets agree on the offset, so a single forged packet can anchor nothing.
"""

from __future__ import annotations

import math
from collections import deque

from m2c.core.controllers import (
    CONTROLLERS,
    M2CWindowController,
    RateController,
    WebrcController,
    WebrcRfcController,
    make_controller,
    reqn,
)
from m2c.core.events import Join, Leave
from m2c.core.groups import RateSchedule

__all__ = ["LossTracker", "RttEstimator", "WebrcController", "WebrcRfcController",
           "M2CWindowController",
           "ReceiverCC", "CONTROLLERS", "make_controller", "reqn"]

REORDER = 3  # a gap is a loss once a packet 3 PSNs later arrived (simple misordering)


class LossTracker:
    """Per-channel PSN accounting: received, lost, duplicated, reordered.

    A PSN more than ``max_pending`` away from the expected one (either way) is
    not trusted on its own: the LCT/M2C checksum is no authentication (anyone
    can compute it and the TSI is public), so one forged packet must not move
    ``expected``, or every genuine packet after it would look like a duplicate
    (a jump ahead) and no loss would ever be seen again.  Such packets are
    counted in ``strays``; only ``RESYNC`` consecutive far packets that follow
    one another (a genuine outage or restart) move the channel to them.
    """

    RESYNC = 3
    """far packets in a row, each at most ``RESYNC_STEP`` after the previous, to resync"""
    RESYNC_STEP = 64

    def __init__(self, max_pending: int = 4096) -> None:
        self.expected: dict[int, int] = {}
        self.pending: dict[int, set[int]] = {}
        self.received = 0
        self.lost = 0
        self.duplicates = 0
        self.reordered = 0
        self.late = 0
        """packets that arrived after being declared lost (they stay counted as lost)"""
        self.strays = 0
        """far-off PSNs ignored (not received, not lost): forged, or before a resync"""
        self.resyncs = 0
        self.max_pending = max_pending
        self._lost_recent: dict[int, set[int]] = {}
        self._run: dict[int, tuple[int, int, int]] = {}
        """channel -> (first, last, count) of the current run of far packets"""
        self.last_lost: list[int] = []
        """the PSNs the last :meth:`on_packet` that returned a loss declared lost (empty
        for a resync's gap, whose PSNs were never tracked); stale after a call returning 0"""

    def reset(self, ch: int) -> None:
        """Forget a channel (after a leave)."""
        self.expected.pop(ch, None)
        self.pending.pop(ch, None)
        self._lost_recent.pop(ch, None)
        self._run.pop(ch, None)

    def _far(self, ch: int, psn: int, exp: int) -> int:
        run = self._run.get(ch)
        if run is not None and 0 < psn - run[1] <= self.RESYNC_STEP:
            run = (run[0], psn, run[2] + 1)
        else:
            run = (psn, psn, 1)
        if run[2] < self.RESYNC:
            self._run[ch] = run
            self.strays += 1
            return 0
        # a consistent run: the channel really moved (outage, sender restart)
        first, last, count = run
        self.strays -= count - 1
        self.received += count
        self.resyncs += 1
        del self._run[ch]
        self.pending[ch] = set()
        self._lost_recent.pop(ch, None)
        self.expected[ch] = last + 1
        gap = max(0, first - exp) + (last - first + 1 - count)
        self.lost += gap
        self.last_lost = []
        return gap

    def on_packet(self, ch: int, psn: int) -> int:
        """Register a packet; returns the number of packets newly declared lost."""
        exp = self.expected.get(ch)
        pend = self.pending.setdefault(ch, set())
        if exp is None:
            self.expected[ch] = psn + 1
            self.received += 1
            return 0
        if abs(psn - exp) > self.max_pending:
            return self._far(ch, psn, exp)
        self._run.pop(ch, None)
        if psn < exp:
            gone = self._lost_recent.get(ch)
            if psn in pend:
                pend.discard(psn)
                self.reordered += 1
                self.received += 1
            elif gone is not None and psn in gone:
                gone.discard(psn)
                self.late += 1
                self.received += 1
            else:
                self.duplicates += 1
            return 0
        self.received += 1
        if psn > exp:
            pend.update(range(exp, psn))
        self.expected[ch] = psn + 1
        newly = [m for m in pend if psn - m >= REORDER]
        if newly:
            self.last_lost = newly
            gone = self._lost_recent.setdefault(ch, set())
            for m in newly:
                pend.discard(m)
                gone.add(m)
            if len(gone) > self.max_pending:
                horizon = psn - self.max_pending
                self._lost_recent[ch] = {m for m in gone if m > horizon}
        self.lost += len(newly)
        return len(newly)


class RttEstimator:
    """WEBRC's ARTT (RFC 3738 3.2.2.2) from join-to-first-packet latencies."""

    ALPHA = 0.25

    def __init__(self, p: float = 0.75, initial: float = 0.5, floor: float = 0.0) -> None:
        self.p = p
        self.artt = initial
        self.v = initial * initial
        self.k = 0
        self.floor = floor

    def on_first_packet(self, join_time: float, first_time: float, expected_wait: float,
                        base: bool) -> float:
        """Update with one join latency; returns the MRTT sample."""
        if base or self.k == 0:
            mrtt = max(first_time - join_time, 1e-6)
            self.artt, self.v = mrtt, mrtt * mrtt
            self.k = 1
            return mrtt
        mrtt = (first_time - join_time) - expected_wait
        omega = self.ALPHA * self.artt * self.artt / self.v if self.v > 0 else self.ALPHA
        omega = min(omega, 1.0)
        rho = omega / (1 - (1 - omega) ** (self.k + 1))
        self.v = (1 - rho) * self.v + rho * mrtt * mrtt
        self.artt = max(self.p * self.artt, (1 - rho) * self.artt + rho * mrtt)
        self.k += 1
        return mrtt

    @property
    def rtt(self) -> float:
        return max(self.artt, self.floor)


class ReceiverCC:
    """Sans-IO receiver congestion control: feed packets and timers, get Join/Leave."""

    STARTUP_JOINS = 4
    """levels joined per epoch before the first loss or rate lag (ours, to shorten the
    climb from the base group; one per epoch afterwards, as in RFC 3738).  Session 7
    tried larger batches (x2.5-3 the received rate): a 6 Mb/s receiver of 2 MiB went
    from 1.26x to 1.19x its link-ideal time, but the last batch then overshoots a deep
    queue before any delay shows (tests/m2c/test_m2c_receiver_cc.py's standing queue),
    and 0.5-2 Mb/s receivers lost 15-30 % of their packets"""

    RANDOM_LOSS_PKTS = 2.0
    """ours: a loss seen while the packets before it queued less than this many packet
    times at the received rate (and less than ``RANDOM_LOSS_QDELAY``, whichever is
    longer) is no drop-tail overflow but loss on the link (radio, a noisy line): it
    is counted in ``random_losses`` and starts no loss event.  One such loss early in
    start-up ended it at a tenth of a 5 Mb/s link (2.05x its link-ideal time)"""
    RANDOM_LOSS_QDELAY = 0.005

    HOLE_SLACK = 0.5
    """ours, after Biaz's inter-arrival rule (Biaz and Vaidya, ASSET 1999; mBiaz in Cen, Cosman
    and Voelker, IEEE/ACM ToN 2003) for a loss seen with a queue: random loss strikes
    after the bottleneck's queue (the lost packet used the link), a drop-tail overflow
    before it.  On a busy link (the packet after the gap was already queued when the one
    before it had left) packets leave back to back, one packet time T apart, so a lost
    packet that used the link leaves a hole: the two around it arrive at least
    (n + 1 + HOLE_SLACK) T apart, n the packets received between them.  Such a loss is
    counted in ``random_losses`` (and ``link_losses``) and starts no loss event"""
    HOLE_SHARE = 0.95
    """the hole rule holds only while our own packets fill the busy link: over the last
    ``HOLE_SAMPLES`` back-to-back spacings, count x T (their 10th percentile) >= this
    share of their sum.  Another flow on the bottleneck (another session, TCP) opens holes of
    its own, and then every loss stays congestion, as before"""
    HOLE_OWN = False
    """ours (session 15, off by default): the ``HOLE_SHARE`` test leaves out the spacings
    across packets of ours the loss tracker declared lost.  A packet lost on a busy link
    leaves a hole of one packet time, and the share test read those holes of our own as
    another flow's packets: at 1.4-2 % random loss, four such holes among the last 64
    spacings (share 64/68 = 0.941) switched the hole rule off, and the next random loss
    halved the window (r387 and r500 of the 1,000-receiver draw, seed 0: a hole of
    exactly two packet times, the packet after it queued 10-19 ms).  Another flow's
    packets fall between packets of ours that all arrived, so its holes still count"""
    HOLE_OVER = 1.25
    """and only while the joined groups send at most this many times what the link
    carries (1/T, about one level above it); further above, the queue overflows whatever
    this packet died of (without it a 1.1 Mb/s link with 1.2 % random loss joined 2.1x
    its rate and lost 19 % of its packets, 11 % before)"""
    DRAIN_OVER = 0.97
    """ours, after Spike (Tobe et al., "Achieving moderate fairness for UDP flows by
    path-status classification", LCN 2000; in Cen, Cosman and Voelker, IEEE/ACM ToN
    2003) for a loss seen with a queue that left no hole: while our packets alone fill
    the link (``HOLE_SHARE``) and the joined groups send at most this share of what the
    link carries (1/T), a drop-tail queue fed by us drains; it overflows only when full.
    Such a loss is on the link when both packets around it queued clearly less than the
    fullest queue seen (``DRAIN_PKTS``, ``DRAIN_SHARE``): a queue still full, draining,
    stays congestion.  Counted in ``random_losses`` and ``drain_losses``"""
    DRAIN_PKTS = 4.0
    DRAIN_SHARE = 0.2
    """the margin below the fullest queueing delay seen: the larger of this many packet
    times T and this share of that delay (an overflow's neighbours queue within about
    two packet times of a full queue, which is at least the fullest seen so far)"""
    HOLE_SAMPLES = 64
    HOLE_HISTORY = 256
    """arrivals kept to find a lost packet's neighbours (a loss is declared 3 PSNs of its
    channel later: up to ~150 packets at the top rate when the channel is the base)"""

    STARTUP_EPOCH = 0.5
    """ours: start-up epochs are half as long for the m2c controller (the climb from the
    base group to a 4 Mb/s link took ~0.5 s, a third of the 4 Mb/s receiver's excess
    over its link-ideal time)"""

    STARTUP_QDELAY = 0.010
    """ours (RFC 3738 3.2.2.6 ends slow start when MRTT grows; we watch the one-way
    delay): start-up ends when every packet of an epoch queued behind more than this
    long, or behind ``STARTUP_QPKTS`` packets at the received rate, whichever is
    longer: a standing queue at the bottleneck, i.e. the link is full before any loss"""
    STARTUP_QPKTS = 2.5
    HOLD_QDELAY = 0.003
    """ours: until the first loss, no join while each of the last ``HOLD_PKTS``
    packets queued longer than this and than one packet time at the received rate
    (the path is filling: the joins already made have not shown their full effect)"""
    HOLD_PKTS = 4
    HOLD_RATIO = 0.9
    """ours: likewise no join before the first loss after an epoch that brought less
    than this share of what the confirmed joined groups sent in it (8 packets or more)"""

    PAIR_SAMPLES = 3
    """ours (packet-pair probing, PLM: Legout and Biersack, SIGMETRICS 2000): the
    bottleneck estimate is the median of the first this many base-group pairs (the
    sender emits its base packets in back-to-back pairs, ``SenderCore.pairs``)"""
    PAIR_AGREE = 0.1
    """the estimate is in after two samples when they agree within this share (the
    smaller is taken; the third, when it comes, gives the median, which lies between
    them); else after ``PAIR_SAMPLES``.  A 4.4-5.9 Mb/s lossless receiver of 4 MB
    reached its link ~0.1 s sooner (1.113-1.132x -> 1.101-1.113x alone)"""
    PAIR_SHARE = 1.0
    """start-up joins go at once up to this share of the estimate, and no higher
    until the first loss or lag (then the window governs, as before)"""
    PAIR_LOAD = 0.5
    """the receiver joins at once up to the estimate only if its joined rate stayed at
    most this share of the estimate while the samples were taken: a token bucket (the
    testbed's tbf) lets a pair through unspread when it holds tokens for both (then
    ``PAIR_MAX`` drops it), and only partly spread, too fast, when it is nearly empty.
    Otherwise the estimate only caps the start-up batches (``STARTUP_JOINS``)"""
    LOSS_EVENTS = False
    """ours (session 17, off by default): loss events as a TCP flow sharing the queue
    sees them, one per congestion episode.  A TCP sender's next loss event comes when
    the queue overflows again after a reduction drained it (its own, or another
    flow's); our smooth packets instead find a drop-tail queue that TCP keeps full
    many times per TCP cycle (the lock-out: 16-23 % of our packets lost where TCP
    loses 1.8 % at 1 Mb/s), and loss events came ~0.8 times a second.  With this switch
    a loss starts a new loss event only if a drain of the queue began between the last
    event's lost packets and this loss's (by their due times: a loss is declared three
    packets late, and packets dropped while the queue stayed full are often declared as
    it drains): a packet of ours queued at least
    ``EVENT_DRAIN`` of the peak (and ``EVENT_DRAIN_MIN``) below the fullest queueing
    delay since the queue last refilled (``_queue_swing``).  A queue that never drains
    still gives one loss event per span: the longer of one sub_TSI (the span the
    controller already answers with one reduction) and the time a TCP window of our
    target rate takes to grow back from its halving (half the window in ARTTs), at
    most ``EVENT_SPAN_MAX`` sub_TSIs.  Measured (docs/m2c-results.md, session 17): the
    events fall by 40 % at 1 Mb/s but the window's halvings do not (the controller
    already ignores the events it drops), so the share is unchanged; alone on a link
    (the heterogeneous pair) halvings fall to a quarter or half and the loss rises"""
    EVENT_DRAIN = 0.2
    EVENT_DRAIN_MIN = 0.005
    EVENT_SPAN_MAX = 4.0

    PAIR_ONE = False
    """ours (session 16, off by default): the estimate is in on the first base pair, and
    that pair anchors the sender clock (two agreeing packets that are a base pair, where
    ``AGREE`` asks for three: the first pair and half the second).  The jump to the
    estimate then comes on the first pair, one pair interval (70-94 ms, the base
    group's packet clock) sooner.  One pair's spacing is checked against no other: on
    a FIFO path a pair that left back to back arrives at least one bottleneck packet
    time apart (another flow's packets between the two spread it: an estimate too low),
    and ``PAIR_MAX`` drops the unspread pairs of a token bucket holding tokens for both;
    a bucket nearly empty spreads a pair partly, too fast, which a second pair could
    have shown (``PAIR_AGREE``).  Later pairs still refine the estimate that caps the
    joins back up to it.  A forger now needs two packets (a base pair) to anchor the
    clock, not three"""
    PAIR_ONE_GUARD = False
    """ours (session 16, second step, off by default; only with ``PAIR_ONE``): after
    the jump to the estimate, no start-up join above it until a whole start-up epoch
    has been counted with every group of the jump flowing (each one's first packet in
    before the epoch began).  The hold rules (``HOLD_QDELAY``, ``HOLD_RATIO``) then
    judge an epoch that carried the jump's full rate.  Without it the epoch right
    after a jump on the first pair joined one level above the estimate on 8 packets,
    before the jump's queue could show (r319 of the 1,000-receiver draw, seed 0: 208
    packets/s on a 158 packets/s link at 0.15 s).  A rule on the ARTT does not hold
    it: the jump's own first packets bring the ARTT down to ~0.027 s"""
    PAIR_AT_ONCE = True
    """ours: the jump to the estimate is made on the packet that completes it, not at
    the next start-up epoch (25 ms later on average, 50 ms at most).  Measured (session
    12, second part): a lossless 5.8 Mb/s receiver of 4 MB left its link idle 0.15 s
    between its first packet and a full link, 30 ms of it this wait"""
    RTT_CHECK = True
    """ours: a first packet measures its join's latency (RFC 3738's MRTT) only if the
    join brought it.  Not when it was due before the join was sent (``rtt_stale``:
    forwarded for an earlier membership and still queued after a leave; the join
    stays pending for its own first packet), nor when the packet before it on its
    group was due after the first packet to arrive of the batch of joins it was made
    with (``rtt_lost_first``: that packet was forwarded, so lost; the batch's earlier
    samples measured the join).  Session 13: r033 of the 100-receiver draw (seed 1,
    4.67 Mb/s, 1.8 % loss) joined 19 groups at once; the first packet of a 4 pkt/s
    group came 0.49 s after the join, its previous packet lost, and the ARTT went
    0.078 -> 0.146 s on that sample (the target cwnd / ARTT halved).  Relies on: joins
    sent at one instant over one path take effect together (one last-hop router; not
    when some groups already flow nearer the receiver than others), one sender's
    packets reach the branch point in due order, and the sender clock offset is at
    most the least one-way delay (the windowed minimum).  A longer path, up or down,
    or a queue still raise the samples the batch's other groups and later joins give.
    While the first packet is awaited, the join timeout counts the queueing delay our
    last packet saw (a joined group's packets queue behind ours)"""
    PAIR_MAX = 2.0
    """pairs spaced as a link faster than this many times the session's top rate show
    no bottleneck (a token bucket's burst, or a link the session cannot fill): ignored"""

    PLAUSIBLE_TSD = 3.0
    """ours: a packet is plausible when its due time is within this many TSD of the
    sender-time estimate (queueing and path delay stay far below it)"""
    AGREE = 3
    """packets that must agree on the offset to anchor the sender clock"""
    REANCHOR_TSD = 4.0
    """slots without any plausible packet (the base group never goes quiescent)
    before the clock may be re-anchored on agreeing packets; at most half the
    driver's slot timeout (see ``reanchor_after``)"""
    SLOT_TIMEOUT_S = 20.0
    """the driver's default slot watch is max(SLOT_TIMEOUT_S, 2 TSD) (RFC 3738 3.2.3.8)"""
    OFFSET_WINDOW_TSD = 8.0
    """the offset is the minimum over this many slots of local time (8 buckets), so
    one early outlier does not bias the sender clock for ever"""
    _BUCKETS = 8
    LOSS_LOG = 0
    """entries kept in ``loss_log`` and ``epoch_log`` (a trace: 0, none, by default;
    ``m2c.experiments.roles`` sets it when asked for a trace)"""

    def __init__(self, schedule: RateSchedule, controller: str = "m2c", epoch: float | None = None,
                 max_rate: float = math.inf, rtt_floor: float = 0.01,
                 slot_timeout: float | None = None, pairs: bool = False) -> None:
        self.schedule = schedule
        self.pairs = pairs
        """the sender sends its base packets in pairs (``SenderCore.pairs``): an even
        base PSN leaves with its odd successor, at that one's due time"""
        if slot_timeout is None:
            slot_timeout = max(self.SLOT_TIMEOUT_S, 2 * schedule.tsd)
        self.reanchor_after = min(self.REANCHOR_TSD * schedule.tsd, slot_timeout / 2,
                                  (slot_timeout - schedule.tsd) / 2)
        """seconds without a plausible packet before a re-sync to a new sender clock
        (a restarted sender): well before the driver's slot watch ends the session
        (with TSD > 5 s, 4 TSD was later than max(20, 2 TSD)); the watch counts from
        the last slot change, up to one TSD before the last plausible packet"""
        self.plausible = self.PLAUSIBLE_TSD * schedule.tsd
        self._bucket = self.OFFSET_WINDOW_TSD * schedule.tsd / self._BUCKETS
        self._mins: deque[list[float]] = deque()
        self._boot: deque[tuple[float, int, int, float]] = deque(maxlen=32)
        self._last_plausible = -math.inf
        self.implausible = 0
        """packets dropped because their PSN does not fit the sender clock"""
        self.anchors = 0
        self.epoch = epoch if epoch is not None else schedule.tsd / 20
        self.ctl: RateController = make_controller(controller, schedule, self.epoch, max_rate)
        self.rtt = RttEstimator(floor=rtt_floor)
        self.loss = LossTracker()
        self.joined: set[int] = set()
        self.offset: float | None = None
        self.pending: dict[int, tuple[float, float]] = {}
        """joins without a first packet yet: channel -> (join time, timeout)"""
        self._rr_avg = 0.0
        self._cum_avg = 0.0
        self.lag_holds = 0
        """epochs a join was refused because the received rate lagged the joined rate"""
        self.loss_event_until = -math.inf
        self.loss_events = 0
        self.next_epoch: float | None = None
        self._rx = self._ev = 0
        self._epoch_start: float | None = None
        self.startup_epoch = self.STARTUP_EPOCH if self.ctl.short_startup else 1.0
        """epoch length factor until the first loss or rate lag (1 for WEBRC, whose
        filters are defined per epoch)"""
        self.started = False
        self._qmin = math.inf
        """least queueing delay (one-way delay above the windowed minimum) this epoch"""
        self.qdelay_exits = 0
        """start-ups ended by a standing queue (see ``STARTUP_QDELAY``)"""
        self._qrecent: deque[float] = deque(maxlen=self.HOLD_PKTS)
        """queueing delays of the last few packets (see ``HOLD_QDELAY``)"""
        self.strict = self.ctl.strict
        """RFC 3738 3.2.3.6's join rules only (the ``webrc-rfc`` controller)"""
        self.base_seen = False
        """the first base channel packet arrived (3.2.3.6: no join before)"""
        self._wave_first: float | None = None
        """when the first packet of the most recently joined wave arrived"""
        self._last_wait: tuple[float, float] | None = None
        """FirstTime - JoinTime of the previous wave less its expected first-packet
        wait, and that wait"""
        self.mrtt_exits = 0
        self.random_losses = 0
        """losses seen with no queue at the bottleneck (see ``RANDOM_LOSS_PKTS``)"""
        self._rr_last = 0.0
        self.pair_probe = self.ctl.pair_probe and pairs
        """the controller speeds its start-up from the packet-pair estimate"""
        self.pair_samples: list[float] = []
        """bottleneck samples (packets/s) from base-group pairs, the first PAIR_SAMPLES"""
        self.capacity: float | None = None
        """the bottleneck estimate (packets/s) once the samples are in, else None"""
        self._capacity_used = False
        """the one jump to the estimate was made (or is not to be made)"""
        self._pair_load = 0.0
        """the highest joined rate while the samples were taken"""
        self._last_rx: tuple[float, int, int] | None = None
        """(arrival, channel, PSN) of the last plausible packet"""
        self._arrivals: deque[tuple[float, float, float]] = deque(maxlen=self.HOLE_HISTORY)
        """(arrival, due, queueing delay) of the last plausible packets, in arrival order
        (the sender's due order: FIFO paths), for the hole rule (``HOLE_SLACK``)"""
        self._spacings: deque[float] = deque(maxlen=self.HOLE_SAMPLES)
        """arrival spacings of packets that queued at least that long (back to back)"""
        self._spacing_at: deque[float] = deque(maxlen=self.HOLE_SAMPLES)
        """arrival time of the packet that ends each spacing of ``_spacings``"""
        self._own_holes: set[float] = set()
        """arrival times of packets that came right after a packet of ours declared lost
        (the spacings they end span our own loss: ``HOLE_OWN``)"""
        self._holes_used: dict[float, int] = {}
        """gap (the arrival before it) -> holes already taken for losses in it"""
        self.link_losses = 0
        """random losses found by the hole rule (a queue, a hole in the departures)"""
        self._left: dict[int, float] = {}
        """channel -> when we left it (its packets still queued are dropped unseen)"""
        self._off_max = -math.inf
        """the largest one-way delay (arrival less due time) of a packet that came in
        order on its channel: the fullest queue seen, for ``DRAIN_OVER``"""
        self.drain_losses = 0
        """random losses found by the drain rule (``DRAIN_OVER``: no hole, the queue
        well below the fullest seen while our joined rate is below the link)"""
        self.rtt_stale = 0
        """first packets of a pending join due before it was sent (``RTT_CHECK``)"""
        self.rtt_lost_first = 0
        """join-latency samples not taken: earlier packets of the group lost (``RTT_CHECK``)"""
        self._batches: dict[float, float] = {}
        """join time of a batch of joins -> due time of its first packet to arrive"""
        self._jump_wait: set[int] | None = None
        """``PAIR_ONE_GUARD``: the jump's groups still awaiting their first packet
        (None before the jump, or when the guard is off)"""
        self._jump_live = math.inf
        """``PAIR_ONE_GUARD``: when the last of the jump's groups delivered its first
        packet (or its join was cancelled)"""
        self._ev_at = -math.inf
        """``LOSS_EVENTS``: when the last loss event began"""
        self._ev_due = -math.inf
        """``LOSS_EVENTS``: sender time at which the first packet lost in it was due"""
        self._drain_due: deque[float] = deque(maxlen=8)
        """``LOSS_EVENTS``: the due times of the packets that showed the last drains"""
        self.queue_drains = 0
        """``LOSS_EVENTS`` (or a trace, ``LOSS_LOG``): drains of the queue seen
        (``EVENT_DRAIN``)"""
        self._q_peak = 0.0
        """``LOSS_EVENTS``: the fullest queueing delay since the last refill"""
        self._q_low: float | None = None
        """``LOSS_EVENTS``: while the queue is drained, the lowest queueing delay since
        the drain began (None while it is not drained)"""
        self.episode_losses = 0
        """``LOSS_EVENTS``: congestion losses after one ARTT that started no loss event
        (the queue had not drained since the last one)"""
        self._tracing = self.LOSS_LOG > 0
        self.epoch_log: deque[tuple[float, float, float, float, float]] = deque(
            maxlen=self.LOSS_LOG)
        """per epoch, the last ``LOSS_LOG``: (time, least queueing delay in it, received
        rate, target rate, RTT) (a trace for the experiments)"""
        self.loss_log: deque[tuple[float, int, int, float, bool, float]] = deque(
            maxlen=self.LOSS_LOG)
        """a trace of congestion losses (after the random-loss rules), the last
        ``LOSS_LOG``: (time, channel, packets lost, queueing delay of the packet that
        showed them, a loss event started, the target rate after it)"""

    def sender_time(self, now: float) -> float | None:
        return None if self.offset is None else now - self.offset

    def start(self, now: float) -> list[Join | Leave]:
        """Enter the session: join the base group."""
        self.started = True
        self.joined.add(0)
        self.pending[0] = (now, 10.0)
        self.next_epoch = now + self.epoch * self.startup_epoch
        self._epoch_start = now
        return [Join(0)]

    def _note_offset(self, now: float, off: float) -> None:
        """Windowed minimum of the offset samples (buckets of local time)."""
        b = math.floor(now / self._bucket)
        mins = self._mins
        if mins and mins[-1][0] >= b:
            mins[-1][1] = min(mins[-1][1], off)
        else:
            mins.append([b, off])
        while mins[0][0] <= b - self._BUCKETS:
            mins.popleft()
        self.offset = min(m for _, m in mins)

    def on_packet(self, now: float, channel: int, psn: int) -> list[Join | Leave]:
        """A packet of this session (checksum and TSI verified) arrived on ``channel``."""
        if channel not in self.joined:
            return []
        if self.pairs and channel == 0 and psn % 2 == 0:
            psn_due = psn + 1  # held by the sender for its pair partner
        else:
            psn_due = psn
        try:
            due = self.schedule.time_of(channel, psn_due)
        except (ArithmeticError, ValueError):
            due = math.nan
        off = now - due
        if not math.isfinite(off):
            self.implausible += 1
            return []
        if self.offset is not None and abs(off - self.offset) <= self.plausible:
            self._last_plausible = now
            self._note_offset(now, off)
            q = off - self.offset
            if q < self._qmin:
                self._qmin = q
            self._qrecent.append(q)
            if self.LOSS_EVENTS or self._tracing:
                self._queue_swing(q, due)
            if self.ctl.random_loss:
                arr = self._arrivals
                if arr and 0 < now - arr[-1][0] <= q:
                    self._spacings.append(now - arr[-1][0])
                    self._spacing_at.append(now)
                arr.append((now, due, q))
                exp = self.loss.expected.get(channel)
                if exp is not None and exp <= psn < exp + self.HOLE_SAMPLES and (
                        off > self._off_max):
                    # in order on its channel only: a forged or duplicated old PSN
                    # (a large offset) must not raise the fullest queue seen
                    self._off_max = off
            return self._accept(now, channel, psn)
        self._boot.append((now, channel, psn, off))
        if self.offset is not None and now - self._last_plausible < self.reanchor_after:
            self.implausible += 1
            return []
        cluster = [b for b in self._boot if abs(b[3] - off) <= self.plausible]
        if len(cluster) < self.AGREE and not (self.PAIR_ONE and self._boot_pair()):
            if self.offset is not None:
                self.implausible += 1
            return []
        # this packet agrees with the new clock: it is plausible (not counted), so a
        # driver that compares ``implausible`` before/after decodes it
        # anchor (or re-anchor) the sender clock on packets that agree
        if self.offset is not None:
            for ch in list(self.loss.expected):
                self.loss.reset(ch)
        self.anchors += 1
        self._boot.clear()
        self._mins.clear()
        self._off_max = -math.inf
        self._batches.clear()
        for t, _, _, o in cluster:
            self._note_offset(t, o)
        self._last_plausible = now
        out: list[Join | Leave] = []
        for t, ch, p, _ in cluster:
            if ch in self.joined:
                out += self._accept(t, ch, p)
        return out

    def _accept(self, now: float, channel: int, psn: int) -> list[Join | Leave]:
        sched, offset = self.schedule, self.offset
        assert offset is not None, "packets are accepted only once the clock is anchored"
        pend = self.pending.pop(channel, None)
        if pend is not None and channel and self.RTT_CHECK:
            due = sched.time_of(channel, psn)
            if due + offset < pend[0]:
                # due before the join was sent: forwarded for an earlier membership
                # (still queued after a leave), not brought by this join
                self.pending[channel] = pend
                pend = None
                self.rtt_stale += 1
            elif self._lost_first(channel, psn, pend[0], due):
                pend = None
                self.rtt_lost_first += 1
        if self._jump_wait and channel not in self.pending:
            self._jump_arrived(now, channel)
        if pend is not None:
            ts = now - offset
            r = sched.rate(channel, ts)
            wait = 0.5 / r if r > 0 else 0.0
            self.rtt.on_first_packet(pend[0], now, wait, channel == 0)
            if self.strict and channel:
                self._rfc_first_wave_packet(now, now - pend[0], wait, ts)
        jump: list[Join | Leave] = []
        if channel == 0:
            self.base_seen = True
            if self.pair_probe and len(self.pair_samples) < self.PAIR_SAMPLES:
                self._pair_sample(now, psn)
                if self.PAIR_AT_ONCE:
                    jump = self._pair_jump(now)
        self._last_rx = (now, channel, psn)
        lost = self.loss.on_packet(channel, psn)
        if lost and self.ctl.random_loss:
            if self.HOLE_OWN:
                self._note_own_holes(channel)
            on_link = lost if self._queue_empty() else self._link_holes(channel)
            self.random_losses += on_link
            lost -= on_link
        self._rx += 1
        self._ev += 1 + lost
        if lost and now >= self.loss_event_until and self._new_episode(now, channel):
            # the loss event starts before the packet events are counted (3.2.3.4)
            self.loss_events += 1
            self.loss_event_until = now + self.rtt.rtt
            if self.LOSS_EVENTS:
                self._ev_at, self._ev_due = now, self._lost_due(channel)
            ts = now - offset
            self.ctl.on_joined_rate(sched.cum_rate(self.level(ts), ts))
            self.ctl.on_loss_event(now, self.rtt.rtt)
            self.ctl.on_packet_events(1, lost)
            if self._tracing:
                self._log_loss(now, channel, lost, True)
            return jump
        self.ctl.on_packet_events(1, lost)
        if lost and self._tracing:
            self._log_loss(now, channel, lost, False)
        return jump

    def _lost_due(self, channel: int) -> float:
        """Sender time at which the first of the packets just declared lost on ``channel``
        was due: about when it met the queue (a loss is declared 3 PSNs later)."""
        sched = self.schedule
        return min((sched.time_of(channel, m + 1 if (self.pairs and channel == 0
                                                     and m % 2 == 0) else m)
                    for m in self.loss.last_lost), default=math.inf)

    def _new_episode(self, now: float, channel: int) -> bool:
        """``LOSS_EVENTS``: a loss may start a loss event: the first one; one whose packets
        met the queue after a drain began that began after the last event's packets met
        it (a loss declared after a drain began but dropped before it belongs to the
        episode already answered); or any loss a span after the last event began."""
        if not self.LOSS_EVENTS or self._ev_at == -math.inf:
            return True
        lost_due = self._lost_due(channel)
        if any(self._ev_due < d <= lost_due for d in self._drain_due):
            return True
        sub_tsi = self.schedule.tsd / self.schedule.k
        rtt = self.rtt.rtt
        span = max(sub_tsi, min(0.5 * self.target_rate() * rtt * rtt,
                                self.EVENT_SPAN_MAX * sub_tsi))
        if now - self._ev_at >= span:
            return True
        self.episode_losses += 1
        return False

    def _queue_swing(self, q: float, due: float) -> None:
        """``LOSS_EVENTS``: follow the queue's swings (with hysteresis): a drain begins
        when a packet queued ``EVENT_DRAIN`` of the peak (and ``EVENT_DRAIN_MIN``) below
        the fullest queue since the last refill, and the queue has refilled when one
        queued as much above the lowest of the drain.  A drain that began before a
        loss event is no new episode after it."""
        if self._q_low is None:
            if q > self._q_peak:
                self._q_peak = q
            elif q < self._q_peak - self._drain_margin(self._q_peak):
                self.queue_drains += 1
                self._drain_due.append(due)
                self._q_low = q
        elif q < self._q_low:
            self._q_low = q
        elif q > self._q_low + self._drain_margin(self._q_peak):
            self._q_low, self._q_peak = None, q

    def _drain_margin(self, peak: float) -> float:
        return max(self.EVENT_DRAIN * peak, self.EVENT_DRAIN_MIN)

    def _log_loss(self, now: float, channel: int, lost: int, event: bool) -> None:
        q = self._qrecent[-1] if self._qrecent else math.nan
        self.loss_log.append((now, channel, lost, q, event, self.target_rate()))

    def _boot_pair(self) -> bool:
        """``PAIR_ONE``: the last two packets kept for anchoring are a base pair (an even
        base PSN and its odd successor, nothing between them) that agree on the offset."""
        boot = self._boot
        if not self.pair_probe or len(boot) < 2:
            return False
        (_, ch0, p0, o0), (_, ch1, p1, o1) = boot[-2], boot[-1]
        return (ch0 == 0 and ch1 == 0 and p0 % 2 == 0 and p1 == p0 + 1
                and abs(o1 - o0) <= self.plausible)

    def _lost_first(self, channel: int, psn: int, join: float, due: float) -> bool:
        """This first packet of a group joined in a batch (``RTT_CHECK``) came after
        earlier packets of the group that were lost: the packet before it was due after
        the batch's first packet to arrive, by which time the joins were in effect."""
        first = self._batches.get(join)
        if first is None:
            live = {t for t, _ in self.pending.values()}
            self._batches = {t: d for t, d in self._batches.items() if t in live}
            self._batches[join] = due
            return False
        if psn <= 0:
            return False
        return self.schedule.time_of(channel, psn - 1) > first

    def _pair_jump(self, now: float) -> list[Join | Leave]:
        """The packet-pair estimate is in and the link was lightly loaded while it was
        sampled: join up to it now (``PAIR_AT_ONCE``), not at the next epoch.  The
        conditions are the epoch's (no loss, no lag, no loss event pending)."""
        if (self.capacity is None or self._capacity_used or self.loss_events
                or self.lag_holds or now < self.loss_event_until or self.offset is None):
            return []
        self._capacity_used = True
        now = max(now, self._last_plausible)  # a packet replayed at anchoring: its join is now
        ts = now - self.offset
        cap = self.PAIR_SHARE * self.capacity
        self.ctl.on_capacity(now, cap, self.rtt.rtt)
        return self._note_jump(now, self._join_up_to(
            now, ts, self.level(ts), min(cap, self.target_rate()), self.schedule.levels,
            reach=True))

    def _note_jump(self, now: float, joins: list[Join | Leave]) -> list[Join | Leave]:
        """``PAIR_ONE_GUARD``: remember the jump's groups until each has flowed."""
        if self.PAIR_ONE and self.PAIR_ONE_GUARD:
            self._jump_wait = {j.channel for j in joins if isinstance(j, Join)}
            self._jump_live = math.inf if self._jump_wait else now
        return joins

    def _jump_arrived(self, now: float, channel: int) -> None:
        """A group of the jump delivered its first packet, or its join was cancelled."""
        wait = self._jump_wait
        if wait is not None and channel in wait:
            wait.discard(channel)
            if not wait:
                self._jump_live = now

    def _jump_guard(self, epoch_start: float) -> bool:
        """``PAIR_ONE_GUARD``: the epoch just ended did not carry the jump's full rate
        from its start (a group of the jump had not flowed yet)."""
        return self._jump_wait is not None and (
            bool(self._jump_wait) or epoch_start < self._jump_live)

    def _pair_sample(self, now: float, psn: int) -> None:
        """The odd packet of a base pair arrived right after its even partner: their
        spacing is one packet's time at the bottleneck (both left the sender
        together).  A pair whose first packet was lost, or with any other packet
        between them, gives nothing; nor does one after a loss or lag."""
        last = self._last_rx
        if (psn % 2 == 0 or last is None or last[1] != 0 or last[2] != psn - 1
                or self.loss_events or self.lag_holds or self.offset is None):
            return
        gap = now - last[0]
        sched = self.schedule
        if gap <= 0 or 1.0 / gap > self.PAIR_MAX * sched.max_rate:
            return
        ts = now - self.offset
        self._pair_load = max(self._pair_load, sched.cum_rate(self.level(ts), ts))
        samples = self.pair_samples
        samples.append(1.0 / gap)
        early = self.capacity is not None  # set from two agreeing samples
        if len(samples) == self.PAIR_SAMPLES:
            self.capacity = sorted(samples)[self.PAIR_SAMPLES // 2]
        elif self.PAIR_ONE and len(samples) == 1:
            self.capacity = samples[0]
        elif len(samples) == 2 and max(samples) <= (1 + self.PAIR_AGREE) * min(samples):
            self.capacity = min(samples)
        else:
            return
        if not early:
            # join at once only if the link was lightly loaded by us while sampling
            self._capacity_used = self._pair_load > self.PAIR_LOAD * self.capacity

    def _queue_empty(self) -> bool:
        """The packets around a loss queued less than RANDOM_LOSS_PKTS packet times at
        the received rate (and RANDOM_LOSS_QDELAY): the loss is no drop-tail overflow."""
        if not self._qrecent or self._rr_last <= 0:
            return False
        return max(self._qrecent) < max(self.RANDOM_LOSS_QDELAY,
                                        self.RANDOM_LOSS_PKTS / self._rr_last)

    def _note_own_holes(self, channel: int) -> None:
        """Remember the arrival right after each packet just declared lost on ``channel``
        (the first one due after it: FIFO paths keep the due order), ``HOLE_OWN``."""
        arr, sched = self._arrivals, self.schedule
        for m in self.loss.last_lost:
            held = self.pairs and channel == 0 and m % 2 == 0
            due = sched.time_of(channel, m + 1 if held else m)
            if not arr or arr[0][1] >= due:
                continue  # its neighbours are no longer kept
            for a, d, _ in arr:
                if d > due:
                    self._own_holes.add(a)
                    break

    def _link_holes(self, channel: int) -> int:
        """How many of the packets just declared lost on ``channel`` left a hole in a
        busy link's departures (``HOLE_SLACK``, ``HOLE_SHARE``): loss on the link."""
        sp = self._spacings
        if len(sp) < self.HOLE_SAMPLES:
            return 0
        # one packet time at the bottleneck: a low quantile (others' packets and our
        # own lost on the link only lengthen spacings)
        t = sorted(sp)[len(sp) // 10]
        kept: list[float] | deque[float] = sp
        if self.HOLE_OWN:
            # spacings across a packet of ours declared lost are no other flow's
            own = self._own_holes
            oldest_at = self._spacing_at[0]
            self._own_holes = own = {a for a in own if a >= oldest_at}
            kept = [s for s, a in zip(sp, self._spacing_at) if a not in own]
        if len(kept) * t < self.HOLE_SHARE * sum(kept):
            return 0  # others' packets share the busy link: their holes are not ours
        arr, sched, found, drained = self._arrivals, self.schedule, 0, 0
        ts = arr[-1][0] - self.offset if self.offset is not None else None
        load = sched.cum_rate(self.level(ts), ts) * t if ts is not None else math.inf
        if load > self.HOLE_OVER:
            return 0  # joined well above the link: overflow comes whatever this was
        # the drain rule (DRAIN_OVER): below the link our queue drains; a loss well
        # below the fullest queue seen is no overflow
        drain = -math.inf
        if load <= self.DRAIN_OVER and self.offset is not None:
            full = self._off_max - self.offset
            drain = self._off_max - max(self.DRAIN_PKTS * t, self.DRAIN_SHARE * full)
        n, now = len(arr), arr[-1][0]
        # groups left within a TSD (last packets still queued) and not joined again
        self._left = {c: tl for c, tl in self._left.items() if now - tl <= sched.tsd}
        left = [c for c in self._left if c not in self.joined]
        for m in self.loss.last_lost:
            held = self.pairs and channel == 0 and m % 2 == 0
            due = sched.time_of(channel, m + 1 if held else m)
            j = n - 1  # the last arrival due before it, then the first due after it
            while j >= 0 and arr[j][1] >= due:
                j -= 1
            k = j + 1
            while k < n and arr[k][1] <= due:
                k += 1
            if j < 0 or k >= n:
                continue  # a neighbour is no longer kept: congestion, as before
            (t_prev, d_prev, _), (t_next, d_next, q_next) = arr[j], arr[k]
            if max(t_prev - d_prev, t_next - d_next) < drain:
                drained += 1  # both neighbours queued well below the fullest queue
                continue
            gap = t_next - t_prev
            if q_next < gap - (1 + self.HOLE_SLACK) * t:
                continue  # the packet after it found the link idle: no back-to-back
            # packets of groups we left due between the two may have crossed unseen
            unseen = sum(sched.index(c, d_next) - sched.index(c, d_prev - 1e-9) for c in left)
            used = self._holes_used.get(t_prev, 0) + unseen
            if gap >= (k - j + used + self.HOLE_SLACK) * t:
                used -= unseen
                self._holes_used[t_prev] = used + 1
                found += 1
        if len(self._holes_used) > self.HOLE_HISTORY:
            oldest = arr[0][0]
            self._holes_used = {g: u for g, u in self._holes_used.items() if g >= oldest}
        self.link_losses += found
        self.drain_losses += drained
        return found + drained

    def _rfc_first_wave_packet(self, now: float, latency: float, wait: float,
                               ts: float) -> None:
        """RFC 3738 3.2.2.6: while SSR_P = infinity, successive FirstTime-JoinTime
        differences MUST be watched and a large increase ends start-up.

        Ours: each latency is taken less the expected wait for the wave's first
        packet (half its packet interval: our waves are joined at any time, so
        a slower wave waits longer with no queue at all), and the increase is
        large beyond the RFC's recommended (P^(NWC+1)-1)/(P*ln P)/ARR_P, with
        P the inverse per-level rate factor of our schedule (1/Q), plus how far
        each of the two waits may be from its expected value (half a packet
        interval each way: without it the deviation of a slow wave's first packet
        alone ended start-up on a path with no queue at all)."""
        self._wave_first = now
        corrected = latency - wait
        prev, self._last_wait = self._last_wait, (corrected, wait)
        if prev is None or not self.ctl.in_startup:
            return
        sched = self.schedule
        nwc = max(self.level(ts) - 1, 0)  # waves joined before this one
        arr = sched.cum_rate(nwc, ts)
        p = 1 / sched.q
        large = (p ** (nwc + 1) - 1) / (p * math.log(p)) / arr if arr > 0 else math.inf
        if corrected - prev[0] > large + wait + prev[1]:
            self.mrtt_exits += 1
            self.ctl.on_mrtt_increase(now, self.rtt.rtt)

    @property
    def joining(self) -> bool:
        """RFC 3738's JOINING: a join (the base group's included) awaits its first packet."""
        return bool(self.pending)

    def _rfc_join(self, now: float, ts: float, lvl: int, lagging: bool) -> list[Join | Leave]:
        """RFC 3738 3.2.3.6, in its order; at most one join per epoch."""
        sched, ctl = self.schedule, self.ctl
        if not self.base_seen:
            return []  # MUST not join before the first base channel packet
        if now < self.loss_event_until:
            return []  # MUST not join during a loss event
        if self.joining:
            return []  # MUST not join while JOINING
        if ctl.in_startup and (lvl >= sched.levels
                                    or sched.cum_rate(lvl + 1, ts) > ctl.mrr):
            # 3.2.2.6: the next join would exceed MRR_P or SR_P (MUST end start-up)
            ctl.on_max_rate(now, self.rtt.rtt)
        if lvl >= sched.levels:
            return []  # NWC = N: MUST not join
        if ctl.in_startup and self._wave_first is not None and (
                now - self._wave_first < self.epoch):
            return []  # OPTIONAL lag rule in use: a full epoch after the last wave's first packet
        if lagging:
            return []  # TRR_P greatly below ARR_P (the lag exit was taken by on_timer)
        if sched.cum_rate(lvl + 1, ts) > self.target_rate():
            return []  # TRATE below the rate after the join: MUST not join
        ch = sched.channel_of_level(lvl + 1, ts)
        r = sched.rate(ch, ts)
        limit = max(10 * self.rtt.rtt, 4 * self.epoch, 4 / r if r > 0 else 1.0)
        self.joined.add(ch)
        self.pending[ch] = (now, limit)
        return [Join(ch)]

    def level(self, sender_now: float) -> int:
        """Highest level l with levels 0..l all joined."""
        lvl = 0
        sched = self.schedule
        while lvl < sched.levels and sched.channel_of_level(lvl + 1, sender_now) in self.joined:
            lvl += 1
        return lvl

    def target_rate(self) -> float:
        return self.ctl.target(self.rtt.rtt)

    def next_timer(self) -> float | None:
        return self.next_epoch

    def on_timer(self, now: float) -> list[Join | Leave]:
        """Epoch processing: leaves of quiescent groups, then at most one join."""
        out: list[Join | Leave] = []
        if self.next_epoch is None or now < self.next_epoch:
            return out
        el = self.epoch
        ep_start = self._epoch_start if self._epoch_start is not None else now - el
        span = max(now - self._epoch_start, 1e-3) if self._epoch_start is not None else el
        self._epoch_start = now
        rr = self._rx / span
        irr = self._ev / span
        if rr > 0:
            self._rr_last = rr
        self._rx = self._ev = 0
        qmin, self._qmin = self._qmin, math.inf
        if self._tracing:
            self.epoch_log.append((now, qmin, rr, self.target_rate(), self.rtt.rtt))
        startup = self.loss_events == 0 and not self.lag_holds
        self.next_epoch = max(self.next_epoch + (el * self.startup_epoch if startup else el), now)
        self.ctl.on_epoch(now, rr, irr, self.rtt.rtt)
        ts = self.sender_time(now)
        if ts is None:
            return out
        sched = self.schedule
        # leave a group only once it has surely gone quiescent: our sender clock is
        # an estimate (minimum one-way delay) and the sender may be a little late
        grace = 2 * el + self.rtt.rtt
        for ch in sorted(self.joined):
            if ch and sched.level_of_channel(ch, ts) is None and sched.level_of_channel(
                    ch, ts - grace) is None and not (
                    ch in self.pending and self.pending[ch][0] > now):
                self.joined.discard(ch)
                self.loss.reset(ch)
                self.pending.pop(ch, None)
                self._left[ch] = now
                out.append(Leave(ch))
                self._jump_arrived(now, ch)  # quiescent: it will bring nothing
        # a joined group's packets queue behind ours: its first packet comes no sooner
        # than the queueing delay our last packet saw (``RTT_CHECK``)
        queued = self._qrecent[-1] if self._qrecent and self.RTT_CHECK else 0.0
        for ch, (t_join, limit) in list(self.pending.items()):
            if ch and now - t_join > limit + queued:
                # join timeout (RFC 3738 3.2.3.7): nothing ever came, cancel the join
                del self.pending[ch]
                self.joined.discard(ch)
                self._left[ch] = now
                out.append(Leave(ch))
                self._jump_arrived(now, ch)
        lvl = self.level(ts)
        self.ctl.on_joined_rate(sched.cum_rate(lvl, ts))
        # received rate versus the rate of the joined levels (RFC 3738 3.2.2.6: TRR
        # greatly below ARR means the path is full: do not join, leave slow start)
        # what the confirmed joined channels were due to deliver during the epoch
        due = sum(sched.count(ch, ts) - sched.count(ch, ts - span) for ch in self.joined
                  if ch not in self.pending) / span
        a = 0.3
        self._rr_avg = (1 - a) * self._rr_avg + a * rr
        self._cum_avg = (1 - a) * self._cum_avg + a * due
        # the averages remember ~1/a epochs: judge once they hold 8 due packets (a slow
        # receiver's overshoot went unseen when this needed 8 per epoch: 80 packets/s)
        lagging = (self._cum_avg * el / a >= 8 and self._rr_avg < 0.8 * self._cum_avg)
        if self.strict:
            # RFC 3738: the lag rule applies in start-up only; no delay rules of ours
            lagging = lagging and self.ctl.in_startup
            qmin = math.inf
        if (startup and not lagging and rr > 0 and math.isfinite(qmin)
                and qmin > max(self.STARTUP_QDELAY, self.STARTUP_QPKTS / rr)):
            # a standing queue through a whole epoch: the path is full (start-up exit)
            lagging = True
            self.qdelay_exits += 1
        hold = max(2 * self.rtt.rtt, el * self.startup_epoch if startup else el)
        recent = any(now - t < hold - 1e-6 for c, (t, _) in self.pending.items() if c)
        if lagging:
            self.lag_holds += 1
            self.ctl.on_lag(now, rr, self.rtt.rtt)
        if self.strict:
            return out + self._rfc_join(now, ts, lvl, lagging)
        if (lvl == sched.levels and not lagging and now >= self.loss_event_until
                and self.target_rate() >= sched.max_rate):
            # at the top: join the K waves of the next slot just before they start (they
            # are quiescent until then), so their first packets are not missed
            t_next = (sched.slot(ts) + 1) * sched.tsd
            if t_next - ts <= 2 * el + self.rtt.rtt:
                for lv in range(sched.levels - sched.k + 1, sched.levels + 1):
                    ch = sched.channel_of_level(lv, t_next + 1e-9)
                    if ch not in self.joined:
                        start_local = now + (t_next - ts)
                        r = sched.rate(ch, t_next + 1e-9)
                        self.joined.add(ch)
                        self.pending[ch] = (start_local, (t_next - ts)
                                            + max(10 * self.rtt.rtt, 4 * el, 4 / r))
                        out.append(Join(ch))
        elif (startup and not lagging and self.capacity is not None
              and not self._capacity_used and now >= self.loss_event_until):
            # the packet-pair estimate is in: join at once up to it (PLM's fast
            # convergence) and let the window go on from there
            self._capacity_used = True
            cap = self.PAIR_SHARE * self.capacity
            self.ctl.on_capacity(now, cap, self.rtt.rtt)
            out += self._note_jump(now, self._join_up_to(
                now, ts, lvl, min(cap, self.target_rate()), sched.levels, reach=True))
        elif not recent and now >= self.loss_event_until:
            # start-up (no loss, no lag yet): up to STARTUP_JOINS levels per epoch
            n_max = self.STARTUP_JOINS if startup else 1
            target = self.target_rate()
            if self.loss_events == 0 and self.capacity is not None:
                cap = min(self.PAIR_SHARE * self.capacity, target)
                if sched.cum_rate(lvl, ts) < cap:
                    # below the packet-pair estimate (the joined groups decay): join up
                    # to the first level that reaches it, queue or not (the holds below
                    # guess a bottleneck that is known now)
                    return out + self._join_up_to(now, ts, lvl, cap, sched.levels,
                                                  reach=True)
                n_max = 1  # above it one level per epoch, as the window and holds allow
                if self._jump_guard(ep_start):
                    n_max = 0  # the jump's rate has not been through a whole epoch yet
            if self.loss_events == 0 and rr > 0 and (
                    (len(self._qrecent) == self.HOLD_PKTS
                     and min(self._qrecent) > max(self.HOLD_QDELAY, 1 / rr))
                    or (due * span >= 8 and rr < self.HOLD_RATIO * due)):
                # a queue is building, or the last epoch brought less than the joined
                # groups sent: wait until the joins made have shown their effect
                n_max = 0
            out += self._join_up_to(now, ts, lvl, target, n_max)
        return out

    def _join_up_to(self, now: float, ts: float, lvl: int, target: float,
                    n_max: int, reach: bool = False) -> list[Join | Leave]:
        """Join up to ``n_max`` levels above ``lvl`` while the cumulative rate stays
        within ``target`` (``reach``: until it reaches ``target``, the last join up to
        one level's rate above it: the link stays full while the groups decay)."""
        sched, out = self.schedule, list[Join | Leave]()
        for _ in range(n_max):
            if lvl >= sched.levels or (sched.cum_rate(lvl, ts) >= target if reach
                                       else sched.cum_rate(lvl + 1, ts) > target):
                break
            ch = sched.channel_of_level(lvl + 1, ts)
            r = sched.rate(ch, ts)
            # long enough for a slow group's first packet
            limit = max(10 * self.rtt.rtt, 4 * self.epoch, 4 / r if r > 0 else 1.0)
            self.joined.add(ch)
            self.pending[ch] = (now, limit)
            out.append(Join(ch))
            lvl += 1
        return out
