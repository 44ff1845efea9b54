"""The sequencer API over real multicast (paper sections 4-5): any application
hands hierarchical buffers (most important bytes first) to
:meth:`StreamSender.send`; each receiver, running its own congestion control,
gets back every buffer as its received parts and contiguous prefix.

PDUs travel as ALC packets with FEC Encoding ID 129 used as "no code"
(SBN = buffer id, SBL = number of PDUs, ESI = PDU number j), the sequencer
header in EXT_M2C, and data-less packets for slots a short buffer leaves
empty, so that PSNs stay contiguous.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable

from deliverykit.aio import BatchedUDPEndpoint, make_udp_socket
from m2c.core.events import BufferReady, Join, Leave
from m2c.core.groups import RateSchedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.core.sequencer import Sequencer, SequencerReceiver
from m2c.fec.errors import DecodeError
from m2c.wire import codec
from m2c.wire.constants import CCI_MAX_CHANNEL, Codepoint

__all__ = ["StreamSender", "StreamReceiver"]


class StreamSender:
    """Sends buffers back to back in time through the sequencer."""

    def __init__(self, schedule: RateSchedule, groups: list[tuple[str, int]], session: int,
                 pdu_size: int = 1400, interface: str = "127.0.0.1") -> None:
        if schedule.channels > CCI_MAX_CHANNEL:  # as SessionDescription.validate for files
            raise ValueError(f"{schedule.channels} dynamic channels: the M2C CCI's 8-bit channel "
                             f"number holds channels 1..{CCI_MAX_CHANNEL} at most; use a smaller k")
        if len(groups) != schedule.channels + 1:
            raise ValueError(f"{len(groups)} groups for {schedule.channels} dynamic channels "
                             f"(one base group plus one per channel: {schedule.channels + 1})")
        self.schedule = schedule
        self.groups = groups
        self.session = session
        self.seq: Sequencer | None = None
        self.pdu_size = pdu_size
        self.interface = interface
        self._ep: BatchedUDPEndpoint | None = None
        self._t0 = 0.0
        self.sent = 0

    def _open(self) -> None:
        loop = asyncio.get_running_loop()
        sock = make_udp_socket((self.interface, 0), reuse_addr=False)  # unicast: never shared
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(self.interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        self._ep = BatchedUDPEndpoint(sock, lambda b, t: None)
        self._t0 = loop.time()
        self.seq = Sequencer(self.schedule, self.pdu_size, start=0.0)

    async def send(self, buffer: bytes, buffer_time: float) -> int:
        """send(buffer, buffer_time, buffer_length = len(buffer)) of paper 5.1; returns
        when the buffer's window is over.  Returns the number of data PDUs sent."""
        if self._ep is None:
            self._open()
        assert self.seq is not None and self._ep is not None
        loop = asyncio.get_running_loop()
        n_pdu = -(-len(buffer) // self.pdu_size)
        pdus = self.seq.send(buffer, buffer_time, fill_empty=True)
        cp = Codepoint.SMALL_BLOCK_SYSTEMATIC
        data = 0
        i = 0
        while i < len(pdus):
            now = loop.time() - self._t0
            batch = []
            while i < len(pdus) and pdus[i].due <= now:
                p = pdus[i]
                i += 1
                if p.j < 0:
                    pkt = codec.AlcPacket(self.session, 1, cp, p.slot, p.g, p.index & 0xFFFFFFFF,
                                          p.buffer_id, 0, 0, 0, data_less=True)
                else:
                    pkt = codec.AlcPacket(self.session, 1, cp, p.slot, p.g, p.index & 0xFFFFFFFF,
                                          p.buffer_id, p.offset, p.buffer_id, p.j, p.data,
                                          min(n_pdu, 0xFFFF))
                    data += 1
                batch.append((codec.encode(pkt), tuple(self.groups[p.g])))
            if batch:
                self._ep.send_many(batch)
                self.sent += len(batch)
            if i < len(pdus):
                await asyncio.sleep(min(max(pdus[i].due - (loop.time() - self._t0), 0.0005), 0.02))
        end = self.seq.next_start
        await asyncio.sleep(max(0.0, end - (loop.time() - self._t0)))
        return data

    def close(self) -> None:
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
        self.schedule = schedule
        self.groups = groups
        self.session = session
        self.on_buffer = on_buffer
        self.interface = interface
        self.source = source
        self.foreign_source = 0
        self.implausible = 0
        self.cc = ReceiverCC(schedule, controller=controller, max_rate=max_rate)
        self.rx = SequencerReceiver(hold=1)
        self.eps: dict[int, BatchedUDPEndpoint] = {}
        self.rejected = 0
        self._task: asyncio.Task | None = None

    def _mreq(self, ch: int) -> bytes:
        return socket.inet_aton(self.groups[ch][0]) + socket.inet_aton(self.interface)

    def _apply(self, events: list[Join | Leave]) -> None:
        for ev in events:
            ch = ev.channel
            if isinstance(ev, Join) and ch not in self.eps:
                g, port = self.groups[ch]
                sock = make_udp_socket((g, int(port)), reuse_addr=True)  # a group: shared
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, self._mreq(ch))
                self.eps[ch] = BatchedUDPEndpoint(sock, functools.partial(self._on_batch, ch))
            elif isinstance(ev, Leave) and ch in self.eps:
                ep = self.eps.pop(ch)
                try:
                    ep.sock.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, self._mreq(ch))
                except OSError:
                    pass
                ep.close()

    def _on_batch(self, ch: int, batch: list, now: float) -> None:
        for data, addr in batch:
            if self.source is not None and addr[0] != self.source:
                self.foreign_source += 1
                continue
            try:
                pkt = codec.decode(data, session=self.session)
            except DecodeError:
                self.rejected += 1
                continue
            if pkt.group != ch:
                self.rejected += 1
                continue
            before = self.cc.implausible
            self._apply(self.cc.on_packet(now, ch, pkt.psn))
            if self.cc.implausible != before:
                self.implausible += 1
                continue
            if pkt.data_less:
                continue
            for ready in self.rx.feed(pkt.buffer_id, pkt.offset, pkt.payload):
                self.on_buffer(ready)

    async def _timers(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            nxt = self.cc.next_timer() or loop.time() + 0.05
            await asyncio.sleep(max(0.0, nxt - loop.time()))
            self._apply(self.cc.on_timer(loop.time()))

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._apply(self.cc.start(loop.time()))
        self._task = asyncio.create_task(self._timers())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._apply([Leave(ch) for ch in list(self.eps)])
        while (ready := self.rx.flush()) is not None:
            self.on_buffer(ready)
