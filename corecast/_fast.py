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
from typing import TYPE_CHECKING, Any

from deliverykit.fastpath import load

if TYPE_CHECKING:
    from corecast.core.maptrie import PrefixTrie

_HASH_LEN = {1: 20, 2: 32}
_CC_PORT = 54341
_CC_PORT_BYTES = _CC_PORT.to_bytes(2, "big")
_PROTO = 253


_RANGES: dict[tuple, tuple] = {}


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


def _int_ranges(ranges: tuple) -> tuple:
    """(length, mask, net) integers for a ranges tuple, memoised."""
    r = _RANGES.get(ranges)
    if r is None:
        r = tuple((len(n), int.from_bytes(m, "big"), int.from_bytes(n, "big")) for n, m in ranges)
        if len(_RANGES) < 64:
            _RANGES[ranges] = r
    return r


def py_cc_parse(pkt: bytes, ranges: tuple) -> tuple:
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


# ---------------------------------------------------------------- ITR batch

#: ``ctr`` slots of :func:`py_cc_itr_batch` (and the C version), by name
CTR_NAMES = ("in_packets", "plain_encap", "header_copies", "payload_copies",
             "extra_payload_copies", "drop_unknown_hash", "mapcache_hits", "l2_to_self", "l2_ip",
             "cc_payloads", "drop_bad_hash")


class Lookup(enum.Enum):
    """How the batch path finds a client EID's map-cache entry (paper section 6.2's
    explanation of its +52 %: a linear EID-to-RLOC search, where routers use tries)."""

    #: longest-prefix walk over the map-cache's binary trie (the default)
    TRIE = "trie"
    #: a scan over every prefix, longest first, stopping at the first that covers it
    LINEAR = "linear"


@dataclass(frozen=True, slots=True)
class LinearTable:
    """The map-cache's prefixes as flat arrays for :attr:`Lookup.LINEAR`, longest
    prefix first: ``packed4`` holds ``net + mask`` (8 bytes) per IPv4 prefix,
    ``packed6`` 32 bytes per IPv6 prefix; ``entries4/6[i]`` is prefix i's entry.
    Built from one trie version (:attr:`PrefixTrie.version`)."""

    packed4: bytes
    entries4: list[Any]
    packed6: bytes
    entries6: list[Any]

    @classmethod
    def of(cls, trie: PrefixTrie[Any]) -> LinearTable:
        rows: dict[int, list[tuple[int, bytes, Any]]] = {4: [], 16: []}
        for net, plen, value in trie.items():
            rows[len(net)].append((plen, net, value))
        packed: dict[int, bytes] = {}
        entries: dict[int, list[Any]] = {}
        for nb, rs in rows.items():
            rs.sort(key=lambda r: -r[0])  # stable: longest first, the trie's order after
            bits = nb * 8
            packed[nb] = b"".join(
                net + (((1 << plen) - 1) << (bits - plen) if plen else 0).to_bytes(nb, "big")
                for plen, net, _ in rs)
            entries[nb] = [v for _, _, v in rs]
        return cls(packed[4], entries[4], packed[16], entries[16])

    def ctx(self) -> tuple[bytes, list[Any], bytes, list[Any]]:
        return (self.packed4, self.entries4, self.packed6, self.entries6)


@dataclass(slots=True)
class ItrPath:
    """Everything the ITR's batch data path reads and writes: the one owner of this
    state (:class:`corecast.core.itr.Itr` reads and sets it through properties).
    :meth:`ctx` lays it out as ``cc_itr_batch`` (C and twin) takes it; nothing else
    knows the order."""

    #: reserved CoreCast ranges, ``(network, mask)`` byte pairs (at most MAX_RANGES)
    ranges: tuple[tuple[bytes, bytes], ...]
    #: the map-cache trie's IPv4 and IPv6 roots (``PrefixTrie.root``)
    root4: list[Any]
    root6: list[Any]
    #: channel EID -> its payloadBuffer entry (``ChannelBuffer``)
    buffers: dict[bytes, Any]
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
    digest: Callable[[int, Any], bytes]
    #: the map-cache trie (the linear table is rebuilt from it when its version moves)
    trie: PrefixTrie[Any] | None = None
    #: the EID-to-RLOC lookup (section 6 ablation)
    lookup: Lookup = Lookup.TRIE
    #: Algorithm 1's per-client hash check: each header's hash against the buffered
    #: payload's (False: the section 6 ablation; a header goes out with whatever
    #: payload the channel holds)
    check_hash: bool = True
    _linear: LinearTable | None = None
    _linear_version: int = -1

    def linear_table(self) -> LinearTable | None:
        """The linear lookup table for the trie's current version (None with TRIE)."""
        if self.lookup is not Lookup.LINEAR:
            return None
        if self.trie is None:
            raise ValueError("a linear lookup needs the map-cache trie")
        if self._linear is None or self._linear_version != self.trie.version:
            self._linear = LinearTable.of(self.trie)
            self._linear_version = self.trie.version
        return self._linear

    def ctx(self) -> tuple[Any, ...]:
        """The ``ctx`` argument of ``cc_itr_batch``."""
        lin = self.linear_table()
        return (self.ranges, self.root4, self.root6, self.buffers, self.lisp_header,
                self.data_port, self.extra_payload_every, self.max_served, self.own,
                self.headers_by_rloc, self.digest, None if lin is None else lin.ctx(),
                self.check_hash)


@dataclass(frozen=True, slots=True)
class BatchImpl:
    """Which implementation an ITR runs: the C functions or their twins, chosen once."""

    parse: Callable[[bytes, tuple[tuple[bytes, bytes], ...]], tuple[Any, ...]]
    batch: Callable[..., int]

    @classmethod
    def choose(cls, fast: bool | None) -> BatchImpl:
        """None: whatever deliverykit.fastpath picked; True: C (RuntimeError when it
        is not built); False: the pure twins."""
        if fast is None:
            return cls(cc_parse, cc_itr_batch)
        if not fast:
            return cls(py_cc_parse, py_cc_itr_batch)
        from deliverykit.fastpath import speedups

        if speedups is None or not hasattr(speedups, "cc_itr_batch"):
            raise RuntimeError("the C fast path is not built")
        return cls(speedups.cc_parse, speedups.cc_itr_batch)


def py_cc_itr_batch(frames: list, start: int, l2: int, ctx: tuple, now: float, out: list,
                    ctr: list) -> int:
    """The ITR data path for a batch (paper section 3.4 Algorithm 1, header step;
    plain LISP encapsulation, RFC 9300 section 5).

    ``frames``: inner IP packets (``l2 == 0``) or Ethernet frames from AF_PACKET
    (``l2 == 14``; non-IP frames skipped, frames to ``own`` addresses or multicast
    counted in ``l2_to_self`` and skipped), each bytes or a ``(bytes, addr)`` pair.
    ``ctx = (ranges, root4, root6, buffers, lisp_header, data_port, extra_every,
    max_served, own, headers_by_rloc, digest[, linear, check_hash])``: the reserved
    ranges as for cc_parse, the
    map-cache trie roots, ``{channel EID: ChannelBuffer}``, the default LISP
    header, the port, Algorithm 1's options, the ITR's own addresses and per-RLOC
    LISP headers that replace the default (echo-nonce, RFC 9300 10.1); optionally
    ``linear`` (:meth:`LinearTable.ctx`: look EIDs up by a linear scan instead of the
    trie; None: the trie) and ``check_hash`` (False: headers skip Algorithm 1's
    hash comparison; a channel with no payload yet still drops them).  A
    map-cache entry's own ``lisp_header`` (map-versioning, RFC 9302), when it
    is bytes, replaces the default for its EIDs; a per-RLOC header wins over it.

    Handles, in order from ``start``: payload PDUs of a known channel (hash checked
    with ``digest(hash_id, payload)``; a match overwrites the channel's
    ``ChannelBuffer`` with a fresh servedRLOC, a mismatch is a counted drop),
    plain packets and CoreCast header PDUs whose
    EID hits a live single-locator map-cache entry (appending ``(lisp_header +
    packet, (rloc, port))`` to ``out``, with the channel's payload first when the
    RLOC is not yet in ``servedRLOC``), and header PDUs with an unknown hash
    (dropped, counted).  Returns the index of the first packet it leaves to the
    Python core (the first payload of a new channel, misses,
    expired/negative/multi-locator entries, unknown channels, a full servedRLOC,
    malformed packets), or ``len(frames)``.
    ``ctr`` (11 ints, :data:`CTR_NAMES`) is incremented.
    """
    if len(ctr) != len(CTR_NAMES):  # the checks in the C function's order
        raise ValueError("cc_itr_batch: ctr must be a list of 11 ints")
    if l2 not in (0, 14):
        raise ValueError("cc_itr_batch: l2 must be 0 or 14")
    if len(ctx[0]) > MAX_RANGES:
        raise ValueError("cc_itr_batch: at most 16 reserved ranges")
    loop = _BatchLoop(ctx, now, out)
    frames = frames[:]  # our own references, as the C function (digest may change the list)
    i = max(start, 0)
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


class _BatchLoop:
    """One call of :func:`py_cc_itr_batch`: the path's state (``ctx``, as
    :meth:`ItrPath.ctx` lays it out), the output list and the counts by name.
    Every ``forward`` step returns False where the C function stops (the packet
    is left to the Python core, untouched and uncounted)."""

    def __init__(self, ctx: tuple, now: float, out: list) -> None:
        (self.ranges, self.root4, self.root6, self.buffers, self.lisp_header, self.port,
         self.extra, self.max_served, self.own, self.hdrs, self.digest) = ctx[:11]
        self.linear = _linear_ints(ctx[11]) if len(ctx) > 11 and ctx[11] is not None else None
        self.check_hash = bool(ctx[12]) if len(ctx) > 12 else True
        self.int_ranges = _int_ranges(self.ranges)
        self.now = now
        self.out = out
        self.counts = dict.fromkeys(CTR_NAMES, 0)
        #: the locator of the last route (the servedRLOC key)
        self.rloc = b""
        # nothing in one call replaces a map-cache entry or changes the reserved ranges:
        # the last destination's class and the last entry's route are remembered
        self._last_dst = b""
        self._last_reserved = False
        self._last_entry: object = None
        self._last_route: tuple[bytes, tuple[str, int]] | None = None

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
        route = self.route(dst)
        if route is None:
            return False
        hdr, dest = route
        self.out.append((hdr + p, dest))
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
        buf = self.buffers.get(chan)
        if buf is None:
            return False  # a new channel: the Python core applies its bounds
        self.counts["in_packets"] += 1
        self.counts["cc_payloads"] += 1
        if self.digest(hid, p[h0 + hlen:]) != p[h0:h0 + hlen]:
            self.counts["drop_bad_hash"] += 1
            return True
        buf.hash = p[h0:h0 + hlen]
        buf.seq = int.from_bytes(p[off + 4:off + 8], "big")
        buf.packet = p
        buf.served = {}
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
        buf = self.buffers.get(chan)
        if buf is None or type(buf.hash) is not bytes:
            return False
        # Algorithm 1: an unknown hash is dropped (without the per-client check, only
        # a header of a channel that holds no payload yet)
        if not buf.hash or (self.check_hash and buf.hash != p[h0:h0 + hlen]):
            self.counts["in_packets"] += 1
            self.counts["drop_unknown_hash"] += 1
            return True
        route = self.route(p[h0 + hlen:])
        if route is None:
            return False
        served = buf.served
        if type(served) is not dict:
            return False
        hdr, dest = route
        rloc = self.rloc
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
        if copy is not None:
            served[rloc] = 1
            self.out.append((hdr + buf.packet, dest))
            self.counts[copy] += 1
        self.out.append((hdr + p, dest))
        self.counts["header_copies"] += 1
        self.counts["in_packets"] += 1
        self.counts["mapcache_hits"] += 1
        return True

    def route(self, eid: bytes) -> tuple[bytes, tuple[str, int]] | None:
        """(LISP header, (locator, port)) of a live single-locator map-cache entry for
        ``eid`` (its locator left in ``self.rloc``), or None: a miss, an expired,
        negative or multi-locator entry (the Python core's cases).  The header: the
        locator's own (echo-nonce) over the entry's own (map-versioning) over the
        default."""
        nb = len(eid)
        if self.linear is not None:
            entry = _scan(self.linear[nb], int.from_bytes(eid, "big"))
        else:
            root = self.root4 if nb == 4 else self.root6
            memo = root[4] if len(root) > 4 else {}
            entry = memo.get(eid, _MISS)
            if entry is _MISS:
                entry = _walk(root, int.from_bytes(eid, "big"), nb)
        if entry is self._last_entry and entry is not None:
            return self._last_route
        if entry is None or entry.expires <= self.now or len(entry.rlocs) != 1:
            return None
        self.rloc = entry.rlocs[0]
        hdr = entry.lisp_header if type(entry.lisp_header) is bytes else self.lisp_header
        if self.hdrs:
            hdr = self.hdrs.get(self.rloc, hdr)
        self._last_entry, self._last_route = entry, (hdr, (entry.rloc_strs[0], self.port))
        return self._last_route


_MISS = object()
_MEMO_MAX = 1 << 16


def _walk(root: list, key: int, nbytes: int):
    """Longest-prefix walk returning only the value (None on a miss).

    A trie root made by :class:`corecast.core.maptrie.PrefixTrie` has a memo
    dict in slot 4 (cleared on every insert/remove): a hit costs one dict lookup
    instead of up to 32/128 Python steps."""
    memo = root[4] if len(root) > 4 else None
    node = root
    best = node[2] if node[3] else None
    shift = nbytes * 8 - 1
    while shift >= 0:
        node = node[(key >> shift) & 1]
        if node is None:
            break
        if node[3]:
            best = node[2]
        shift -= 1
    if memo is not None:
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[key.to_bytes(nbytes, "big")] = best
    return best


_LINEAR: dict[bytes, tuple[tuple[int, int, Any], ...]] = {}


def _linear_ints(lin: tuple[bytes, list[Any], bytes, list[Any]]
                 ) -> dict[int, tuple[tuple[int, int, Any], ...]]:
    """``{4: ((net, mask, entry), ...), 16: ...}`` from :meth:`LinearTable.ctx`, longest
    prefix first (the integer rows memoised per packed table)."""
    out = {}
    for nb, packed, entries in ((4, lin[0], lin[1]), (16, lin[2], lin[3])):
        if len(packed) != 2 * nb * len(entries):
            raise ValueError("cc_itr_batch: linear table and entries disagree")
        rows = _LINEAR.get(packed)
        if rows is None or len(rows) != len(entries):
            rows = tuple((int.from_bytes(packed[k:k + nb], "big"),
                          int.from_bytes(packed[k + nb:k + 2 * nb], "big"), None)
                         for k in range(0, len(packed), 2 * nb))
            if len(_LINEAR) >= 8:
                _LINEAR.clear()
            _LINEAR[packed] = rows
        out[nb] = tuple((net, mask, e) for (net, mask, _), e in zip(rows, entries))
    return out


def _scan(rows: tuple[tuple[int, int, Any], ...], key: int) -> Any:
    """The linear EID-to-RLOC search: the first (longest) prefix covering ``key``."""
    for net, mask, entry in rows:
        if key & mask == net:
            return entry
    return None


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


cc_itr_batch = load("cc_itr_batch", py_cc_itr_batch)
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
