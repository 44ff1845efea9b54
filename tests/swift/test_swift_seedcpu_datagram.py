"""``seed_datagram``: ``MerkleTree.data_datagram`` over the upload path's two
binmaps in one call (deliverykit/csrc/swift.c, twin
swift._fast.py_seed_datagram; the seeder's DATA toward a libswift leecher,
docs/swift-perf.md "Session 12").

The twin is checked against the tree's own method with the two binmaps as
one view (what the upload path called before), for every chunk of seeded
trees with the short last chunk; the C function against the twin on seeded
and part-verified trees (an uncle not known: KeyError), from a buffer and a
file, and past the end of the content (IndexError)."""

from __future__ import annotations

import random
import struct
import tempfile

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit import fastpath
from swift._fast import py_seed_datagram
from swift.core.binmap import Binmap
from swift.core.content import _Either
from swift.core.merkle import MerkleTree
from swift.wire.constants import HashFunc

c_seed = getattr(fastpath.speedups, "seed_datagram", None)
needs_c = pytest.mark.skipif(c_seed is None, reason="C speedups not built")

CS = 16


def _binmap(rng: random.Random, n: int) -> Binmap:
    m = Binmap()
    for _ in range(rng.randrange(0, 4)):
        lo = rng.randrange(0, n)
        m.set_range(lo, min(n, lo + rng.randrange(1, 9)))
    if rng.random() < 0.3:  # grown past a first root (a binmap's root layer changes)
        m.add(rng.randrange(n, 4 * n + 64))
    return m


def _outcome(f, *args):
    try:
        return f(*args)
    except (ValueError, KeyError, IndexError, OverflowError, TypeError, OSError,
            AttributeError) as e:
        return type(e).__name__


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 300), st.integers(1, CS), st.integers(0, 2**32 - 1))
def test_twin_is_the_trees_data_datagram(seed, n, last, channel) -> None:
    """The twin gives ``tree.data_datagram(channel, i, _Either(a, b), ...)``'s
    bytes for every chunk (the last, short one through a short length), with
    two binmaps and with one binmap passed twice (a chunk sent before)."""
    rng = random.Random(seed)
    data = rng.randbytes((n - 1) * CS + last)
    t = MerkleTree.build([data[k:k + CS] for k in range(0, len(data), CS)], HashFunc.SHA1, CS)
    tsb = struct.pack(">Q", rng.getrandbits(64))
    a, b = _binmap(rng, n), _binmap(rng, n)
    for i in range(n):
        for x, y in ((a, b), (a, a), (b, b)):
            want = t.data_datagram(channel, i, _Either(x, y), tsb, data, i * CS, CS)
            assert py_seed_datagram(channel, t, i, x, y, tsb, data, i * CS, CS) == want
            if c_seed is not None:
                assert c_seed(channel, t, i, x, y, tsb, data, i * CS, CS) == want
    for i in (-1, n, n + 7):  # past the end: IndexError, as MerkleTree._peak_top
        assert _outcome(py_seed_datagram, channel, t, i, a, b, tsb, data, 0, CS) == "IndexError"


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 200), st.integers(0, 2**32 - 1),
       st.integers(-2, 210), st.integers(0, 40), st.booleans())
def test_c_equals_python(seed, n, channel, chunk, length, from_file) -> None:
    """Same bytes, or the same error, on a part-verified leecher's tree (an
    uncle not known: KeyError), a seeded one, chunks past the end, payloads
    from a buffer or a file whose end may cut them short."""
    rng = random.Random(seed)
    data = rng.randbytes(8 * n)
    t = MerkleTree.build([data[k:k + 8] for k in range(0, len(data), 8)], HashFunc.SHA1, 8)
    lt = MerkleTree.for_root(t.root_hash, HashFunc.SHA1, 8)
    assert lt.offer_peaks(t.peaks())
    for i in rng.sample(range(n), rng.randrange(0, n)):
        lt.verify(i, data[i * 8:(i + 1) * 8], dict(t.uncles(i)))
    ts = rng.randbytes(8)
    a, b = _binmap(rng, n), _binmap(rng, n)
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        src = f.fileno() if from_file else data
        for tree in (t, lt):
            for x, y in ((a, b), (b, b)):
                args = (channel, tree, chunk, x, y, ts, src, max(0, chunk) * 8, length)
                assert _outcome(c_seed, *args) == _outcome(py_seed_datagram, *args)


@needs_c
def test_c_garbage_objects_same_outcome() -> None:
    """Objects without the attributes, or with the wrong kinds: an error
    from both, never a crash."""
    t = MerkleTree.build([bytes([k]) * 8 for k in range(5)], HashFunc.SHA1, 8)
    m = Binmap()
    ts = bytes(8)
    for args in ((1, object(), 0, m, m, ts, b"x" * 40, 0, 8),
                 (1, t, 0, object(), m, ts, b"x" * 40, 0, 8),
                 (1, t, 0, m, 5, ts, b"x" * 40, 0, 8),
                 (1, t, 0, m, m, bytes(7), b"x" * 40, 0, 8),
                 (-1, t, 0, m, m, ts, b"x" * 40, 0, 8),
                 (1, t, 0, m, m, ts, b"x" * 40, -1, 8)):
        got = _outcome(c_seed, *args)
        assert isinstance(got, str) and got == _outcome(py_seed_datagram, *args), args
