"""Seeder memory (issue 15 item 2, issue 17): the Merkle tree of a file is
built in its flat hash buffer, with no Python object per chunk or node, so
the peak while hashing stays near the tree's own size."""

from __future__ import annotations

import hashlib
import io
import os
import tracemalloc

from hypothesis import given, settings, strategies as st

from swift.core import bins as B
from swift.core.merkle import MerkleTree
from swift.wire.constants import HashFunc


def _reference(leaves: list[bytes], hs: int) -> dict[int, bytes]:
    """Every node of the tree (5.1): pad to a power of two with the zero
    hash; a node over only padding is the zero hash itself."""
    zero = bytes(hs)
    width = 1
    while width < len(leaves):
        width *= 2
    level = leaves + [zero] * (width - len(leaves))
    out = {2 * i: d for i, d in enumerate(level)}
    lay = 0
    while len(level) > 1:
        lay += 1
        level = [zero if a == zero and b == zero else hashlib.sha1(a + b).digest()
                 for a, b in zip(level[::2], level[1::2])]
        out.update({B.make(lay, i): d for i, d in enumerate(level)})
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70), st.integers(1, 64))
def test_tree_matches_the_reference(n: int, tail: int) -> None:
    data = os.urandom((n - 1) * 64 + tail)
    t = MerkleTree.from_file(io.BytesIO(data), HashFunc.SHA1, 64)
    leaves = [hashlib.sha1(data[i:i + 64]).digest() for i in range(0, len(data), 64)]
    ref = _reference(leaves, 20)
    assert t.root_hash == ref[B.covering(n)]
    assert t.n_chunks == n and t.size == len(data)
    for b, d in ref.items():
        lo = B.base_range(b)[0]
        if lo < n:  # nodes over content: known and equal (the rest is padding)
            assert bytes(t._hashes[b * 20:(b + 1) * 20]) == d, b
    assert t.uncles(n - 1) is not None  # the tree answers as before
    chunks = [data[i:i + 64] for i in range(0, len(data), 64)]
    assert MerkleTree.build(chunks, HashFunc.SHA1, 64).root_hash == t.root_hash


def test_hashing_a_file_peaks_near_the_tree_size() -> None:
    n = 1 << 14  # 16 Ki chunks: the tree has exactly 2n nodes
    data = io.BytesIO(os.urandom(n * 16))
    tracemalloc.start()
    try:
        t = MerkleTree.from_file(data, HashFunc.SHA256, 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    footprint = len(t._hashes) + len(t._known)
    # the tree plus the leaf digests (n * 32 bytes) and small change; an
    # object per chunk and per node took more than three times the tree
    assert peak < 1.8 * footprint, (peak, footprint)
