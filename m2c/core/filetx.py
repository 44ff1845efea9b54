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

import hashlib
import ipaddress
import json
import math
import random
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from m2c.core.events import Pdu
from m2c.core.groups import RateSchedule, make_schedule
from m2c.core.scheduler import AppScheduler
from m2c.core.sequencer import Sequencer
from m2c.fec import ldpc, rs
from m2c.fec.errors import FECError
from m2c.fec.partition import Partition, n_for_block, partition
from m2c.fec.payload_id import LDPC_MAX_N, SBS_MAX_FIELD, ZFEC_INSTANCE_ID
from m2c.wire.codec import AlcPacket
from m2c.wire.constants import CCI_MAX_CHANNEL, Codepoint

__all__ = ["SessionDescription", "FileSender", "FileReceiver", "Metrics", "IP_UDP_OVERHEAD",
           "RATE_UNIT",
           "default_fec", "sha256_file"]

LDPC_MAX_BLOCKS = 1 << 12
"""RFC 5170 4.1: the LDPC FEC Payload ID's Source Block Number is 12 bits"""
LDPC_MAX1_B = 1 << 19
"""RFC 5170 5.2: max1_B = 2^(20 - ceil(log2(1/CR))) for 1/2 <= CR < 1 (our n = 2k)"""

RATE_UNIT = "packets/s"
"""the unit of the session description's rates (``rates["unit"]``)"""
IP_UDP_OVERHEAD = 28  # IPv4 + UDP header bytes counted in the paper's link-level figures
FIRST_LEVEL = 4
"""Default symbols per first level (see :class:`FileSender`).  With 1, a receiver's share
of a 1/min_rate buffer swings between ~0.2x and 2x its mean from buffer to buffer, and the
Birk-Crupnicoff offsets of the deeper levels it holds now and then repeat symbols before it
has k + eps of them; 4 makes each buffer's prefix longer and steadier, which cuts those
repeats (``python -m m2c.experiments.dupsim``; figures in docs/m2c-results.md)."""


@dataclass
class SessionDescription:
    """What a receiver needs to join: read from a JSON file or an HTTP URL."""

    session: int
    """LCT TSI"""
    toi: int
    name: str
    size: int
    sha256: str
    fec: dict[str, Any]
    """scheme ('ldpc' | 'rs'), symbol_size, max_block_length, max_n, n1, seed; for 'rs'
    also instance_id, the FEC Instance ID of our zfec code under the Under-Specified FEC
    Encoding ID 129 (RFC 5445 5.2.2.2: part of the FEC OTI; older descriptions omit it)"""
    rates: dict[str, Any]
    """the rate schedule (RateSchedule.describe()); its rates (min_rate, max_rate) are in
    packets per second, all groups together for max_rate (``"unit": "packets/s"``;
    descriptions without ``unit`` are read the same way), tsd in seconds.  ``m2c send``
    converts its kbit/s options with the symbol size and header bytes."""
    groups: list[list[Any]]
    """[address, port] per channel, index = channel (0 = base group)"""
    interface: str = "127.0.0.1"
    """the sender's interface address (IP_MULTICAST_IF); never a receiver's join interface"""
    levels: int = 0
    """application scheduler levels N"""
    window_blocks: int = 0
    """source blocks carouselled together (0: all); bounds sender and receiver memory"""
    first_level: int = FIRST_LEVEL
    """symbols of the hierarchy's first level: buffer_time = first_level / min_rate
    (paper 5.1); the sender's application scheduler has one level per symbol"""
    source: str = ""
    """the sender's IP address (RFC 5775 4.4: receivers accept only datagrams from
    (source, TSI)); "" in descriptions written before it existed: no source check"""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> SessionDescription:
        """Parse and validate; anything malformed raises ValueError with the reason."""
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("session") is None:
            raise ValueError("not an M2C session description")
        names = {f.name for f in fields(cls)}
        missing = [f.name for f in fields(cls) if f.name not in d
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"session description lacks {', '.join(missing)}")
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"session description has unknown keys {', '.join(unknown)}")
        return cls(**d)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field a sender or receiver relies on (ValueError if not)."""
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ValueError(f"session description: {what}")

        def is_int(x: object) -> bool:
            return isinstance(x, int) and not isinstance(x, bool)

        def is_num(x: object) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

        need(is_int(self.session) and 0 <= self.session < 1 << 32,
             "session (TSI) must be 0..2^32-1")
        need(is_int(self.toi) and 0 <= self.toi < 1 << 32, "toi must be 0..2^32-1")
        need(isinstance(self.name, str), "name must be a string")
        need(is_int(self.size) and self.size >= 0, "size must be a non-negative integer")
        need(isinstance(self.sha256, str) and len(self.sha256) == 64
             and all(c in "0123456789abcdefABCDEF" for c in self.sha256),
             "sha256 must be 64 hex digits")
        need(isinstance(self.interface, str) and _is_ipv4(self.interface),
             "interface must be an IPv4 address")
        need(isinstance(self.source, str) and (self.source == "" or (
            _is_ipv4(self.source) and not _is_ipv4(self.source, multicast=True)
            and self.source != "0.0.0.0")),
             "source must be the sender's unicast IPv4 address, not 0.0.0.0 (or empty)")
        for key in ("levels", "window_blocks"):
            need(is_int(getattr(self, key)) and getattr(self, key) >= 0, f"{key} must be >= 0")
        need(is_int(self.first_level) and self.first_level >= 1, "first_level must be >= 1")
        f, r = self.fec, self.rates
        need(isinstance(f, dict), "fec must be an object")
        for key in ("scheme", "symbol_size", "max_block_length", "max_n", "n1", "seed"):
            need(key in f, f"fec lacks {key!r}")
        need(f["scheme"] in ("ldpc", "rs"), f"unknown FEC scheme {f['scheme']!r}")
        if f["scheme"] == "rs":
            # RFC 5445 5.2.2.2: the FEC Instance ID names the code under ID 129
            iid = f.get("instance_id", ZFEC_INSTANCE_ID)
            need(is_int(iid) and iid == ZFEC_INSTANCE_ID,
                 f"fec instance_id {f.get('instance_id')!r} is not our zfec Reed-Solomon "
                 f"({ZFEC_INSTANCE_ID})")
        else:
            need("instance_id" not in f, "fec instance_id is only for 'rs' (FEC Encoding "
                 "ID 129); LDPC-Staircase (ID 3) is fully specified")
        for key in ("symbol_size", "max_block_length", "max_n", "n1", "seed"):
            need(is_int(f[key]), f"fec {key} must be an integer")
        need(1 <= f["symbol_size"] <= 0xFFFF, "fec symbol_size must be 1..65535")
        need(1 <= f["max_block_length"] <= f["max_n"],
             "fec needs 1 <= max_block_length <= max_n")
        need(self.size < 1 << 48, "size does not fit the FEC OTI's 48-bit Transfer-Length")
        if f["scheme"] == "ldpc":
            need(f["max_n"] <= LDPC_MAX_N,
                 f"fec max_n {f['max_n']} does not fit EXT_FTI's 20-bit max_n field: at most "
                 f"2^20 - 1 = {LDPC_MAX_N} (RFC 5170 Figure 2)")
        else:
            need(f["max_n"] <= SBS_MAX_FIELD,
                 f"fec max_block_length {f['max_block_length']} and max_n {f['max_n']} must "
                 f"fit the 16-bit fields of FEC Encoding ID 129's FEC OTI: at most "
                 f"{SBS_MAX_FIELD} (RFC 5445 5.2.2.2)")
        need(isinstance(r, dict), "rates must be an object")
        for key in ("schedule", "min_rate", "max_rate", "tsd", "k", "quiet"):
            need(key in r, f"rates lack {key!r}")
        for key in ("min_rate", "max_rate", "tsd"):
            need(is_num(r[key]), f"rates {key} must be a number")
        need(is_int(r["k"]) and is_int(r["quiet"]), "rates k and quiet must be integers")
        need(is_num(r.get("per_slot_factor", 4 / 3)), "rates per_slot_factor must be a number")
        need(r.get("unit", RATE_UNIT) == RATE_UNIT,
             f"rates unit {r.get('unit')!r}: only {RATE_UNIT!r} (packets per second) is known")
        try:
            sched = self.schedule()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"session description: bad rate schedule: {exc}") from None
        # the M2C CCI's channel number is 8 bits (docs/wire-m2c.md): refuse, never wrap
        need(sched.channels <= CCI_MAX_CHANNEL,
             f"{sched.channels} dynamic channels (rates k = {r['k']}, min_rate..max_rate "
             f"{r['min_rate']:g}..{r['max_rate']:g} packets/s): the M2C CCI's 8-bit channel "
             f"number holds the base group 0 and channels 1..{CCI_MAX_CHANNEL} at most; "
             f"use a smaller k (m2c send --k) or a narrower rate range")
        need(isinstance(self.groups, list) and len(self.groups) >= sched.channels + 1,
             f"{sched.channels + 1} groups needed (base + {sched.channels} channels), "
             f"got {len(self.groups) if isinstance(self.groups, list) else 'none'}")
        for g in self.groups:
            need(isinstance(g, list) and len(g) == 2 and isinstance(g[0], str) and is_int(g[1])
                 and 0 < g[1] < 65536 and _is_ipv4(g[0], multicast=True),
                 f"group {g!r} is not [IPv4 multicast address, port]")
        pt = self.partition()
        if f["scheme"] == "ldpc":
            # RFC 5170 4.1: the SBN is 12 bits, so at most 2^12 blocks (4.2.2)
            need(pt.blocks <= LDPC_MAX_BLOCKS,
                 f"{pt.blocks} source blocks; LDPC-Staircase's 12-bit SBN allows "
                 f"{LDPC_MAX_BLOCKS} (RFC 5170 4.2.2: transfer length <= 2^12*B*E)")
        else:
            need(pt.blocks <= 1 << 32, f"{pt.blocks} source blocks; the 32-bit SBN of FEC "
                 f"Encoding ID 129 allows 2^32 (RFC 5445 5.2.1)")
        # every block's n (RFC 5170 5.5 / RFC 5510) must be a valid code: the FEC
        # layer checks k < n <= 2^20, n - k >= N1, the seed ... (FECError is a ValueError)
        for k in {pt.a_large, pt.a_small} - {0}:
            n = self.block_n(k)
            try:
                if f["scheme"] == "rs":
                    rs.RSParams(k, n, f["symbol_size"])
                else:
                    ldpc.LDPCParams(k, n, f["symbol_size"], f["n1"], f["seed"])
            except FECError as exc:
                raise ValueError(f"session description: FEC parameters of a block with "
                                 f"k = {k}, n = {n}: {exc}") from None

    def schedule(self) -> RateSchedule:
        r = self.rates
        return make_schedule(r["schedule"], min_rate=r["min_rate"], max_rate=r["max_rate"],
                             tsd=r["tsd"], k=r["k"], quiet=r["quiet"],
                             per_slot_factor=r.get("per_slot_factor", 4 / 3))

    def partition(self) -> Partition:
        f = self.fec
        return partition(self.size, f["max_block_length"], f["symbol_size"])

    def block_n(self, k: int) -> int:
        f = self.fec
        if f["scheme"] == "rs":
            return min(256, int(k * f["max_n"] // f["max_block_length"]))
        # RFC 5170 5.5, exactly: n = floor(k * max_n / B); default_fec chooses max_n so
        # that n - k >= N1 for every block of the file (validate() checks it)
        return n_for_block(k, f["max_n"], f["max_block_length"])

    @property
    def codepoint(self) -> int:
        return Codepoint.LDPC_STAIRCASE if self.fec["scheme"] == "ldpc" else \
            Codepoint.SMALL_BLOCK_SYSTEMATIC


def _is_ipv4(text: str, multicast: bool = False) -> bool:
    try:
        a = ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return a.is_multicast or not multicast


def default_fec(size: int, scheme: str = "ldpc", symbol_size: int = 1400,
                max_block_length: int | None = None, seed: int = 1, n1: int = 5) -> dict[str, Any]:
    """FEC parameters for a file: code rate 1/2 (the paper's n = 2k).

    LDPC: N1 = 5 (N1m3 = 2) because our receivers finish with Gaussian
    elimination (RFC 5170 4.2.3 suggests N1m3 > 0 then): ~1.01 k symbols instead
    of ~1.07 k with N1 = 3 (bench m2c_fec).  Blocks of at most 3,000 source
    symbols: fewer, larger blocks waste fewer symbols of already decoded blocks
    while the last one finishes (``dupsim``: 0.2-1.3 % fewer symbols with one
    block of 2,946 than with two of 1,473).  Session 2 went back to 2,000
    because the last block's final elimination, on the critical path, took
    0.25-0.3 s in Python at k = 2,946; in C it takes 6-8 ms
    (``python -m m2c.fec.elimbench --k 2946 --size 1424``), docs/m2c-results.md.
    """
    if scheme == "rs":
        B = max_block_length or 128
        return {"scheme": "rs", "symbol_size": symbol_size, "max_block_length": B,
                "max_n": 2 * B, "n1": 0, "seed": 0, "instance_id": ZFEC_INSTANCE_ID}
    B = max_block_length or 3000
    T = -(-size // symbol_size) if symbol_size > 0 else 0
    if T > LDPC_MAX_BLOCKS * B:
        # RFC 5170 4.1/4.2.2: at most 2^12 source blocks; grow B (up to 5.2's max1_B)
        need = -(-T // LDPC_MAX_BLOCKS)
        if max_block_length is not None or need > LDPC_MAX1_B:
            raise FECError(
                f"{size} bytes need {-(-T // B)} source blocks of at most {B} symbols of "
                f"{symbol_size} bytes; LDPC-Staircase allows 2^12 blocks (RFC 5170 4.2.2: "
                f"at most 2^12*B*E = "
                f"{LDPC_MAX_BLOCKS * min(max(B, need), LDPC_MAX1_B) * symbol_size}"
                f" bytes{'' if need > LDPC_MAX1_B else ' with this B'}): use a larger "
                f"{'symbol size' if need > LDPC_MAX1_B else 'block length or none'}")
        B = need
    # RFC 5170 5.4: max_n = ceil(B / CR) = 2B, but EXT_FTI's max_n field has 20 bits:
    # with B = max1_B = 2^19 (5.2), 2^20 - 1 (n = 2k - 1 for a full block)
    max_n = min(2 * B, LDPC_MAX_N)
    # RFC 5170 5.5 n = floor(k*max_n/B) must leave n - k >= N1 rows for the N1 ones of
    # every column (6.2): only a block shorter than N1 (a file of < N1 symbols) needs
    # a max_n above 2B, i.e. a code rate below 1/2 for that tiny file
    if T:
        k_min = partition(size, B, symbol_size).a_small or 1
        if n_for_block(k_min, max_n, B) - k_min < n1:
            max_n = -(-(k_min + n1) * B // k_min)
            if max_n > LDPC_MAX_N:
                raise FECError(
                    f"a block of {k_min} symbols needs max_n = {max_n} with B = {B} for "
                    f"n - k >= N1 = {n1}, beyond EXT_FTI's 20-bit max_n field "
                    f"({LDPC_MAX_N}): use a smaller block length or none")
    return {"scheme": "ldpc", "symbol_size": symbol_size, "max_block_length": B,
            "max_n": max_n, "n1": n1, "seed": seed}


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
        self.E = sd.fec["symbol_size"]
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
        # window of source blocks carouselled together (whole file unless the
        # session bounds it): memory holds only the window's encoded blocks
        self.window = sd.window_blocks or max(1, self.pt.blocks)
        self.n_windows = max(1, -(-self.pt.blocks // self.window))
        self._win = -1
        self._win_buffer = 0
        self._win_buffers = 0
        self._enter_window(0)

    def _enter_window(self, w: int) -> None:
        if w == self._win:
            return
        self._win = w
        first = w * self.window
        blocks = range(first, min(self.pt.blocks, first + self.window))
        self._blocks = {b: v for b, v in self._blocks.items() if b in blocks}
        self.order = _order(self.pt, self.sd, blocks)
        B = max(1, len(self.order))
        self.levels = min(self.max_levels, B)
        self.app = AppScheduler(B, self.levels)
        self._win_buffer = 0
        # one pass of the application scheduler at the top rate per visit
        self._win_buffers = -(-B // self.levels)

    def _block(self, sbn: int) -> tuple[bytes, bytes]:
        got = self._blocks.get(sbn)
        if got is None:
            off, ln = self.pt.block_bytes(sbn)
            k = self.pt.block_length(sbn)
            src = self.read(off, ln).ljust(k * self.E, b"\0")
            n = self.sd.block_n(k)
            if self.sd.fec["scheme"] == "rs":
                rep = rs.encode(rs.RSParams(k, n, self.E), src)
            else:
                f = self.sd.fec
                rep = ldpc.encode(ldpc.LDPCParams(k, n, self.E, f["n1"], f["seed"]), src)
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
        if self.n_windows > 1 and self._win_buffer >= self._win_buffers:
            self._enter_window((self._win + 1) % self.n_windows)
        b = self._win_buffer if self.n_windows > 1 else self.next_buffer
        self._win_buffer += 1
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
    raw: dict[str, Any] = field(default_factory=dict)


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
        self.E = sd.fec["symbol_size"]
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
            if f["scheme"] == "rs":
                dec = _RSCollector(rs.RSParams(k, n, self.E))
            else:
                dec = ldpc.LDPCDecoder(ldpc.LDPCParams(k, n, self.E, f["n1"], f["seed"]))
            self.active[sbn] = dec
        return dec

    def feed(self, pkt: AlcPacket, wire_len: int, defer: bool = False) -> list[tuple[int, bytes]]:
        """One verified packet; returns [(file offset, bytes)] of newly decoded blocks.

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
        return 1 + math.ceil(k * (0.012 if self.sd.fec.get("n1", 3) >= 5 else 0.06))

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

    def flush(self) -> list[tuple[int, bytes]]:
        """Run the eliminations :meth:`feed` deferred; returns newly decoded blocks."""
        out: list[tuple[int, bytes]] = []
        due, self._ml_due = self._ml_due, set()
        for sbn in sorted(due):
            dec = self.active.get(sbn)
            if isinstance(dec, ldpc.LDPCDecoder) and self._eliminate(sbn, dec):
                out.extend(self._finish(sbn, dec))
        return out

    def _finish(self, sbn: int, dec: ldpc.LDPCDecoder | _RSCollector) -> list[tuple[int, bytes]]:
        self.needed += dec.received
        data = dec.source_block()
        del self.active[sbn]
        self._ml_wait.pop(sbn, None)
        self._ml_deficit.pop(sbn, None)
        self.done.add(sbn)
        off, ln = self.pt.block_bytes(sbn)
        return [(off, data[:ln])]

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
        m.raw = {"packets": self.packets, "symbols": self.symbols, "needed": self.needed,
                 "k": k_total, "link_bytes": self.link_bytes, "lost": lost,
                 "dropped_inactive": self.dropped_inactive, "ignored": self.ignored,
                 "eliminations": self.eliminations,
                 "repeats": self.repeats, "after_done": self.after_done}
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


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)
