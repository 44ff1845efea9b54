"""Batched asyncio UDP endpoints.

The stdlib datagram transport does one ``recvfrom`` per event-loop iteration
(~22k packets/s measured on these machines). :class:`BatchedUDPEndpoint`
instead registers the socket with ``loop.add_reader`` and drains it with
:func:`deliverykit.fastpath.recv_batch` (``recvmmsg`` in C), handing the
protocol core a list of datagrams per wake-up; sends go out through
``sendmmsg``. It works on any asyncio loop, uvloop included.

Usage::

    async with open_udp(("127.0.0.1", 0), on_batch) as ep:
        ep.sendto(b"...", ("127.0.0.1", 4341))
        ep.send_many([(data, addr), ...])

``on_batch(datagrams, now)`` receives ``[(data, addr), ...]`` and the loop's
clock; an exception it raises is counted in ``ep.stats["handler_errors"]`` and
logged, never propagated into the loop, so one malformed packet cannot stop a
router.

:class:`CoreDriver` pumps any :class:`~deliverykit.protocol.DatagramCore` on
such an endpoint: the real-time twin of the simulator's pump
(:mod:`deliverykit.sim.pump`)::

    async with open_core(core, ("127.0.0.1", 0), on_event=print) as driver:
        core.connect(peer_addr, driver.now)   # the application calls the core...
        driver.kick()                         # ...then lets the driver drain it
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from deliverykit.errors import RemoteProtocolError
from deliverykit.fastpath import (
    UDP_SEGMENT,
    group_by_destination,
    recv_batch,
    send_batch,
    send_gso,
)
from deliverykit.protocol import DatagramCore, SockAddr

log = logging.getLogger(__name__)

#: one datagram and the socket address it came from or goes to
Datagram: TypeAlias = tuple[bytes, SockAddr]
#: a datagram with its kernel arrival time on the loop's clock (None: the kernel gave
#: none), as an endpoint with :meth:`BatchedUDPEndpoint.enable_timestamps` hands it on
TimestampedDatagram: TypeAlias = tuple[bytes, SockAddr, float | None]
#: what an endpoint hands its handler per wake-up: plain datagrams, or timestamped
#: ones once :meth:`BatchedUDPEndpoint.enable_timestamps` was called
Batch: TypeAlias = list[Datagram] | list[TimestampedDatagram]
BatchHandler: TypeAlias = Callable[[Batch, float], None]
#: a recvmmsg that also returns each datagram's kernel arrival time:
#: ``recv_ts(sock, max_count, size) -> [(data, addr, unix time or -1.0)]``
TimestampedRecv: TypeAlias = Callable[
    [socket.socket, int, int], list[tuple[bytes, SockAddr, float]]
]
#: SO_TIMESTAMPNS on Linux (the socket module has no name for it)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def make_udp_socket(
    local_addr: SockAddr,
    *,
    reuse_port: bool = False,
    reuse_addr: bool | None = None,
    rcvbuf: int | None = 4 << 20,
    sndbuf: int | None = 4 << 20,
    family: int | None = None,
) -> socket.socket:
    """A non-blocking UDP socket bound to ``local_addr`` with large buffers.

    A busy unicast port is an error (EADDRINUSE), never a silent share: SO_REUSEADDR
    is set only when asked (``reuse_addr=True``) or, by default, for a multicast
    group address, whose port several receivers on one host share; SO_REUSEPORT
    only with ``reuse_port=True``.
    """
    if family is None:
        family = socket.AF_INET6 if ":" in local_addr[0] else socket.AF_INET
    if reuse_addr is None:
        try:
            reuse_addr = ipaddress.ip_address(local_addr[0]).is_multicast
        except ValueError:  # a name, or "" (the wildcard): unicast
            reuse_addr = False
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        if reuse_addr:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        for opt, size in ((socket.SO_RCVBUF, rcvbuf), (socket.SO_SNDBUF, sndbuf)):
            if size:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
        sock.bind(local_addr)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


#: errno values with which the kernel refuses a UDP GSO message itself
_GSO_REFUSED = frozenset({errno.EIO, errno.EINVAL, errno.ENOPROTOOPT, errno.EOPNOTSUPP})


class BatchedUDPEndpoint:
    """A UDP socket pumped by ``add_reader`` + ``recvmmsg`` and ``sendmmsg``."""

    def __init__(
        self,
        sock: socket.socket,
        on_batch: BatchHandler,
        *,
        batch: int = 64,
        max_size: int = 65536,
        loop: asyncio.AbstractEventLoop | None = None,
        max_backlog: int = 65536,
    ) -> None:
        self.sock = sock
        self.on_batch = on_batch
        self.batch = batch
        self.max_size = max_size
        self.loop = loop or asyncio.get_running_loop()
        self._backlog: deque[Datagram] = deque()
        self._max_backlog = max_backlog
        self._writing = False
        self._closed = False
        #: called when a backlog of sends has gone out (a driver resumes draining its core)
        self.on_drain: Callable[[], None] | None = None
        self.stats = {
            "rx_packets": 0, "rx_batches": 0, "tx_packets": 0, "tx_dropped": 0,
            "handler_errors": 0, "socket_errors": 0, "gso_fallbacks": 0,
        }
        #: UDP GSO segments per message at most, 0 when off (:meth:`enable_gso`)
        self.gso_segments = 0
        self._recv_ts: TimestampedRecv | None = None
        self._reading = True
        self.loop.add_reader(sock.fileno(), self._on_readable)

    @property
    def local_addr(self) -> SockAddr:
        addr: SockAddr = self.sock.getsockname()
        return addr

    def enable_timestamps(self, recv_ts: TimestampedRecv) -> None:
        """Hand each datagram on as ``(data, addr, arrived)``: its kernel arrival time
        (SO_TIMESTAMPNS) on the loop's clock, or None when the kernel gave none.

        ``recv_ts`` is the receive function that reads the timestamps (the
        extension's ``recv_batch_ts`` or its twin).  Costs CPU on every datagram:
        only for cores that use arrival times (e.g. delay samples).  Raises
        OSError when the socket refuses the option."""
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._recv_ts = recv_ts

    @property
    def timestamps(self) -> bool:
        return self._recv_ts is not None

    def pause_reading(self) -> None:
        """Stop reading the socket (datagrams wait in, then overflow, its buffer)."""
        if self._reading and not self._closed:
            self._reading = False
            self.loop.remove_reader(self.sock.fileno())

    def resume_reading(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self.loop.add_reader(self.sock.fileno(), self._on_readable)

    # --- receive -------------------------------------------------------
    def _on_readable(self) -> None:
        # Bounded work per wake-up so a flood cannot starve timers.
        for _ in range(8):
            got: Batch
            try:
                if self._recv_ts is not None:
                    got = self._recv_timestamped()
                else:
                    got = recv_batch(self.sock, self.batch, self.max_size)
            except OSError as exc:  # e.g. ICMP port unreachable surfaced as ECONNREFUSED
                self.stats["socket_errors"] += 1
                log.debug("recv error on %s: %s", self.local_addr, exc)
                return
            if not got:
                return
            self.stats["rx_packets"] += len(got)
            self.stats["rx_batches"] += 1
            try:
                self.on_batch(got, self.loop.time())
            except Exception:  # never let one bad batch kill the loop
                self.stats["handler_errors"] += 1
                log.exception("batch handler failed")
            if len(got) < self.batch:
                return
            if not self._reading:  # the handler paused us
                return

    def _recv_timestamped(self) -> list[TimestampedDatagram]:
        assert self._recv_ts is not None
        got = self._recv_ts(self.sock, self.batch, self.max_size)
        if not got:
            return []
        # kernel times are the wall clock's; the loop's clock is monotonic
        shift = time.time() - self.loop.time()
        return [(d, a, t - shift if t > 0 else None) for d, a, t in got]

    # --- send ----------------------------------------------------------
    def sendto(self, data: bytes, addr: SockAddr) -> None:
        self.send_many(((data, addr),))

    def enable_gso(self, max_segments: int = 64) -> bool:
        """Send with UDP GSO from now on (udp(7), ``UDP_SEGMENT``); True when the
        kernel has it.

        Each :meth:`send_many` batch is grouped by destination (stable: the
        order towards one address is kept; datagrams to different addresses
        have no order on the wire anyway), and each run of same-size datagrams
        to one address crosses the stack as one message that the kernel cuts at
        the device (:func:`deliverykit.fastpath.send_gso`).  Every datagram
        still leaves as its own datagram.  When the kernel refuses a GSO
        message (EIO: no checksum offload on the route's device; EINVAL: a
        segment above the path MTU) the endpoint counts it in
        ``stats["gso_fallbacks"]``, turns GSO off and sends the same datagrams
        with sendmmsg.  ``max_segments``: the kernel's UDP_MAX_SEGMENTS is 64
        (128 since Linux 6.9)."""
        if not 1 <= max_segments <= 128:
            raise ValueError("enable_gso: 1 <= max_segments <= 128")
        try:  # the option exists on kernels with UDP GSO (4.18+)
            self.sock.getsockopt(socket.SOL_UDP, UDP_SEGMENT)
        except OSError:
            return False
        self.gso_segments = max_segments
        return True

    def send_many(self, items: Iterable[Datagram]) -> None:
        """Queue datagrams; sent at once with sendmmsg, the rest when writable.

        Datagrams beyond ``max_backlog`` waiting for a full socket buffer are
        dropped and counted in ``stats["tx_dropped"]`` (UDP semantics, but
        never silent).
        """
        if self._closed:
            raise ConnectionError("endpoint is closed")
        batch = group_by_destination(items) if self.gso_segments else list(items)
        if self._backlog:
            self._enqueue(batch)
            return
        sent = self._send_now(batch)
        if sent < len(batch):
            self._enqueue(batch[sent:])

    def _send_now(self, items: list[Datagram]) -> int:
        """Send what the socket takes now; returns how many items are done with
        (sent, or dropped and counted for an error of their own)."""
        done, n = 0, len(items)
        while done < n:
            rest = items[done:] if done else items
            try:
                if self.gso_segments:
                    got = send_gso(self.sock, rest, self.gso_segments)
                else:
                    got = send_batch(self.sock, rest)
            except BlockingIOError:
                break
            except OSError as exc:
                if self.gso_segments and exc.errno in _GSO_REFUSED:
                    self.gso_segments = 0  # the same datagrams again, one by one
                    self.stats["gso_fallbacks"] += 1
                    log.info("UDP GSO refused on %s (%s): sendmmsg from now on",
                             self.local_addr, exc)
                    continue
                # An unreachable destination must not stop the others: skip one.
                self.stats["socket_errors"] += 1
                self.stats["tx_dropped"] += 1
                log.debug("send error to %s: %s", rest[0][1], exc)
                done += 1
                continue
            if got == 0:
                break
            self.stats["tx_packets"] += got
            done += got
        return done

    def _enqueue(self, items: Iterable[Datagram]) -> None:
        for item in items:
            if len(self._backlog) >= self._max_backlog:
                self.stats["tx_dropped"] += 1
            else:
                self._backlog.append(item)
        if not self._writing and self._backlog:
            self._writing = True
            self.loop.add_writer(self.sock.fileno(), self._on_writable)

    @property
    def backlogged(self) -> bool:
        """True while datagrams wait for room in the socket buffer."""
        return bool(self._backlog)

    def _on_writable(self) -> None:
        while self._backlog:
            chunk = [self._backlog[i] for i in range(min(len(self._backlog), 256))]
            sent = self._send_now(chunk)
            for _ in range(sent):
                self._backlog.popleft()
            if sent < len(chunk):
                return
        self.loop.remove_writer(self.sock.fileno())
        self._writing = False
        if self.on_drain is not None:
            try:
                self.on_drain()
            except Exception:  # as for on_batch: counted, never fatal
                self.stats["handler_errors"] += 1
                log.exception("drain handler failed")

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until queued datagrams have been handed to the kernel."""
        deadline = self.loop.time() + timeout
        while self._backlog and self.loop.time() < deadline:
            await asyncio.sleep(0.001)

    # --- lifetime ------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        fd = self.sock.fileno()
        if fd >= 0:
            if self._reading:
                self.loop.remove_reader(fd)
            if self._writing:
                self.loop.remove_writer(fd)
        self.stats["tx_dropped"] += len(self._backlog)
        self._backlog.clear()
        self.sock.close()

    async def __aenter__(self) -> BatchedUDPEndpoint:  # noqa: PYI034 - mypy targets 3.10
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def open_udp(
    local_addr: SockAddr, on_batch: BatchHandler, **kw: Any
) -> BatchedUDPEndpoint:
    """Bind a UDP socket and pump it; use as ``async with open_udp(...) as ep``."""
    sock_kw = {k: kw.pop(k) for k in ("reuse_port", "reuse_addr", "rcvbuf", "sndbuf", "family")
               if k in kw}
    return BatchedUDPEndpoint(make_udp_socket(local_addr, **sock_kw), on_batch, **kw)


class Transport(Protocol):
    """What :class:`CoreDriver` sends through: a :class:`BatchedUDPEndpoint`, a
    raw-socket endpoint, anything with ``send_many`` (handed what the core's
    ``datagrams_to_send`` returned).  Optional attributes the
    driver uses when present: ``backlogged`` (bool: stop draining the core),
    ``on_drain`` (set by the driver: resume when the backlog has gone out) and
    ``stats`` (a dict: core errors are added to ``stats["handler_errors"]``)."""

    def send_many(self, items: Sequence[Datagram]) -> None: ...


@runtime_checkable
class Drains(Protocol):
    """A transport that tells when its send backlog has gone out (a
    :class:`BatchedUDPEndpoint`): :class:`CoreDriver` sets ``on_drain``."""

    on_drain: Callable[[], None] | None


#: datagrams_to_send rounds per input, as the simulator's pump bounds its flush
MAX_FLUSH_ROUNDS = 64
#: timer runs in a row that leave the deadline at or before the time they ran with;
#: beyond this the driver waits STUCK_BACKOFF between runs instead of spinning
MAX_SAME_TIMERS = 1000
STUCK_BACKOFF = 0.001


class CoreDriver:
    """Pump one :class:`~deliverykit.protocol.DatagramCore` on a transport in real time.

    ``on_batch(batch, now)`` is the endpoint's handler: every datagram goes to
    ``core.datagram_received`` (one that raises is counted in
    ``stats["core_errors"]`` and the transport's ``stats["handler_errors"]``,
    and the rest of the batch goes on); then the driver drains
    ``core.datagrams_to_send(now)`` into ``transport.send_many``, hands every
    ``core.next_event()`` to ``on_event`` and re-arms its one ``loop.call_at``
    timer from ``core.get_timer(now)``.  The clock is ``loop.time()``, the
    ``now`` the endpoint passes.  A batch item of three elements ``(data, addr,
    arrived)`` (an endpoint with kernel timestamps) is passed on as
    ``core.datagram_received(data, addr, now, arrived)``: only cores that take
    an arrival time get such a transport.
    """

    def __init__(
        self,
        core: DatagramCore,
        transport: Transport | None = None,
        *,
        on_event: Callable[[object], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.core = core
        self.transport: Transport | None = None
        self.on_event = on_event
        self.loop = loop or asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None
        self._same_timers = 0
        self._closed = False
        #: what the driver did: datagrams in and out, timer runs, events, core errors,
        #: drains cut short by a transport backlog, timers held back by the stuck guard
        self.stats = {
            "datagrams_in": 0, "datagrams_out": 0, "timers": 0, "events": 0,
            "core_errors": 0, "backlogged": 0, "stuck_timers": 0,
        }
        if transport is not None:
            self.attach(transport)

    @property
    def now(self) -> float:
        """The driver's clock: the loop's."""
        return self.loop.time()

    def attach(self, transport: Transport) -> None:
        """Send through ``transport`` from now on (and resume when its backlog drains)."""
        self.transport = transport
        if isinstance(transport, Drains):
            transport.on_drain = self.kick

    # --- input ---------------------------------------------------------
    def on_batch(self, batch: Sequence[Datagram | TimestampedDatagram], now: float) -> None:
        """Feed a batch of datagrams that arrived by ``now``, then drain the core."""
        if self._closed:
            return
        core = self.core
        self.stats["datagrams_in"] += len(batch)
        for item in batch:
            try:
                if len(item) == 2:
                    core.datagram_received(item[0], item[1], now)
                else:
                    recv = core.datagram_received
                    recv(item[0], item[1], now, item[2])  # type: ignore[call-arg]  # takes ECN
            except Exception as exc:  # noqa: BLE001 - one bad datagram must not stop the rest
                self._count_error(exc, f"a datagram from {item[1]}")
        self._pump(now)

    def kick(self) -> None:
        """The application called the core directly (start, connect, join...):
        drain it, hand its events on and re-arm the timer."""
        if not self._closed:
            self._pump(self.loop.time())

    def _count_error(self, exc: Exception, where: str) -> None:
        self.stats["core_errors"] += 1
        stats = getattr(self.transport, "stats", None)
        if isinstance(stats, dict):
            stats["handler_errors"] = stats.get("handler_errors", 0) + 1
        if isinstance(exc, RemoteProtocolError):
            log.debug("%s dropped: %s", where, exc)
        elif self.stats["core_errors"] == 1:
            log.error("core failed (%s; further failures at debug level)", where, exc_info=exc)
        else:
            log.debug("core failed (%s): %r", where, exc)

    # --- output --------------------------------------------------------
    def _pump(self, now: float) -> None:
        core = self.core
        try:
            transport = self.transport
            if transport is not None:
                for _ in range(MAX_FLUSH_ROUNDS):
                    if getattr(transport, "backlogged", False):
                        self.stats["backlogged"] += 1
                        break  # on_drain kicks us again once the socket has room
                    out = core.datagrams_to_send(now)
                    if not out:
                        break
                    self.stats["datagrams_out"] += len(out)
                    transport.send_many(out)
        except Exception as exc:  # noqa: BLE001 - counted; the timer is re-armed all the same
            self._count_error(exc, "datagrams_to_send")
        try:
            on_event = self.on_event
            while (event := core.next_event()) is not None:
                self.stats["events"] += 1
                if on_event is not None:
                    on_event(event)
                if self._closed:  # the application closed us from its event handler
                    return
        finally:
            if not self._closed:
                self._arm(now)

    # --- the one timer -------------------------------------------------
    def _arm(self, now: float) -> None:
        deadline = self.core.get_timer(now)
        if deadline == self._deadline and (deadline is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadline = deadline
        if deadline is not None:
            self._timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        deadline, self._deadline = self._deadline, None
        if self._closed or deadline is None:
            return
        # asyncio may run a handle up to its clock resolution early: the core
        # sees at least the deadline it asked for.
        now = max(self.loop.time(), deadline)
        self.stats["timers"] += 1
        try:
            self.core.handle_timer(now)
        except Exception as exc:  # noqa: BLE001 - counted; drained and re-armed all the same
            self._count_error(exc, "handle_timer")
        self._pump(now)
        if self._deadline is not None and self._deadline <= now:
            self._same_timers += 1
            if self._same_timers > MAX_SAME_TIMERS and self._timer is not None:
                # the core keeps asking for its timer now: wait a little between runs
                self.stats["stuck_timers"] += 1
                self._timer.cancel()
                self._timer = self.loop.call_at(now + STUCK_BACKOFF, self._on_timer)
        else:
            self._same_timers = 0

    # --- lifetime ------------------------------------------------------
    def close(self) -> None:
        """Cancel the timer; later batches and kicks are ignored."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadline = None
        transport = self.transport
        if isinstance(transport, Drains) and transport.on_drain == self.kick:
            transport.on_drain = None

    @property
    def closed(self) -> bool:
        return self._closed


class _OpenCore:
    """``open_core``'s async context manager: endpoint + driver, both closed on exit."""

    def __init__(self, core: DatagramCore, local_addr: SockAddr,
                 on_event: Callable[[object], None] | None, kw: dict[str, Any]) -> None:
        self._args = (core, local_addr, on_event, kw)
        self.driver: CoreDriver | None = None
        self.endpoint: BatchedUDPEndpoint | None = None

    async def __aenter__(self) -> CoreDriver:
        core, local_addr, on_event, kw = self._args
        loop = kw.get("loop") or asyncio.get_running_loop()
        driver = CoreDriver(core, on_event=on_event, loop=loop)
        ep = open_udp(local_addr, driver.on_batch, **kw)
        driver.attach(ep)
        self.driver, self.endpoint = driver, ep
        driver.kick()
        return driver

    async def __aexit__(self, *exc: object) -> None:
        if self.driver is not None:
            self.driver.close()
        if self.endpoint is not None:
            self.endpoint.close()


def open_core(
    core: DatagramCore,
    local_addr: SockAddr,
    *,
    on_event: Callable[[object], None] | None = None,
    **kw: Any,
) -> _OpenCore:
    """Bind a UDP socket and pump ``core`` on it: ``async with open_core(...) as driver``.

    ``kw`` goes to :func:`open_udp` (``make_udp_socket``'s options, ``batch``,
    ``max_backlog``, ``loop``); ``driver.transport`` is the
    :class:`BatchedUDPEndpoint`.  The core is drained once on entry (what it
    queued before the socket existed goes out); driver and endpoint close on exit.
    """
    return _OpenCore(core, local_addr, on_event, kw)


def install_uvloop() -> bool:
    """Use uvloop's event loop policy when installed; returns whether it is in use."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
