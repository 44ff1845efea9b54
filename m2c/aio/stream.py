"""The sequencer API over real multicast (paper sections 4-5): any application
hands hierarchical buffers (most important bytes first) to
:meth:`StreamSender.send`; each receiver, running its own congestion control,
gets back every buffer as its received parts and contiguous prefix.

The protocol is in :mod:`m2c.core.stream` (:class:`~m2c.core.stream.StreamSenderCore`,
:class:`~m2c.core.stream.StreamReceiverCore`); here each is pumped by
:class:`deliverykit.aio.CoreDriver` on multicast sockets.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable
from typing import Any

from deliverykit.aio import BatchedUDPEndpoint, CoreDriver, make_udp_socket
from m2c.core.events import BufferReady, Join, Leave
from m2c.core.groups import RateSchedule
from m2c.core.sequencer import Sequencer
from m2c.core.stream import StreamReceiverCore, StreamSenderCore

__all__ = ["StreamSender", "StreamReceiver"]


class StreamSender:
    """Sends buffers back to back in time through the sequencer."""

    def __init__(self, schedule: RateSchedule, groups: list[tuple[str, int]], session: int,
                 pdu_size: int = 1400, interface: str = "127.0.0.1") -> None:
        self.core = StreamSenderCore(schedule, groups, session, pdu_size)
        self.schedule = schedule
        self.groups = groups
        self.session = session
        self.pdu_size = pdu_size
        self.interface = interface
        self._ep: BatchedUDPEndpoint | None = None
        self._driver: CoreDriver | None = None

    @property
    def seq(self) -> Sequencer | None:
        return self.core.seq

    @property
    def sent(self) -> int:
        return self.core.sent

    def _open(self) -> None:
        loop = asyncio.get_running_loop()
        sock = make_udp_socket((self.interface, 0), reuse_addr=False)  # unicast: never shared
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(self.interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        self._driver = CoreDriver(self.core, loop=loop)
        self._ep = BatchedUDPEndpoint(sock, self._driver.on_batch)
        self._driver.attach(self._ep)
        self.core.start(loop.time())

    async def send(self, buffer: bytes, buffer_time: float) -> int:
        """send(buffer, buffer_time, buffer_length = len(buffer)) of paper 5.1; returns
        when the buffer's window is over.  Returns the number of data PDUs sent."""
        if self._ep is None:
            self._open()
        assert self._driver is not None
        loop = asyncio.get_running_loop()
        data = self.core.send(buffer, buffer_time)
        self._driver.kick()
        await asyncio.sleep(max(0.0, self.core.window_end() - loop.time()))
        return data

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None
        if self._ep is not None:
            self._ep.close()
            self._ep = None


class StreamReceiver:
    """Joins cumulatively under congestion control and reassembles buffers.

    ``interface``: the local address joins are made on.  ``source``: the sender's
    address; with it, datagrams from any other address are dropped before decoding
    (RFC 5775 4.4: receivers accept only (sender IP, TSI) of the session).
    Packets the congestion control finds implausible are not reassembled.
    """

    def __init__(self, schedule: RateSchedule, groups: list[tuple[str, int]], session: int,
                 on_buffer: Callable[[BufferReady], None], controller: str = "m2c",
                 max_rate: float = float("inf"), interface: str = "127.0.0.1",
                 source: str | None = None) -> None:
        self.core = StreamReceiverCore(schedule, session, controller=controller,
                                       max_rate=max_rate, source=source)
        self.schedule = schedule
        self.groups = groups
        self.session = session
        self.on_buffer = on_buffer
        self.interface = interface
        self.source = source
        self.eps: dict[int, BatchedUDPEndpoint] = {}
        self._driver: CoreDriver | None = None

    cc = property(lambda self: self.core.cc)
    rx = property(lambda self: self.core.rx)
    foreign_source = property(lambda self: self.core.foreign_source)
    implausible = property(lambda self: self.core.implausible)
    rejected = property(lambda self: self.core.rejected)

    def _mreq(self, ch: int) -> bytes:
        return socket.inet_aton(self.groups[ch][0]) + socket.inet_aton(self.interface)

    def _on_event(self, ev: object) -> None:
        if isinstance(ev, BufferReady):
            self.on_buffer(ev)
            return
        if not isinstance(ev, (Join, Leave)):
            return
        ch = ev.channel
        if isinstance(ev, Join) and ch not in self.eps:
            g, port = self.groups[ch]
            sock = make_udp_socket((g, int(port)), reuse_addr=True)  # a group: shared
            try:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, self._mreq(ch))
            except OSError:
                sock.close()
                raise
            self.eps[ch] = BatchedUDPEndpoint(sock, functools.partial(self._on_batch, ch))
        elif isinstance(ev, Leave) and ch in self.eps:
            ep = self.eps.pop(ch)
            try:
                ep.sock.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, self._mreq(ch))
            except OSError:
                pass
            ep.close()

    def _on_batch(self, ch: int, batch: list[tuple[bytes, Any]], now: float) -> None:
        core = self.core
        for data, addr in batch:
            core.datagram_received(data, addr, now, channel=ch)
        if self._driver is not None:
            self._driver.kick()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._driver = CoreDriver(self.core, on_event=self._on_event, loop=loop)
        self.core.start(loop.time())
        self._driver.kick()

    def close(self) -> None:
        self.core.stop()
        if self._driver is not None:
            self._driver.kick()  # the leaves and the last buffer
            self._driver.close()
        for ch in list(self.eps):
            self._on_event(Leave(ch))
