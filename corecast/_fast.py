"""Pure-Python twins of the C fast paths in deliverykit/csrc/corecast.c.

``cc_parse(pkt, ranges)`` classifies one inner IP packet at the ITR (paper
section 3.3: only the reserved CoreCast range leaves the fast path) and
validates the CoreCast PDU lengths (docs/wire-corecast.md):

* ``(0, dst)``                                     not in the reserved range: plain LISP
* ``(1, chan, hash_id, hash, payload_off, seq)``   payload PDU
* ``(2, chan, hash, eid)``                         header PDU
* ``(-1, 1)`` malformed, ``(-1, 2)`` in the range but not a CoreCast PDU

``ranges`` is a tuple of ``(network_bytes, mask_bytes)``.

``cc_trie_lookup(root, addr)`` walks a :class:`corecast.core.maptrie.PrefixTrie`
root (nodes are lists ``[child0, child1, value, has_value]``) and returns
``(prefix_len, value)`` of the longest match, or None.

Selected with ``deliverykit.fastpath.load`` (``DELIVERYKIT_PURE=1`` forces these).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, TypeVar

from deliverykit.fastpath import load
from deliverykit.protocol import SockAddr

if TYPE_CHECKING:
    from deliverykit._speedups import ItrTable

_HASH_LEN = {1: 20, 2: 32}
_CC_PORT = 54341
_CC_PORT_BYTES = _CC_PORT.to_bytes(2, "big")
_PROTO = 253


#: the reserved CoreCast ranges, ``(network, mask)`` byte pairs
Ranges: TypeAlias = tuple[tuple[bytes, bytes], ...]
#: (length, mask, network) integers of each range
IntRanges: TypeAlias = tuple[tuple[int, int, int], ...]
#: what cc_parse says of an inner packet (the module docstring): ``(-1, error)``,
#: ``(0, dst)``, ``(1, chan, hash_id, hash, payload_off, seq)``, ``(2, chan, hash, eid)``
CcParsed: TypeAlias = (
    tuple[Literal[-1], int]
    | tuple[Literal[0], bytes]
    | tuple[Literal[1], bytes, int, bytes, int, int]
    | tuple[Literal[2], bytes, bytes, bytes]
)

_RANGES: dict[Ranges, IntRanges] = {}


def l2_inner(frame: bytes) -> bytes:
    """The IP packet in an Ethernet frame (type IPv4 or IPv6 at bytes 12-13), without
    the padding Ethernet adds to short frames: cut at the IP total / payload
    length when that is shorter than what follows the 14-byte header."""
    p = frame[14:]
    n = len(p)
    if frame[12:14] == b"\x08\x00":
        if n >= 4:
            tot = p[2] << 8 | p[3]
            if 20 <= tot < n:
                return p[:tot]
    elif n >= 6:
        tot = 40 + (p[4] << 8 | p[5])
        if tot < n:
            return p[:tot]
    return p


#: reserved ranges the batch fast path takes (CC_MAX_RANGES in corecast.c)
MAX_RANGES = 16


def _int_ranges(ranges: Ranges) -> IntRanges:
    """(length, mask, net) integers for a ranges tuple, memoised."""
    r = _RANGES.get(ranges)
    if r is None:
        r = tuple((len(n), int.from_bytes(m, "big"), int.from_bytes(n, "big")) for n, m in ranges)
        if len(_RANGES) < 64:
            _RANGES[ranges] = r
    return r


def py_cc_parse(pkt: bytes, ranges: Ranges) -> CcParsed:
    n = len(pkt)
    if n < 20:
        return (-1, 1)
    v = pkt[0] >> 4
    if v == 4:
        ihl = (pkt[0] & 0x0F) * 4
        if ihl < 20 or ihl > n:
            return (-1, 1)
        dst = pkt[16:20]
        proto = pkt[9]
    elif v == 6 and n >= 40:
        ihl = 40
        dst = pkt[24:40]
        proto = pkt[6]
    else:
        return (-1, 1)
    ld = len(dst)
    d = int.from_bytes(dst, "big")
    for ln, mask, net in _int_ranges(ranges):
        if ln == ld and d & mask == net:
            break
    else:
        return (0, dst)
    if proto == _PROTO:
        off = ihl
    elif proto == 17 and n >= ihl + 8 and (pkt[ihl + 2] << 8 | pkt[ihl + 3]) == _CC_PORT:
        off = ihl + 8
    else:
        return (-1, 2)
    if n < off + 12:
        return (-1, 1)
    vt = pkt[off]
    hid = pkt[off + 1]
    hlen = pkt[off + 2]
    if vt >> 4 != 1 or _HASH_LEN.get(hid) != hlen:
        return (-1, 1)
    typ = vt & 0x0F
    h0 = off + 12
    if typ == 1:
        plen = pkt[off + 8] << 8 | pkt[off + 9]
        if h0 + hlen + plen != n:
            return (-1, 1)
        seq = int.from_bytes(pkt[off + 4 : off + 8], "big")
        return (1, dst, hid, pkt[h0 : h0 + hlen], h0 + hlen, seq)
    if typ == 2:
        afi = pkt[off + 10] << 8 | pkt[off + 11]
        elen = 4 if afi == 1 else 16 if afi == 2 else 0
        if not elen or h0 + hlen + elen != n:
            return (-1, 1)
        return (2, dst, pkt[h0 : h0 + hlen], pkt[h0 + hlen :])
    return (-1, 1)


def py_cc_trie_lookup(root: list, addr: bytes) -> tuple | None:
    node = root
    best = (0, node[2]) if node[3] else None
    key = int.from_bytes(addr, "big")
    shift = len(addr) * 8 - 1
    depth = 0
    while shift >= 0:
        node = node[(key >> shift) & 1]
        if node is None:
            break
        depth += 1
        if node[3]:
            best = (depth, node[2])
        shift -= 1
    return best


cc_parse = load("cc_parse", py_cc_parse)
cc_trie_lookup = load("cc_trie_lookup", py_cc_trie_lookup)


# ---------------------------------------------------------------- ITR table

#: one item of a batch of the ITR's inside interface, as :meth:`PyItrTable.batch` (and
#: C) takes them, a list of one kind: inner IP packets or AF_PACKET Ethernet frames as
#: the RX ring gives them (bytes), or datagrams as ``deliverykit.fastpath.recv_batch``
#: gives them (``(bytes, addr)``)
Frame = TypeVar("Frame", bytes, tuple[bytes, SockAddr])
#: a datagram the batch path sends: the LISP-encapsulated packet to ``(rloc, port)``
OutDatagram: TypeAlias = tuple[bytes, tuple[str, int]]


class TxSink(Protocol):
    """Where the batch path appends what it sends: a list, or a
    ``deliverykit.fastpath.tx_batch()`` (the C batch loop then appends without a
    Python object per datagram)."""

    def append(self, item: OutDatagram, /) -> None: ...

#: ``digest(hash_id, data) -> bytes`` (corecast.wire.codec.digest)
Digest: TypeAlias = Callable[[int, "bytes | memoryview"], bytes]
#: the ``ctx`` argument of ``batch``, laid out by :meth:`ItrPath.ctx`: (ranges,
#: lisp_header, data_port, extra_every, max_served, own, headers_by_rloc, digest,
#: linear, check_hash)
BatchCtx: TypeAlias = tuple[
    tuple[tuple[bytes, bytes], ...], bytes, int, int, int, tuple[bytes, ...],
    dict[bytes, bytes], Digest, bool, bool,
]

#: ``ctr`` slots of :meth:`PyItrTable.batch` (and the C version), by name
CTR_NAMES = ("in_packets", "plain_encap", "header_copies", "payload_copies",
             "extra_payload_copies", "drop_unknown_hash", "mapcache_hits", "l2_to_self", "l2_ip",
             "cc_payloads", "drop_bad_hash")


class Lookup(enum.Enum):
    """How the batch path finds a client EID's map-cache entry (paper section 6.2's
    explanation of its +52 %: a linear EID-to-RLOC search, where routers use tries)."""

    #: longest-prefix match over the table's prefixes (a binary trie in C)
    TRIE = "trie"
    #: a scan over every prefix, longest first, stopping at the first that covers it
    LINEAR = "linear"


#: one map-cache entry as ``ItrTable.entries()`` gives it:
#: (network, prefix length, locators, their text, expiry, own LISP header, fast-path hits)
EntryRow = tuple[bytes, int, tuple[bytes, ...], tuple[str, ...], float, "bytes | None", int]
#: one channel as ``ItrTable.channel()`` gives it: (hash, seq, payload packet, servedRLOC)
ChannelRow = tuple[bytes, int, bytes, "dict[bytes, int] | None"]


def _masked(net: bytes, plen: int) -> int:
    bits = len(net) * 8
    return int.from_bytes(net, "big") & ((((1 << plen) - 1) << (bits - plen)) if plen else 0)


@dataclass(slots=True)
class _Row:
    """One map-cache entry of :class:`PyItrTable` (a row of the C table)."""

    net: int
    nb: int
    plen: int
    rlocs: tuple[bytes, ...]
    rloc_strs: tuple[str, ...]
    expires: float
    header: bytes | None
    hits: int = 0

    @property
    def fast(self) -> bool:
        """Exactly one usable locator: the batch path may forward with it."""
        return len(self.rlocs) == 1

    def covers(self, key: int, nb: int) -> bool:
        return nb == self.nb and (key >> (nb * 8 - self.plen) if self.plen else 0) == (
            self.net >> (nb * 8 - self.plen) if self.plen else 0)

    def as_tuple(self) -> EntryRow:
        return (self.net.to_bytes(self.nb, "big"), self.plen, self.rlocs, self.rloc_strs,
                self.expires, self.header, self.hits)


@dataclass(slots=True)
class _Channel:
    """One payloadBuffer entry of :class:`PyItrTable` (paper Fig. 3)."""

    eid: bytes
    hash: bytes = b""
    seq: int = -1
    packet: bytes = b""
    served: dict[bytes, int] | None = None


class PyItrTable:
    """The pure twin of the C ``ItrTable`` (``deliverykit._speedups.cc_itr_table()``):
    the ITR's data-path state, owned in one place.  The map-cache's entries
    (:class:`corecast.core.mapcache.MapCache` keeps them here through
    :meth:`set_entry` and :meth:`remove_entry`) and the payloadBuffer
    (:class:`corecast.core.itr.Itr`: :meth:`add_channel`, :meth:`set_payload`);
    :meth:`batch` is the data path over them.  Same methods, results and state as C."""

    def __init__(self) -> None:
        #: (nb, plen, masked network) -> row
        self._rows: dict[tuple[int, int, int], _Row] = {}
        #: per family, the prefix lengths present, longest first
        self._lengths: dict[int, list[int]] = {4: [], 16: []}
        #: rows longest prefix first (the linear search), rebuilt after a change
        self._order: list[_Row] | None = None
        self._channels: dict[bytes, _Channel] = {}
        #: EID -> its longest match, cleared by every change (bounded)
        self._memo: dict[bytes, _Row | None] = {}

    def __len__(self) -> int:
        return len(self._rows)

    # -- map-cache entries -----------------------------------------------------------

    @staticmethod
    def _check(prefix: bytes, plen: int) -> None:
        if len(prefix) not in (4, 16):
            raise ValueError("ItrTable: an address is 4 or 16 bytes")
        if not 0 <= plen <= len(prefix) * 8:
            raise ValueError("ItrTable: bad prefix length")

    def set_entry(self, prefix: bytes, plen: int, rlocs: tuple[bytes, ...],
                  rloc_strs: tuple[str, ...], expires: float, header: bytes | None) -> None:
        """Add or replace the entry of ``prefix/plen``."""
        self._check(prefix, plen)
        if len(rlocs) != len(rloc_strs) or not (header is None or isinstance(header, bytes)):
            raise TypeError("set_entry: rlocs and rloc_strs of one length; header bytes or None")
        nb = len(prefix)
        key = (nb, plen, _masked(prefix, plen))
        old = self._rows.get(key)
        self._rows[key] = _Row(key[2], nb, plen, tuple(rlocs), tuple(rloc_strs), float(expires),
                               header, old.hits if old is not None else 0)
        self._memo.clear()
        if old is None:
            self._lengths[nb] = sorted({plen, *self._lengths[nb]}, reverse=True)
            self._order = None

    def remove_entry(self, prefix: bytes, plen: int) -> bool:
        """Remove the entry of ``prefix/plen``; True if there was one."""
        self._check(prefix, plen)
        nb = len(prefix)
        if self._rows.pop((nb, plen, _masked(prefix, plen)), None) is None:
            return False
        self._memo.clear()
        self._lengths[nb] = sorted({k[1] for k in self._rows if k[0] == nb}, reverse=True)
        self._order = None
        return True

    def entries(self) -> list[EntryRow]:
        """Every entry, sorted (as C gives them)."""
        return sorted(r.as_tuple() for r in self._rows.values())

    def longest_match(self, eid: bytes) -> _Row | None:
        """The entry of the longest prefix covering ``eid``."""
        if eid in self._memo:
            return self._memo[eid]
        nb = len(eid)
        found = None
        for plen in self._lengths[nb]:
            found = self._rows.get((nb, plen, _masked(eid, plen)))
            if found is not None:
                break
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[eid] = found
        return found

    def linear_match(self, eid: bytes) -> _Row | None:
        """The section 6 ablation: every entry scanned, longest prefix first."""
        if self._order is None:
            self._order = sorted(self._rows.values(), key=lambda r: -r.plen)
        key, nb = int.from_bytes(eid, "big"), len(eid)
        for row in self._order:
            if row.covers(key, nb):
                return row
        return None

    # -- the payloadBuffer -------------------------------------------------------------

    def add_channel(self, eid: bytes) -> bool:
        """A payloadBuffer entry with no payload yet; False if there is one."""
        if eid in self._channels:
            return False
        self._channels[eid] = _Channel(eid)
        return True

    def set_payload(self, eid: bytes, hash: bytes, seq: int, packet: bytes) -> None:
        """A channel's new payload, with a fresh, empty servedRLOC."""
        ch = self._channels.get(eid)
        if ch is None:
            raise KeyError("set_payload: not a channel of this table")
        ch.hash, ch.seq, ch.packet, ch.served = hash, seq, packet, {}

    def channel(self, eid: bytes) -> ChannelRow | None:
        """(hash, seq, packet, servedRLOC) of a channel; the servedRLOC is the table's."""
        ch = self._channels.get(eid)
        return None if ch is None else (ch.hash, ch.seq, ch.packet, ch.served)

    def channels(self) -> list[bytes]:
        return list(self._channels)

    # -- the data path -------------------------------------------------------------------

    def batch(self, frames: list[Frame], start: int, l2: int, ctx: BatchCtx, now: float,
              out: TxSink, ctr: list[int]) -> int:
        """The ITR data path for a batch (paper section 3.4 Algorithm 1, header step;
        plain LISP encapsulation, RFC 9300 section 5).

        ``frames``: inner IP packets (``l2 == 0``) or Ethernet frames from AF_PACKET
        (``l2 == 14``; non-IP frames skipped, frames to ``own`` addresses or multicast
        counted in ``l2_to_self`` and skipped), each bytes or a ``(bytes, addr)`` pair.
        ``ctx`` is :meth:`ItrPath.ctx`: ``(ranges, lisp_header, data_port,
        extra_every, max_served, own, headers_by_rloc, digest, linear, check_hash)``.
        An entry's own header (map-versioning, RFC 9302) replaces the default for
        its EIDs; a per-RLOC header (echo-nonce, RFC 9300 10.1) wins over both.

        Handles, in order from ``start``: payload PDUs of a known channel (hash checked
        with ``digest(hash_id, payload)``; a match is the channel's new payload with a
        fresh servedRLOC, a mismatch a counted drop), plain packets and CoreCast
        header PDUs whose EID hits a live single-locator entry (appending ``(lisp_header
        + packet, (rloc, port))`` to ``out``, with the channel's payload first when the
        RLOC is not yet in servedRLOC), and header PDUs with an unknown hash (dropped,
        counted).  Returns the index of the first packet it leaves to the Python core
        (the first payload of a new channel, misses, expired/negative/multi-locator
        entries, unknown channels, a full servedRLOC, malformed packets), or
        ``len(frames)``.  ``ctr`` (11 ints, :data:`CTR_NAMES`) is incremented."""
        (ranges, lisp_header, port, extra, max_served, own, hdrs, digest, linear,
         check_hash) = ctx
        if len(ctr) != len(CTR_NAMES):  # the checks in the C function's order
            raise ValueError("cc_itr_batch: ctr must be a list of 11 ints")
        if l2 not in (0, 14):
            raise ValueError("cc_itr_batch: l2 must be 0 or 14")
        if len(ranges) > MAX_RANGES:
            raise ValueError("cc_itr_batch: at most 16 reserved ranges")
        loop = _BatchLoop(self, _int_ranges(ranges), lisp_header, port, extra, max_served,
                          own, hdrs, digest, bool(linear), bool(check_hash), now, out)
        frames = frames[:]  # our own references, as C (digest may change the list)
        i = max(start, 0)
        p: object  # bytes, once checked as C checks it
        while i < len(frames):
            item = frames[i]
            p = item[0] if type(item) is tuple and item else item
            if not isinstance(p, bytes):  # as the C function: bytes or (bytes, addr) only
                raise TypeError("cc_itr_batch: frames are bytes or (bytes, addr)")
            if l2:
                p = loop.inner_of_frame(p)
                if p is None:  # not IP, or not for forwarding: skipped
                    i += 1
                    continue
            if not loop.forward(p):
                break  # the Python core takes this packet
            i += 1
        for k, name in enumerate(CTR_NAMES):
            ctr[k] += loop.counts[name]
        return i


_MEMO_MAX = 1 << 16


def py_cc_itr_table() -> PyItrTable:
    return PyItrTable()


@dataclass(slots=True)
class ItrPath:
    """Everything the ITR's batch data path reads and writes: the one owner of this
    state (:class:`corecast.core.itr.Itr` reads and sets it through properties).
    The map-cache entries and the payloadBuffer are in :attr:`table` (C or twin);
    :meth:`ctx` lays the rest out as ``table.batch`` takes it; nothing else knows
    the order."""

    #: reserved CoreCast ranges, ``(network, mask)`` byte pairs (at most MAX_RANGES)
    ranges: tuple[tuple[bytes, bytes], ...]
    #: the map-cache entries and the payloadBuffer (``ItrTable`` or :class:`PyItrTable`)
    table: ItrTable | PyItrTable
    #: the default LISP data header
    lisp_header: bytes
    #: the remote ETRs' LISP data port
    data_port: int
    #: Algorithm 1's option: re-send the payload after every n headers (0: never)
    extra_payload_every: int
    #: servedRLOC entries per payload
    max_served: int
    #: the ITR's own addresses (AF_PACKET frames to them are not forwarded)
    own: tuple[bytes, ...]
    #: LISP data headers that replace the default toward one RLOC (echo-nonce)
    headers_by_rloc: dict[bytes, bytes]
    #: ``digest(hash_id, data) -> bytes`` (corecast.wire.codec.digest)
    digest: Digest
    #: the EID-to-RLOC lookup (section 6 ablation)
    lookup: Lookup = Lookup.TRIE
    #: Algorithm 1's per-client hash check: each header's hash against the buffered
    #: payload's (False: the section 6 ablation; a header goes out with whatever
    #: payload the channel holds)
    check_hash: bool = True

    def ctx(self) -> BatchCtx:
        """The ``ctx`` argument of ``table.batch``."""
        return (self.ranges, self.lisp_header, self.data_port, self.extra_payload_every,
                self.max_served, self.own, self.headers_by_rloc, self.digest,
                self.lookup is Lookup.LINEAR, self.check_hash)


@dataclass(frozen=True, slots=True)
class BatchImpl:
    """Which implementation an ITR runs: the C parser and table or their twins,
    chosen once."""

    parse: Callable[[bytes, Ranges], CcParsed]
    table: Callable[[], ItrTable | PyItrTable]

    @classmethod
    def choose(cls, fast: bool | None) -> BatchImpl:
        """None: whatever deliverykit.fastpath picked; True: C (RuntimeError when it
        is not built); False: the pure twins."""
        if fast is None:
            return cls(cc_parse, cc_itr_table)
        if not fast:
            return cls(py_cc_parse, py_cc_itr_table)
        from deliverykit.fastpath import speedups

        if speedups is None or not hasattr(speedups, "cc_itr_table"):
            raise RuntimeError("the C fast path is not built")
        return cls(speedups.cc_parse, speedups.cc_itr_table)


class _BatchLoop:
    """One call of :meth:`PyItrTable.batch`: the table, the call's options, the
    output list and the counts by name.  Every ``forward`` step returns False where
    the C function stops (the packet is left to the Python core, untouched and
    uncounted)."""

    def __init__(self, table: PyItrTable, int_ranges: tuple[tuple[int, int, int], ...],
                 lisp_header: bytes, port: int, extra: int, max_served: int,
                 own: tuple[bytes, ...], hdrs: dict[bytes, bytes],
                 digest: Digest, linear: bool, check_hash: bool,
                 now: float, out: TxSink) -> None:
        self.table = table
        self.int_ranges = int_ranges
        self.lisp_header = lisp_header
        self.port = port
        self.extra = extra
        self.max_served = max_served
        self.own = own
        self.hdrs = hdrs
        self.digest = digest
        self.linear = linear
        self.check_hash = check_hash
        self.now = now
        self.out = out
        self.counts = dict.fromkeys(CTR_NAMES, 0)
        self._last_dst = b""
        self._last_reserved = False

    # -- frames (AF_PACKET, l2 = 14) ---------------------------------------------------

    def inner_of_frame(self, f: bytes) -> bytes | None:
        """The IP packet of an Ethernet frame to forward; None for a frame that is not
        IP (not counted) or is for this host: multicast, IPv6 link-local or one of
        our own addresses (counted in ``l2_to_self``)."""
        n = len(f)
        et = (f[12] << 8 | f[13]) if n >= 14 else 0
        if et == 0x0800 and n >= 34:
            dst = f[30:34]
            to_self = dst[0] >= 224
        elif et == 0x86DD and n >= 54:
            dst = f[38:54]
            to_self = dst[0] == 0xFF or (dst[0] == 0xFE and dst[1] & 0xC0 == 0x80)
        else:
            return None
        if to_self or dst in self.own:
            self.counts["l2_to_self"] += 1
            return None
        self.counts["l2_ip"] += 1
        return l2_inner(f)

    # -- one inner packet ----------------------------------------------------------------

    def forward(self, p: bytes) -> bool:
        """Classify ``p`` as cc_parse does and handle it: plain LISP, or a CoreCast
        payload or header PDU (Algorithm 1)."""
        n = len(p)
        if n < 20:
            return False
        v = p[0] >> 4
        if v == 4:
            ihl = (p[0] & 0x0F) * 4
            if ihl < 20 or ihl > n:
                return False
            dst, proto = p[16:20], p[9]
        elif v == 6 and n >= 40:
            ihl, dst, proto = 40, p[24:40], p[6]
        else:
            return False
        if not self.reserved(dst):
            return self.plain(p, dst)
        if proto == _PROTO:
            off = ihl
        elif proto == 17 and n >= ihl + 8 and (p[ihl + 2] << 8 | p[ihl + 3]) == _CC_PORT:
            off = ihl + 8
        else:
            return False
        if n >= off + 12 and p[off] == 0x11:
            return self.payload(p, dst, off)
        return self.header(p, dst, off)

    def reserved(self, dst: bytes) -> bool:
        if dst != self._last_dst:
            d, ld = int.from_bytes(dst, "big"), len(dst)
            self._last_dst = dst
            self._last_reserved = any(ln == ld and d & mask == net
                                      for ln, mask, net in self.int_ranges)
        return self._last_reserved

    def plain(self, p: bytes, dst: bytes) -> bool:
        """Not in the reserved range: LISP-encapsulated to the EID's one locator."""
        row = self.route(dst)
        if row is None:
            return False
        self.out.append((self.header_for(row) + p, (row.rloc_strs[0], self.port)))
        row.hits += 1
        self.counts["plain_encap"] += 1
        self.counts["in_packets"] += 1
        self.counts["mapcache_hits"] += 1
        return True

    def payload(self, p: bytes, chan: bytes, off: int) -> bool:
        """A payload PDU: if its hash matches its payload, it becomes the channel's
        payloadBuffer entry with a fresh servedRLOC; nothing is sent."""
        n, hid, hlen = len(p), p[off + 1], p[off + 2]
        h0 = off + 12
        if _HASH_LEN.get(hid) != hlen or h0 + hlen + (p[off + 8] << 8 | p[off + 9]) != n:
            return False
        if self.table.channel(chan) is None:
            return False  # a new channel: the Python core applies its bounds
        good = self.digest(hid, p[h0 + hlen:]) == p[h0:h0 + hlen]
        self.counts["in_packets"] += 1
        self.counts["cc_payloads"] += 1
        if not good:
            self.counts["drop_bad_hash"] += 1
        elif self.table.channel(chan) is not None:  # digest() may have changed the table
            self.table.set_payload(chan, p[h0:h0 + hlen], int.from_bytes(p[off + 4:off + 8],
                                                                         "big"), p)
        return True

    def header(self, p: bytes, chan: bytes, off: int) -> bool:
        """A header PDU: with the buffered payload's hash, the header goes to the
        client EID's locator, preceded by the payload when that locator is not in
        servedRLOC yet (or, with ``extra``, after every ``extra`` headers)."""
        n = len(p)
        if n < off + 12 or p[off] != 0x12:
            return False
        hlen = p[off + 2]
        if _HASH_LEN.get(p[off + 1]) != hlen:
            return False
        afi = p[off + 10] << 8 | p[off + 11]
        elen = 4 if afi == 1 else 16 if afi == 2 else 0
        h0 = off + 12
        if not elen or h0 + hlen + elen != n:
            return False
        ch = self.table.channel(chan)
        if ch is None:
            return False  # an unknown channel: the Python core decides and counts
        buf_hash, _seq, packet, served = ch
        # Algorithm 1: an unknown hash is dropped (without the per-client check, only
        # a header of a channel that holds no payload yet)
        if not buf_hash or (self.check_hash and buf_hash != p[h0:h0 + hlen]):
            self.counts["in_packets"] += 1
            self.counts["drop_unknown_hash"] += 1
            return True
        row = self.route(p[h0 + hlen:])
        if row is None or served is None:
            return False
        rloc = row.rlocs[0]
        count = served.get(rloc)
        copy = None
        if count is None:
            if len(served) >= self.max_served:
                return False  # served_limit: the Python core drops and counts
            copy = "payload_copies"
        elif self.extra and count >= self.extra:
            copy = "extra_payload_copies"
        elif self.extra:
            served[rloc] = count + 1
        hdr, dest = self.header_for(row), (row.rloc_strs[0], self.port)
        if copy is not None:
            served[rloc] = 1
            self.out.append((hdr + packet, dest))
            self.counts[copy] += 1
        self.out.append((hdr + p, dest))
        row.hits += 1
        self.counts["header_copies"] += 1
        self.counts["in_packets"] += 1
        self.counts["mapcache_hits"] += 1
        return True

    def route(self, eid: bytes) -> _Row | None:
        """The live single-locator entry for ``eid``, or None: a miss, an expired,
        negative or multi-locator entry (the Python core's cases)."""
        t = self.table
        row = t.linear_match(eid) if self.linear else t.longest_match(eid)
        if row is None or not row.fast or row.expires <= self.now:
            return None
        return row

    def header_for(self, row: _Row) -> bytes:
        """The locator's own header (echo-nonce) over the entry's own (map-versioning)
        over the default."""
        hdr = row.header if row.header is not None else self.lisp_header
        if self.hdrs:
            hdr = self.hdrs.get(row.rlocs[0], hdr)
        return hdr


def py_cc_blast(sock, items: list, count: int, seconds: float) -> int:
    """Benchmark sender: send prebuilt ``(data, (host, port))`` items, cycling,
    until ``count`` went or ``seconds`` passed (checked after every batch of up
    to 1,024); returns how many went.  A full socket buffer is retried."""
    import time

    from deliverykit.fastpath import send_batch

    n_items = len(items)
    if not n_items or count <= 0:
        return 0
    sent = pos = 0
    t_end = time.monotonic() + seconds
    while sent < count:
        want = min(1024, n_items - pos, count - sent)
        try:
            rc = send_batch(sock, items[pos:pos + want])
        except (BlockingIOError, InterruptedError):
            rc = 0
        except OSError as exc:
            if exc.errno != 105:  # ENOBUFS
                raise
            rc = 0
        sent += rc
        pos = (pos + rc) % n_items
        if time.monotonic() >= t_end:
            break
    return sent


cc_itr_table = load("cc_itr_table", py_cc_itr_table)
cc_blast = load("cc_blast", py_cc_blast)


# ---------------------------------------------------------------- AF_PACKET RX ring

_TP_STATUS_USER = 1


def py_cc_ring_read(ring, frame_size: int, frame_nr: int, start: int, max_frames: int
                    ) -> tuple[list[bytes], int, int]:
    """Frames the kernel handed to user space in a TPACKET_V2 RX ring (packet(7)):
    from slot ``start``, every slot whose ``tp_status`` has TP_STATUS_USER is
    copied out (``tp_snaplen`` bytes at ``tp_mac``) and given back to the kernel
    (status 0), up to ``max_frames``.  A frame cut short (``tp_snaplen < tp_len``)
    is given back without being returned.  -> (frames, next slot, truncated)."""
    import struct

    if frame_size < 32 or frame_nr < 1 or not 0 <= start < frame_nr or max_frames < 0 \
            or frame_nr > sys.maxsize // frame_size:  # as the C overflow check
        raise ValueError("cc_ring_read: bad frame size, count or start")
    mv = memoryview(ring)
    if mv.readonly:
        raise BufferError("cc_ring_read: the ring must be writable")
    if len(mv) < frame_size * frame_nr:
        raise ValueError("cc_ring_read: ring smaller than frame_size * frame_nr")
    out: list[bytes] = []
    idx = start
    truncated = 0
    for _ in range(max_frames):
        o = idx * frame_size
        status, tp_len, snaplen, mac = struct.unpack_from("=IIIH", mv, o)
        if not status & _TP_STATUS_USER:
            break
        if mac + snaplen > frame_size or snaplen < tp_len:
            truncated += 1
        else:
            out.append(bytes(mv[o + mac:o + mac + snaplen]))
        struct.pack_into("=I", mv, o, 0)
        idx = (idx + 1) % frame_nr
    mv.release()
    return out, idx, truncated


cc_ring_read = load("cc_ring_read", py_cc_ring_read)
