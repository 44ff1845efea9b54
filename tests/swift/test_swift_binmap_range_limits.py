"""Binmap at the top of its range: C fast paths and twins agree (review 2, finding 4).

At root layer 58 (chunks up to 2**63) the C binmap_find computed a half's
end as ``hs + hw`` past INT64_MAX (undefined behaviour; it answered -1 where
the twin found the chunk) and binmap_set1 shifted ``32LL << 58`` out of
range.  The binmap now stops at root layer 57 (chunks below 2**62) in C,
in the twins and in Binmap itself (a clear ValueError beyond), and a peer
clips announced ranges (live HAVE with 64-bit addressing) to it.
"""

import os
from array import array

import pytest
from hypothesis import given, settings, strategies as st
from swift_support import live_feeder, pump

from deliverykit import fastpath
from swift._fast import py_binmap_find, py_binmap_set1
from swift.core.binmap import Binmap
from swift.core.live import LiveContent, LiveTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing

SRC, V1 = ("10.2.0.1", 1), ("10.2.0.2", 2)

TOP = Binmap.MAX_CHUNKS
c_find = getattr(fastpath.speedups, "binmap_find", None)
c_set1 = getattr(fastpath.speedups, "binmap_set1", None)
needs_c = pytest.mark.skipif(c_find is None or c_set1 is None, reason="C speedups not built")


def test_limit_is_2_pow_62_with_clear_error() -> None:
    assert TOP == 1 << 62 == 32 << Binmap.MAX_LAYER
    b = Binmap()
    b.set_range(TOP - 2, TOP)
    b.add(TOP - 3)
    assert b.root_layer == Binmap.MAX_LAYER
    assert b.has(TOP - 1) and b.has(TOP - 3) and not b.has(TOP - 4) and not b.has(TOP)
    assert b.find_filled(0) == TOP - 3
    for bad in (lambda: b.set_range(TOP, TOP + 1), lambda: b.set_range(TOP - 1, TOP + 5),
                lambda: b.add(TOP), lambda: Binmap().set_range(1 << 62, (1 << 62) + 2)):
        with pytest.raises(ValueError, match="2\\*\\*62"):
            bad()
    b.reset_range(0, 1 << 64)  # clearing beyond the range is a no-op past the span
    assert b.find_filled(0) is None


def _top_binmap(ops) -> Binmap:
    m = Binmap()
    for v, off, n in ops:
        a = TOP - 1 - off if v != 2 else off  # near the top, and a few near 0
        (m.reset_range if v == 0 else m.set_range)(max(0, a), min(TOP, max(0, a) + n))
    return m


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1 << 40), st.integers(1, 300)),
                min_size=1, max_size=12),
       st.integers(0, 1 << 40), st.integers(0, 1 << 41), st.booleans(), st.booleans())
def test_find_c_equals_python_at_top_layer(ops, off, ln, val, near_top) -> None:
    m = _top_binmap(ops)
    lo = TOP - 1 - off if near_top else off
    lo = max(0, lo)
    hi = min(lo + ln, m.span)
    args = (m._h, m._deep, m.root, m.root_layer, lo, hi, val)
    assert fastpath.speedups.binmap_find(*args) == py_binmap_find(*args)


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1 << 40), st.integers(1, 300)),
                max_size=8),
       st.lists(st.tuples(st.booleans(), st.integers(0, 1 << 40), st.booleans()), max_size=20))
def test_set1_c_equals_python_at_top_layer(ops, ones) -> None:
    m = _top_binmap(ops)
    m._grow(TOP)
    m._reserve(m.root_layer + 1)
    for v, off, near_top in ones:
        i = TOP - 1 - off if near_top else off
        a = (array("I", m._h), bytearray(m._deep), array("I", m._free), array("q", m._st))
        b = (array("I", m._h), bytearray(m._deep), array("I", m._free), array("q", m._st))
        ra = c_set1(*a, m.root, m.root_layer, i, v)
        rb = py_binmap_set1(*b, m.root, m.root_layer, i, v)
        assert ra == rb and a[0] == b[0] and a[1] == b[1] and a[3] == b[3]
        m._h, m._deep, m._free, m._st = a
        m._reserve(m.root_layer + 1)
        assert m.has(i) == v


@needs_c
@pytest.mark.parametrize("layer", [58, 59, 63])
def test_layers_beyond_57_rejected_by_both(layer) -> None:
    m = Binmap()
    m.set_range(0, 3)
    for f in (fastpath.speedups.binmap_find, py_binmap_find):
        with pytest.raises(ValueError):
            f(m._h, m._deep, m.root, layer, 0, 1, True)
    for f in (c_set1, py_binmap_set1):
        with pytest.raises(ValueError):
            f(array("I", m._h), bytearray(m._deep), array("I", m._free), array("q", m._st),
              m.root, layer, 0, True)


@pytest.mark.parametrize("addressing", [ChunkAddressing.CHUNK64, ChunkAddressing.BIN64],
                         ids=lambda a: a.name)
def test_live_have_beyond_2_pow_62_is_clipped(addressing) -> None:
    """A live HAVE with 64-bit addressing may name any chunk below 2**64: the
    viewer keeps what fits its binmaps and goes on (no exception, no stall)."""
    src = LiveTree.source(4, 1024)
    cfg = dict(addressing=addressing)
    source = Peer(LiveContent(src, window=256), PeerConfig(seed=1, **cfg))
    v = Peer(LiveContent(LiveTree(src.swarm_id, 4, 1024), window=256), PeerConfig(seed=2, **cfg))
    t = 7000.0
    source.live_append(os.urandom(16 * 1024), t)
    v.connect(SRC, t)
    nodes = {SRC: source, V1: v}
    feed = live_feeder(source, True, lambda: os.urandom(512))
    t = pump(nodes, 6, t0=t, dt=0.01, timer_every=5, tick=feed)
    vch = next(iter(v.channels.values()))
    assert vch.state == "est"
    if addressing == ChunkAddressing.CHUNK64:
        have = C.Have(TOP - 4, (1 << 64) - 2)  # [2**62 - 4, 2**64 - 1)
    else:
        have = C.Have((1 << 63) - 1, 0)  # bin 2**63 - 1: chunks [0, 2**63)
    v.datagram_received(C.encode_datagram(v.ctx, vch.local_id, [have]), SRC, t)
    assert vch.remote.have.has(TOP - 1) and not vch.remote.have.has(TOP)
    assert vch.remote.top == TOP
