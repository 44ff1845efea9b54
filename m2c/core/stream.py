"""The sequencer API (paper sections 4-5) as :class:`deliverykit.protocol.DatagramCore` cores.

:class:`StreamSenderCore`: :meth:`~StreamSenderCore.send` places an application
buffer (most important bytes first) on the layered schedule; the PDUs leave at
their due times as ALC packets with FEC Encoding ID 129 used as "no code" (SBN =
buffer id, SBL = number of PDUs, ESI = PDU number j), the sequencer header in
EXT_M2C, and data-less packets for slots a short buffer leaves empty, so that
PSNs stay contiguous.

:class:`StreamReceiverCore`: receiver congestion control
(:class:`~m2c.core.receiver_cc.ReceiverCC`) and reassembly
(:class:`~m2c.core.sequencer.SequencerReceiver`); its events are
:class:`~m2c.core.events.Join` / ``Leave`` (the driver's group memberships) and
:class:`~m2c.core.events.BufferReady`.  No clock, no socket: :mod:`m2c.aio.stream`
drives both on multicast sockets.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from deliverykit.protocol import Address
from m2c.core.events import Join, Leave
from m2c.core.groups import RateSchedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.core.sequencer import Sequencer, SequencerReceiver
from m2c.fec.errors import DecodeError
from m2c.wire import codec
from m2c.wire.constants import CCI_MAX_CHANNEL, Codepoint

__all__ = ["StreamReceiverCore", "StreamSenderCore"]

#: a PDU to send and the multicast group ``(ip, port)`` it goes to
Outgoing = tuple[bytes, tuple[str, int]]


class StreamSenderCore:
    """Buffers back to back in time through the sequencer (sender clock from :meth:`start`)."""

    def __init__(self, schedule: RateSchedule, groups: list[tuple[str, int]], session: int,
                 pdu_size: int = 1400, quantum: float = 0.0005) -> None:
        if schedule.channels > CCI_MAX_CHANNEL:  # as SessionDescription.validate for files
            raise ValueError(f"{schedule.channels} dynamic channels: the M2C CCI's 8-bit channel "
                             f"number holds channels 1..{CCI_MAX_CHANNEL} at most; use a smaller k")
        if len(groups) != schedule.channels + 1:
            raise ValueError(f"{len(groups)} groups for {schedule.channels} dynamic channels "
                             f"(one base group plus one per channel: {schedule.channels + 1})")
        self.schedule = schedule
        self.groups = [(str(g), int(p)) for g, p in groups]
        self.session = session
        self.pdu_size = pdu_size
        self.quantum = quantum
        self.seq: Sequencer | None = None
        self.t0: float | None = None
        self._queue: deque[tuple[float, bytes, int]] = deque()
        """(due on the sender clock, wire, channel)"""
        self.sent = 0

    def start(self, now: float) -> None:
        self.t0 = now
        self.seq = Sequencer(self.schedule, self.pdu_size, start=0.0)

    def send(self, buffer: bytes, buffer_time: float) -> int:
        """send(buffer, buffer_time, buffer_length = len(buffer)) of paper 5.1: queue
        the buffer's PDUs; returns the number of data PDUs.  The window ends at
        :meth:`window_end`."""
        if self.seq is None:
            raise RuntimeError("start the stream sender first")
        n_pdu = -(-len(buffer) // self.pdu_size)
        cp = Codepoint.SMALL_BLOCK_SYSTEMATIC
        data = 0
        for p in self.seq.send(buffer, buffer_time, fill_empty=True):
            if p.j < 0:
                pkt = codec.AlcPacket(self.session, 1, cp, p.slot, p.g, p.index & 0xFFFFFFFF,
                                      p.buffer_id, 0, 0, 0, data_less=True)
            else:
                pkt = codec.AlcPacket(self.session, 1, cp, p.slot, p.g, p.index & 0xFFFFFFFF,
                                      p.buffer_id, p.offset, p.buffer_id, p.j, p.data,
                                      min(n_pdu, 0xFFFF))
                data += 1
            self._queue.append((p.due, codec.encode(pkt), p.g))
        return data

    def window_end(self) -> float:
        """Driver time at which the last window sent is over."""
        assert self.t0 is not None and self.seq is not None
        return self.t0 + self.seq.next_start

    # DatagramCore
    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        """A sender takes no input."""

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        if self.t0 is None:
            return []
        t0 = self.t0
        q = self._queue
        out: list[Outgoing] = []
        while q and t0 + q[0][0] <= now:  # get_timer's own expression (float sums)
            _, wire, g = q.popleft()
            out.append((wire, self.groups[g]))
        self.sent += len(out)
        return out

    def get_timer(self, now: float) -> float | None:
        if self.t0 is None or not self._queue:
            return None
        due = self.t0 + self._queue[0][0]
        return due if due <= now else max(due, now + self.quantum)

    def handle_timer(self, now: float) -> None:
        """Nothing to compute: the due packets go out in :meth:`datagrams_to_send`."""

    def next_event(self) -> object | None:
        return None


class StreamReceiverCore:
    """Joins cumulatively under congestion control and reassembles buffers.

    ``source``: the sender's address; with it, datagrams from any other address
    are dropped before decoding (RFC 5775 4.4).  Packets the congestion control
    finds implausible are not reassembled.
    """

    def __init__(self, schedule: RateSchedule, session: int, controller: str = "m2c",
                 max_rate: float = math.inf, source: str | None = None) -> None:
        self.schedule = schedule
        self.session = session
        self.source = source
        self.cc = ReceiverCC(schedule, controller=controller, max_rate=max_rate)
        self.rx = SequencerReceiver(hold=1)
        self.foreign_source = 0
        self.implausible = 0
        self.rejected = 0
        """undecodable, another session's, or of a group other than the socket's"""
        self.layers: set[int] = set()
        self._events: deque[object] = deque()
        self.started = False

    def start(self, now: float) -> None:
        self.started = True
        self._emit(self.cc.start(now))

    def stop(self) -> None:
        """Leave every group and hand on what is left of the current buffer."""
        self._emit([Leave(ch) for ch in sorted(self.layers)])
        while (ready := self.rx.flush()) is not None:
            self._events.append(ready)
        self.started = False

    def _emit(self, events: list[Join | Leave]) -> None:
        for ev in events:
            if isinstance(ev, Join):
                if ev.channel in self.layers:
                    continue
                self.layers.add(ev.channel)
            else:
                if ev.channel not in self.layers:
                    continue
                self.layers.discard(ev.channel)
            self._events.append(ev)

    # DatagramCore
    def datagram_received(self, data: bytes, addr: Address, now: float,
                          channel: int | None = None) -> None:
        if not self.started:
            return
        if self.source is not None and addr[0] != self.source:
            self.foreign_source += 1
            return
        try:
            pkt = codec.decode(data, session=self.session)
        except DecodeError:
            self.rejected += 1
            return
        ch = pkt.group if channel is None else channel
        if pkt.group != ch or ch not in self.layers:
            self.rejected += 1
            return
        cc = self.cc
        before = cc.implausible
        self._emit(cc.on_packet(now, ch, pkt.psn))
        if cc.implausible != before:
            self.implausible += 1
            return
        if pkt.data_less:
            return
        self._events.extend(self.rx.feed(pkt.buffer_id, pkt.offset, pkt.payload))

    def datagrams_to_send(self, now: float) -> Sequence[Outgoing]:
        return ()

    def get_timer(self, now: float) -> float | None:
        return self.cc.next_timer() if self.started else None

    def handle_timer(self, now: float) -> None:
        if self.started:
            self._emit(self.cc.on_timer(now))

    def next_event(self) -> object | None:
        return self._events.popleft() if self._events else None
