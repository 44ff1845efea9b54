"""``Content.complete`` without a binmap search per verified chunk, and the
per-chunk ``ChunkVerified`` built through its slots (session 18,
docs/swift-perf.md "Session 18: the leecher's per-datagram overheads").

``complete`` now answers from a count of ``[0, n_chunks)`` that
``store_chunk`` keeps while nothing else touched ``have``; any other change
(the binmap's version, another binmap, the chunk count becoming known) makes
it recount.  The property test runs random mixes of stores and direct binmap
changes and checks it against the search it replaced after every step."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from hypothesis import given, settings, strategies as st

from swift.core import events as ev
from swift.core.binmap import Binmap
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree

CS = 64


def _tree(n: int) -> MerkleTree:
    return MerkleTree.build([bytes([k % 251]) * CS for k in range(n)], chunk_size=CS)


def _truth(c: Content) -> bool:
    n = c.tree.n_chunks
    return n is not None and c.have.is_filled_range(0, n)


OPS = st.lists(st.tuples(st.sampled_from(["store", "store", "store", "add", "discard", "set",
                                          "reset", "clear", "swap", "peaks", "retree"]),
                         st.integers(0, 80), st.integers(0, 40)), max_size=120)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 70), unknown=st.booleans(), ops=OPS)
def test_complete_is_the_search_it_replaced(n: int, unknown: bool,
                                            ops: list[tuple[str, int, int]]) -> None:
    full = _tree(n)
    tree = MerkleTree.for_root(full.root_hash, chunk_size=CS) if unknown else full
    c = Content(tree, MemoryStorage())
    for op, i, w in ops:
        if op == "store":
            c.store_chunk(i, b"x" * CS)
        elif op == "add":
            c.have.add(i)
        elif op == "discard":
            c.have.discard(i)
        elif op == "set":
            c.have.set_range(i, i + w)
        elif op == "reset":
            c.have.reset_range(i, i + w)
        elif op == "clear":
            c.have.clear()
        elif op == "swap":  # another binmap, with the same version as the old one
            b = Binmap()
            b.set_range(0, i)
            b.version = c.have.version
            c.have = b
        elif op == "peaks" and tree.n_chunks is None:
            assert tree.offer_peaks(list(full.peaks()))
        elif op == "retree":  # another chunk count, the binmap as it was
            c.tree = _tree(w + 1)
        assert c.complete == _truth(c), (op, i, w)
    # and a whole download in a random order ends complete exactly at its last chunk
    if c.tree.n_chunks is None:
        assert c.tree.offer_peaks(list(full.peaks()))
    n = c.tree.n_chunks or 0
    left = [k for k in range(n) if not c.have.has(k)]
    for k in sorted(left, key=lambda x: (x * 31 + len(ops)) % (n + 1)):  # a shuffled order
        assert not c.complete
        c.store_chunk(k, b"y" * CS)
        assert c.complete == _truth(c)
    assert c.complete


def test_seeded_and_stores_past_the_end() -> None:
    t = _tree(40)
    assert Content.seeded(t, MemoryStorage(bytes(40 * CS))).complete
    c = Content(t, MemoryStorage())
    assert not c.complete
    for k in range(40, 60):  # past the content: never counted
        c.store_chunk(k, b"z" * CS)
        assert not c.complete
    for k in range(39):
        c.store_chunk(k, b"z" * CS)
        c.store_chunk(k, b"z" * CS)  # twice: counted once
        assert not c.complete
    c.store_chunk(39, b"z" * CS)
    assert c.complete
    c.have.discard(5)
    assert not c.complete
    c.store_chunk(5, b"z" * CS)
    assert c.complete


def test_chunk_verified_is_the_frozen_dataclass_it_was() -> None:
    """Its own ``__init__`` aside, it behaves as ``ChunkRejected`` (the same
    fields, generated frozen and slotted) does."""
    a = ("10.0.0.1", 7)
    v, r = ev.ChunkVerified(3, a), ev.ChunkRejected(3, a)
    assert (v.index, v.addr) == (3, a)
    assert ev.ChunkVerified(index=3, addr=a) == v
    assert v != r and v != ev.ChunkVerified(4, a)
    assert hash(v) == hash(ev.ChunkVerified(3, a))
    assert repr(v) == repr(r).replace("ChunkRejected", "ChunkVerified")
    assert ev.ChunkVerified.__match_args__ == ev.ChunkRejected.__match_args__
    assert ev.ChunkVerified.__slots__ == ev.ChunkRejected.__slots__
    assert [f.name for f in dataclasses.fields(v)] == ["index", "addr"]
    assert dataclasses.replace(v, index=9) == ev.ChunkVerified(9, a)
    assert pickle.loads(pickle.dumps(v)) == v
    assert copy.copy(v) == v and copy.deepcopy(v) == v
    for obj in (v, r):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.index = 5  # type: ignore[misc]  # frozen: what the test checks
        with pytest.raises((AttributeError, TypeError)):
            obj.other = 1  # type: ignore[attr-defined]  # slots: no such attribute
    with pytest.raises(TypeError):
        ev.ChunkVerified(3)  # type: ignore[call-arg]  # a field missing
    match v:
        case ev.ChunkVerified(i, addr):
            assert (i, addr) == (3, a)
        case _:
            raise AssertionError("no match")


@settings(max_examples=300, deadline=None)
@given(ranges=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 200)), max_size=12),
       holes=st.lists(st.integers(0, 3000), max_size=12),
       chunks=st.lists(st.integers(-3, 5000), max_size=60))
def test_lacking_is_the_has_filter(ranges: list[tuple[int, int]], holes: list[int],
                                   chunks: list[int]) -> None:
    """``Binmap.lacking`` (the announcer's filter, proposed for announce.py)
    against ``has`` chunk by chunk, past the span and negative included."""
    m = Binmap()
    for lo, w in ranges:
        m.set_range(lo, lo + w)
    for c in holes:
        m.discard(c)
    assert m.lacking(chunks) == [c for c in chunks if not m.has(c)]
    assert m.lacking([]) == []
