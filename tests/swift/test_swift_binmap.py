"""Binmap (Binmaps report) against a plain set model, and bin arithmetic (RFC 7574 4.2)."""

from hypothesis import given, settings, strategies as st

from swift.core import bins as B
from swift.core.binmap import Binmap

N = 3000
ops = st.lists(st.tuples(st.booleans(), st.integers(0, N), st.integers(0, 300)), max_size=40)


def _apply(m: Binmap, model: set, opl) -> None:
    for val, lo, ln in opl:
        hi = lo + ln
        if val:
            m.set_range(lo, hi)
            model.update(range(lo, hi))
        else:
            m.reset_range(lo, hi)
            model.difference_update(range(lo, hi))


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(0, N), st.integers(0, 400))
def test_binmap_matches_set(opl, qlo, qlen) -> None:
    m, model = Binmap(), set()
    _apply(m, model, opl)
    qhi = qlo + qlen
    want_runs = []
    for i in sorted(model):
        if want_runs and want_runs[-1][1] == i:
            want_runs[-1][1] = i + 1
        else:
            want_runs.append([i, i + 1])
    assert [list(r) for r in m.ranges()] == want_runs
    assert m.count() == len(model)
    inr = [i for i in range(qlo, qhi) if i in model]
    assert m.find_filled(qlo, qhi) == (inr[0] if inr else None)
    out = [i for i in range(qlo, qhi) if i not in model]
    assert m.find_empty(qlo, qhi) == (out[0] if out else None)
    assert m.is_filled_range(qlo, qhi) == (not out)
    assert m.is_empty_range(qlo, qhi) == (not inr)
    covered = set()
    for b in m.filled_bins():
        a, e = B.base_range(b)
        assert not covered & set(range(a, e))
        covered.update(range(a, e))
    assert covered == model


@given(st.integers(0, 1 << 20), st.integers(0, 1 << 12))
def test_bins_roundtrip(first, ln) -> None:
    got = B.from_range(first, first + ln)
    chunks = []
    for b in got:
        a, e = B.base_range(b)
        assert a % (e - a) == 0
        chunks.extend(range(a, e))
    assert chunks == list(range(first, first + ln + 1))


def test_bins_figure2() -> None:
    # RFC 7574 figure 2: bin 7 is C0..C7, 3 is C0..C3, 1 is C0..C1, 2 is C1
    assert B.base_range(7) == (0, 8)
    assert B.base_range(3) == (0, 4)
    assert B.base_range(1) == (0, 2)
    assert B.base_range(2) == (1, 2)
    assert B.parent(8) == 9 and B.parent(9) == 11 and B.parent(11) == 7
    assert B.sibling(10) == 8 and B.sibling(13) == 9 and B.sibling(3) == 11
    assert B.children(11) == (9, 13)
    # section 5.6.1: a 7-chunk file has peaks 3, 9, 12
    assert B.peaks(7) == [3, 9, 12]
    assert B.covering(7) == 7 and B.covering(1) == 0 and B.covering(8) == 7


def test_binmap_aggregates_uniform_ranges() -> None:
    m = Binmap()
    m.set_range(0, 1 << 20)
    assert m.cells <= 2  # one bit at a high layer, not a 1M-bit bitmap
    m.reset_range(5, 6)
    assert m.cells < 40  # a logarithmic staircase down to the hole
    assert m.find_empty(0) == 5
    m.set(B.chunk(5))
    assert m.cells <= 2
    assert m.cover(B.chunk(5)) == B.make(20, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5000)), max_size=300))
def test_single_chunk_paths_match_set(opl) -> None:
    m, model = Binmap(), set()
    for val, i in opl:
        if val:
            m.set(B.chunk(i))
            model.add(i)
        else:
            m.reset(B.chunk(i))
            model.discard(i)
    for i in range(0, 5100, 7):
        assert m.has(i) == (i in model) == (i in m)
    assert m.count() == len(model)
    m2 = Binmap()
    for i in model:
        m2.set_range(i, i + 1)
    assert list(m.ranges()) == list(m2.ranges())
