"""Bin numbers (RFC 7574 section 4.2): one integer per aligned binary interval.

Bin ``b`` lies at layer ``l`` = number of trailing 1 bits; it covers the
chunks ``[o * 2**l, (o + 1) * 2**l)`` with ``o = b >> (l + 1)``.  Leaves
(single chunks) are the even numbers ``2 * i``.
"""

from __future__ import annotations

NONE32 = 0xFFFFFFFF
NONE64 = 0xFFFFFFFFFFFFFFFF
ALL32 = 0x7FFFFFFF
ALL64 = 0x7FFFFFFFFFFFFFFF


def layer(b: int) -> int:
    """Height of bin ``b`` (0 for a single chunk)."""
    return ((b + 1) & ~b).bit_length() - 1


def make(lay: int, offset: int) -> int:
    """Bin number of the ``offset``-th interval of width ``2**lay``."""
    return (offset << (lay + 1)) | ((1 << lay) - 1)


def chunk(i: int) -> int:
    """Bin of chunk ``i``."""
    return i << 1


def base_range(b: int) -> tuple[int, int]:
    """Chunks ``[first, end)`` covered by ``b``."""
    lay = layer(b)
    first = (b >> (lay + 1)) << lay
    return first, first + (1 << lay)


def first_chunk(b: int) -> int:
    """First chunk of ``b``."""
    lay = layer(b)
    return (b >> (lay + 1)) << lay


def width(b: int) -> int:
    """Number of chunks covered by ``b``."""
    return 1 << layer(b)


def parent(b: int) -> int:
    """The bin one layer up that contains ``b``."""
    lay = layer(b)
    return (b & ~(1 << (lay + 1))) | (1 << lay)


def sibling(b: int) -> int:
    """The other child of ``parent(b)``."""
    return b ^ (1 << (layer(b) + 1))


def is_left(b: int) -> bool:
    """True when ``b`` is the left child of its parent."""
    return not (b >> (layer(b) + 1)) & 1


def children(b: int) -> tuple[int, int]:
    """Left and right child of a bin above layer 0."""
    lay = layer(b)
    if lay == 0:
        raise ValueError("a leaf bin has no children")
    half = 1 << (lay - 1)
    return b - half, b + half


def contains(a: int, b: int) -> bool:
    """True when bin ``a`` covers every chunk of bin ``b``."""
    af, ae = base_range(a)
    bf, be = base_range(b)
    return af <= bf and be <= ae


def from_range(first: int, last: int) -> list[int]:
    """Minimal list of bins covering chunks ``first..last`` (inclusive)."""
    out = []
    end = last + 1
    while first < end:
        lay = (first & -first).bit_length() - 1 if first else 63
        while (1 << lay) > end - first:
            lay -= 1
        out.append(make(lay, first >> lay))
        first += 1 << lay
    return out


def covering(n: int) -> int:
    """The smallest bin that covers chunks ``0..n-1`` (the tree root, n >= 1)."""
    lay = max(0, (n - 1).bit_length())
    return make(lay, 0)


def peaks(n: int) -> list[int]:
    """Peak bins of an ``n``-chunk content (RFC 7574 section 5.6.1), left to right."""
    out = []
    first = 0
    for lay in range(n.bit_length() - 1, -1, -1):
        if n & (1 << lay):
            out.append(make(lay, first >> lay))
            first += 1 << lay
    return out
