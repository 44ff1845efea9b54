"""``Binmap.add_new``: test-and-set of one chunk in one C descent (the
per-chunk HAVE/ACK of a libswift leecher), the same set as ``add``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from swift.core.binmap import Binmap


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 70)), max_size=12),
       st.lists(st.integers(0, 1 << 20), max_size=60))
def test_add_new_says_whether_the_chunk_was_empty(ranges, chunks) -> None:
    """True exactly when the chunk was not in the set; afterwards the set is
    what ``add`` makes of it (same runs), growing past the span alike."""
    a, b = Binmap(), Binmap()
    for lo, w in ranges:
        a.set_range(lo, lo + w)
        b.set_range(lo, lo + w)
    for i in chunks:
        was = a.has(i)
        v0 = a.version
        assert a.add_new(i) is (not was)
        assert a.version > v0  # memoised results keyed by version see the call
        b.add(i)
        assert a.has(i)
        assert list(a.ranges()) == list(b.ranges())


def test_add_new_refuses_a_negative_chunk() -> None:
    with pytest.raises(ValueError):
        Binmap().add_new(-1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 70)), max_size=10),
       st.integers(0, 5000), st.one_of(st.none(), st.integers(0, 5000)))
def test_find_empty_and_filled_match_the_set(ranges, lo, hi) -> None:
    """Both searches against a plain set, with and without an upper bound and
    from past the span (the span read inline now: it is the per-HAVE path)."""
    m, model = Binmap(), set[int]()
    for a, w in ranges:
        m.set_range(a, a + w)
        model.update(range(a, a + w))
    span = m.span
    top = max(span, lo + 1) if hi is None else hi
    empty = next((i for i in range(lo, top) if i not in model), None)
    if hi is None and empty is None:
        empty = span  # unbounded: everything past the span is empty
    assert m.find_empty(lo, hi) == empty
    end = span if hi is None else min(hi, span)
    assert m.find_filled(lo, hi) == next((i for i in range(lo, end) if i in model), None)
