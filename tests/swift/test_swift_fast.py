"""C fast paths (deliverykit/csrc/swift.c) against their Python twins."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
