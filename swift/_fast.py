"""Pure-Python twins of the swift C fast paths (deliverykit/_speedups/swift.c).

``deliverykit.fastpath.load`` picks the C version unless DELIVERYKIT_PURE=1;
tests/swift/test_swift_fast.py proves both agree.
"""

from __future__ import annotations

from deliverykit.fastpath import load


def py_binmap_find(halves, deep, root: int, root_layer: int, lo: int, hi: int, val: bool) -> int:
    """First chunk in ``[lo, hi)`` whose bit equals ``val``, or -1 (see binmap.py)."""
    raw = memoryview(halves).cast("B")
    if len(raw) % 4:
        raise ValueError("binmap_find: bad binmap buffers")
    h = raw.cast("I")
    nh = len(h)
    if root_layer < 0 or root_layer > 58 or root < 0 or 2 * root + 1 >= nh or len(deep) < nh:
        raise ValueError("binmap_find: bad binmap buffers")
    # iterative DFS in order (left half before right half)
    work = [(root, root_layer, 0, 0)]
    while work:
        c, lay, start, side = work.pop()
        if side > 1:
            continue
        work.append((c, lay, start, side + 1))
        hw = 16 << lay
        hs = start + side * hw
        he = hs + hw
        a = lo if lo > hs else hs
        b = hi if hi < he else he
        if a >= b:
            continue
        k = 2 * c + side
        if deep[k]:
            if lay == 0 or 2 * h[k] + 1 >= nh or len(work) >= 128:
                raise ValueError("binmap_find: corrupt tree")
            work.append((h[k], lay - 1, hs, 0))
            continue
        x = h[k] if val else (~h[k] & 0xFFFF)
        i = (a - hs) >> lay
        j = (b - 1 - hs) >> lay
        x &= ((1 << (j + 1)) - 1) ^ ((1 << i) - 1)
        if x:
            pos = hs + (((x & -x).bit_length() - 1) << lay)
            return pos if pos > a else a
    return -1


binmap_find = load("binmap_find", py_binmap_find)
