"""M2C's sender and receiver sessions as :class:`deliverykit.protocol.DatagramCore` cores.

The same objects run on multicast sockets (:mod:`m2c.aio.driver`, through
``deliverykit.aio.CoreDriver``) and in virtual time (:mod:`m2c.sim`, through
``deliverykit.sim``).  Neither reads a clock nor touches a socket: the driver
passes ``now`` and moves the datagrams.

:class:`SenderCore`: :class:`~m2c.core.filetx.FileSender` (application scheduler,
sequencer, layered rate schedule) emitting ALC/LCT datagrams at their due
times to the layer groups' addresses ``(group_ip, port)``; one buffer is
sequenced per timer run, ``LOOKAHEAD`` s ahead of the schedule.

:class:`ReceiverCore`: :class:`~m2c.core.receiver_cc.ReceiverCC` and
:class:`~m2c.core.filetx.FileReceiver` with the session rules of RFC 5775 4.4
(source check), RFC 3738 3.2.3.8 (exceptional timeouts) and RFC 5651 5.1 (the
close-session flag A).  It sends nothing; its events tell the driver what to
do: :class:`~m2c.core.events.Join` / :class:`~m2c.core.events.Leave` a group
(IP_ADD/DROP_MEMBERSHIP on sockets, ``Network.join/leave`` in the simulator),
:class:`Decoded` bytes to write, :class:`ReceiveProgress` reports,
:class:`Recovered` and :class:`SessionEnded`.
"""

from __future__ import annotations

import enum
import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deliverykit.protocol import Address
from m2c.core.description import FecScheme, Group, RateLadder, SessionDescription, default_fec
from m2c.core.events import Join, Leave
from m2c.core.filetx import DecodedBlock, FileReceiver, FileSender, Metrics, SymbolProgress
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.fec.errors import DecodeError, FECError
from m2c.wire import codec

__all__ = ["BYTES_PER_SYMBOL_HELD", "CLOSE_GRACE", "CLOSE_PACKETS", "MAX_ACTIVE",
           "PROGRESS_INTERVAL", "TRACE_LEN", "TRANSIENT_BYTES_PER_SYMBOL", "Decoded",
           "EndReason", "ReceiveProgress",
           "ReceiverCore", "Recovered", "SenderCore", "SessionEnded",
           "describe_session"]

CLOSE_PACKETS = 3
"""data-less packets with A = 1 (close session, RFC 5651 5.1) a sender sends when it stops"""
CLOSE_GRACE = 0.5
"""s a receiver still takes packets after A = 1 (datagrams of other groups in flight)"""
PROGRESS_INTERVAL = 0.5
"""s between two :class:`ReceiveProgress` events (default)"""
TRACE_LEN = 1 << 14
"""per-epoch trace entries kept (13.6 min at the default 50 ms epochs)"""

MAX_ACTIVE = 64
"""partially received source blocks a receiver holds at most (default)"""
BYTES_PER_SYMBOL_HELD = 2
"""a partial LDPC block costs a receiver ~2*k*E bytes: its k source values and its
n - k = k equations' partial sums (1.95*k*E measured at k = 3,000, E = 1,428)"""
TRANSIENT_BYTES_PER_SYMBOL = 3
"""one block at a time costs up to ~1.6*k*E more while it is eliminated or handed out
decoded (measured); ``describe_session`` keeps 3*B*E for it"""

Outgoing = tuple[bytes, Address]


def describe_session(name: str, size: int, sha256: str, *, session: int, fec_seed: int,
                     group: str = "239.192.77.1", port: int = 47000,
                     interface: str = "127.0.0.1", min_rate: float = 20.0,
                     max_rate: float = 2000.0, tsd: float = 1.0, k: int = 2,
                     schedule: str = "wave", fec: FecScheme | str = FecScheme.LDPC,
                     symbol_size: int = 1400,
                     max_block_length: int | None = None,
                     memory: int = 256 << 20) -> SessionDescription:
    """The session description of an object of ``size`` bytes (rates in packets/s).

    Each channel has its own group address (``group`` + channel) and port
    (``port`` + channel).  Memory bound: a receiver holds ~2*k*E bytes per
    partially received LDPC block (the source values and the equations' partial
    sums), and one block at a time needs up to 3*B*E more (the elimination's work
    space, the decoded block's copies), so objects of more than ``window =
    min(MAX_ACTIVE, (memory - 3*B*E) // (2*B*E))`` source blocks are carouselled by
    windows of at most that many blocks (of even sizes: FileSender), and receivers
    hold at most ``window`` partial blocks: 2*B*E*window + 3*B*E <= ``memory`` at
    each receiver (the sender holds 2*B*E per block of the window).  Until session 7
    every partial block was counted 3*B*E: a 99 MB file (24 blocks of 3,000 symbols)
    was cut into windows of 20 and 4 blocks at 256 MiB.
    """
    sched = make_schedule(schedule, min_rate=min_rate, max_rate=max_rate, tsd=tsd, k=k)
    a, b, c, d = (int(x) for x in group.split("."))
    base = a << 24 | b << 16 | c << 8 | d
    groups: list[Group] = []
    for ch in range(sched.channels + 1):
        g = base + ch
        groups.append(Group(f"{g >> 24 & 255}.{g >> 16 & 255}.{g >> 8 & 255}.{g & 255}",
                            port + ch))
    fp = default_fec(size, fec, symbol_size, max_block_length, fec_seed)
    # TOI 0: the session's single object, so packets omit the TOI field (RFC 5775 4.1)
    sd = SessionDescription(session, 0, name, size, sha256, fp, RateLadder.of(sched), groups,
                            interface, source=interface)
    per_block = BYTES_PER_SYMBOL_HELD * fp.max_block_length * symbol_size
    transient = TRANSIENT_BYTES_PER_SYMBOL * fp.max_block_length * symbol_size
    fit = max(0, memory - transient) // per_block
    if fit < 1:
        raise FECError(f"a receiver needs ~{per_block + transient} bytes for one source "
                       f"block of {fp.max_block_length} symbols of {symbol_size} bytes, "
                       f"more than the memory bound of {memory} bytes: use a smaller block "
                       f"length (m2c send --block-length) or symbol size (--symbol-size)")
    window = min(MAX_ACTIVE, fit)
    if sd.partition().blocks > window:
        sd.window_blocks = window
    return sd


# --- events ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Decoded:
    """Source bytes recovered: write ``data`` at file offset ``offset``."""

    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Recovered:
    """Every source block of the file is decoded (the driver verifies and delivers)."""

    at: float


class EndReason(enum.Enum):
    """Why a session ended before the file was recovered."""

    CLOSED = "closed"
    """the sender closed the session (A = 1) and the grace passed"""
    IDLE = "idle"
    """no packet for ``idle_timeout`` s (RFC 3738 3.2.3.8)"""
    SLOT = "slot"
    """the time slot index did not advance for ``slot_timeout`` s (RFC 3738 3.2.3.8)"""


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """The session is over without the whole file (``text`` says why, one line)."""

    reason: EndReason
    text: str
    at: float


@dataclass(frozen=True, slots=True)
class ReceiveProgress:
    """What a receiver reports every ``progress_interval`` s and at its end."""

    file: SymbolProgress
    """source symbols held and needed, blocks decoded"""
    packets: int
    """datagrams of this session received"""
    rate_kbps: float
    """IP-level receive rate since the last report, kbit/s"""
    layers: int
    """groups (layers) joined now"""
    elapsed: float
    """s since the receiver started"""


# --- sender ------------------------------------------------------------------------

class SenderCore:
    """Carousel sender: every PDU leaves at its due time (sender clock from :meth:`start`).

    ``quantum``: least wait between two timer runs while packets are pending (the
    asyncio driver batches packets due within 0.5 ms into one sendmmsg; 0 in the
    simulator: every packet at its exact due time).

    ``pairs`` (default): the base group's packets leave in back-to-back pairs, the
    even PSN held until its odd successor is due (at most one base packet interval,
    ~50 ms), so that a receiver can measure its bottleneck from the pair's spacing
    at arrival (packet-pair probing as PLM, Legout and Biersack 2000: see
    :class:`~m2c.core.receiver_cc.ReceiverCC`).  The PSNs and their due times are
    unchanged: a receiver sees the held packet as queued, never early.
    """

    LOOKAHEAD = 0.2
    """s of schedule sequenced ahead of the clock"""

    def __init__(self, sd: SessionDescription, read: Callable[[int, int], bytes],
                 quantum: float = 0.0005, pairs: bool = True) -> None:
        self.sd = sd
        self.file = FileSender(sd, read)
        self.addrs: list[tuple[str, int]] = [(str(g), int(p)) for g, p in sd.groups]
        self.quantum = quantum
        self.pairs = pairs
        self._schedule = self.file.seq.schedule
        self.t0: float | None = None
        self._queue: list[tuple[float, int, bytes, int, int, int]] = []
        """heap of (send time, order, wire, channel, slot, psn), on the sender clock"""
        self._order = 0
        self._horizon = 0.0
        self.sent = 0
        self.bytes = 0
        self.base = (0, -1)
        """slot and PSN of the last base-group packet handed out"""
        self.stopped = False

    @property
    def buffers(self) -> int:
        return self.file.next_buffer

    def start(self, now: float) -> None:
        """The session's clock starts now (schedule time 0)."""
        self.t0 = now

    def stop(self) -> None:
        """Send nothing more (no timer either)."""
        self.stopped = True
        self._queue.clear()

    def _wake(self) -> float:
        """When the lookahead needs the next buffer (one expression for the timer
        and the check, so float rounding cannot make them disagree)."""
        assert self.t0 is not None
        return self.t0 + self._horizon - self.LOOKAHEAD

    def _needs_buffer(self, now: float) -> bool:
        return self.t0 is not None and self._wake() <= now

    # DatagramCore
    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        """A sender takes no input (receivers never answer)."""

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        if self.t0 is None or self.stopped:
            return []
        q = self._queue
        t0 = self.t0
        out: list[Outgoing] = []
        addrs = self.addrs
        while q and t0 + q[0][0] <= now:  # get_timer's own expression (float sums)
            _, _, wire, g, slot, psn = heapq.heappop(q)
            out.append((wire, addrs[g]))
            self.bytes += len(wire)
            if g == 0:
                self.base = (slot, psn)
        self.sent += len(out)
        return out

    def get_timer(self, now: float) -> float | None:
        if self.t0 is None or self.stopped:
            return None
        if self._needs_buffer(now):
            return now
        # the next packet, or the moment the lookahead needs the next buffer
        due = self._wake()
        if self._queue:
            due = min(due, self.t0 + self._queue[0][0])
        return due if due <= now else max(due, now + self.quantum)

    def handle_timer(self, now: float) -> None:
        """Sequence one buffer if the lookahead is short (one per run: a driver gets
        control back between buffers, as a slow sender must still see a stop)."""
        if self.stopped or not self._needs_buffer(now):
            return
        q, sched = self._queue, self._schedule
        for pdu, pkt in self.file.next_pdus():
            at = pdu.due
            if self.pairs and pdu.g == 0 and pdu.index % 2 == 0:
                # held for its odd successor: the two leave back to back, this one first
                at = sched.time_of(0, pdu.index + 1)
            heapq.heappush(q, (at, self._order, codec.encode(pkt), pdu.g, pkt.slot, pkt.psn))
            self._order += 1
        self._horizon = self.file.seq.next_start

    def next_event(self) -> object | None:
        return None

    def close_packets(self) -> list[Outgoing]:
        """RFC 5651 5.1: A = 1 tells receivers the session ends; data-less (RFC 5775
        4.1) packets on the base group, continuing its PSN sequence.  Not counted in
        ``sent``: the driver counts the ones it could send."""
        cp = self.sd.codepoint
        slot, psn = self.base
        return [(codec.encode(codec.AlcPacket(
            self.sd.session, self.sd.toi, cp, slot, 0, (psn + 1 + i) & 0xFFFFFFFF, 0, 0, 0, 0,
            close_session=True, data_less=True)), self.addrs[0]) for i in range(CLOSE_PACKETS)]


# --- receiver ----------------------------------------------------------------------

class ReceiverCore:
    """Joins, runs congestion control, decodes; the driver writes what it decodes.

    ``source``: the session's source address (RFC 5775 4.4: datagrams from any other
    address are dropped before decoding; None: no check).  ``where``: the join
    interface, named in the "no packet arrived" message.  ``idle_timeout`` /
    ``slot_timeout``: RFC 3738 3.2.3.8, max(10, TSD, 4 / base rate) and
    max(20, 2 TSD) s by default.  ``progress_interval``: s between
    :class:`ReceiveProgress` events (None: none).
    """

    def __init__(self, sd: SessionDescription, controller: str = "m2c",
                 max_active: int = MAX_ACTIVE,
                 max_rate: float = math.inf, source: str | None = None, where: str = "",
                 idle_timeout: float | None = None, slot_timeout: float | None = None,
                 progress_interval: float | None = PROGRESS_INTERVAL) -> None:
        self.sd = sd
        self.schedule = sd.schedule()
        tsd = self.schedule.tsd
        # RFC 3738 3.2.3.8 recommends max(10, TSD) s; a base group slower than one
        # packet in 2.5 s would trip it while the sender runs: 4 of its packet intervals
        self.idle_timeout = float(idle_timeout if idle_timeout is not None else
                                  max(10.0, tsd, 4.0 / self.schedule.min_rate))
        # RFC 3738's recommended max(20, 2 TSD) s.  A sender restarted with --resume
        # has a new clock: its packets advance the index only once ReceiverCC has
        # re-anchored (REANCHOR_TSD slots), so with TSD > 5 s this fires first
        self.slot_timeout = float(slot_timeout if slot_timeout is not None else
                                  max(20.0, 2 * tsd))
        self.source = source
        self.where = where
        self.cc = ReceiverCC(self.schedule, controller=controller, max_rate=max_rate,
                             pairs=True)
        # the session's window is what fits in the sender's memory bound: hold no more
        window = sd.window_blocks or max(1, sd.partition().blocks)
        self.file = FileReceiver(sd, max_active=min(max_active, window))
        self.progress_interval = progress_interval
        self._events: deque[object] = deque()
        self.layers: set[int] = set()
        """channels joined (as the Join/Leave events said)"""
        self.joins = self.leaves = 0
        self.rejected = 0
        self.wrong_group = 0
        self.unjoined = 0
        """packets of a group already left (still arriving for the leave latency)"""
        self.foreign_source = 0
        self.implausible = 0
        self.packets = 0
        self.closed = False
        self.end: str | None = None
        self.end_reason: EndReason | None = None
        self.done = False
        """recovered or ended: no more input is taken, no timer runs"""
        self.trace: deque[tuple[float, int, float, float, int, int, float, int]] = deque(
            maxlen=TRACE_LEN)
        self.t0 = 0.0
        self.t_last = 0.0
        """arrival time of the packet that completed the last decoded block"""
        self._t_packet = 0.0
        self._t_slot = 0.0
        self._slot = -1
        self._close_at = math.inf
        self._flush_due = False
        self._t_batch = 0.0
        self._report = (0.0, 0)
        self.started = False

    # --- application calls --------------------------------------------------------
    def start(self, now: float) -> None:
        """Enter the session: join the base group (a :class:`Join` event)."""
        self.started = True
        self.t0 = self._t_packet = self._t_slot = now
        self._report = (now, 0)
        self._emit(self.cc.start(now))
        if self.sd.size == 0 or self.file.complete:
            self._recovered(now)

    def stop(self, now: float) -> None:
        """The application ends the session (a timeout, a signal, a write error):
        no more input, a last :class:`ReceiveProgress`, a :class:`Leave` per group."""
        if not self.done:
            self.done = True
        self.progress(now)
        for ch in sorted(self.layers):
            self._emit([Leave(ch)])

    def progress(self, now: float) -> None:
        """Queue a :class:`ReceiveProgress` now (if reports are wanted)."""
        if self.progress_interval is None:
            return
        t, link = self._report
        self._report = (now, self.file.link_bytes)
        rate = (self.file.link_bytes - link) * 8 / 1000 / (now - t) if now > t else 0.0
        self._events.append(ReceiveProgress(self.file.progress(), self.packets, rate,
                                            len(self.layers), now - self.t0))

    # --- DatagramCore ---------------------------------------------------------------
    def datagram_received(self, data: bytes, addr: Address, now: float,
                          channel: int | None = None) -> None:
        """One datagram; ``channel``: the group it came in on, when the transport
        knows (a socket per group); None trusts the packet's own group number."""
        if self.done or not self.started:
            return
        if self.source is not None and addr[0] != self.source:  # RFC 5775 4.4
            self.foreign_source += 1
            return
        try:
            pkt = codec.decode(data, session=self.sd.session)
        except DecodeError:
            self.rejected += 1
            return
        ch = pkt.group if channel is None else channel
        if pkt.group != ch:
            self.wrong_group += 1
            return
        if ch not in self.layers:  # in flight after a leave (the leave latency)
            self.unjoined += 1
            return
        self.packets += 1
        self._t_packet = now
        if pkt.close_session:  # RFC 5651 5.1: the sender ends the session
            if not self.closed:
                self.closed = True
                self._close_at = now + CLOSE_GRACE
            if pkt.data_less:
                return
            # a sender may set A on its last data packets: decode them as usual
        cc = self.cc
        before = cc.implausible
        self._emit(cc.on_packet(now, ch, pkt.psn))
        if cc.implausible != before:  # does not fit the sender clock: not decoded
            self.implausible += 1
            return
        if pkt.slot != self._slot and cc.offset is not None:
            # RFC 3738 3.2.3.8 watches for no *change* of the time slot index; only
            # packets judged against the sender clock count
            self._slot = pkt.slot
            self._t_slot = now
        self._decoded(self.file.feed(pkt, len(data), defer=True), now)
        if self.file.complete:
            self._recovered(now)
            return
        # eliminations wait for the timer at ``now``: a driver that hands over a
        # whole recvmmsg batch first pays one elimination per block, not per datagram
        self._t_batch = now
        self._flush_due = True

    def datagrams_to_send(self, now: float) -> Sequence[Outgoing]:
        return ()

    def get_timer(self, now: float) -> float | None:
        if self.done or not self.started:
            return None
        if self._flush_due:
            return now
        t = min(self._close_at, self._t_packet + self.idle_timeout,
                self._t_slot + self.slot_timeout)
        nxt = self.cc.next_timer()
        if nxt is not None:
            t = min(t, nxt)
        if self.progress_interval is not None:
            t = min(t, self._report[0] + self.progress_interval)
        return t

    def handle_timer(self, now: float) -> None:
        if self.done or not self.started:
            return
        if self._flush_due:
            self._flush()
            if self.done:
                return
        self._check_end(now)
        if self.done:
            return
        cc = self.cc
        nxt = cc.next_timer()
        if nxt is not None and now >= nxt:
            self._emit(cc.on_timer(now))
            ts = cc.sender_time(now)
            if ts is not None:
                lvl = cc.level(ts)
                self.trace.append((now, lvl, self.schedule.cum_rate(lvl, ts), cc.target_rate(),
                                   cc.loss.lost, cc.loss.received, cc.rtt.rtt, cc.loss_events))
        if self.progress_interval is not None and (
                now >= self._report[0] + self.progress_interval):
            self.progress(now)

    def next_event(self) -> object | None:
        return self._events.popleft() if self._events else None

    # --- inside ---------------------------------------------------------------------
    def _emit(self, events: list[Join | Leave]) -> None:
        for ev in events:
            if isinstance(ev, Join):
                if ev.channel in self.layers:
                    continue
                self.layers.add(ev.channel)
                self.joins += 1
            else:
                if ev.channel not in self.layers:
                    continue
                self.layers.discard(ev.channel)
                self.leaves += 1
            self._events.append(ev)

    def _decoded(self, blocks: list[DecodedBlock], now: float) -> None:
        for off, blk in blocks:
            self._events.append(Decoded(off, blk))
            self.t_last = now

    def _flush(self) -> None:
        self._flush_due = False
        self._decoded(self.file.flush(), self._t_batch)
        if self.file.complete:
            self._recovered(self._t_batch)

    def _recovered(self, now: float) -> None:
        self.done = True
        self._events.append(Recovered(now))

    def _ended(self, reason: EndReason, text: str, now: float) -> None:
        self.done = True
        self.end, self.end_reason = text, reason
        self._events.append(SessionEnded(reason, text, now))

    def _check_end(self, now: float) -> None:
        """RFC 3738 3.2.3.8 exceptional timeouts (MUST leave) and the A flag's end."""
        if now >= self._close_at:
            self._flush()
            if not self.done:
                self._ended(EndReason.CLOSED, "the sender closed the session (LCT flag A, "
                            "RFC 5651 5.1) before the file was complete", now)
        elif now >= self._t_packet + self.idle_timeout:  # the deadline's own expression
            if self.packets:
                text = (f"no packet from the sender for {self.idle_timeout:g} s after "
                        f"{self.packets} packets: left the session (RFC 3738 3.2.3.8)")
            else:
                text = (f"no packet of this session arrived in {self.idle_timeout:g} s "
                        f"(is the sender running, and can {self.where} reach "
                        f"{self.sd.groups[0][0]}?): left the session (RFC 3738 3.2.3.8)")
            self._ended(EndReason.IDLE, text + self.others(), now)
        elif now >= self._t_slot + self.slot_timeout:
            self._ended(EndReason.SLOT, f"the time slot index did not advance for "
                        f"{self.slot_timeout:g} s: left the session (RFC 3738 3.2.3.8)", now)

    def others(self) -> str:
        """What arrived that was not this session's (a restarted sender, a wrong SDP)."""
        parts = [f"{n} {what}" for n, what in (
            (self.rejected, "datagrams of another session or malformed (a sender "
                            "restarted without --resume?)"),
            (self.foreign_source, "datagrams from another source address"),
            (self.implausible, "packets that did not fit the sender clock")) if n]
        return f" ({'; '.join(parts)})" if parts else ""

    def metrics(self, t_end: float) -> Metrics:
        """Paper section 7.2 criteria from ``start`` to ``t_end``."""
        lt = self.cc.loss
        return self.file.metrics(t_end - self.t0, max(self.t_last - self.t0, 1e-9), lt.lost,
                                 lt.received)
