"""Binmap: a binary tree of bitmap cells (Grishchenko & Pouwelse, "Binmaps").

Report section 2: a binmap is a binary tree of 32-bit cells, each made of two
16-bit halves.  A half of a cell at layer L is either a *leaf* bitmap whose
every bit stands for an aligned ``2**L``-chunk range, or a pointer to a child
cell at layer L-1.  Data is always aggregated to the highest layer possible:
when a child cell's two halves are bitmaps whose bits pair up (bits 2i and
2i+1 equal), the child is folded back into its parent's half.  A uniform
range is therefore one bit at a high layer, and a patchy one degrades to
plain bitmaps with at most 2x overhead (report section 3).

Cells live in flat Python lists (the report's "vector of integers"); freed
cells are recycled.  Positions beyond the root's span read as empty, and
setting one grows the tree upward (up to ``MAX_CHUNKS`` = 2**62 chunks).
Public operations take chunk ranges ``[lo, hi)`` or bin numbers (RFC 7574
section 4.2).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

from swift._fast import binmap_find, binmap_set1
from swift.core import bins as B

_FULL = 0xFFFF

# 8 bits -> 16 bits (each bit doubled) and 16 bits -> 8 bits (even bits)
_EXPAND = [0] * 256
for _v in range(256):
    _x = 0
    for _i in range(8):
        if _v >> _i & 1:
            _x |= 3 << (2 * _i)
    _EXPAND[_v] = _x
_SQUEEZE = {}
for _v in range(256):
    _SQUEEZE[_EXPAND[_v]] = _v


def _squeeze32(x: int) -> int | None:
    """32 bits at layer L-1 -> 16 bits at layer L, or None if bits don't pair."""
    if (x ^ (x >> 1)) & 0x55555555:
        return None
    return (_SQUEEZE[x & 0xFFFF] | (_SQUEEZE[(x >> 16) & 0xFFFF] << 8))


def _mask(i: int, j: int) -> int:
    """Bits i..j inclusive."""
    return ((1 << (j + 1)) - 1) ^ ((1 << i) - 1)


class Binmap:
    """Set of chunks stored as a binmap; see the module docstring."""

    __slots__ = ("_h", "_deep", "_free", "_st", "root", "root_layer", "version")

    #: highest root layer: chunks below ``MAX_CHUNKS`` = 2**62, so that every
    #: position and span fits the C fast paths' int64 (swift.c)
    MAX_LAYER = 57
    MAX_CHUNKS = 32 << MAX_LAYER

    def __init__(self) -> None:
        # cell c has halves _h[2c], _h[2c+1]; _deep[k] says half k points to a cell
        self._h = array("I", (0, 0))
        self._deep = bytearray(2)
        # free cells: a stack in ``_free`` (capacity = cells) whose depth is
        # ``_st[0]``, so the C fast path can allocate and free in place
        self._free = array("I", (0,))
        self._st = array("q", (0,))
        self.root = 0
        self.root_layer = 0
        #: bumped by every call that may change the set (never reset, not even
        #: by :meth:`clear`): equal versions mean the same contents, so a
        #: caller may memoise a result computed from this binmap
        #: (requests.py: "nothing to pick" per channel)
        self.version = 0

    # -- storage ------------------------------------------------------------

    def _alloc(self, left: int, right: int) -> int:
        st = self._st
        if st[0]:
            st[0] -= 1
            c = self._free[st[0]]
            self._h[2 * c] = left
            self._h[2 * c + 1] = right
            self._deep[2 * c] = self._deep[2 * c + 1] = 0
            return c
        self._h.extend((left, right))
        self._deep.extend(b"\0\0")
        self._free.append(0)  # keep stack capacity = number of cells
        return len(self._h) // 2 - 1

    def _push_free(self, c: int) -> None:
        self._free[self._st[0]] = c
        self._st[0] += 1

    def _reserve(self, n: int) -> None:
        """Make sure ``n`` free cells exist (the C path allocates from them)."""
        while self._st[0] < n:
            c = len(self._h) // 2
            self._h.extend((0, 0))
            self._deep.extend(b"\0\0")
            self._free.append(0)
            self._push_free(c)

    def _release(self, c: int) -> None:
        for k in (2 * c, 2 * c + 1):
            if self._deep[k]:
                self._release(self._h[k])
                self._deep[k] = 0
        self._push_free(c)

    @property
    def cells(self) -> int:
        """Cells in use (footprint, report section 3)."""
        return len(self._h) // 2 - self._st[0]

    @property
    def span(self) -> int:
        """Chunks addressable without growing."""
        return 32 << self.root_layer

    def _grow(self, hi: int) -> None:
        if hi > self.MAX_CHUNKS:
            raise ValueError(f"chunk {hi - 1} beyond the binmap's range (below 2**62)")
        while hi > self.span:
            old = self.root
            new = self._alloc(0, 0)
            self._h[2 * new] = old
            self._deep[2 * new] = 1
            self.root = new
            self.root_layer += 1
            self._pack(new, 0)

    def _pack(self, c: int, side: int) -> None:
        """Fold the child of half (c, side) into it when possible."""
        k = 2 * c + side
        if not self._deep[k]:
            return
        ch = self._h[k]
        if self._deep[2 * ch] or self._deep[2 * ch + 1]:
            return
        v = _squeeze32(self._h[2 * ch] | (self._h[2 * ch + 1] << 16))
        if v is None:
            return
        self._push_free(ch)
        self._deep[k] = 0
        self._h[k] = v

    # -- update -----------------------------------------------------------------

    def _set(self, c: int, lay: int, start: int, lo: int, hi: int, val: bool) -> None:
        hw = 16 << lay
        h = self._h
        deep = self._deep
        for side in (0, 1):
            hs = start + side * hw
            he = hs + hw
            a = lo if lo > hs else hs
            b = hi if hi < he else he
            if a >= b:
                continue
            k = 2 * c + side
            if a == hs and b == he:
                if deep[k]:
                    self._release(h[k])
                    deep[k] = 0
                h[k] = _FULL if val else 0
                continue
            if not deep[k]:
                unit = 1 << lay
                if not ((a - hs) & (unit - 1)) and not ((b - hs) & (unit - 1)):
                    m = _mask((a - hs) >> lay, ((b - hs) >> lay) - 1)
                    h[k] = (h[k] | m) if val else (h[k] & ~m)
                    continue
                bm = h[k]
                if val and (bm | _mask((a - hs) >> lay, (b - 1 - hs) >> lay)) == bm:
                    continue  # already all set
                if not val and not (bm & _mask((a - hs) >> lay, (b - 1 - hs) >> lay)):
                    continue
                ch = self._alloc(_EXPAND[bm & 0xFF], _EXPAND[bm >> 8])
                h = self._h
                h[k] = ch
                deep[k] = 1
            self._set(h[k], lay - 1, hs, a, b, val)
            self._pack(c, side)

    def set_range(self, lo: int, hi: int) -> None:
        """Mark chunks ``[lo, hi)`` filled."""
        if lo >= hi:
            return
        if lo < 0:
            raise ValueError("negative chunk index")
        self.version += 1
        if hi - lo == 1:  # one chunk (an ACK, most HAVEs): the C descent
            self._one(lo, True)
            return
        if hi <= 32 << self.root_layer:
            # the empty runs one by one (C searches), the usual case being one
            # short run: libswift's HAVE of the bin its newest chunk completed,
            # whose other chunks were announced before
            for _ in range(8):
                a = binmap_find(self._h, self._deep, self.root, self.root_layer, lo, hi, False)
                if a < 0:
                    return  # (already filled: a HAVE after the ACK for the same chunks)
                b = binmap_find(self._h, self._deep, self.root, self.root_layer, a, hi, True)
                b = hi if b < 0 else b
                if b - a > 8:  # a long run: the recursion
                    self._set(self.root, self.root_layer, 0, a, b, True)
                else:  # a few chunks: C descents beat the Python recursion
                    for i in range(a, b):
                        self._one(i, True)
                if b >= hi:
                    return
                lo = b
        self._grow(hi)
        self._set(self.root, self.root_layer, 0, lo, hi, True)

    def reset_range(self, lo: int, hi: int) -> None:
        """Mark chunks ``[lo, hi)`` empty."""
        hi = min(hi, self.span)
        if lo >= hi:
            return
        self.version += 1
        if hi - lo == 1 and lo >= 0:
            self._one(lo, False)
            return
        self._set(self.root, self.root_layer, 0, lo, hi, False)

    def _one(self, i: int, val: bool) -> None:
        """Set (:meth:`add`) or clear (:meth:`discard`) one chunk."""
        if val:
            self.add(i)
        else:
            self.discard(i)

    def add(self, i: int) -> None:
        """Mark chunk ``i`` filled: descend (splitting leaves), flip, fold back up.

        ``binmap_set1`` (C, or its twin in swift/_fast.py) does the work in the
        buffers; it allocates from the free stack, so enough cells are
        reserved first (at most one split per layer).  Called per ACK, HAVE,
        DATA sent and single-chunk REQUEST, so the checks are inline."""
        self.version += 1
        if i >= 32 << self.root_layer:
            self._grow(i + 1)
        if self._st[0] <= self.root_layer:
            self._reserve(self.root_layer + 1)
        binmap_set1(self._h, self._deep, self._free, self._st, self.root, self.root_layer, i, True)

    def add_new(self, i: int) -> bool:
        """Mark chunk ``i`` filled; True when it was empty.  One C descent
        that tests and sets, for the per-chunk HAVE/ACK of a libswift
        leecher, instead of a search for an empty chunk and then a set."""
        if i < 0:
            raise ValueError("negative chunk index")
        self.version += 1
        if i >= 32 << self.root_layer:
            self._grow(i + 1)
        if self._st[0] <= self.root_layer:
            self._reserve(self.root_layer + 1)
        return bool(binmap_set1(self._h, self._deep, self._free, self._st, self.root,
                                self.root_layer, i, True))

    def discard(self, i: int) -> None:
        """Mark chunk ``i`` empty (as :meth:`add`; nothing past the span)."""
        self.version += 1
        if i >= 32 << self.root_layer:
            return
        if self._st[0] <= self.root_layer:
            self._reserve(self.root_layer + 1)
        binmap_set1(self._h, self._deep, self._free, self._st, self.root, self.root_layer, i,
                    False)

    def set(self, b: int) -> None:
        """Mark every chunk of bin ``b`` filled."""
        if not b & 1:
            self._one(b >> 1, True)
        else:
            self.set_range(*B.base_range(b))

    def reset(self, b: int) -> None:
        """Mark every chunk of bin ``b`` empty."""
        if not b & 1:
            self._one(b >> 1, False)
        else:
            self.reset_range(*B.base_range(b))

    def has(self, i: int) -> bool:
        """True when chunk ``i`` is filled (one C descent, ``binmap_find``)."""
        if i >= (32 << self.root_layer) or i < 0:
            return False
        return binmap_find(self._h, self._deep, self.root, self.root_layer, i, i + 1, True) >= 0

    def lacking(self, chunks: Iterable[int]) -> list[int]:
        """The chunks of ``chunks`` not filled, in their order: ``[c for c in
        chunks if not self.has(c)]`` without a :meth:`has` frame per chunk
        (the announcer's filter of the chunks verified since its last HAVEs,
        one per chunk a leecher stores)."""
        h, d, r, lay = self._h, self._deep, self.root, self.root_layer
        span = 32 << lay
        return [c for c in chunks
                if c >= span or c < 0 or binmap_find(h, d, r, lay, c, c + 1, True) < 0]

    def clear(self) -> None:
        """Empty the binmap."""
        v = self.version
        self.__init__()  # type: ignore[misc]  # reset in place
        self.version = v + 1

    # -- queries ----------------------------------------------------------------

    def _find(self, c: int, lay: int, start: int, lo: int, hi: int, val: bool) -> int | None:
        hw = 16 << lay
        h = self._h
        for side in (0, 1):
            hs = start + side * hw
            he = hs + hw
            a = lo if lo > hs else hs
            b = hi if hi < he else he
            if a >= b:
                continue
            k = 2 * c + side
            if self._deep[k]:
                r = self._find(h[k], lay - 1, hs, a, b, val)
                if r is not None:
                    return r
                continue
            x = h[k] if val else (~h[k] & _FULL)
            x &= _mask((a - hs) >> lay, (b - 1 - hs) >> lay)
            if x:
                pos = hs + (((x & -x).bit_length() - 1) << lay)
                return pos if pos > a else a
        return None

    def find_filled(self, lo: int = 0, hi: int | None = None) -> int | None:
        """First filled chunk in ``[lo, hi)``, or None."""
        span = 32 << self.root_layer  # self.span, inline: called per HAVE/ACK
        if hi is None or hi > span:
            hi = span
        if lo >= hi:
            return None
        r = binmap_find(self._h, self._deep, self.root, self.root_layer, lo, hi, True)
        return None if r < 0 else r

    def any_in(self, lo: int, hi: int) -> bool:
        """True when some chunk of ``[lo, hi)`` is filled (one C call)."""
        span = 32 << self.root_layer
        if hi > span:
            hi = span
        return lo < hi and binmap_find(
            self._h, self._deep, self.root, self.root_layer, lo, hi, True) >= 0

    def find_empty(self, lo: int = 0, hi: int | None = None) -> int | None:
        """First empty chunk in ``[lo, hi)`` (hi defaults to the span), or None."""
        span = 32 << self.root_layer  # self.span, inline: called per HAVE/ACK
        unbounded = hi is None
        if hi is None:
            hi = span if span > lo else lo + 1
        if lo >= hi:
            return None
        if lo >= span:
            return lo
        r = binmap_find(self._h, self._deep, self.root, self.root_layer, lo,
                        hi if hi < span else span, False)
        if r >= 0:
            return r
        if unbounded or hi > span:
            return span  # everything past the span is empty
        return None

    def is_filled_range(self, lo: int, hi: int) -> bool:
        """True when every chunk of ``[lo, hi)`` is filled."""
        if lo >= hi:
            return True
        if hi > (32 << self.root_layer):
            return False
        return binmap_find(self._h, self._deep, self.root, self.root_layer, lo, hi, False) < 0

    def is_empty_range(self, lo: int, hi: int) -> bool:
        """True when no chunk of ``[lo, hi)`` is filled."""
        return self.find_filled(lo, hi) is None

    def is_filled(self, b: int) -> bool:
        """True when every chunk of bin ``b`` is filled."""
        return self.is_filled_range(*B.base_range(b))

    def is_empty(self, b: int) -> bool:
        """True when no chunk of bin ``b`` is filled."""
        return self.is_empty_range(*B.base_range(b))

    def __contains__(self, i: int) -> bool:
        return self.has(i)

    def _runs(self, c: int, lay: int, start: int) -> Iterator[tuple[int, int]]:
        hw = 16 << lay
        for side in (0, 1):
            hs = start + side * hw
            k = 2 * c + side
            if self._deep[k]:
                yield from self._runs(self._h[k], lay - 1, hs)
                continue
            x = self._h[k]
            while x:
                i = (x & -x).bit_length() - 1
                y = (x >> i) + 1  # run of ones starting at i
                n = (y & -y).bit_length() - 1
                yield hs + (i << lay), hs + ((i + n) << lay)
                x &= ~_mask(i, i + n - 1)

    def ranges(self) -> Iterator[tuple[int, int]]:
        """Maximal filled runs ``[lo, hi)`` in order."""
        cur = None
        for a, b in self._runs(self.root, self.root_layer, 0):
            if cur is not None and cur[1] == a:
                cur = (cur[0], b)
                continue
            if cur is not None:
                yield cur
            cur = (a, b)
        if cur is not None:
            yield cur

    def filled_bins(self) -> Iterator[int]:
        """The filled set as the fewest aligned bins, in order (for HAVE)."""
        for a, b in self.ranges():
            yield from B.from_range(a, b - 1)

    def count(self) -> int:
        """Number of filled chunks."""
        return sum(b - a for a, b in self.ranges())

    def cover(self, b: int) -> int:
        """Largest filled bin that contains bin ``b`` (``b`` must be filled)."""
        while True:
            p = B.parent(b)
            if not self.is_filled(p):
                return b
            b = p
