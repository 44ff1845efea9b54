"""C fast paths (deliverykit/csrc/swift.c) against their Python twins."""

import pytest
from hypothesis import example, given, settings, strategies as st

from deliverykit import fastpath
from swift._fast import py_binmap_find
from swift.core.binmap import Binmap

c_find = getattr(fastpath.speedups, "binmap_find", None)
needs_c = pytest.mark.skipif(c_find is None, reason="C speedups not built")


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4000), st.integers(0, 200)), max_size=30),
       st.integers(0, 4200), st.integers(0, 500), st.booleans())
def test_binmap_find_c_equals_python(ops, lo, ln, val) -> None:
    m = Binmap()
    for v, a, n in ops:
        (m.set_range if v else m.reset_range)(a, a + n)
    hi = min(lo + ln, m.span)
    args = (m._h, m._deep, m.root, m.root_layer, lo, hi, val)
    assert c_find(*args) == py_binmap_find(*args)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=20), st.integers(-2, 20), st.integers(-1, 70),
       st.integers(0, 5000), st.integers(0, 5000), st.booleans())
def test_binmap_find_garbage_same_outcome(h, d, root, lay, lo, hi, val) -> None:
    def outcome(f):
        try:
            return f(h, d, root, lay, lo, hi, val)
        except ValueError:
            return "ValueError"
    assert outcome(c_find) == outcome(py_binmap_find)


c_set1 = getattr(fastpath.speedups, "binmap_set1", None)


def _clone(m: Binmap):
    from array import array
    return array("I", m._h), bytearray(m._deep), array("I", m._free), array("q", m._st)


@pytest.mark.skipif(c_set1 is None, reason="C speedups not built")
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3000), st.integers(0, 100)), max_size=20),
       st.lists(st.tuples(st.booleans(), st.integers(0, 3000)), max_size=40))
def test_binmap_set1_c_equals_python(ranges, ones) -> None:
    from swift._fast import py_binmap_set1
    m = Binmap()
    for v, a, n in ranges:
        (m.set_range if v else m.reset_range)(a, a + n)
    m._grow(3001)
    m._reserve(m.root_layer + 1)
    for v, i in ones:
        a, b = _clone(m), _clone(m)
        ra = c_set1(*a, m.root, m.root_layer, i, v)
        rb = py_binmap_set1(*b, m.root, m.root_layer, i, v)
        assert ra == rb and a[0] == b[0] and a[1] == b[1] and a[3] == b[3]
        assert list(a[2][:a[3][0]]) == list(b[2][:b[3][0]])
        m._h, m._deep, m._free, m._st = a
        m._reserve(m.root_layer + 1)


@pytest.mark.skipif(c_set1 is None, reason="C speedups not built")
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=48), st.binary(max_size=12), st.binary(max_size=16), st.integers(-1, 4),
       st.integers(-1, 6), st.integers(-1, 60), st.integers(0, 3000), st.booleans())
def test_binmap_set1_garbage_same_outcome(h, d, f, nfree, root, lay, i, val) -> None:
    from array import array

    from swift._fast import py_binmap_set1
    h = h[: len(h) // 4 * 4]
    f = f[: len(f) // 4 * 4]

    def outcome(fn):
        hh, dd, ff = array("I", h), bytearray(d), array("I", f)
        ss = array("q", (nfree,))
        try:
            r = fn(hh, dd, ff, ss, root, lay, i, val)
        except ValueError:
            return "ValueError"
        return r, bytes(hh), bytes(dd), bytes(ff), ss[0]

    assert outcome(c_set1) == outcome(py_binmap_set1)


c_recv_ts = getattr(fastpath.speedups, "recv_batch_ts", None)


def _ts_pair():
    import socket

    from swift._fast import SO_TIMESTAMPNS
    socks = []
    for _ in range(2):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    return socks, tx


@pytest.mark.skipif(c_recv_ts is None, reason="C speedups not built")
@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=1500), max_size=40), st.integers(1, 64))
def test_recv_batch_ts_c_equals_python(payloads, max_count) -> None:
    """Same datagrams, addresses and count from recvmmsg (C) and recvmsg
    (twin); both carry kernel arrival times between send and receive."""
    import time

    from swift._fast import py_recv_batch_ts
    (a, b), tx = _ts_pair()
    try:
        t0 = time.time()
        for p in payloads:
            tx.sendto(p, a.getsockname())
            tx.sendto(p, b.getsockname())
        time.sleep(0.01)
        t1 = time.time()
        got_c = c_recv_ts(a, max_count, 2048)
        got_py = py_recv_batch_ts(b, max_count, 2048)
        assert [(d, ad) for d, ad, _ in got_c] == [(d, ad) for d, ad, _ in got_py]
        assert [d for d, _, _ in got_c] == payloads[:max_count]
        for _, ad, t in got_c + got_py:
            assert ad == tx.getsockname()
            assert t0 - 0.01 <= t <= t1 + 0.01
        # drained: both return an empty list rather than blocking
        while c_recv_ts(a, 64, 2048):
            pass
        while py_recv_batch_ts(b, 64, 2048):
            pass
        assert c_recv_ts(a, 4, 2048) == [] and py_recv_batch_ts(b, 4, 2048) == []
    finally:
        for s in (a, b, tx):
            s.close()


def test_recv_batch_ts_rejects_bad_arguments() -> None:
    from swift._fast import py_recv_batch_ts, recv_batch_ts
    (a, b), tx = _ts_pair()
    try:
        for fn in {py_recv_batch_ts, recv_batch_ts}:
            for mc, size in ((0, 10), (257, 10), (1, 0), (1, 65537)):
                with pytest.raises(ValueError):
                    fn(a, mc, size)
    finally:
        for s in (a, b, tx):
            s.close()


c_stop = getattr(fastpath.speedups, "uncle_stop", None)


def _binmap(ops) -> Binmap:
    m = Binmap()
    for v, a, n in ops:
        (m.set_range if v else m.reset_range)(a, a + n)
    return m


def _ref_stop(chunk: int, top: int, a: Binmap, b: Binmap) -> int:
    """By definition: the lowest layer in [1, top] whose block around chunk
    has a filled chunk in a or b, else top (a linear scan, no galloping)."""
    for m in range(1, top + 1):
        lo = (chunk >> m) << m
        if a.any_in(lo, lo + (1 << m)) or b.any_in(lo, lo + (1 << m)):
            return m
    return top


_ops = st.lists(st.tuples(st.booleans(), st.integers(0, 5000), st.integers(0, 300)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_ops, _ops, st.integers(0, 6000), st.integers(0, 14))
def test_uncle_stop_twin_is_the_definition(ops_a, ops_b, chunk, top) -> None:
    from swift._fast import py_uncle_stop
    a, b = _binmap(ops_a), _binmap(ops_b)
    args = (chunk, top, a._h, a._deep, a.root, a.root_layer, b._h, b._deep, b.root, b.root_layer)
    assert py_uncle_stop(*args) == _ref_stop(chunk, top, a, b)


@pytest.mark.skipif(c_stop is None, reason="C speedups not built")
@settings(max_examples=300, deadline=None)
@given(_ops, _ops, st.integers(0, 6000), st.integers(0, 14))
def test_uncle_stop_c_equals_python(ops_a, ops_b, chunk, top) -> None:
    from swift._fast import py_uncle_stop
    a, b = _binmap(ops_a), _binmap(ops_b)
    args = (chunk, top, a._h, a._deep, a.root, a.root_layer, b._h, b._deep, b.root, b.root_layer)
    assert c_stop(*args) == py_uncle_stop(*args)


@pytest.mark.skipif(c_stop is None, reason="C speedups not built")
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=20), st.integers(-2, 20), st.integers(-1, 70),
       st.integers(-1, 5000), st.integers(-1, 70))
@example(b"\0" * 13, b"\0" * 3, 0, 0, 0, 0)  # halves not whole uint32s: both refuse
def test_uncle_stop_garbage_same_outcome(h, d, root, lay, chunk, top) -> None:
    from swift._fast import py_uncle_stop
    ok = Binmap()
    ok.set_range(3, 40)

    def outcome(f):
        try:
            return f(chunk, top, h, d, root, lay, ok._h, ok._deep, ok.root, ok.root_layer)
        except ValueError:
            return "ValueError"
    assert outcome(c_stop) == outcome(py_uncle_stop)


c_walk = getattr(fastpath.speedups, "merkle_walk", None)


def _walk_case(rng, n: int):
    """A seeded tree, a leecher's tree part-verified, one chunk and the
    INTEGRITY hashes offered for it: uncles, sometimes dropped or damaged."""
    import hashlib

    from swift.core.merkle import MerkleTree
    from swift.wire.constants import HashFunc
    data = [rng.randbytes(8) for _ in range(n)]
    t = MerkleTree.build(data, HashFunc.SHA1, 8)
    lt = MerkleTree.for_root(t.root_hash, HashFunc.SHA1, 8)
    assert lt.offer_peaks(t.peaks())
    for i in rng.sample(range(n), rng.randrange(0, n)):
        lt.verify(i, data[i], dict(t.uncles(i)))
    i = rng.randrange(n)
    offered = dict(t.uncles(i))
    if offered and rng.random() < 0.3:
        del offered[rng.choice(list(offered))]
    if offered and rng.random() < 0.2:
        offered[rng.choice(list(offered))] = rng.randbytes(20)
    chunk = data[i] if rng.random() < 0.8 else rng.randbytes(8)
    return lt, i, hashlib.sha1(chunk).digest(), offered


@pytest.mark.skipif(c_walk is None, reason="C speedups not built")
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 70))
def test_merkle_walk_c_equals_python(seed, n) -> None:
    import hashlib
    import random

    from swift._fast import py_merkle_walk
    lt, i, leaf, offered = _walk_case(random.Random(seed), n)
    h1, k1 = bytearray(lt._hashes), bytearray(lt._known)
    h2, k2 = bytearray(lt._hashes), bytearray(lt._known)
    assert lt.root_bin is not None
    args = (20, n, lt.root_bin, i, leaf, offered, hashlib.sha1, bytes(20))
    assert c_walk(h1, k1, *args) == py_merkle_walk(h2, k2, *args)
    assert h1 == h2 and k1 == k2


@pytest.mark.skipif(c_walk is None, reason="C speedups not built")
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.binary(max_size=8), st.integers(-1, 70), st.integers(-1, 9),
       st.integers(-1, 9), st.integers(-1, 9), st.binary(max_size=21),
       st.dictionaries(st.integers(-1, 20), st.binary(max_size=21), max_size=4))
def test_merkle_walk_garbage_same_outcome(h, k, hs, n, root, chunk, leaf, offered) -> None:
    import hashlib

    from swift._fast import py_merkle_walk

    def outcome(f):
        hb, kb = bytearray(h), bytearray(k)
        try:
            r = f(hb, kb, hs, n, root, chunk, leaf, offered, hashlib.sha1, bytes(max(hs, 0)))
        except ValueError:
            return "ValueError"
        return r, hb, kb
    assert outcome(c_walk) == outcome(py_merkle_walk)


c_uncles = getattr(fastpath.speedups, "merkle_uncles", None)


@pytest.mark.skipif(c_uncles is None, reason="C speedups not built")
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 70), st.integers(0, 8))
def test_merkle_uncles_c_equals_python(seed, n, stop) -> None:
    """Same hashes, or the same KeyError (a sibling not known yet), from a
    part-verified leecher's tree and a seeder's."""
    import random

    from swift._fast import py_merkle_uncles
    rng = random.Random(seed)
    lt, i, _, _ = _walk_case(rng, n)

    def outcome(f, t):
        try:
            return f(t._hashes, t._known, 20, t.n_chunks or 0, i, stop, t.zero)
        except KeyError as e:
            return ("KeyError", str(e))
    assert outcome(c_uncles, lt) == outcome(py_merkle_uncles, lt)


@pytest.mark.skipif(c_uncles is None, reason="C speedups not built")
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.binary(max_size=8), st.integers(-1, 70), st.integers(-1, 9),
       st.integers(-1, 9), st.integers(-1, 70), st.binary(max_size=21))
def test_merkle_uncles_garbage_same_outcome(h, k, hs, n, chunk, stop, zero) -> None:
    from swift._fast import py_merkle_uncles

    def outcome(f):
        try:
            return f(h, k, hs, n, chunk, stop, zero)
        except (ValueError, KeyError) as e:
            return type(e).__name__
    assert outcome(c_uncles) == outcome(py_merkle_uncles)
