"""``binmap_find`` and ``binmap_set1`` (C) take their arguments as
METH_FASTCALL since session 17 (docs/swift-perf.md, "Session 17: the
leecher's receive path"): no argument tuple and no ``PyArg_ParseTuple``.
Their results are the twins' (tests/swift/test_swift_fast.py); here, that a
bad argument raises what the ``"y*y*LLLLp"`` / ``"w*w*w*w*LLLp"`` parsing
raised before (each case's type checked against that build), and that a
buffer taken before a later argument failed is released again."""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from deliverykit import fastpath
from swift.core.binmap import Binmap

find = getattr(fastpath.speedups, "binmap_find", None)
set1 = getattr(fastpath.speedups, "binmap_set1", None)
pytestmark = pytest.mark.skipif(find is None or set1 is None, reason="C speedups not built")


def _map() -> Binmap:
    m = Binmap()
    m.set_range(3, 70)
    return m


def _outcome(f: Any, *args: Any) -> Any:
    try:
        return f(*args)
    except Exception as exc:  # noqa: BLE001  (the exception's type is the answer)
        return type(exc)


def test_find_errors_as_before() -> None:
    m = _map()
    h, d = bytes(m._h), bytes(m._deep)
    cases = [
        ((m._h, m._deep, m.root, m.root_layer, 0, 100, True), 3),
        (("x", d, 0, 0, 0, 1, 1), TypeError),  # not a buffer
        ((h, "x", 0, 0, 0, 1, 1), TypeError),
        ((h, d, 0.5, 0, 0, 1, 1), TypeError),  # not an int
        ((h, d, 0, 0, 1 << 64, 1, 1), OverflowError),
        ((h, d, 0, 0, 0, 1), TypeError),  # too few
        ((h, d, 0, 0, 0, 1, 1, 1), TypeError),  # too many
        ((memoryview(h)[::2], d, 0, 0, 0, 1, 1), BufferError),  # the exporter's own error
        ((h, d, m.root, m.root_layer, 0, 5, []), 0),  # "p": any object's truth
        ((h, d, True, 0, 0, 1, 1), ValueError),  # bool is an int: root 1 is past the halves
    ]
    for args, want in cases:
        assert _outcome(find, *args) == want, args


def _bufs(m: Binmap) -> list[Any]:
    return [array("I", m._h), bytearray(m._deep), array("I", m._free), array("q", m._st)]


def test_set1_errors_as_before() -> None:
    m = _map()
    m._reserve(m.root_layer + 1)
    r, lay = m.root, m.root_layer
    cases = [
        ((*_bufs(m), r, lay, 5, True), 0),
        ((*_bufs(m), r, lay, 2, True), 1),
        ((bytes(m._h), *_bufs(m)[1:], r, lay, 5, True), TypeError),  # read-only
        ((*_bufs(m)[:3], bytes(8), r, lay, 5, True), TypeError),
        ((*_bufs(m), r, lay, 5.0, True), TypeError),
        ((*_bufs(m), r, lay, 5), TypeError),
        ((*_bufs(m), r, lay, -(1 << 70), True), OverflowError),
        (("s", *_bufs(m)[1:], 0, 0, 0, 0), TypeError),
    ]
    for args, want in cases:
        assert _outcome(set1, *args) == want, args


def test_buffers_released_after_a_later_bad_argument() -> None:
    """A bytearray with an export still held cannot be resized: each call
    that failed after taking it must have let it go."""
    m = _map()
    m._reserve(m.root_layer + 1)
    h, d, f, st = _bufs(m)
    hb, db = bytearray(bytes(m._h)), bytearray(bytes(m._deep))
    for _ in range(3):
        assert _outcome(find, hb, db, 0.5, 0, 0, 1, 1) is TypeError
        assert _outcome(find, hb, "x", 0, 0, 0, 1, 1) is TypeError
        assert _outcome(set1, d, d, d, "x", 0, 0, 0, 0) is TypeError
        assert _outcome(set1, h, d, f, st, m.root, m.root_layer, 1.5, True) is TypeError
    hb.append(0)  # BufferError if an export were left
    d.append(0)
    h.append(0)
    st.append(0)


walk = getattr(fastpath.speedups, "merkle_walk", None)


@pytest.mark.skipif(walk is None, reason="C speedups not built")
def test_merkle_walk_errors_as_before() -> None:
    """``merkle_walk`` (METH_FASTCALL too): what ``"w*w*nLLLy*OOy*"`` raised."""
    import hashlib

    from swift.core.merkle import MerkleTree
    data = bytes(range(256)) * 40
    t = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)], chunk_size=1024)
    leaf = hashlib.sha256(data[:1024]).digest()

    def fresh() -> tuple[Any, ...]:
        m = MerkleTree.for_root(t.root_hash, chunk_size=1024)
        assert m.offer_peaks(list(t.peaks()))
        assert m.n_chunks is not None and m.root_bin is not None
        return (m._hashes, m._known, 32, m.n_chunks, m.root_bin, 0, leaf, dict(t.uncles(0)),
                hashlib.sha256, m.zero)

    cases: list[tuple[Any, Any]] = [
        (lambda g: g, 1),
        (lambda g: (bytes(g[0]),) + g[1:], TypeError),  # read-only
        (lambda g: g[:2] + (32.0,) + g[3:], TypeError),
        (lambda g: g[:2] + (1 << 70,) + g[3:], OverflowError),
        (lambda g: g[:3] + ("x",) + g[4:], TypeError),
        (lambda g: g[:6] + ("leaf",) + g[7:], TypeError),
        (lambda g: g[:6] + (memoryview(leaf)[::2],) + g[7:], BufferError),
        (lambda g: g[:7] + ([],) + g[8:], ValueError),  # offered not a dict
        (lambda g: g[:9] + (None,), TypeError),
        (lambda g: g[:9], TypeError),
        (lambda g: g + (1,), TypeError),
        (lambda g: g[:6] + (leaf[:5],) + g[7:], ValueError),
    ]
    for k, (make, want) in enumerate(cases):
        assert _outcome(walk, *make(fresh())) == want, k
