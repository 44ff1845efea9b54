"""Files beside content: the seeder's cached hash tree and a download's
``FILE.part`` with its resume state.

Two promises live here (issue 13, items 11 and 12):

* A download is written to ``FILE.part`` with its verified hashes in
  ``FILE.part.mhash`` (+ ``.json``); ``FILE`` appears only after every chunk
  verified, the length is right and the data is on disk (fsync, then one
  rename).  ``FILE.mhash`` then stays beside it, so a later run re-verifies
  ``FILE`` instead of fetching it.
* A seeder's cached hash tree (``FILE.mhash`` + ``.json`` + ``.stamp``) is used
  only when the stamp (device, inode, size, mtime and ctime: ctime cannot be
  set from user space, so ``cp -p``, ``rsync -t`` and ``tar x`` all change it)
  matches, and a sample of chunks read from the file matches the tree's leaf
  hashes.  Anything else rebuilds the tree, and :class:`TreeLoad` says why.
"""

from __future__ import annotations

import enum
import os
import random
from dataclasses import dataclass

from deliverykit.outputs import fsync_parent
from swift.core import bins as B
from swift.core.merkle import DeferredTree, MerkleTree
from swift.wire.constants import HashFunc

#: files up to this size are checked whole against a cached tree; larger ones by sample
VERIFY_ALL_BYTES = 4 << 20
#: chunks checked (besides the first and the last) in a larger file
SAMPLE_CHUNKS = 64


# -- downloads ----------------------------------------------------------------------


@dataclass(frozen=True)
class DownloadPaths:
    """Where a download into ``final`` keeps its data and resume state."""

    #: the name the complete, verified content gets
    final: str

    @property
    def part(self) -> str:
        """The data while incomplete."""
        return self.final + ".part"

    @property
    def part_state(self) -> str:
        """Verified hashes of :attr:`part` (the resume state; plus ``.json``)."""
        return self.part + ".mhash"

    @property
    def final_state(self) -> str:
        """Hashes kept beside the complete file (plus ``.json``)."""
        return self.final + ".mhash"

    def temporaries(self) -> list[str]:
        """Every file an incomplete download leaves (data and state)."""
        s = self.part_state
        return [self.part, s, s + ".json", s + ".tmp", s + ".json.tmp"]


def fsync_dir(path: str) -> None:
    """Make a rename in the directory of ``path`` durable (an error is raised)."""
    fsync_parent(path, strict=True)


def move_state(src: str, dst: str) -> None:
    """Rename a saved tree (``src`` and ``src.json``) to ``dst``."""
    os.replace(src, dst)
    os.replace(src + ".json", dst + ".json")


def remove_quietly(paths: list[str]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


def saved_tree(state: str, root_hash: bytes, chunk_size: int) -> MerkleTree | None:
    """The tree saved at ``state`` if it is this swarm's, else None."""
    if not os.path.exists(state + ".json"):
        return None
    try:
        t = MerkleTree.load(state)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return t if t.root_hash == root_hash and t.chunk_size == chunk_size else None


# -- the seeder's hash tree cache ---------------------------------------------------


class CacheStatus(enum.Enum):
    """How :func:`load_or_build_tree` got its tree."""

    HIT = "hit"            #: the cached tree, stamp current and sampled chunks matching
    MISS = "miss"          #: no cache (or not asked to use one): hashed the file
    STALE = "stale"        #: the file changed since the cache was written: rehashed
    MISMATCH = "mismatch"  #: stamp current but a chunk did not match the tree: rebuilt
    UNREADABLE = "unreadable"  #: the cache files were damaged: rebuilt


@dataclass(frozen=True)
class TreeLoad:
    """A hash tree and how it was obtained."""

    tree: MerkleTree
    status: CacheStatus
    #: one line for the user when the cache was not used as is ("" otherwise)
    message: str = ""


def mhash_path(path: str, hash_func: HashFunc = HashFunc.SHA256, chunk_size: int = 1024) -> str:
    """Where the hash tree of ``path`` for this metadata is cached."""
    if hash_func == HashFunc.SHA256 and chunk_size == 1024:
        return path + ".mhash"
    return f"{path}.{HashFunc(hash_func).name.lower()}-{chunk_size}.mhash"


def _stamp(st: os.stat_result) -> str:
    """What a cached tree is keyed on: any change of the file changes one of these."""
    return (f"v2 dev={st.st_dev} ino={st.st_ino} size={st.st_size} "
            f"mtime={st.st_mtime_ns} ctime={st.st_ctime_ns}")


def _sample(n: int, size: int, chunk_size: int) -> list[int]:
    if size <= VERIFY_ALL_BYTES or n <= SAMPLE_CHUNKS + 2:
        return list(range(n))
    rng = random.Random(os.urandom(8))  # another sample each load
    return sorted({0, n - 1, *rng.sample(range(1, n - 1), SAMPLE_CHUNKS)})


def first_mismatch(tree: MerkleTree, path: str) -> int | None:
    """The first sampled chunk of ``path`` whose hash is not the tree's leaf, or None."""
    n, size, cs = tree.n_chunks or 0, tree.size or 0, tree.chunk_size
    with open(path, "rb") as f:
        for i in _sample(n, size, cs):
            data = os.pread(f.fileno(), cs, i * cs)
            if i == n - 1:
                data = data[:size - i * cs]
            if not tree.known(B.chunk(i)) or not tree.leaf_ok(i, data):
                return i
    return None


@dataclass(frozen=True)
class _Verdict:
    status: CacheStatus
    message: str = ""
    tree: MerkleTree | None = None


def _cached(path: str, mh: str, hash_func: HashFunc, chunk_size: int,
            st: os.stat_result) -> _Verdict:
    """Whether the cache at ``mh`` may be used for ``path`` (its tree if so)."""
    if not os.path.exists(mh + ".json"):
        return _Verdict(CacheStatus.MISS)
    try:
        with open(mh + ".stamp") as f:
            stamp = f.read()
    except OSError:
        stamp = ""
    if stamp != _stamp(st):
        return _Verdict(CacheStatus.STALE,
                        f"{path} changed since its hash tree was cached (inode, size, mtime or "
                        "ctime differ): rehashing")
    try:
        t = MerkleTree.load(mh)
    except (OSError, ValueError, KeyError, TypeError):
        return _Verdict(CacheStatus.UNREADABLE,
                        f"{mh} is damaged: rehashing {path}")
    if t.func != hash_func or t.chunk_size != chunk_size or t.size != st.st_size:
        return _Verdict(CacheStatus.STALE,
                        f"{mh} is for other swarm metadata: rehashing {path}")
    bad = first_mismatch(t, path)
    if bad is not None:
        return _Verdict(CacheStatus.MISMATCH,
                        f"{path}: chunk {bad} does not match its cached hash tree (content "
                        "changed under the same size, mtime and ctime): hash tree rebuilt")
    return _Verdict(CacheStatus.HIT, tree=t)


def load_or_build_tree(path: str, hash_func: HashFunc = HashFunc.SHA256,
                       chunk_size: int = 1024, cache: bool = True) -> TreeLoad:
    """Merkle tree of a file: the cached one when it is provably current, else
    built from the file (and cached again when ``cache``)."""
    mh = mhash_path(path, hash_func, chunk_size)
    st = os.stat(path)
    got = _cached(path, mh, hash_func, chunk_size, st) if cache else _Verdict(CacheStatus.MISS)
    if got.tree is not None:
        return TreeLoad(got.tree, CacheStatus.HIT)
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())  # the stamp of what we hash
        t = MerkleTree.from_file(f, hash_func, chunk_size)
    if cache:
        try:
            remove_quietly([mh + ".stamp"])  # no window where an old stamp meets a new tree
            t.save(mh)
            with open(mh + ".stamp", "w") as f:
                f.write(_stamp(st))
        except OSError:
            pass
    return TreeLoad(t, got.status, got.message)


def deferred_tree(path: str, hash_func: HashFunc = HashFunc.SHA256,
                  chunk_size: int = 1024) -> TreeLoad:
    """:func:`load_or_build_tree`, giving a tree that holds no hashes until a
    peer first needs them (:class:`swift.core.merkle.DeferredTree`): they are
    then loaded the same way, from the cache when it is still current, else
    hashed again (a tree of another root then raises IntegrityError: the file
    changed under the seeder).  When the cache could not be written the tree
    is given whole, as built."""
    got = load_or_build_tree(path, hash_func, chunk_size)
    if not os.path.exists(mhash_path(path, hash_func, chunk_size) + ".stamp"):
        return got
    return TreeLoad(DeferredTree(got.tree, lambda: load_or_build_tree(
        path, hash_func, chunk_size).tree), got.status, got.message)
