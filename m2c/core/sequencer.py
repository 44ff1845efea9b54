"""The sequencer (paper sections 4 and 5): maps a buffer holding its most
important bytes first onto the dynamic groups, so that a receiver getting N %
of the source rate by cumulative joins obtains about the first N % of it.

Sender (:class:`Sequencer`)
    ``send(buffer, buffer_time, buffer_length)`` splits the window
    [t, t + buffer_time) at every sub_TSI boundary (TSD/K), asks the rate
    schedule how many packets S_{g,i} each active group g sends in each
    interval i (a *tile*), sorts the tiles by their minimal cumulative rate
    (coarse hierarchy, 5.2; ties: earlier first, then lower group), gives the
    PDUs j = 0, 1, ... to the tiles in that order, and inside a tile gives
    the most important PDU to the last packet (fine hierarchy: a group slows
    down during a tile, and a late joiner gets the end of it).  Result: PDUs
    {j, g, s} with their send time and sequencer header (buffer id, offset).
    If the buffer is shorter than the window's capacity, the least important
    tiles (and the earliest packets of the last used tile) stay empty and
    nothing is sent for them.

Receiver (:class:`SequencerReceiver`, 5.4)
    stores datagrams until one arrives with a new buffer id; then hands the
    finished buffer over as every received part or the contiguous prefix
    from offset 0.  Memory is bounded by ``max_buffer`` bytes.
"""

from __future__ import annotations

import math
from itertools import pairwise

from m2c.core.events import BufferReady, Pdu, Tile
from m2c.core.groups import RateSchedule
from m2c.fec.errors import FECError

__all__ = ["Sequencer", "SequencerReceiver", "tiles_for_window"]


def tiles_for_window(schedule: RateSchedule, t0: float, t1: float) -> list[Tile]:
    """Every non-empty tile of [t0, t1), sorted by importance (most important first)."""
    if t1 <= t0:
        return []
    sub = schedule.sub
    cuts = [t0]
    i = math.floor(t0 / sub) + 1
    while i * sub < t1 - 1e-9:
        if i * sub > t0 + 1e-9:
            cuts.append(i * sub)
        i += 1
    cuts.append(t1)
    tiles: list[Tile] = []
    for a, b in pairwise(cuts):
        if b - a <= 1e-12:
            continue
        mid = (a + b) / 2
        for ch in range(schedule.channels + 1):
            lvl = schedule.level_of_channel(ch, mid)
            if lvl is None:
                continue
            first = schedule.index(ch, a)
            count = schedule.index(ch, b) - first
            if count <= 0:
                continue
            lo, hi = schedule.cum_bounds(lvl, a, b)
            tiles.append(Tile(ch, lvl, a, b, first, count, lo, hi))
    tiles.sort(key=lambda t: (t.min_cum, t.start, t.channel))
    return tiles


class Sequencer:
    """Sender side of the sequencer, fed buffers back to back in time."""

    def __init__(self, schedule: RateSchedule, pdu_size: int, start: float = 0.0,
                 first_buffer_id: int = 0) -> None:
        if pdu_size < 1:
            raise FECError("PDU size must be >= 1")
        self.schedule = schedule
        self.pdu_size = pdu_size
        self.next_start = start
        """start of the next buffer window (sender clock)"""
        self.next_buffer_id = first_buffer_id

    def capacity(self, buffer_time: float) -> int:
        """Packets available in the next window of ``buffer_time`` seconds."""
        t0 = self.next_start
        return sum(t.count for t in tiles_for_window(self.schedule, t0, t0 + buffer_time))

    def send(self, buffer: bytes | bytearray | memoryview, buffer_time: float,
             buffer_length: int | None = None, fill_empty: bool = False) -> list[Pdu]:
        """Sequence one buffer over the next ``buffer_time`` seconds (paper 5.1 API).

        Returns its PDUs sorted by send time.  With ``fill_empty`` the slots left
        empty by a short buffer come back as PDUs with ``j = -1`` and no data, for
        the sender to fill with data-less packets (keeps each group's PSN
        sequence and rate, so receivers do not count them as losses).
        """
        if buffer_time <= 0:
            raise FECError("buffer_time must be > 0")
        n_bytes = len(buffer) if buffer_length is None else buffer_length
        if not 0 <= n_bytes <= len(buffer):
            raise FECError("buffer_length larger than the buffer")
        sched = self.schedule
        t0 = self.next_start
        t1 = t0 + buffer_time
        self.next_start = t1
        bid = self.next_buffer_id
        self.next_buffer_id = (bid + 1) & 0xFFFFFFFF
        size = self.pdu_size
        n_pdu = -(-n_bytes // size)
        mv = memoryview(buffer)
        out: list[Pdu] = []
        j = 0
        for tile in tiles_for_window(sched, t0, t1):
            if j >= n_pdu and not fill_empty:
                break
            used = max(0, min(tile.count, n_pdu - j))
            s0 = tile.first - sched.index(tile.channel, t0)
            if fill_empty:
                for pos in range(tile.count - used):
                    idx = tile.first + pos
                    due = sched.time_of(tile.channel, idx)
                    out.append(Pdu(-1, tile.channel, s0 + pos, idx, due, sched.slot(due), bid,
                                   0, b""))
            for r in range(used):
                pos = tile.count - 1 - r  # most important PDU on the last packet
                idx = tile.first + pos
                due = sched.time_of(tile.channel, idx)
                off = (j + r) * size
                out.append(Pdu(j + r, tile.channel, s0 + pos, idx, due, sched.slot(due), bid,
                               off, bytes(mv[off:min(off + size, n_bytes)])))
            j += used
        out.sort(key=lambda p: (p.due, p.g))
        return out


class SequencerReceiver:
    """Receiver side (paper 5.4): reassemble by buffer id, bounded memory.

    ``hold = 0`` is the paper's rule: a buffer is handed over as soon as a
    datagram of a newer buffer arrives.  Datagrams of different groups arrive
    on different sockets, so around a buffer boundary they can interleave;
    ``hold = 1`` keeps the previous buffer open until a datagram of the one
    after arrives (one buffer_time of extra delay, no boundary losses).
    """

    MAX_AHEAD = 64
    """buffer ids more than this far from the newest (either way) are not trusted on
    their own: the checksum is no authentication, and one forged id current + 2^30
    would otherwise become the newest and make every genuine buffer after it late"""
    RESYNC = 8
    """far datagrams in a row, within MAX_AHEAD of each other, that do move the
    receiver (a genuine outage, a sender restart, a first datagram that was forged)"""

    def __init__(self, max_buffer: int = 64 << 20, hold: int = 0) -> None:
        self.max_buffer = max_buffer
        self.hold = hold
        self._bufs: dict[int, dict[int, bytes]] = {}  # open buffers, oldest first
        self._bytes = 0
        self._newest: int | None = None
        self.late = 0
        """datagrams of an already finished buffer (dropped)"""
        self.overflow = 0
        """datagrams dropped because the open buffers exceeded max_buffer"""
        self.far = 0
        """datagrams dropped because their buffer id was implausibly far away"""
        self.resyncs = 0
        self._run: tuple[int, int] | None = None
        """(newest id, count) of the current run of far datagrams"""

    @property
    def current(self) -> int | None:
        return self._newest

    def _far_run(self, buffer_id: int) -> bool:
        """Count a far datagram; True once RESYNC of them agree (then move there)."""
        run = self._run
        if run is not None and (buffer_id - run[0]) & 0xFFFFFFFF <= self.MAX_AHEAD:
            run = (buffer_id, run[1] + 1)
        elif run is not None and (run[0] - buffer_id) & 0xFFFFFFFF <= self.MAX_AHEAD:
            run = (run[0], run[1] + 1)
        else:
            run = (buffer_id, 1)
        if run[1] < self.RESYNC:
            self._run = run
            self.far += 1
            return False
        self._run = None
        self.far -= run[1] - 1
        self.resyncs += 1
        return True

    def feed(self, buffer_id: int, offset: int, data: bytes) -> list[BufferReady]:
        """Store one datagram; returns the buffers it closes (oldest first)."""
        out: list[BufferReady] = []
        if buffer_id not in self._bufs:
            if self._newest is not None:
                ahead = (buffer_id - self._newest) & 0xFFFFFFFF
                behind = (self._newest - buffer_id) & 0xFFFFFFFF
                if min(ahead, behind) > self.MAX_AHEAD:
                    if not self._far_run(buffer_id):
                        return out
                    # the stream really moved: hand over what is open, start afresh
                    while self._bufs:
                        out.append(self._close(next(iter(self._bufs))))
                    self._newest = None
                elif behind and behind <= self.MAX_AHEAD:
                    self.late += 1  # older than every open buffer (modulo 2^32)
                    return out
            self._run = None
            self._bufs[buffer_id] = {}
            self._newest = buffer_id
            while len(self._bufs) > self.hold + 1:
                oldest = next(iter(self._bufs))
                out.append(self._close(oldest))
        parts = self._bufs[buffer_id]
        if offset not in parts:
            if self._bytes + len(data) > self.max_buffer:
                self.overflow += 1
                return out
            parts[offset] = bytes(data)
            self._bytes += len(data)
        return out

    def _close(self, bid: int) -> BufferReady:
        parts_d = self._bufs.pop(bid)
        self._bytes -= sum(len(d) for d in parts_d.values())
        parts = tuple(sorted(parts_d.items()))
        prefix = bytearray()
        for off, data in parts:
            if off > len(prefix):
                break
            if off + len(data) > len(prefix):
                prefix += data[len(prefix) - off:]
        return BufferReady(bid, parts, bytes(prefix))

    def flush(self) -> BufferReady | None:
        """Hand over the oldest open buffer (if any)."""
        if not self._bufs:
            return None
        return self._close(next(iter(self._bufs)))
