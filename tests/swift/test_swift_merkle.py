"""Merkle trees (RFC 7574 section 5): two independent computations must agree."""

import hashlib
import os

import pytest
from hypothesis import given, settings, strategies as st

from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.core.merkle import IntegrityError, MerkleTree
from swift.wire.constants import HashFunc


def naive_root(chunks: list[bytes], name: str) -> bytes:
    """Section 5.1 written recursively over bin numbers, no shared code."""
    n = len(chunks)
    size = hashlib.new(name).digest_size
    top = 0
    while (1 << top) < n:
        top += 1

    def node(lay: int, off: int) -> bytes:
        first = off << lay
        if first >= n:
            return bytes(size)
        if lay == 0:
            return hashlib.new(name, chunks[off]).digest()
        a, b = node(lay - 1, 2 * off), node(lay - 1, 2 * off + 1)
        if a == bytes(size) and b == bytes(size):
            return bytes(size)
        return hashlib.new(name, a + b).digest()

    return node(top, 0)


def _chunks(data: bytes, cs: int) -> list[bytes]:
    return [data[i:i + cs] for i in range(0, len(data), cs)]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5000),
    st.sampled_from([(HashFunc.SHA1, "sha1"), (HashFunc.SHA256, "sha256")]),
    st.sampled_from([64, 100, 1024]),
    st.randoms(),
)
def test_build_matches_naive_and_every_chunk_verifies(size, hf, cs, rnd) -> None:
    data = rnd.randbytes(size)
    chunks = _chunks(data, cs)
    t = MerkleTree.build(chunks, hf[0], cs)
    assert t.root_hash == naive_root(chunks, hf[1])
    assert t.root_from_peaks(t.peaks()) == t.root_hash
    # a leecher that knows only the root verifies every chunk in random order,
    # getting the uncles a sender computes from its acknowledgements (5.3)
    r = MerkleTree.for_root(t.root_hash, hf[0], cs)
    assert r.offer_peaks(t.peaks()) and r.n_chunks == len(chunks)
    acked = Binmap()
    order = list(range(len(chunks)))
    rnd.shuffle(order)
    for i in order:
        assert r.verify(i, chunks[i], dict(t.uncles(i, acked)))
        acked.set(B.chunk(i))
    assert r.size == size


def test_tampering_is_rejected() -> None:
    chunks = _chunks(os.urandom(10 * 1024 + 17), 1024)
    t = MerkleTree.build(chunks, HashFunc.SHA256, 1024)
    r = MerkleTree.for_root(t.root_hash)
    bad_peaks = [(b, bytes(32)) for b, _ in t.peaks()]
    assert not r.offer_peaks(bad_peaks) and r.n_chunks is None
    assert not r.verify(0, chunks[0], dict(t.uncles(0)))  # no size yet
    assert r.offer_peaks(t.peaks())
    assert not r.verify(3, b"x" * 1024, dict(t.uncles(3)))
    u = dict(t.uncles(3))
    u[next(iter(u))] = bytes(32)
    assert not r.verify(3, chunks[3], u)
    assert not r.verify(3, chunks[3], {})
    assert r.verify(3, chunks[3], dict(t.uncles(3)))
    assert not r.verify(10, chunks[10] + b"x", dict(t.uncles(10)))  # last chunk too long
    assert not r.verify(11, b"x", {})


def test_peak_figure4() -> None:
    # RFC 7574 figure 4: 7162 bytes in 1 KiB chunks -> peaks 3, 9, 12
    t = MerkleTree.build(_chunks(os.urandom(7162), 1024), HashFunc.SHA1, 1024)
    assert [b for b, _ in t.peaks()] == [3, 9, 12]
    assert t.root_bin == 7
    # table 1 style: progressive download sends 2,5,11 for chunk 0 when the
    # tree is checked up to the root; we stop at peak 3 (peaks are sent first)
    assert [b for b, _ in t.uncles(0)] == [5, 2]


def test_save_load_roundtrip(tmp_path) -> None:
    data = os.urandom(50_000)
    t = MerkleTree.build(_chunks(data, 1024), HashFunc.SHA1, 1024)
    p = str(tmp_path / "x.mhash")
    t.save(p)
    u = MerkleTree.load(p)
    assert u.root_hash == t.root_hash and u.peaks() == t.peaks()
    assert u.uncles(17) == t.uncles(17)
    raw = bytearray(open(p, "rb").read())
    pk = t.peaks()[0][0]
    raw[pk * 20] ^= 1
    open(p, "wb").write(raw)
    with pytest.raises(IntegrityError):
        MerkleTree.load(p)


def test_hash_file_size_ratio() -> None:
    # paper V-C: "0.5% of the content size for the Merkle hashes" (8 KiB, SHA-1)
    n = 1000
    t = MerkleTree.build([b"\1" * 8192] * n, HashFunc.SHA1, 8192)
    assert len(t._hashes) / (n * 8192) < 0.0062


class _AnyIn:
    """A peer's knowledge seen only through ``any_in`` (the generic path)."""

    def __init__(self, *maps) -> None:
        self.maps = maps

    def any_in(self, lo: int, hi: int) -> bool:
        return any(m.any_in(lo, hi) for m in self.maps)


class _Pair:
    """A union view of two binmaps, shaped as swift.core.content's (a, b)."""

    def __init__(self, a, b) -> None:
        self.a, self.b = a, b

    def any_in(self, lo: int, hi: int) -> bool:
        return self.a.any_in(lo, hi) or self.b.any_in(lo, hi)


def test_uncles_from_binmaps_equal_the_generic_search() -> None:
    """MerkleTree.uncles asks binmaps (one, or a union of two) in one C call
    (swift._fast.uncle_stop); any other ``any_in`` object takes the Python
    search: both give the same hashes for every chunk."""
    import random

    rng = random.Random(7)
    n = 1000  # peaks of 512, 256, 128, 64, 32, 8
    t = MerkleTree.build([bytes([i % 251]) * 8 for i in range(n)], HashFunc.SHA1, 8)
    for _ in range(40):
        acked, sent = Binmap(), Binmap()
        for _ in range(rng.randrange(0, 6)):
            lo = rng.randrange(n)
            acked.set_range(lo, min(n, lo + rng.randrange(1, 80)))
        for _ in range(rng.randrange(0, 4)):
            sent.add(rng.randrange(n))
        for i in range(0, n, 7):
            assert t.uncles(i, acked) == t.uncles(i, _AnyIn(acked)), i
            assert t.uncles(i, _Pair(acked, sent)) == t.uncles(i, _AnyIn(acked, sent)), i
