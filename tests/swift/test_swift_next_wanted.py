"""``picker_next_wanted`` (C) against its twin ``py_next_wanted`` and both against
a definition by enumeration: the first chunk in [pos, hi) we lack, not in flight,
that the peer holds."""

import pytest
from hypothesis import example, given, settings, strategies as st

from deliverykit import fastpath
from swift._fast import py_next_wanted
from swift.core.binmap import Binmap
from swift.core.picker import Availability, PickState, next_wanted

c_next = getattr(fastpath.speedups, "picker_next_wanted", None)
needs_c = pytest.mark.skipif(c_next is None, reason="C speedups not built")

# ranges set (True) or reset (False); wide enough to cross spans of a few layers
_ops = st.lists(st.tuples(st.booleans(), st.integers(0, 5000), st.integers(0, 400)), max_size=12)


def _binmap(ops: list[tuple[bool, int, int]]) -> Binmap:
    m = Binmap()
    for v, a, n in ops:
        (m.set_range if v else m.reset_range)(a, a + n)
    return m


def _definition(have: Binmap, infl: Binmap, peer: Binmap, pos: int, hi: int) -> int:
    for c in range(max(pos, 0), hi):
        if not have.has(c) and not infl.has(c) and peer.has(c):
            return c
    return -1


@settings(max_examples=300, deadline=None)
@given(_ops, _ops, _ops, st.integers(0, 6000), st.integers(0, 700))
@example([(True, 0, 64)], [(True, 70, 3)], [(True, 0, 200)], 0, 200)  # gaps in every map
@example([], [], [(True, 4000, 10)], 10, 5000)  # the peer's chunks past the others' spans
@example([(True, 0, 32)], [], [(True, 0, 40)], 0, 33)  # the first chunk past have's span
def test_twin_is_the_definition(ops_h, ops_i, ops_p, pos, ln) -> None:
    have, infl, peer = _binmap(ops_h), _binmap(ops_i), _binmap(ops_p)
    assert py_next_wanted(have, infl, peer, pos, pos + ln) == _definition(
        have, infl, peer, pos, pos + ln)


@needs_c
@settings(max_examples=500, deadline=None)
@given(_ops, _ops, _ops, st.integers(-5, 6000), st.integers(-5, 9000))
@example([(True, 0, 64)], [(True, 70, 3)], [(True, 0, 200)], 0, 200)
@example([], [], [(True, 4000, 10)], 10, 5000)
@example([(True, 0, 5000)], [], [(True, 0, 5000)], 0, 9000)  # all held: none
@example([(True, 0, 32)], [], [(True, 0, 40)], 0, 33)  # the first chunk past have's span
def test_c_equals_twin(ops_h, ops_i, ops_p, pos, hi) -> None:
    have, infl, peer = _binmap(ops_h), _binmap(ops_i), _binmap(ops_p)
    assert c_next(have, infl, peer, pos, hi) == py_next_wanted(have, infl, peer, pos, hi)


def test_picker_next_wanted_is_none_or_the_chunk() -> None:
    have, infl, peer = Binmap(), Binmap(), Binmap()
    have.set_range(0, 10)
    infl.set_range(10, 12)
    peer.set_range(0, 20)
    st_ = PickState(have=have, inflight=infl, availability=Availability(), n_chunks=20)
    assert next_wanted(st_, peer, 0, 20) == 12
    assert next_wanted(st_, peer, 0, 12) is None
    peer.reset_range(12, 20)
    assert next_wanted(st_, peer, 0, 20) is None


@needs_c
def test_c_refuses_what_is_not_a_binmap() -> None:
    m = Binmap()
    with pytest.raises(AttributeError):
        c_next(m, object(), m, 0, 10)
    with pytest.raises(TypeError):
        c_next(m, m, m, 0)
    with pytest.raises(OverflowError):
        c_next(m, m, m, 0, 1 << 70)
    with pytest.raises(OverflowError):
        py_next_wanted(m, m, m, 0, 1 << 70)
