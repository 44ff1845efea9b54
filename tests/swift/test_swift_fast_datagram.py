"""``data_datagram``: one DATA datagram with its INTEGRITY uncles in one call
(deliverykit/csrc/swift.c, twin swift._fast.py_data_datagram,
``MerkleTree.data_datagram``).

The twin is checked against the definition (the messages built one by one
with the codec, as the upload path did), the C function against the twin on
seeded and part-verified trees, buffers and files, and both against each
other on garbage arguments."""

from __future__ import annotations

import os
import random
import struct

import pytest
from hypothesis import example, given, settings, strategies as st

from deliverykit import fastpath
from swift._fast import py_data_datagram
from swift.aio.storage import FileStorage
from swift.core.binmap import Binmap
from swift.core.content import _Either
from swift.core.merkle import MerkleTree
from swift.wire import codec as C
from swift.wire.constants import HashFunc

c_dgram = getattr(fastpath.speedups, "data_datagram", None)
needs_c = pytest.mark.skipif(c_dgram is None, reason="C speedups not built")

CS = 16


def _content(rng: random.Random, n: int, last: int) -> bytes:
    """``n`` chunks of ``CS`` bytes, the last one ``last`` bytes (1..CS)."""
    return rng.randbytes((n - 1) * CS + last)


def _binmap(rng: random.Random, n: int) -> Binmap:
    m = Binmap()
    for _ in range(rng.randrange(0, 4)):
        lo = rng.randrange(0, n)
        m.set_range(lo, min(n, lo + rng.randrange(1, 9)))
    return m


def _by_messages(t: MerkleTree, channel: int, i: int, known: object, ts: int,
                 payload: bytes) -> bytes:
    """The definition: channel ID, INTEGRITY per uncle (8.8), DATA (8.6), each
    message encoded by the codec (chunk32)."""
    ctx = C.WireContext(hash_size=t.hash_size, chunk_size=t.chunk_size)
    msgs: list[C.Message] = []
    for b, h in t.uncles(i, known):
        lay = ((b + 1) & ~b).bit_length() - 1
        lo = (b >> (lay + 1)) << lay
        msgs.append(C.Integrity(lo, lo + (1 << lay) - 1, h))
    msgs.append(C.Data(i, i, ts, payload))
    return C.encode_datagram(ctx, channel, msgs)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 70), st.integers(1, CS), st.integers(0, 2**32 - 1))
def test_twin_is_the_messages_one_by_one(seed, n, last, channel) -> None:
    """The tree's data_datagram (C or twin, whichever is loaded) and the twin
    give the codec's bytes, for every chunk, the short last one included,
    with the receiver's acknowledged and in-flight chunks as two binmaps."""
    rng = random.Random(seed)
    data = _content(rng, n, last)
    t = MerkleTree.build([data[k:k + CS] for k in range(0, len(data), CS)], HashFunc.SHA1, CS)
    ts = rng.getrandbits(64)
    tsb = struct.pack(">Q", ts)
    # two binmaps (the upload path), one, none, and a view that is neither
    both = _Either(_binmap(rng, n), _binmap(rng, n))
    for known in (both, _binmap(rng, n), None, _AnyIn(both)):
        for i in range(n):
            want = _by_messages(t, channel, i, known, ts, data[i * CS:(i + 1) * CS])
            assert t.data_datagram(channel, i, known, tsb, data, i * CS, CS) == want
            stop = t._uncle_stop(i, known)
            assert py_data_datagram(channel, t._hashes, t._known, t.hash_size, n, i, stop,
                                    t.zero, tsb, data, i * CS, CS) == want


class _AnyIn:
    """A peer view with only ``any_in`` (MerkleTree.uncles' generic search)."""

    def __init__(self, inner: _Either) -> None:
        self.inner = inner

    def any_in(self, lo: int, hi: int) -> bool:
        return self.inner.any_in(lo, hi)


def test_a_leecher_verifies_what_it_is_sent(tmp_path) -> None:
    """End to end: datagrams read from a file by pread, decoded by the codec,
    verify chunk by chunk at a leecher that knows only the root (every chunk
    arrives with the uncles it lacks, since its peer binmap is its own)."""
    rng = random.Random(7)
    data = _content(rng, 37, 5)
    path = tmp_path / "content.bin"
    path.write_bytes(data)
    t = MerkleTree.build([data[k:k + CS] for k in range(0, len(data), CS)], HashFunc.SHA1, CS)
    leech = MerkleTree.for_root(t.root_hash, HashFunc.SHA1, CS)
    assert leech.offer_peaks(t.peaks())
    acked = Binmap()
    ctx = C.WireContext(hash_size=20, chunk_size=CS)
    fs = FileStorage(str(path))
    try:
        for i in rng.sample(range(37), 37):
            d = t.data_datagram(9, i, acked, bytes(8), fs.payload_source(), i * CS, CS)
            chan, msgs, error = C.decode_raw(d, ctx)
            assert chan == 9 and error is None and msgs[-1][0] == 1
            offered = {}
            for m in msgs[:-1]:
                lo, hi = m[1], m[2] + 1
                w = hi - lo
                offered[2 * lo + w - 1] = m[3]  # the bin of [lo, hi)
            assert leech.verify(i, msgs[-1][4], offered), i
            acked.add(i)
    finally:
        fs.close()
    assert leech.size == len(data)


def _outcome(f, *args):
    try:
        return f(*args)
    except (ValueError, KeyError, OverflowError, TypeError, OSError) as e:
        return type(e).__name__


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 70), st.integers(0, 8), st.integers(0, 1200),
       st.integers(0, 40), st.booleans())
def test_c_equals_python(seed, n, stop, offset, length, from_file) -> None:
    """Same bytes, or the same error (an uncle not known yet), on a
    part-verified leecher's tree, from a buffer or a file whose end may cut
    the payload short."""
    rng = random.Random(seed)
    data = rng.randbytes(8 * n)
    t = MerkleTree.build([data[k:k + 8] for k in range(0, len(data), 8)], HashFunc.SHA1, 8)
    lt = MerkleTree.for_root(t.root_hash, HashFunc.SHA1, 8)
    assert lt.offer_peaks(t.peaks())
    for i in rng.sample(range(n), rng.randrange(0, n)):
        lt.verify(i, data[i * 8:(i + 1) * 8], dict(t.uncles(i)))
    i = rng.randrange(n)
    ts = rng.randbytes(8)
    r, w = os.pipe()  # a file that is not seekable: pread fails alike
    os.close(w)
    import tempfile
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        for tree in (t, lt):
            src = f.fileno() if from_file else data
            args = (5, tree._hashes, tree._known, 20, n, i, stop, tree.zero, ts, src, offset,
                    length)
            assert _outcome(c_dgram, *args) == _outcome(py_data_datagram, *args)
        args = (5, t._hashes, t._known, 20, n, i, stop, t.zero, ts, r, 0, length)
        assert _outcome(c_dgram, *args) == _outcome(py_data_datagram, *args)
    os.close(r)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.integers(-1, 2**32), st.binary(max_size=80), st.binary(max_size=8),
       st.integers(-1, 70), st.integers(-1, 9), st.integers(-1, 2**32), st.integers(-1, 34),
       st.binary(max_size=21), st.binary(max_size=9),
       st.one_of(st.binary(max_size=30), st.integers(-3, 2**64)),
       st.integers(-1, 40), st.integers(-1, (1 << 24) + 1))
@example(0, b"", b"", 20, 0, 0, 0, bytes(20), bytes(8), 2**63, 0, 0)  # fd beyond a C long
@example(0, b"", b"", 20, 0, 0, 0, bytes(20), bytes(8), 2**31, 0, 0)  # fd beyond a C int
@example(0, b"", b"", 20, 1, 2**32 - 1, 32, bytes(20), bytes(8), b"", 0, 0)  # the widest uncles
def test_garbage_same_outcome(channel, h, k, hs, n, chunk, stop, zero, ts, src, offset,
                              length) -> None:
    args = (channel, h, k, hs, n, chunk, stop, zero, ts, src, offset, length)
    assert _outcome(c_dgram, *args) == _outcome(py_data_datagram, *args)
