"""Carousel file transfer (paper section 6): sans-IO sender and receiver.

Data flow (Fig. 3(a)): file reader -> FEC encoder -> application scheduler
-> sequencer -> network scheduler (the asyncio driver sends the PDUs at their
due times) -> carousel (the application scheduler cycles for ever).

- The file is split into source blocks (RFC 5052 9.1); each block is encoded
  with LDPC-Staircase (n = 2k by default) or Reed-Solomon (zfec, n <= 256).
- All encoding symbols of the file form the application scheduler's blocks,
  in an interleaved order (symbol rank within its block's pseudo-random
  permutation, then block number), so any window of the carousel carries a
  random-looking subset of every source block (RFC 5170 5.1 advises against
  sending parity symbols in sequence).
- Each buffer of the application scheduler (N levels = N symbols) is given to
  the sequencer with buffer_time = the first level at the minimal rate (paper
  5.1), our first level being ``first_level`` symbols (default 4).

Receivers decode block by block: a source block is written out (and its
decoder freed) as soon as it decodes, and at most ``max_active`` partially
received blocks are held, so memory stays bounded for files larger than
memory (symbols of other blocks come back on the next carousel turn).

Metrics are those of paper section 7.2 (see :class:`Metrics`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, TypedDict

from m2c.core.description import (
    FIRST_LEVEL,
    LDPC_MAX1_B,
    LDPC_MAX_BLOCKS,
    RATE_UNIT,
    FecParams,
    FecScheme,
    Group,
    RateLadder,
    SessionDescription,
    default_fec,
)
from m2c.core.events import Pdu
from m2c.core.scheduler import AppScheduler
from m2c.core.sequencer import Sequencer
from m2c.fec import ldpc, rs
from m2c.fec.errors import FECError
from m2c.fec.partition import Partition
from m2c.wire.codec import AlcPacket
from m2c.wire.constants import Codepoint

# SessionDescription and its parts live in m2c.core.description; their names stay
# importable from here (m2c.sim, m2c.experiments and older callers import them so)
__all__ = ["SessionDescription", "FecParams", "FecScheme", "RateLadder", "Group",
           "FileSender", "FileReceiver", "DecodedBlock", "Metrics", "MetricsCounts",
           "SymbolProgress",
           "IP_UDP_OVERHEAD", "RATE_UNIT", "FIRST_LEVEL", "LDPC_MAX_BLOCKS", "LDPC_MAX1_B",
           "default_fec"]

IP_UDP_OVERHEAD = 28  # IPv4 + UDP header bytes counted in the paper's link-level figures


def _order(pt: Partition, sd: SessionDescription,
           blocks: range | None = None) -> list[tuple[int, int]]:
    """Interleaved carousel order of every (sbn, esi) of ``blocks`` (default: the file)."""
    keyed: list[tuple[tuple[float, int], tuple[int, int]]] = []
    for b in blocks if blocks is not None else range(pt.blocks):
        n = sd.block_n(pt.block_length(b))
        perm = list(range(n))
        random.Random(sd.session * 1000003 + b).shuffle(perm)
        keyed.extend(((r / n, b), (b, esi)) for r, esi in enumerate(perm))
    keyed.sort(key=lambda x: x[0])
    return [x[1] for x in keyed]


class FileSender:
    """Sans-IO sender: yields PDUs with due times and the packets to send."""

    def __init__(self, sd: SessionDescription, read: Callable[[int, int], bytes],
                 start: float = 0.0) -> None:
        self.sd = sd
        self.read = read
        self.pt = sd.partition()
        self.schedule = sd.schedule()
        self.E = sd.fec.symbol_size
        self._blocks: dict[int, tuple[bytes, bytes]] = {}
        # paper 5.1: buffer_time is the time the first level takes at the minimal rate;
        # our first level is ``first_level`` symbols, one application level per symbol
        m = max(1, int(sd.first_level))
        ratio = self.schedule.max_rate / self.schedule.min_rate
        levels = sd.levels or m * max(1, math.ceil(ratio) + 1)
        self.max_levels = levels
        self.seq = Sequencer(self.schedule, self.E, start=start)
        self.buffer_time = m / self.schedule.min_rate
        self.next_buffer = 0
        self.packets = 0
        # windows of source blocks carouselled in turn (the whole file unless the
        # session bounds it): memory holds only the current window's encoded blocks.
        # The windows are of even sizes (at most ``window_blocks``): 24 blocks by 20 were
        # a window of 20 then one of 4, and a receiver holding 20 partial blocks of the
        # first dropped the second's symbols while it was sent
        blocks = max(1, self.pt.blocks)
        self.n_windows = max(1, -(-blocks // (sd.window_blocks or blocks)))
        self.window = -(-blocks // self.n_windows)
        step, extra = divmod(self.pt.blocks, self.n_windows)
        self._bounds = [w * step + min(w, extra) for w in range(self.n_windows + 1)]
        # where each window's application scheduler stopped: a visit resumes there, so a
        # receiver below the top rate gets new symbols on every visit (paper 6.1's
        # property); until session 7 each visit began at buffer 0 and repeated them
        self._resume = [0] * self.n_windows
        self._win = -1
        self._win_buffer = 0
        self._win_buffers = 0
        self._visit = 0
        self._enter_window(0)

    def _enter_window(self, w: int) -> None:
        if w == self._win:
            return
        if self._win >= 0:
            self._resume[self._win] = self._win_buffer
        self._win = w
        blocks = range(self._bounds[w], self._bounds[w + 1])
        self._blocks = {b: v for b, v in self._blocks.items() if b in blocks}
        self.order = _order(self.pt, self.sd, blocks)
        B = max(1, len(self.order))
        self.levels = min(self.max_levels, B)
        self.app = AppScheduler(B, self.levels)
        self._win_buffer = self._resume[w]
        self._visit = 0
        # one pass of the application scheduler at the top rate per visit
        self._win_buffers = -(-B // self.levels)

    def _block(self, sbn: int) -> tuple[bytes, bytes]:
        got = self._blocks.get(sbn)
        if got is None:
            off, ln = self.pt.block_bytes(sbn)
            k = self.pt.block_length(sbn)
            src = self.read(off, ln).ljust(k * self.E, b"\0")
            n = self.sd.block_n(k)
            f = self.sd.fec
            if f.scheme is FecScheme.RS:
                rep = rs.encode(rs.RSParams(k, n, self.E), src)
            else:
                rep = ldpc.encode(ldpc.LDPCParams(k, n, self.E, f.n1, f.seed), src)
            got = (src, rep)
            self._blocks[sbn] = got
        return got

    def symbol(self, sbn: int, esi: int) -> bytes:
        src, rep = self._block(sbn)
        k = self.pt.block_length(sbn)
        E = self.E
        if esi < k:
            return src[esi * E:(esi + 1) * E]
        return rep[(esi - k) * E:(esi - k + 1) * E]

    def next_pdus(self) -> list[tuple[Pdu, AlcPacket]]:
        """Sequence the next application buffer; returns (PDU, packet) by due time."""
        if self.n_windows > 1 and self._visit >= self._win_buffers:
            self._enter_window((self._win + 1) % self.n_windows)
        b = self._win_buffer if self.n_windows > 1 else self.next_buffer
        self._win_buffer += 1
        self._visit += 1
        self.next_buffer += 1
        if not self.pt.blocks:  # empty file: keep the clock moving, send nothing
            self.seq.send(b"", self.buffer_time)
            return []
        cap = self.seq.capacity(self.buffer_time)
        blocks = self.app.buffer(b)[:cap]
        # a buffer holds each symbol of the window once at most; when the schedule's
        # window carries more packets than that (a small file, a high --max-rate), the
        # next buffers' orders follow (least important positions) rather than data-less
        # padding: the groups then carry the bytes their rates announce, and a receiver
        # with losses gets other symbols, not empty packets (user test 11)
        nxt = b
        while len(blocks) < cap:
            nxt += 1
            blocks += self.app.buffer(nxt)[:cap - len(blocks)]
        ids = [self.order[x] for x in blocks]
        buf = b"".join(self.symbol(sbn, esi) for sbn, esi in ids)
        out = []
        cp = self.sd.codepoint
        for p in self.seq.send(buf, self.buffer_time, fill_empty=True):
            if p.j < 0:  # nothing for this slot (tiny file): a data-less packet
                out.append((p, AlcPacket(self.sd.session, self.sd.toi, cp, p.slot, p.g,
                                         p.index & 0xFFFFFFFF, p.buffer_id, 0, 0, 0,
                                         data_less=True)))
                continue
            sbn, esi = ids[p.j]
            k = self.pt.block_length(sbn)
            out.append((p, AlcPacket(self.sd.session, self.sd.toi, cp, p.slot, p.g,
                                     p.index & 0xFFFFFFFF, p.buffer_id, p.offset, sbn, esi,
                                     p.data, k if cp == Codepoint.SMALL_BLOCK_SYSTEMATIC else 0)))
        self.packets += len(out)
        return out


class DecodedBlock(NamedTuple):
    """A source block decoded: its bytes and where they go in the file."""

    offset: int
    """file offset of the block's first byte"""
    data: bytes
    """the block's source bytes (the last block without its padding)"""


class MetricsCounts(TypedDict):
    """The raw counts behind :class:`Metrics` (a dict in the JSON results)."""

    packets: int
    """data and data-less packets of this object"""
    symbols: int
    """FEC symbols received (with duplicates) until the file was recovered"""
    needed: int
    """k + eps: distinct symbols held when each block decoded"""
    k: int
    """source symbols of the file"""
    link_bytes: int
    lost: int
    dropped_inactive: int
    """symbols of a block beyond ``max_active`` partial blocks"""
    ignored: int
    """verified packets not of this file (see :attr:`FileReceiver.ignored`)"""
    eliminations: int
    repeats: int
    after_done: int


def _no_counts() -> MetricsCounts:
    return MetricsCounts(packets=0, symbols=0, needed=0, k=0, link_bytes=0, lost=0,
                         dropped_inactive=0, ignored=0, eliminations=0, repeats=0,
                         after_done=0)


@dataclass
class Metrics:
    """Paper section 7.2 criteria, plus the raw counts behind them.

    gput, dup, sym and comp are defined for a recovered file only: None (JSON null)
    when the transfer did not complete; head is None when no data packet arrived.
    """

    time: float = 0.0
    """s to download and recover the file"""
    gput: float | None = 0.0
    """goodput, kb/s (file bits / time)"""
    tput: float = 0.0
    """throughput at the link (IP) level, kb/s"""
    loss: float = 0.0
    """loss rate, %"""
    dup: float | None = 0.0
    """(received symbols / (k + eps) - 1) * 100"""
    sym: float | None = 0.0
    """((k + eps) / k - 1) * 100"""
    head: float | None = 0.0
    """(packet length / application data - 1) * 100, IP level, from the data packets
    received (LDPC: 44 header bytes with the TOI omitted, 48 with it; RS with FEC
    Payload ID 129: 4 more)"""
    net: float | None = 0.0
    """(link-level bytes / file length - 1) * 100; None (null) unless the file was
    recovered: bytes spent on a file not received are no overhead of receiving it"""
    comp: float | None = 0.0
    """(time / network time - 1) * 100"""
    raw: MetricsCounts = field(default_factory=_no_counts)


@dataclass(frozen=True, slots=True)
class SymbolProgress:
    """How far a receiver is, in source symbols: a large file is a few big blocks that
    all decode near the end, so counting decoded blocks says nothing for most of it."""

    symbols: int
    """source symbols' worth held: k of each decoded block, the distinct symbols
    (at most k) of each partial one"""
    needed: int
    """source symbols of the file (the sum of k over its blocks)"""
    blocks_done: int
    """source blocks decoded"""
    blocks: int
    """source blocks of the file"""

    @property
    def percent(self) -> float:
        return 100.0 * self.symbols / self.needed if self.needed else 100.0


class FileReceiver:
    """Sans-IO receiver: feed verified packets, get decoded blocks to write."""

    def __init__(self, sd: SessionDescription, max_active: int = 64) -> None:
        self.sd = sd
        self.pt = sd.partition()
        self.E = sd.fec.symbol_size
        self.max_active = max_active
        self.active: dict[int, ldpc.LDPCDecoder | _RSCollector] = {}
        self.done: set[int] = set()
        self.needed = 0
        """k + eps: distinct symbols held when each block decoded"""
        self.symbols = 0
        """FEC symbols received (with duplicates) until the file was recovered"""
        self.dropped_inactive = 0
        self.ignored = 0
        """verified packets that are not of this file: another TOI or FEC codepoint, a
        source block the file does not have, an ESI beyond the block, a symbol of the
        wrong length (forged, or a sender with another session description)"""
        self.link_bytes = 0
        self.packets = 0
        self.app_bytes = 0
        self.data_ip_bytes = 0
        """IP-level bytes of the data packets (what ``head`` compares with app_bytes)"""
        self.after_done = 0
        """symbols of blocks already decoded (part of ``dup``)"""
        self.repeats = 0
        """symbols received twice (part of ``dup``)"""
        self.eliminations = 0
        """ML decoding attempts (Gaussian eliminations), each stalls the receiver a little"""
        self._ml_wait: dict[int, int] = {}
        self._ml_due: set[int] = set()
        self._ml_deficit: dict[int, int] = {}
        """per partial LDPC block: new symbols to wait for before the next elimination"""

    @property
    def complete(self) -> bool:
        return len(self.done) == self.pt.blocks

    def progress(self) -> SymbolProgress:
        """Source symbols held against the file's (see :class:`SymbolProgress`)."""
        held = sum(self.pt.block_length(sbn) for sbn in self.done) + sum(
            min(dec.received, self.pt.block_length(sbn)) for sbn, dec in self.active.items())
        return SymbolProgress(held, self.pt.total_symbols, len(self.done), self.pt.blocks)

    def _decoder(self, sbn: int) -> ldpc.LDPCDecoder | _RSCollector | None:
        dec = self.active.get(sbn)
        if dec is None:
            if len(self.active) >= self.max_active:
                return None
            k = self.pt.block_length(sbn)
            n = self.sd.block_n(k)
            f = self.sd.fec
            if f.scheme is FecScheme.RS:
                dec = _RSCollector(rs.RSParams(k, n, self.E))
            else:
                dec = ldpc.LDPCDecoder(ldpc.LDPCParams(k, n, self.E, f.n1, f.seed))
            self.active[sbn] = dec
        return dec

    def feed(self, pkt: AlcPacket, wire_len: int, defer: bool = False) -> list[DecodedBlock]:
        """One verified packet; returns the newly decoded blocks (offset, bytes).

        With ``defer`` an elimination that falls due is only noted; :meth:`flush`
        runs it.  A driver feeds a whole recvmmsg batch, then flushes: after a stall
        the backlog arrives as one batch and costs one elimination per block, not one
        every few symbols (which made the backlog grow at the end of a transfer).
        """
        if self.complete:
            return []
        # counted only once the packet is known to be of this object (TOI, codepoint)
        # and, if it carries a symbol, of one of its blocks (issue 5 review, item 6)
        if pkt.toi != self.sd.toi or pkt.codepoint != self.sd.codepoint:
            self.ignored += 1
            return []
        if pkt.data_less:
            self.packets += 1
            self.link_bytes += wire_len + IP_UDP_OVERHEAD
            return []
        if not 0 <= pkt.sbn < self.pt.blocks or len(pkt.payload) != self.E:
            self.ignored += 1
            return []
        self.packets += 1
        self.link_bytes += wire_len + IP_UDP_OVERHEAD
        self.data_ip_bytes += wire_len + IP_UDP_OVERHEAD
        self.app_bytes += len(pkt.payload)
        self.symbols += 1
        sbn = pkt.sbn
        if sbn in self.done:
            self.after_done += 1
            return []
        k = self.pt.block_length(sbn)
        if pkt.esi >= self.sd.block_n(k):
            self.ignored += 1
            return []  # before a decoder is allocated for it (memory bound)
        dec = self._decoder(sbn)
        if dec is None:
            self.dropped_inactive += 1
            return []
        before = dec.received
        ok = dec.add(pkt.esi, pkt.payload)
        if dec.received == before:
            self.repeats += 1
        if not ok and dec.received > before and dec.received >= k and isinstance(
                dec, ldpc.LDPCDecoder):
            # ML fallback once peeling stalls with >= k symbols; a failed elimination
            # tells how many equations are still missing (its rank deficiency), so the
            # next one waits for that many new symbols: the block decodes on the very
            # symbol that makes it solvable, with a handful of eliminations per block
            # The first waits for about what ML decoding typically needs (N1 = 5: k +
            # 0.8-1.3 % for k = 1,500-3,000, bench m2c_fec: 1.01 k at k = 10,000; N1 = 3:
            # ~1.07 k), so most blocks need one elimination: each costs 0.1-0.2 s at
            # k = 3,000 on a loaded machine and the last one adds to the transfer time.
            c = self._ml_wait.get(sbn, self._first_wait(k)) - 1
            self._ml_wait[sbn] = c
            if c <= 0:
                if defer:
                    self._ml_due.add(sbn)
                    return []
                ok = self._eliminate(sbn, dec)
        if not ok:
            return []
        return self._finish(sbn, dec)

    def _first_wait(self, k: int) -> int:
        """Symbols beyond k before the first elimination of a block (see :meth:`feed`)."""
        return 1 + math.ceil(k * (0.012 if self.sd.fec.n1 >= 5 else 0.06))

    def _eliminate(self, sbn: int, dec: ldpc.LDPCDecoder) -> bool:
        # values-free first pass while many equations are missing; once the last
        # attempt lacked only one or two, this one probably succeeds: one pass with
        # values then costs less than the two (the last elimination is on the
        # critical path of the transfer time)
        likely = self._ml_deficit.get(sbn, 1 << 30) <= 2
        ok = dec.solve(partial=likely)
        self.eliminations += 1
        self._ml_deficit[sbn] = dec.ml_deficit
        self._ml_wait[sbn] = max(1, dec.ml_deficit)
        return ok

    def flush(self) -> list[DecodedBlock]:
        """Run the eliminations :meth:`feed` deferred; returns newly decoded blocks."""
        out: list[DecodedBlock] = []
        due, self._ml_due = self._ml_due, set()
        for sbn in sorted(due):
            dec = self.active.get(sbn)
            if isinstance(dec, ldpc.LDPCDecoder) and self._eliminate(sbn, dec):
                out.extend(self._finish(sbn, dec))
        return out

    def _finish(self, sbn: int, dec: ldpc.LDPCDecoder | _RSCollector) -> list[DecodedBlock]:
        self.needed += dec.received
        data = dec.source_block()
        del self.active[sbn]
        self._ml_wait.pop(sbn, None)
        self._ml_deficit.pop(sbn, None)
        self.done.add(sbn)
        off, ln = self.pt.block_bytes(sbn)
        return [DecodedBlock(off, data[:ln])]

    def metrics(self, time: float, network_time: float, lost: int, received: int) -> Metrics:
        size = max(self.sd.size, 1)
        k_total = self.pt.total_symbols or 1
        m = Metrics()
        m.time = time
        m.tput = self.link_bytes * 8 / time / 1000 if time > 0 else 0.0
        m.loss = 100.0 * lost / (lost + received) if lost + received else 0.0
        m.head = (self.data_ip_bytes / self.app_bytes - 1) * 100 if self.app_bytes else None
        if self.complete:
            m.net = (self.link_bytes / size - 1) * 100
            m.gput = size * 8 / time / 1000 if time > 0 else 0.0
            m.dup = (self.symbols / self.needed - 1) * 100 if self.needed else 0.0
            m.sym = (self.needed / k_total - 1) * 100
            m.comp = (time / network_time - 1) * 100 if network_time > 0 else 0.0
        else:  # nothing (or not all) recovered: these criteria are undefined
            m.gput = m.dup = m.sym = m.comp = m.net = None
        m.raw = MetricsCounts(packets=self.packets, symbols=self.symbols, needed=self.needed,
                              k=k_total, link_bytes=self.link_bytes, lost=lost,
                              dropped_inactive=self.dropped_inactive, ignored=self.ignored,
                              eliminations=self.eliminations, repeats=self.repeats,
                              after_done=self.after_done)
        return m


class _RSCollector:
    """Collects k distinct symbols of an RS block, then decodes with zfec."""

    def __init__(self, params: rs.RSParams) -> None:
        self.params = params
        self.got: dict[int, bytes] = {}
        self.duplicates = 0
        self._data: bytes | None = None

    @property
    def received(self) -> int:
        return len(self.got)

    def add(self, esi: int, symbol: bytes) -> bool:
        if esi in self.got:
            self.duplicates += 1
        else:
            self.got[esi] = bytes(symbol)
        if self._data is None and len(self.got) >= self.params.k:
            self._data = rs.decode(self.params, self.got)
        return self._data is not None

    def source_block(self) -> bytes:
        if self._data is None:
            raise FECError("block not decoded yet")
        return self._data
