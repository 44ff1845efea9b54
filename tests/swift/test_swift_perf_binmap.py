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
