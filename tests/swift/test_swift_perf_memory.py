"""Peak memory of the hash tree's persistence (issue 17, step 3): loading a
saved tree and snapshotting a download's tree for its resume state must not
hold a second copy of the hashes.  A copy in each was the tree's size again
(8 MB for 100 MiB at 1 KiB chunks and SHA-256) on top of the tree itself,
in the seeder at start-up and in the leecher every ``SAVE_EVERY`` seconds."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from typing import Any

from swift.core import bins as B
from swift.core.merkle import MerkleTree
from swift.wire.constants import HashFunc

N = 1 << 13  # chunks: a tree of 2N bins


def _peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        got = fn()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _seeded(cs: int = 16) -> tuple[bytes, MerkleTree]:
    data = os.urandom(N * cs)
    return data, MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)],
                                  HashFunc.SHA256, cs)


def test_load_reads_into_the_tree_without_a_copy(tmp_path) -> None:
    _, t = _seeded()
    t.save(str(tmp_path / "t.mhash"))
    got, peak = _peak(lambda: MerkleTree.load(str(tmp_path / "t.mhash")))
    assert got.root_hash == t.root_hash and got._hashes == t._hashes
    footprint = len(t._hashes) + len(t._known)
    # the tree itself, its known flags and small change; reading the file
    # into bytes first and copying them in peaked at twice the tree
    assert peak < 1.3 * footprint, (peak, footprint)


def test_load_refuses_a_short_hash_file(tmp_path) -> None:
    _, t = _seeded()
    p = str(tmp_path / "t.mhash")
    t.save(p)
    with open(p, "r+b") as f:
        f.truncate(len(t._hashes) - 1)
    try:
        MerkleTree.load(p)
    except ValueError as e:
        assert "wrong size" in str(e)
    else:
        raise AssertionError("a short hash file was loaded")


def _half_downloaded(data: bytes, seeded: MerkleTree, cs: int = 16) -> MerkleTree:
    lt = MerkleTree.for_root(seeded.root_hash, HashFunc.SHA256, cs)
    assert lt.offer_peaks(seeded.peaks())
    for i in range(N // 2):
        assert lt.verify(i, data[i * cs:(i + 1) * cs], dict(seeded.uncles(i)))
    return lt


def test_snapshot_does_not_copy_the_hashes(tmp_path) -> None:
    data, t = _seeded()
    lt = _half_downloaded(data, t)
    snap, peak = _peak(lt.snapshot)
    # the known flags (one byte per bin, as hex text) and the metadata; the
    # hashes (32 bytes per bin) are handed over as they are
    assert peak < 0.5 * len(lt._hashes), (peak, len(lt._hashes))
    _, peak = _peak(lambda: MerkleTree.write_snapshot(str(tmp_path / "s.mhash"), snap))
    assert peak < 0.25 * len(lt._hashes), (peak, len(lt._hashes))


def test_a_snapshot_written_while_the_tree_grows_loads_as_taken(tmp_path) -> None:
    """The writer thread reads the live hash buffer: chunks verified between
    the snapshot and the write must neither corrupt nor enter the saved tree."""
    cs = 16
    data, t = _seeded(cs)
    lt = _half_downloaded(data, t, cs)
    snap = lt.snapshot()
    known_then = bytes(lt._known)
    for i in range(N // 2, N):  # the download goes on meanwhile
        assert lt.verify(i, data[i * cs:(i + 1) * cs], dict(t.uncles(i)))
    p = str(tmp_path / "s.mhash")
    MerkleTree.write_snapshot(p, snap)
    back = MerkleTree.load(p)
    assert bytes(back._known) == known_then
    for b in range(len(known_then)):
        if known_then[b]:
            assert back.hash(b) == t.hash(b), b
    for i in range(N // 2):  # resumes what it had, not what came later
        assert back.known(B.chunk(i)) and back.leaf_ok(i, data[i * cs:(i + 1) * cs])
    assert not back.known(B.chunk(N - 1))
