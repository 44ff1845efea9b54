"""The seeder's request queue under libswift's request pattern (issue 15
item 2): single-chunk REQUESTs, then one HAVE per chunk received, each an
implicit CANCEL (RFC 7574 3.8) of a chunk the seeder already sent.  The
work of each such message must not grow with the queue: counted here in
executed lines of swift/core/channel.py (a deterministic measure, no clock)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from hypothesis import given, settings, strategies as st

import swift.core.binmap as binmap_mod
import swift.core.channel as channel_mod
from swift.core.binmap import Binmap
from swift.core.sendside import RangeQueue

_FILE = channel_mod.__file__


def _lines(fn: Callable[[], Any], file: str = _FILE) -> int:
    """Lines of ``file`` (channel.py) executed while ``fn`` runs."""
    n = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal n
        if frame.f_code.co_filename != file:
            return None
        if event == "line":
            n += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(old)
    return n


def _libswift_pattern_cost(queued: int) -> int:
    """Lines run by one pop + one HAVE for the popped chunk, ``queued`` deep."""
    q = RangeQueue(1 << 20)
    for c in range(queued):
        q.push(c, c + 1)  # libswift: mostly single-chunk REQUESTs
    for _ in range(3):  # some served and acknowledged by HAVE already
        q.remove(q.pop() or 0, (q.pop() or 0) + 1)

    def step() -> None:
        c = q.pop()
        assert c is not None
        q.remove(c, c + 1)  # the leecher's HAVE for the chunk just sent

    return _lines(step)


def test_have_for_a_sent_chunk_costs_the_same_however_long_the_queue() -> None:
    short, long_ = _libswift_pattern_cost(16), _libswift_pattern_cost(4000)
    assert long_ == short, (short, long_)


def _dropped_duplicate_cost(queued: int) -> int:
    """Lines run by a HAVE for a chunk that is still queued (asked twice,
    or sent again after a loss and asked again), ``queued`` deep."""
    q = RangeQueue(1 << 20)
    for c in range(queued):
        q.push(c, c + 1)
    q.push(queued // 2, queued // 2 + 1)  # asked again while queued
    return _lines(lambda: q.remove(queued // 2, queued // 2 + 1))


def test_have_for_a_queued_chunk_costs_the_same_however_long_the_queue() -> None:
    assert _dropped_duplicate_cost(16) == _dropped_duplicate_cost(4000)


def test_cancel_of_a_queued_chunk_still_removes_it() -> None:
    q = RangeQueue(100)
    for c in range(10):
        q.push(c, c + 1)
    q.remove(4, 6)
    assert len(q) == 8
    assert [q.pop() for _ in range(9)] == [0, 1, 2, 3, 6, 7, 8, 9, None]


class _EagerQueue(RangeQueue):
    """Compacts as soon as two chunks were dropped (exercises _compact)."""

    __slots__ = ()
    COMPACT_AT = 2


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([RangeQueue, _EagerQueue]),
       st.lists(st.tuples(st.sampled_from(["push", "push", "pop", "remove", "clear", "front"]),
                          st.integers(0, 24), st.integers(0, 6)), max_size=80))
def test_overlapping_requests_match_a_list(kind: type[RangeQueue],
                                           ops: list[tuple[str, int, int]]) -> None:
    """Repeated and overlapping REQUESTs (the ``extra`` copies), chunks
    dropped and asked again, lost DATA queued in front: FIFO order and
    counts stay exact; a HAVE/CANCEL drops every copy."""
    q, model = kind(40), []  # type: RangeQueue, list[int]
    for op, lo, ln in ops:
        if op == "push":
            room = max(0, 40 - len(model))
            q.push(lo, lo + ln)
            model.extend(range(lo, lo + min(ln, room)))
        elif op == "front":
            room = max(0, 40 - len(model))
            chunks = list(range(lo, lo + ln))
            q.push_front(chunks)
            model[:0] = chunks[:room]
        elif op == "pop":
            assert q.pop() == (model.pop(0) if model else None)
        elif op == "remove":
            q.remove(lo, lo + ln)
            model = [c for c in model if not lo <= c < lo + ln]
        else:
            q.clear()
            model = []
        assert len(q) == len(model)
        for c in range(0, 31):  # the index agrees with the queue
            assert q.queued.has(c) == (c in model)
    assert [q.pop() for _ in range(len(model) + 1)] == model + [None]


def _refill_cost(chunks: int) -> int:
    """binmap.py lines to mark two chunks already marked, in a binmap of ``chunks``."""
    m = Binmap()
    m.set_range(0, chunks)
    for c in range(1, chunks, 3):  # patchy, so the tree is deep
        m.discard(c)
    return _lines(lambda: m.set_range(chunks - 6, chunks - 4), binmap_mod.__file__)


def test_marking_chunks_a_peer_already_has_does_not_walk_the_tree() -> None:
    """libswift's HAVE repeats the chunks its ACK just covered: the second
    set_range on the peer's binmap is one lookup, whatever the tree depth."""
    assert _refill_cost(1 << 8) == _refill_cost(1 << 16)
