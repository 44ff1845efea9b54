"""``Client`` remembers which sequence numbers it saw in a sliding window over the
last ``window`` extended sequence numbers (the client's buffer, in chunks), not in
a set of every number: its state stays the same size however long the stream
(docs/corecast-multidomain.md: the set grew ~129 B per client-chunk, ~31 GB for
60 s at 100,000 clients).  A chunk older than the window is a counted ``too_old``
drop; inside the window duplicates and reordering are counted exactly as the set
counted them (RFC 3550 A.1's extended sequence numbers, wrapping at 65,536)."""

from __future__ import annotations

import gc
import struct
import sys

from hypothesis import given, settings, strategies as st

from corecast.core.client import Client


def rtp(seq: int, payload: bytes = b"x" * 20) -> bytes:
    return struct.pack("!BBHII", 0x80, 96, seq & 0xFFFF, seq * 3600 & 0xFFFFFFFF, 7) + payload


def reachable(obj: object) -> tuple[int, int]:
    """(objects, bytes) reachable from a client's fields, each object once."""
    seen: set[int] = set()
    stack = [getattr(obj, name) for name in type(obj).__slots__ if hasattr(obj, name)]
    n = size = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type):
            continue
        seen.add(id(o))
        n += 1
        size += sys.getsizeof(o)
        if isinstance(o, (set, frozenset, list, tuple, dict)):
            stack.extend(gc.get_referents(o))
    return n, size


def test_the_client_state_is_bounded_however_long_the_stream():
    """After 100,000 chunks (the 16-bit sequence wrapped once), the client holds
    a few dozen objects and a bitmap of its window, not one entry per chunk."""
    cl = Client(keep_digests=False, window=4096)
    for s in range(100_000):
        cl.handle(rtp(s), s * 0.02)
    n, size = reachable(cl)
    assert cl.received == 100_000 and cl.duplicates == 0 and cl.stats()["lost"] == 0
    assert n < 100, n
    assert size < 4096 // 8 + 8192, size
    # and as many again changes nothing
    for s in range(100_000, 200_000):
        cl.handle(rtp(s), s * 0.02)
    assert reachable(cl)[0] == n and reachable(cl)[1] <= size + 64


def test_a_chunk_older_than_the_window_is_a_counted_drop():
    cl = Client(keep_digests=False, window=64)
    for s in range(100):
        cl.handle(rtp(s), 0.0)
    cl.handle(rtp(36), 0.0)  # the oldest in the window (99 - 63): a duplicate
    cl.handle(rtp(35), 0.0)  # before the window: too old, not received
    st_ = cl.stats()
    assert (cl.duplicates, cl.too_old, cl.received) == (1, 1, 100)
    assert st_["too_old"] == 1 and st_["lost"] == 0


def _reference(seqs: list[int]) -> tuple[int, int, int, int, int | None, int]:
    """The set of every number, as the client counted before the window."""
    seen: set[int] = set()
    received = duplicates = reordered = nbytes = 0
    first: int | None = None
    top = -1
    for s in seqs:
        if s in seen:
            duplicates += 1
            continue
        seen.add(s)
        received += 1
        nbytes += len(rtp(s))
        first = s if first is None or s < first else first
        if s < top:
            reordered += 1
        else:
            top = s
    return received, duplicates, reordered, nbytes, first, top


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200_000), st.lists(st.integers(-60, 60), min_size=1, max_size=300))
def test_inside_the_window_duplicates_and_reordering_are_counted_as_before(start, steps):
    """Random walks (repeats, reordering, jumps, the 16-bit wrap) that never reach
    more than ``window`` behind the newest: the same counts as a set of every number."""
    window = 128
    seqs, s, top = [], start, start
    for d in steps:
        s = max(s + d, top - window + 1, 0)
        top = max(top, s)
        seqs.append(s)
    cl = Client(keep_digests=False, window=window)
    for q in seqs:
        cl.handle(rtp(q), 0.0)
    got = (cl.received, cl.duplicates, cl.reordered, cl.bytes, cl.first_seq, cl.max_ext)
    # the client sees 16-bit numbers: compare relative to its own extension of the first
    base = seqs[0] - (seqs[0] & 0xFFFF)
    want = _reference(seqs)
    assert got[:4] == want[:4] and cl.too_old == 0
    assert got[4] is not None and want[4] is not None
    assert (got[4] + base, got[5] + base) == (want[4], want[5])
