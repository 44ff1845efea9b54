"""Sender and receiver drivers: real multicast sockets, the loop's clock.

Works as an ordinary user on loopback: the sender binds to and sets
IP_MULTICAST_IF to its interface address (127.0.0.1 by default), which the
session description names as the ``source``; the receiver joins with
IP_ADD_MEMBERSHIP on its own interface (INADDR_ANY unless told otherwise;
127.0.0.1 for a loopback sender, which only lo can reach).  Each channel has
its own group address and port (see ``make_session``).

The protocol is in the sans-IO cores (:mod:`m2c.core.session`: ``SenderCore``,
``ReceiverCore``), pumped by :class:`deliverykit.aio.CoreDriver` on the loop's
clock; the very same objects run in the simulator (:mod:`m2c.sim`).  This
module opens the sockets, turns the receiver's Join/Leave events into group
memberships and writes what it decodes.

Session handling (RFC 5775 4.4, RFC 3738 3.2.3.8, RFC 5651 5.1, in the
receiver core): the receiver
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
import contextlib
import functools
import ipaddress
import logging
import math
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deliverykit.aio import BatchedUDPEndpoint, CoreDriver, make_udp_socket
from m2c.aio.delivery import Delivery, sha256_file
from m2c.core.description import FecScheme, SessionDescription
from m2c.core.events import Join, Leave
from m2c.core.filetx import Metrics
from m2c.core.session import (
    BYTES_PER_SYMBOL_HELD,
    CLOSE_GRACE,
    CLOSE_PACKETS,
    MAX_ACTIVE,
    PROGRESS_INTERVAL,
    TRACE_LEN,
    Decoded,
    ReceiveProgress,
    ReceiverCore,
    Recovered,
    SenderCore,
    SessionEnded,
    describe_session,
)

log = logging.getLogger(__name__)

TraceEntry = tuple[float, int, float, float, int, int, float, int]

__all__ = ["BYTES_PER_SYMBOL_HELD", "CLOSE_GRACE", "CLOSE_PACKETS", "MAX_ACTIVE",
           "MAX_SEND_PPS", "PROGRESS_INTERVAL", "TRACE_LEN", "MulticastReceiver",
           "MulticastSender", "ReceiveProgress", "ReceiveResult", "SendResult", "make_session",
           "sender_socket_check"]

MAX_SEND_PPS = 50_000
"""packets/s a sender schedules at most (all groups): each packet costs the Python
sender ~5-10 us of sequencing and encoding, so a higher --max-rate could not be met
and only made each buffer's sequencing take seconds (see docs/m2c.md)"""


@dataclass(frozen=True, slots=True)
class SendResult:
    """What a sender did (``m2c send`` prints it as JSON on stderr)."""

    packets: int
    """datagrams sent, the close-session packets included"""
    bytes: int
    """UDP payload bytes sent"""
    buffers: int
    """application buffers sequenced"""
    tx_dropped: int
    """datagrams the endpoint dropped (full send backlog, socket errors)"""
    stopped: bool
    """the ``stop`` event ended it (a signal in the CLI)"""
    closed: bool
    """the session was closed (A = 1) when it stopped"""


@dataclass(frozen=True, slots=True)
class ReceiveResult:
    """How a receiver's transfer ended (``m2c receive`` prints it as JSON)."""

    ok: bool
    """the file was recovered, verified (SHA-256) and delivered"""
    complete: bool
    """every source block was decoded"""
    end: str | None
    """why not ``ok`` (one line); None when ok"""
    metrics: Metrics
    """paper section 7.2's criteria and their raw counts"""
    packets: int
    """datagrams of this session received"""
    rejected: int
    """datagrams of another session or malformed"""
    wrong_group: int
    """packets whose group is not the socket's"""
    foreign_source: int
    """datagrams from another source address (RFC 5775 4.4)"""
    implausible: int
    """packets that did not fit the sender clock"""
    ignored: int
    """verified packets not of this file (another TOI, block, ESI, symbol length)"""
    handler_errors: int
    """batches or core calls that raised (a bug; counted, never fatal)"""
    closed: bool
    """the sender closed the session (A = 1)"""
    stopped: bool
    """the ``stop`` event ended it (a signal in the CLI)"""
    joins: int
    leaves: int
    loss_events: int
    duplicates: int
    """datagrams received twice (same channel and PSN)"""
    trace: list[TraceEntry]
    """per epoch: (t, level, cumulative rate, target rate, lost, received, ARTT, loss
    events); the last TRACE_LEN epochs"""


def make_session(path: str, *, group: str = "239.192.77.1", port: int = 47000,
                 interface: str = "127.0.0.1", min_rate: float = 20.0,
                 max_rate: float = 2000.0, tsd: float = 1.0, k: int = 2,
                 schedule: str = "wave", fec: FecScheme | str = FecScheme.LDPC,
                 symbol_size: int = 1400, max_block_length: int | None = None,
                 seed: int | None = None,
                 session: int | None = None, memory: int = 256 << 20) -> SessionDescription:
    """Session description for sending ``path`` (rates in packets per second);
    see :func:`m2c.core.session.describe_session`.

    Memory bound (see :func:`m2c.core.session.describe_session`): a receiver
    holds ~2*B*E bytes per partially received LDPC block plus 3*B*E once (the
    block being eliminated or handed out), so files of more than ``window =
    min(MAX_ACTIVE, (memory - 3*B*E) // (2*B*E))`` source blocks are
    carouselled by even windows of at most that many blocks:
    2*B*E*window + 3*B*E <= ``memory`` at each receiver.
    """
    if ipaddress.IPv4Address(interface).is_unspecified:
        raise ValueError(f"interface {interface}: a sender needs the address of one interface "
                         f"(its datagrams come from that address, which receivers check, "
                         f"RFC 5775 4.4)")
    size = os.path.getsize(path)
    return describe_session(
        os.path.basename(path), size, sha256_file(path),
        session=session if session is not None else secrets.randbits(32),
        fec_seed=seed if seed is not None else 1 + secrets.randbelow(0x7FFFFFFD),
        group=group, port=port, interface=interface, min_rate=min_rate, max_rate=max_rate,
        tsd=tsd, k=k, schedule=schedule, fec=fec, symbol_size=symbol_size,
        max_block_length=max_block_length, memory=memory)


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
    """Carousel sender: a :class:`~m2c.core.session.SenderCore` pumped by
    :class:`deliverykit.aio.CoreDriver`, for ever or ``duration`` s."""

    def __init__(self, sd: SessionDescription, path: str, close: bool = True) -> None:
        self.sd = sd
        self.path = path
        self.close = close
        """close the session (A = 1) when the sender stops; False for a sender meant to
        be restarted (``m2c send --no-close``, then ``--resume``): receivers keep
        waiting for it up to their no-packet timeout"""
        self._f = open(path, "rb")  # noqa: SIM115 - closed in run()
        self.core = SenderCore(sd, self._read)
        self._close_sent = 0
        self._close_bytes = 0

    def _read(self, off: int, n: int) -> bytes:
        return os.pread(self._f.fileno(), n, off)

    @property
    def sent(self) -> int:
        """datagrams sent (the close-session packets included)"""
        return self.core.sent + self._close_sent

    @property
    def bytes(self) -> int:
        return self.core.bytes + self._close_bytes

    def _close_session(self, ep: BatchedUDPEndpoint) -> None:
        """RFC 5651 5.1: A = 1 tells receivers the session ends (the core's
        data-less packets on the base group)."""
        for wire, addr in self.core.close_packets():
            try:  # directly, not behind a backlog the endpoint drops when closed
                ep.sock.sendto(wire, addr)
            except OSError as exc:  # full socket buffer, interface gone: receivers time out
                log.debug("close-session packet not sent: %s", exc)
                continue
            self._close_sent += 1
            self._close_bytes += len(wire)

    async def send(self, duration: float | None = None,
                   stop: asyncio.Event | None = None) -> SendResult:
        """Send until ``duration`` s passed, ``stop`` is set or the task is cancelled,
        then close the session (A = 1, see :meth:`_close_session`) unless ``close``
        is False."""
        loop = asyncio.get_running_loop()
        driver = CoreDriver(self.core, loop=loop)
        ep = BatchedUDPEndpoint(_mcast_sender_socket(self.sd.interface), driver.on_batch)
        driver.attach(ep)
        try:
            self.core.start(loop.time())
            driver.kick()
            waits: list[asyncio.Future[Any]] = []
            if stop is not None:
                waits.append(asyncio.ensure_future(stop.wait()))
            try:
                if waits:
                    await asyncio.wait(waits, timeout=duration)
                else:
                    await asyncio.sleep(duration if duration is not None else math.inf)
            finally:
                for w in waits:
                    w.cancel()
        finally:
            driver.close()
            self.core.stop()
            try:
                if self.close:
                    self._close_session(ep)
            finally:
                ep.close()
                self._f.close()
        return SendResult(self.sent, self.bytes, self.core.buffers, ep.stats["tx_dropped"],
                          bool(stop is not None and stop.is_set()), self.close)


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

    The session is a :class:`~m2c.core.session.ReceiverCore` pumped by
    :class:`deliverykit.aio.CoreDriver`; this driver acts on its events: a
    socket with IP_ADD_MEMBERSHIP per :class:`~m2c.core.events.Join`,
    IP_DROP_MEMBERSHIP per ``Leave``, decoded bytes into the
    :class:`~m2c.aio.delivery.Delivery`.

    ``interface``: the local address to join on (default :func:`default_interface`;
    the session description's ``interface`` is the sender's, never used here).
    ``idle_timeout`` / ``slot_timeout``: RFC 3738 3.2.3.8's exceptional timeouts,
    max(10, TSD, 4 / base rate) and max(20, 2 TSD) s by default.
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
        self.on_progress = on_progress
        """called with a :class:`ReceiveProgress` every PROGRESS_INTERVAL s and at the end"""
        self.core = ReceiverCore(sd, controller=controller, max_active=max_active,
                                 max_rate=max_rate, source=self.source, where=self.interface,
                                 idle_timeout=idle_timeout, slot_timeout=slot_timeout,
                                 progress_interval=PROGRESS_INTERVAL if on_progress else None)
        self.schedule = self.core.schedule
        self.idle_timeout = self.core.idle_timeout
        self.slot_timeout = self.core.slot_timeout
        self.eps: dict[int, BatchedUDPEndpoint] = {}
        self.handler_errors = 0
        """batches whose handling raised (a bug; the endpoint logs it and goes on): the
        rest of such a batch is lost, so it is counted here, not only in a log"""
        self.stopped = False
        """``run``'s stop event ended the transfer (SIGINT, SIGTERM in the CLI)"""
        self.end: str | None = None
        """why the session ended early (exceptional timeout, A = 1, a write error)"""
        self._done = asyncio.Event()
        self._driver: CoreDriver | None = None
        self._running = False
        self.output = Delivery(out_path, sd.size, sd.sha256)
        """the temporary file, its verification and delivery"""

    # the core's state, as the receiver's attributes
    cc = property(lambda self: self.core.cc)
    file = property(lambda self: self.core.file)
    packets = property(lambda self: self.core.packets, doc="datagrams of this session received")
    rejected = property(lambda self: self.core.rejected)
    wrong_group = property(lambda self: self.core.wrong_group)
    foreign_source = property(lambda self: self.core.foreign_source)
    implausible = property(lambda self: self.core.implausible)
    closed = property(lambda self: self.core.closed, doc="the sender closed the session (A = 1)")
    joins = property(lambda self: self.core.joins)
    leaves = property(lambda self: self.core.leaves)
    trace = property(lambda self: self.core.trace,
                     doc="per epoch: (t, level, cumulative rate, target rate, lost, received, "
                         "ARTT, loss events); the last TRACE_LEN epochs")

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

    # --- the core's events -------------------------------------------------
    def _on_event(self, ev: object) -> None:
        if isinstance(ev, Decoded):
            self._write(ev.offset, ev.data)
        elif isinstance(ev, Join):
            try:
                self._join(ev.channel)
            except OSError as exc:
                if not self._running:
                    raise  # the base group at the start: receive() raises it
                if self.end is None:
                    self.end = str(exc)
                self._done.set()
        elif isinstance(ev, Leave):
            self._leave(ev.channel)
        elif isinstance(ev, ReceiveProgress):
            if self.on_progress is not None:
                self.on_progress(ev)
        elif isinstance(ev, SessionEnded):
            if self.end is None:
                self.end = ev.text
            self._done.set()
        elif isinstance(ev, Recovered):
            self._done.set()

    def _on_batch(self, ch: int, batch: list[tuple[bytes, Any]], now: float) -> None:
        """One socket's datagrams (the group ``ch``'s): into the core, then drain it."""
        if self._done.is_set():
            return
        core = self.core
        for data, addr in batch:
            core.datagram_received(data, addr, now, channel=ch)
        if self._driver is not None:
            self._driver.kick()

    def _write(self, off: int, blk: bytes) -> None:
        if self._done.is_set() and self.end is not None:
            return  # a write already failed: the transfer is over
        try:
            self.output.write(off, blk)
        except OSError as exc:  # disk full, quota, I/O error: the transfer ends
            if self.end is None:
                self.end = self.output.io_error(exc, self.out_path)
            self._done.set()

    def _others(self) -> str:
        return self.core.others()

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

    async def receive(self, timeout: float = 60.0,
                      stop: asyncio.Event | None = None) -> ReceiveResult:
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
            return self._result(False, t0)
        try:
            out.open()
        except OSError as exc:
            self.end = out.io_error(exc, self.out_path)
            return self._result(False, loop.time())
        ok = False
        core = self.core
        driver = self._driver = CoreDriver(core, on_event=self._on_event, loop=loop)
        try:
            try:
                core.start(t0)
                driver.kick()
                self._running = True
                await self._until(self._done.wait(), stop, timeout)
                if self.stopped and not core.file.complete:
                    self.end = "stopped before the file was complete"
                elif core.file.complete and self.end is None:
                    try:
                        ok = out.verified()
                    except OSError as exc:  # a delayed write error, reading it back
                        self.end = out.io_error(exc, self.out_path)
                    else:
                        if not ok:
                            self.end = "the recovered file does not match the session's SHA-256"
            except asyncio.TimeoutError:
                ok = False
                got = core.file.progress()
                self.end = (f"the file was not complete after {timeout:g} s: "
                            f"{got.symbols} of {got.needed} source symbols "
                            f"({got.percent:.1f} %), {got.blocks_done} of {got.blocks} source "
                            f"blocks decoded from {core.packets} packets" + core.others())
            finally:
                self._done.set()
                core.stop(loop.time())  # the last progress report and a Leave per group
                with contextlib.suppress(OSError):
                    driver.kick()
                driver.close()
                self.handler_errors += driver.stats["core_errors"]
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
        return self._result(ok, loop.time())

    def _result(self, ok: bool, t_end: float) -> ReceiveResult:
        core = self.core
        return ReceiveResult(
            ok=ok, complete=core.file.complete, end=None if ok else self.end,
            metrics=core.metrics(t_end), packets=core.packets, rejected=core.rejected,
            wrong_group=core.wrong_group, foreign_source=core.foreign_source,
            implausible=core.implausible, ignored=core.file.ignored,
            handler_errors=self.handler_errors, closed=core.closed, stopped=self.stopped,
            joins=core.joins, leaves=core.leaves, loss_events=core.cc.loss_events,
            duplicates=core.cc.loss.duplicates, trace=list(core.trace))
