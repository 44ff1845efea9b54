"""The per-channel request state in buffers (docs/swift-perf.md, "Session 19:
the request state in buffers"): ``DownloadSide`` keeps its requests in three
parallel lists (chunk, time asked, sequence number) with a chunk -> slot dict, where
it kept two dicts (``requests``, chunk -> time asked, used as a FIFO, and
``req_seq``, chunk -> sequence number).

Hypothesis: random sequences of ask (one chunk, or a flush's picks at once),
DATA (the receive path's ``skipped`` then ``answered``), a bare ``skipped``
or ``answered``, a stale check and a timeout (as ``request_timeouts`` drops
them), a CANCEL of one chunk and a clear, over few chunks (so chunks are
re-asked while in flight) and long enough to grow the lists past their
first size, against the two dicts as they were (``_DictPair``, verbatim but
for the compaction every 512 answers, which changed no content): the same
returns, the same requests in the same order with the same times and
sequence numbers, the same count of request changes after every step."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from swift.core.channel import REQUEST_CHANGES, DownloadSide


class _DictPair:
    """``DownloadSide``'s request state before session 19: two dicts."""

    def __init__(self) -> None:
        self.requests: dict[int, float] = {}
        self.req_seq: dict[int, int] = {}
        self.next_seq = 0

    def ask(self, c: int, now: float) -> None:
        REQUEST_CHANGES.n += 1
        self.requests[c] = now
        self.req_seq[c] = self.next_seq
        self.next_seq += 1

    def ask_all(self, chunks: list[int], now: float) -> bool:
        reqs, seq = self.requests, self.req_seq
        k = self.next_seq
        again = False
        for c in chunks:
            if c in reqs:
                again = True
            reqs[c] = now
            seq[c] = k
            k += 1
        self.next_seq = k
        REQUEST_CHANGES.n += len(chunks)
        return again

    def drop(self, c: int) -> None:
        REQUEST_CHANGES.n += 1
        del self.requests[c]
        self.req_seq.pop(c, None)

    def clear(self) -> None:
        REQUEST_CHANGES.n += 1
        self.requests.clear()
        self.req_seq.clear()

    def skipped(self, i: int) -> list[int]:
        seq_i = self.req_seq.pop(i, None)
        reqs = self.requests
        if seq_i is None or i not in reqs or next(iter(reqs)) == i:
            return []
        seq = self.req_seq
        older = []
        for c in reqs:
            if c == i:
                break
            if seq_i - seq.get(c, seq_i) > 1:
                older.append(c)
        if older:
            REQUEST_CHANGES.n += 1
        for c in older:
            del reqs[c]
            seq.pop(c, None)
        return older

    def answered(self, i: int) -> float | None:
        sent_at = self.requests.pop(i, None)
        if sent_at is not None:
            REQUEST_CHANGES.n += 1
        return sent_at


def _stale(items: list[tuple[int, float]], limit: float, unordered: bool) -> list[int]:
    """The stale check's choice (``RequestScheduler.request_timeouts``)."""
    out = []
    for c, t in items:
        if t >= limit:
            if unordered:
                continue
            break
        out.append(c)
    return out


def _same(a: DownloadSide, b: _DictPair) -> None:
    assert list(a.requests.items()) == list(b.requests.items())
    assert a.items() == list(b.requests.items()) and a.chunks() == list(b.requests)
    # the old req_seq kept a number after ``answered`` alone (never read again)
    assert dict(a.req_seq) == {c: b.req_seq[c] for c in b.requests if c in b.req_seq}
    assert list(a.req_seq) == [c for c in b.requests if c in b.req_seq]
    assert a.next_seq == b.next_seq
    assert len(a.slot) == len(b.requests) and bool(a.slot) == bool(b.requests)
    # the lists: the head is a live slot (or the lists are empty), every
    # chunk asked sits in its slot within [head, tail), no other slot is live
    h, t = a.ends
    assert 0 <= h <= t <= len(a.chunk) == len(a.sent) == len(a.seq)
    assert (h, t) == (0, 0) if not a.slot else a.chunk[h] >= 0
    live = {a.chunk[k]: k for k in range(h, t) if a.chunk[k] >= 0}
    assert live == a.slot
    for c in b.requests:
        assert a.sent_at(c) == b.requests[c] == a.requests[c] and c in a.requests
    assert a.sent_at(-5) is None and -5 not in a.requests


_chunk = st.integers(0, 23)
_op = st.one_of(
    st.tuples(st.just("ask"), _chunk),
    st.tuples(st.just("ask_all"), st.lists(_chunk, max_size=12)),
    st.tuples(st.just("data"), _chunk),
    st.tuples(st.just("skipped"), _chunk),
    st.tuples(st.just("answered"), _chunk),
    st.tuples(st.just("stale"), st.floats(0.0, 1.0), st.booleans()),
    st.tuples(st.just("timeout"), st.just(0)),
    st.tuples(st.just("cancel"), _chunk),
    st.tuples(st.just("clear"), st.just(0)),
    st.tuples(st.just("grow"), st.integers(0, 100)),
)


def _run(ops: list[tuple[Any, ...]]) -> int:
    a, b = DownloadSide(0.0), _DictPair()
    now = 0.0
    most = 0
    for op in ops:
        kind = op[0]
        now += 0.01
        n0 = REQUEST_CHANGES.n
        if kind == "ask":
            a.ask(op[1], now)
            n1 = REQUEST_CHANGES.n
            b.ask(op[1], now)
        elif kind == "ask_all":
            ra = a.ask_all(list(op[1]), now)
            n1 = REQUEST_CHANGES.n
            assert ra == b.ask_all(list(op[1]), now)
        elif kind == "grow":  # a window of fresh chunks, past the first lists
            picks = list(range(1000 + op[1], 1000 + op[1] + 40))
            ra = a.ask_all(picks, now)
            n1 = REQUEST_CHANGES.n
            assert ra == b.ask_all(picks, now)
        elif kind == "data":  # Verifier.on_data: skipped, then answered
            ra2 = (a.skipped(op[1]), a.answered(op[1]))
            n1 = REQUEST_CHANGES.n
            assert ra2 == (b.skipped(op[1]), b.answered(op[1]))
        elif kind == "skipped":
            rs = a.skipped(op[1])
            n1 = REQUEST_CHANGES.n
            assert rs == b.skipped(op[1])
        elif kind == "answered":
            rf = a.answered(op[1])
            n1 = REQUEST_CHANGES.n
            assert rf == b.answered(op[1])
        elif kind == "stale":  # request_timeouts' stale check, then its drops
            limit = now - op[1]
            sa = _stale(a.items(), limit, op[2])
            assert sa == _stale(list(b.requests.items()), limit, op[2])
            for c in sa:
                a.drop(c)
            n1 = REQUEST_CHANGES.n
            for c in sa:
                b.drop(c)
        elif kind == "timeout":  # no progress: every request given back
            assert a.chunks() == list(b.requests)
            a.clear()
            n1 = REQUEST_CHANGES.n
            b.clear()
        elif kind == "cancel":  # a copy came elsewhere (receive._store): drop here
            if op[1] in a.slot:
                a.drop(op[1])
            n1 = REQUEST_CHANGES.n
            if op[1] in b.requests:
                b.drop(op[1])
        else:
            a.clear()
            n1 = REQUEST_CHANGES.n
            b.clear()
        assert n1 - n0 == REQUEST_CHANGES.n - n1  # the same count of changes
        _same(a, b)
        most = max(most, len(a.chunk))
    return most


@settings(max_examples=400, deadline=None)
@given(st.lists(_op, max_size=120))
def test_the_lists_behave_as_the_two_dicts(ops: list[tuple[Any, ...]]) -> None:
    _run(ops)


def test_the_lists_grow_and_compact_as_the_two_dicts() -> None:
    """A long fixed run: windows of 40 asked, most answered in order, some
    skipped or re-asked, until the lists grew past their first size and
    compacted many times."""
    ops: list[tuple[Any, ...]] = []
    for r in range(60):
        ops.append(("grow", (r * 37) % 100))
        ops += [("data", 1000 + (r * 37) % 100 + k) for k in range(0, 40, 3)]
        ops += [("ask", r % 24), ("ask", (r + 5) % 24), ("data", (r + 5) % 24), ("ask", r % 24)]
    assert _run(ops) > DownloadSide.FIRST


def test_drop_of_a_chunk_not_asked_raises_as_before() -> None:
    a, b = DownloadSide(0.0), _DictPair()
    a.ask(3, 1.0)
    b.ask(3, 1.0)
    for side in (a, b):
        with pytest.raises(KeyError):
            side.drop(4)
    _same(a, b)


def test_requests_is_a_read_only_view() -> None:
    d = DownloadSide(0.0)
    d.ask(7, 1.0)
    view: Any = d.requests
    with pytest.raises(TypeError):
        view[8] = 2.0
    with pytest.raises(AttributeError):
        d.requests = {}  # type: ignore[misc]  # a property without a setter: the point of the test
    assert dict(d.requests) == {7: 1.0} and dict(d.req_seq) == {7: 0}
