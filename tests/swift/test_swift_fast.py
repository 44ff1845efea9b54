"""C fast paths (deliverykit/_speedups/swift.c) against their Python twins."""

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
