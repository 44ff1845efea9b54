"""Sender and receiver drivers: real multicast sockets, the loop's clock.

Works as an ordinary user on loopback: the sender binds to and sets
IP_MULTICAST_IF to its interface address (127.0.0.1 by default), which the
session description names as the ``source``; the receiver joins with
IP_ADD_MEMBERSHIP on its own interface (INADDR_ANY unless told otherwise;
127.0.0.1 for a loopback sender, which only lo can reach).  Each channel has
its own group address and port (see ``make_session``).

Session handling (RFC 5775 4.4, RFC 3738 3.2.3.8, RFC 5651 5.1): the receiver
drops datagrams from any address other than the session's source before
decoding them, leaves the session when no packet arrived for max(10, TSD,
4 base-group packet intervals) s or the time slot index did not advance for
max(20, 2 TSD) s, and treats the close-session flag A, which the sender sets
on a few data-less packets of the base group when it stops (unless told not
to: ``close=False``, ``m2c send --no-close``), as the end of the session; data
packets that carry A are still decoded.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import ipaddress
import logging
import math
import os
import secrets
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deliverykit.aio import BatchedUDPEndpoint, make_udp_socket
from m2c.aio.delivery import Delivery
from m2c.core.events import Join, Leave
from m2c.core.filetx import (
    RATE_UNIT,
    FileReceiver,
    FileSender,
    Metrics,
    SessionDescription,
    SymbolProgress,
    default_fec,
)
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.fec.errors import DecodeError, FECError
from m2c.wire import codec

log = logging.getLogger(__name__)

__all__ = ["make_session", "MulticastSender", "MulticastReceiver", "ReceiveProgress",
           "sender_socket_check"]


MAX_ACTIVE = 64
"""partially received source blocks a receiver holds at most (default)"""
BYTES_PER_SYMBOL_HELD = 3
"""a partial LDPC block costs a receiver ~3*k*E bytes (see make_session)"""
CLOSE_PACKETS = 3
"""data-less packets with A = 1 (close session, RFC 5651 5.1) a sender sends when it stops"""
CLOSE_GRACE = 0.5
"""s a receiver still takes packets after A = 1 (datagrams of other groups in flight)"""
MAX_SEND_PPS = 50_000
"""packets/s a sender schedules at most (all groups): each packet costs the Python
sender ~5-10 us of sequencing and encoding, so a higher --max-rate could not be met
and only made each buffer's sequencing take seconds (see docs/m2c.md)"""
PROGRESS_INTERVAL = 0.5
"""s between two reports to a receiver's ``on_progress``"""
TRACE_LEN = 1 << 14
"""per-epoch trace entries kept (13.6 min at the default 50 ms epochs)"""


def make_session(path: str, *, group: str = "239.192.77.1", port: int = 47000,
                 interface: str = "127.0.0.1", min_rate: float = 20.0,
                 max_rate: float = 2000.0, tsd: float = 1.0, k: int = 2,
                 schedule: str = "wave", fec: str = "ldpc", symbol_size: int = 1400,
                 max_block_length: int | None = None, seed: int | None = None,
                 session: int | None = None, memory: int = 256 << 20) -> SessionDescription:
    """Session description for sending ``path`` (rates in packets per second).

    Memory bound: a receiver holds up to ~3*k*E bytes per partially received
    LDPC block (symbols, decoder rows, the elimination's work space), so files
    of more than ``window = min(MAX_ACTIVE, memory // (3*B*E))`` source blocks
    are carouselled by windows of that many blocks, and receivers hold at most
    ``window`` partial blocks: 3*B*E*window <= ``memory`` at each receiver
    (the sender holds 2*B*E per block of the window).
    """
    if ipaddress.IPv4Address(interface).is_unspecified:
        raise ValueError(f"interface {interface}: a sender needs the address of one interface "
                         f"(its datagrams come from that address, which receivers check, "
                         f"RFC 5775 4.4)")
    size = os.path.getsize(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    sched = make_schedule(schedule, min_rate=min_rate, max_rate=max_rate, tsd=tsd, k=k)
    a, b, c, d = (int(x) for x in group.split("."))
    base = a << 24 | b << 16 | c << 8 | d
    groups = []
    for ch in range(sched.channels + 1):
        g = base + ch
        groups.append([f"{g >> 24 & 255}.{g >> 16 & 255}.{g >> 8 & 255}.{g & 255}", port + ch])
    fec_d = default_fec(size, fec, symbol_size, max_block_length,
                        seed if seed is not None else 1 + secrets.randbelow(0x7FFFFFFD))
    # TOI 0: the session's single object, so packets omit the TOI field (RFC 5775 4.1)
    sd = SessionDescription(session if session is not None else secrets.randbits(32), 0,
                            os.path.basename(path), size, h.hexdigest(), fec_d,
                            {**sched.describe(), "unit": RATE_UNIT}, groups, interface,
                            source=interface)
    per_block = BYTES_PER_SYMBOL_HELD * fec_d["max_block_length"] * symbol_size
    fit = memory // per_block
    if fit < 1:
        raise FECError(f"a receiver needs ~{per_block} bytes for one source block of "
                       f"{fec_d['max_block_length']} symbols of {symbol_size} bytes, more than "
                       f"the memory bound of {memory} bytes: use a smaller block length "
                       f"(m2c send --block-length) or symbol size (--symbol-size)")
    window = min(MAX_ACTIVE, fit)
    if sd.partition().blocks > window:
        sd.window_blocks = window
    return sd


def _mcast_sender_socket(interface: str) -> socket.socket:
    # unicast: never a port another socket holds (no SO_REUSEADDR; busy is EADDRINUSE)
    sock = make_udp_socket((interface, 0), reuse_addr=False)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
    ttl = 1 if interface.startswith("127.") else 8
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    return sock


def sender_socket_check(interface: str) -> None:
    """Raise OSError now if a sender cannot send from ``interface`` (not a local
    address, say), before anything (a session description) is written."""
    _mcast_sender_socket(interface).close()


class MulticastSender:
    """Carousel sender: sends each PDU at its due time, for ever or ``duration`` s."""

    LOOKAHEAD = 0.2

    def __init__(self, sd: SessionDescription, path: str, close: bool = True) -> None:
        self.sd = sd
        self.path = path
        self.close = close
        """close the session (A = 1) when the sender stops; False for a sender meant to
        be restarted (``m2c send --no-close``, then ``--resume``): receivers keep
        waiting for it up to their no-packet timeout"""
        self._f = open(path, "rb")  # noqa: SIM115 - closed in run()
        self.core = FileSender(sd, self._read)
        self.sent = 0
        self.bytes = 0

    def _read(self, off: int, n: int) -> bytes:
        return os.pread(self._f.fileno(), n, off)

    def _close_session(self, ep: BatchedUDPEndpoint, addr: tuple[str, int], slot: int,
                       psn: int) -> None:
        """RFC 5651 5.1: A = 1 tells receivers the session ends; data-less (RFC 5775
        4.1) packets on the base group, continuing its PSN sequence."""
        cp = self.sd.codepoint
        for i in range(CLOSE_PACKETS):
            wire = codec.encode(codec.AlcPacket(
                self.sd.session, self.sd.toi, cp, slot, 0, (psn + 1 + i) & 0xFFFFFFFF, 0, 0, 0,
                0, close_session=True, data_less=True))
            try:  # directly, not behind a backlog the endpoint drops when closed
                ep.sock.sendto(wire, addr)
            except OSError as exc:  # full socket buffer, interface gone: receivers time out
                log.debug("close-session packet not sent: %s", exc)
                continue
            self.sent += 1
            self.bytes += len(wire)

    async def run(self, duration: float | None = None, stop: asyncio.Event | None = None) -> dict:
        """Send until ``duration`` s passed, ``stop`` is set or the task is cancelled,
        then close the session (A = 1, see :meth:`_close_session`) unless ``close``
        is False."""
        loop = asyncio.get_running_loop()
        ep = BatchedUDPEndpoint(_mcast_sender_socket(self.sd.interface), lambda b, t: None)
        addrs = [(g, int(p)) for g, p in self.sd.groups]
        t0 = loop.time()
        queue: deque[tuple[float, bytes, Any, int, int, int]] = deque()
        horizon = 0.0
        base = [0, -1]  # slot and PSN of the last base-group packet sent
        try:
            while True:
                now = loop.time() - t0
                if duration is not None and now >= duration:
                    break
                if stop is not None and stop.is_set():
                    break
                while horizon < now + self.LOOKAHEAD:
                    pdus = self.core.next_pdus()
                    for pdu, pkt in pdus:
                        queue.append((pdu.due, codec.encode(pkt), addrs[pdu.g], pdu.g,
                                      pkt.slot, pkt.psn))
                    horizon = self.core.seq.next_start
                    # a sender slower than its schedule must still see --duration, the
                    # stop event and cancellation (Ctrl-C) between buffers
                    await asyncio.sleep(0)
                    now = loop.time() - t0
                    if (duration is not None and now >= duration) or (
                            stop is not None and stop.is_set()):
                        break
                batch = []
                while queue and queue[0][0] <= now:
                    _, wire, addr, g, slot, psn = queue.popleft()
                    batch.append((wire, addr))
                    if g == 0:
                        base[:] = [slot, psn]
                if batch:
                    ep.send_many(batch)
                    self.sent += len(batch)
                    self.bytes += sum(len(w) for w, _ in batch)
                wait = (queue[0][0] - (loop.time() - t0)) if queue else 0.001
                await asyncio.sleep(min(max(wait, 0.0005), 0.02))
        finally:
            try:
                if self.close:
                    self._close_session(ep, addrs[0], *base)
            finally:
                ep.close()
                self._f.close()
        return {"packets": self.sent, "bytes": self.bytes, "buffers": self.core.next_buffer,
                "tx_dropped": ep.stats["tx_dropped"],
                "stopped": bool(stop is not None and stop.is_set()), "closed": self.close}


@dataclass(frozen=True, slots=True)
class ReceiveProgress:
    """What a receiver reports to ``on_progress`` every PROGRESS_INTERVAL s and at its end."""

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


def default_interface(sd: SessionDescription) -> str:
    """The local address a receiver joins on when none is given: INADDR_ANY (the
    kernel picks the interface the group is routed to), except for a loopback
    sender, which only lo reaches (INADDR_ANY would follow the default route)."""
    sender = sd.source or sd.interface
    try:
        loopback = ipaddress.IPv4Address(sender).is_loopback
    except ValueError:
        loopback = False
    return "127.0.0.1" if loopback else "0.0.0.0"


class MulticastReceiver:
    """Joins the session, runs congestion control, decodes, verifies and writes.

    ``interface``: the local address to join on (default :func:`default_interface`;
    the session description's ``interface`` is the sender's, never used here).
    ``idle_timeout`` / ``slot_timeout``: RFC 3738 3.2.3.8's exceptional timeouts,
    max(10, TSD, 4 / base rate) and max(20, 2 TSD) s by default
    (see ``__init__``).
    """

    def __init__(self, sd: SessionDescription, out_path: str, controller: str = "m2c",
                 max_active: int = MAX_ACTIVE, max_rate: float = float("inf"),
                 on_progress: Callable[[ReceiveProgress], None] | None = None,
                 interface: str | None = None, idle_timeout: float | None = None,
                 slot_timeout: float | None = None) -> None:
        self.sd = sd
        self.interface = interface or default_interface(sd)
        """local address joins are made on"""
        self.source = sd.source or None
        """RFC 5775 4.4: datagrams from any other address are dropped (None: no check)"""
        self.out_path = out_path
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
        self.cc = ReceiverCC(self.schedule, controller=controller, max_rate=max_rate)
        # the session's window is what fits in the sender's memory bound: hold no more
        window = sd.window_blocks or max(1, sd.partition().blocks)
        self.file = FileReceiver(sd, max_active=min(max_active, window))
        self.on_progress = on_progress
        """called with a :class:`ReceiveProgress` every PROGRESS_INTERVAL s and at the end"""
        self._t0 = 0.0
        self._report = (0.0, 0)
        """time and link bytes of the last progress report"""
        self.eps: dict[int, BatchedUDPEndpoint] = {}
        self.rejected = 0
        self.wrong_group = 0
        self.foreign_source = 0
        """datagrams from an address other than the session's source (RFC 5775 4.4)"""
        self.implausible = 0
        """packets the congestion control found implausible: not given to the decoder"""
        self.handler_errors = 0
        """batches whose handling raised (a bug; the endpoint logs it and goes on): the
        rest of such a batch is lost, so it is counted here, not only in a log"""
        self.closed = False
        """the sender closed the session (A = 1)"""
        self.stopped = False
        """``run``'s stop event ended the transfer (SIGINT, SIGTERM in the CLI)"""
        self.end: str | None = None
        """why the session ended early (exceptional timeout, A = 1), None otherwise"""
        self.joins = self.leaves = 0
        self.trace: deque[tuple[float, int, float, float, int, int, float, int]] = deque(
            maxlen=TRACE_LEN)
        """per epoch: (t, level, cumulative rate, target rate, lost, received, ARTT,
        loss events); the last TRACE_LEN epochs"""
        self._done = asyncio.Event()
        self._t_last = 0.0
        self._t_batch = 0.0
        self._t_packet = 0.0
        self._t_slot = 0.0
        self._slot = -1
        self._close_at = math.inf
        self._flush_pending = False
        self.output = Delivery(out_path, sd.size, sd.sha256)
        """the temporary file, its verification and delivery"""
        self.packets = 0
        """datagrams of this session received (before any decoding check)"""

    # --- sockets -----------------------------------------------------------
    def _mreq(self, ch: int) -> bytes:
        return socket.inet_aton(self.sd.groups[ch][0]) + socket.inet_aton(self.interface)

    def _join(self, ch: int) -> None:
        if ch in self.eps:
            return
        g, port = self.sd.groups[ch]
        try:
            # receivers on one host share the group's port by design (SO_REUSEADDR)
            sock = make_udp_socket((g, int(port)), rcvbuf=4 << 20, reuse_addr=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot bind {g} port {port} (channel {ch}): "
                                     f"{exc.strerror}") from None
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, self._mreq(ch))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"cannot join {g} on interface {self.interface}: "
                                     f"{exc.strerror}") from None
        self.eps[ch] = BatchedUDPEndpoint(sock, functools.partial(self._on_batch, ch))
        self.joins += 1

    def _leave(self, ch: int) -> None:
        ep = self.eps.pop(ch, None)
        if ep is None:
            return
        try:
            ep.sock.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, self._mreq(ch))
        except OSError:
            pass
        ep.close()
        self.handler_errors += ep.stats["handler_errors"]
        self.leaves += 1

    def _apply(self, events: list[Join | Leave]) -> None:
        for ev in events:
            if isinstance(ev, Join):
                self._join(ev.channel)
            else:
                self._leave(ev.channel)

    # --- packets -----------------------------------------------------------
    def _on_batch(self, ch: int, batch: list, now: float) -> None:
        if self._done.is_set():
            return
        src = self.source
        cc = self.cc
        for data, addr in batch:
            if src is not None and addr[0] != src:  # RFC 5775 4.4, before any decoding
                self.foreign_source += 1
                continue
            try:
                pkt = codec.decode(data, session=self.sd.session)
            except DecodeError:
                self.rejected += 1
                continue
            if pkt.group != ch:
                self.wrong_group += 1
                continue
            self.packets += 1
            self._t_packet = now
            if pkt.close_session:  # RFC 5651 5.1: the sender ends the session
                if not self.closed:
                    self.closed = True
                    self._close_at = now + CLOSE_GRACE
                if pkt.data_less:
                    continue
                # a sender may set A on its last data packets: decode them as usual
            before = cc.implausible
            self._apply(cc.on_packet(now, ch, pkt.psn))
            if cc.implausible != before:  # does not fit the sender clock: not decoded
                self.implausible += 1
                continue
            if pkt.slot != self._slot and cc.offset is not None:
                # RFC 3738 3.2.3.8 watches for no *change* of the time slot index; only
                # packets judged against the sender clock count (a forged index before
                # the clock is anchored cannot hold the watch)
                self._slot = pkt.slot
                self._t_slot = now
            self._write(self.file.feed(pkt, len(data), defer=True), now)
            if self.file.complete:
                self._done.set()
                return
        # eliminations once all ready sockets are read (FileReceiver.feed): the
        # callback runs after the other readers the loop found ready with this one
        self._t_batch = now
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._done.is_set():
            return
        self._write(self.file.flush(), self._t_batch)
        if self.file.complete:
            self._done.set()

    def _write(self, blocks: list[tuple[int, bytes]], t_arrival: float) -> None:
        for off, blk in blocks:
            try:
                self.output.write(off, blk)
            except OSError as exc:  # disk full, quota, I/O error: the transfer ends
                if self.end is None:
                    self.end = self.output.io_error(exc, self.out_path)
                self._done.set()
                return
            self._t_last = t_arrival

    def _progress(self, now: float) -> None:
        if self.on_progress is None:
            return
        t, link = self._report
        self._report = (now, self.file.link_bytes)
        rate = (self.file.link_bytes - link) * 8 / 1000 / (now - t) if now > t else 0.0
        self.on_progress(ReceiveProgress(self.file.progress(), self.packets, rate,
                                         len(self.eps), now - self._t0))

    def _check_end(self, now: float) -> None:
        """RFC 3738 3.2.3.8 exceptional timeouts (MUST leave) and the A flag's end."""
        if now >= self._close_at:
            self._flush()
            if not self.file.complete:
                self.end = "the sender closed the session (LCT flag A, RFC 5651 5.1) " \
                           "before the file was complete"
        elif now - self._t_packet >= self.idle_timeout:
            if self.packets:
                self.end = (f"no packet from the sender for {self.idle_timeout:g} s after "
                            f"{self.packets} packets: left the session (RFC 3738 3.2.3.8)"
                            + self._others())
            else:
                self.end = (f"no packet of this session arrived in {self.idle_timeout:g} s "
                            f"(is the sender running, and can {self.interface} reach "
                            f"{self.sd.groups[0][0]}?): left the session (RFC 3738 3.2.3.8)"
                            + self._others())
        elif now - self._t_slot >= self.slot_timeout:
            self.end = (f"the time slot index did not advance for {self.slot_timeout:g} s: "
                        f"left the session (RFC 3738 3.2.3.8)")
        if self.end is not None or now >= self._close_at:
            self._done.set()

    def _others(self) -> str:
        """What arrived that was not this session's (a restarted sender, a wrong SDP)."""
        parts = [f"{n} {what}" for n, what in (
            (self.rejected, "datagrams of another session or malformed (a sender "
                            "restarted without --resume?)"),
            (self.foreign_source, "datagrams from another source address"),
            (self.implausible, "packets that did not fit the sender clock")) if n]
        return f" ({'; '.join(parts)})" if parts else ""

    async def _timers(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._done.is_set():
            nxt = self.cc.next_timer()
            now = loop.time()
            # wake for the next epoch, and at least every 0.1 s for the session timers
            await asyncio.sleep(max(0.0, min(nxt if nxt is not None else math.inf,
                                             now + 0.1, self._close_at) - now))
            now = loop.time()
            self._check_end(now)
            if self._done.is_set():
                return
            self._apply(self.cc.on_timer(now))
            if now - self._report[0] >= PROGRESS_INTERVAL:
                self._progress(now)
            ts = self.cc.sender_time(now)
            if ts is not None:
                lvl = self.cc.level(ts)
                self.trace.append((now, lvl, self.schedule.cum_rate(lvl, ts),
                                   self.cc.target_rate(), self.cc.loss.lost,
                                   self.cc.loss.received, self.cc.rtt.rtt,
                                   self.cc.loss_events))

    async def _until(self, aw: Any, stop: asyncio.Event | None,
                     timeout: float | None = None) -> bool:
        """Await ``aw`` unless ``stop`` is set first (then ``aw`` is cancelled and the
        answer is False); asyncio.TimeoutError after ``timeout`` s."""
        work = asyncio.ensure_future(aw)
        waits = {work}
        halt = None
        if stop is not None:
            halt = asyncio.ensure_future(stop.wait())
            waits.add(halt)
        try:
            done, _ = await asyncio.wait(waits, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if work in done:
            work.result()  # its exception, if any
            return True
        if halt is not None and halt in done:
            self.stopped = True
            return False
        raise asyncio.TimeoutError

    async def run(self, timeout: float = 60.0, stop: asyncio.Event | None = None) -> dict:
        """Receive until the file is recovered and verified, the session ends early
        (``end``: an exceptional timeout, A = 1 with the file incomplete, a write
        error such as a full disk), ``timeout`` s pass or ``stop`` is set (a signal,
        see :class:`deliverykit.cliutil.Stopper`: ``stopped`` in the result).

        Blocks are written to a temporary file (see :class:`~m2c.aio.delivery.Delivery`); only a
        file whose SHA-256 matches the session description reaches the output:
        ``os.replace`` for a regular file, a copy for a device, a FIFO or ``-``
        (stdout).  Otherwise the temporary file is removed and an existing output
        file is left as it was; ``end`` says why.  Setting ``stop`` or cancelling
        the task removes it too.
        """
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        out = self.output
        refusal = out.refusal()
        if refusal is not None:
            self.end = refusal
            return self._result(False, t0, t0)
        try:
            out.open()
        except OSError as exc:
            self.end = out.io_error(exc, self.out_path)
            return self._result(False, t0, loop.time())
        self._t_packet = self._t_slot = self._t0 = t0
        self._report = (t0, 0)
        ok = False
        timers: asyncio.Task | None = None
        try:
            try:
                self._apply(self.cc.start(t0))
                timers = asyncio.create_task(self._timers())
                if self.sd.size == 0:
                    self._done.set()
                await self._until(self._done.wait(), stop, timeout)
                if self.stopped and not self.file.complete:
                    self.end = "stopped before the file was complete"
                elif self.file.complete and self.end is None:
                    try:
                        ok = out.verified()
                    except OSError as exc:  # a delayed write error, reading it back
                        self.end = out.io_error(exc, self.out_path)
                    else:
                        if not ok:
                            self.end = "the recovered file does not match the session's SHA-256"
            except asyncio.TimeoutError:
                ok = False
                got = self.file.progress()
                self.end = (f"the file was not complete after {timeout:g} s: "
                            f"{got.symbols} of {got.needed} source symbols "
                            f"({got.percent:.1f} %), {got.blocks_done} of {got.blocks} source "
                            f"blocks decoded from {self.packets} packets" + self._others())
            finally:
                if timers is not None:
                    timers.cancel()
                self._progress(loop.time())  # the last word: where the transfer ended
                for ch in list(self.eps):
                    self._leave(ch)
        finally:
            out.close()
            try:
                if ok and out.to_stream:
                    try:
                        if not await self._until(out.deliver(), stop):
                            ok = False
                            self.end = "stopped while writing the verified file"
                    except OSError as exc:  # /dev/full, a FIFO whose reader left
                        ok = False
                        self.end = out.io_error(exc, self.out_path if self.out_path != "-"
                                                else "stdout")
                elif ok:
                    await out.deliver()
            finally:
                out.discard()
        return self._result(ok, t0, loop.time())

    def _result(self, ok: bool, t0: float, t_end: float) -> dict:
        lt = self.cc.loss
        m: Metrics = self.file.metrics(t_end - t0, max(self._t_last - t0, 1e-9), lt.lost,
                                       lt.received)
        return {"ok": ok, "complete": self.file.complete, "end": None if ok else self.end,
                "metrics": m, "packets": self.packets, "rejected": self.rejected,
                "wrong_group": self.wrong_group, "foreign_source": self.foreign_source,
                "implausible": self.implausible, "ignored": self.file.ignored,
                "handler_errors": self.handler_errors,
                "closed": self.closed, "stopped": self.stopped, "joins": self.joins,
                "leaves": self.leaves,
                "loss_events": self.cc.loss_events, "duplicates": lt.duplicates,
                "trace": list(self.trace)}
