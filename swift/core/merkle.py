"""Merkle hash trees for static content (RFC 7574 section 5).

Leaves are chunk hashes laid out by bin number (section 5.1); leaves past the
end of the content and nodes whose children are both empty are all-zero
hashes; any other node is ``H(left || right)``.  The root of the smallest
tree covering the content is the swarm ID.  Peak hashes (section 5.6.1) let
a receiver that knows only the root learn the number of chunks; the last
chunk then gives the exact size.

Hashes are kept in one flat ``bytearray`` indexed by bin number, as in
libswift's memory-mapped ``.mhash`` file, so a seeder saves it once and
restarts without rehashing (:meth:`MerkleTree.save`/:meth:`MerkleTree.load`).
With 8 KiB chunks and SHA-1 the file is 2*20/8192 = 0.49% of the content,
the paper's "0.5% of the content size" (section V-C).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from swift._fast import data_datagram, lowest_hit, merkle_uncles, merkle_walk, uncle_stop
from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.wire.constants import HASH_NAMES, HASH_SIZES, HashFunc


def _binmaps(known: Any) -> tuple[Binmap, Binmap] | None:
    """``known`` as two binmaps whose union it is (a :class:`Binmap` alone,
    or a union view with binmaps ``a`` and ``b``, as ``swift.core.content``'s
    of a peer's acknowledged and in-flight chunks), else None."""
    if type(known) is Binmap:
        return known, known
    a = getattr(known, "a", None)
    b = getattr(known, "b", None)
    if type(a) is Binmap and type(b) is Binmap:
        return a, b
    return None


class IntegrityError(ValueError):
    """Hashes or data that do not check out against the trusted root."""


def _nbins(n: int) -> int:
    """Bins in the flat buffer of an ``n``-chunk tree: up to the highest node
    whose range starts inside the content (the last one of each layer, up to
    the root); every node past it starts past the content and is the all-zero
    hash (5.1), so it is not stored.  Sized to the covering power of two
    before session 16: 262,144 bins instead of 229,376 for 102,400 chunks
    (1.08 MB more with SHA-256; docs/swift-perf.md, "Peak memory")."""
    top, m = 0, n
    for lay in range(B.layer(B.covering(n)) + 1):
        top = max(top, (1 << lay) - 1 + (m - 1) * (2 << lay))
        m = (m + 1) // 2
    return top + 1


def _old_nbins(n: int) -> int:
    """:func:`_nbins` as it was before session 16 (hash files of then still load)."""
    return 2 * B.width(B.covering(n))


#: known flags (0 or 1 a bin) as the digits of a base-2 number, and back
_FLAG_DIGITS = b"0" + b"1" * 255
_DIGIT_FLAGS = bytes(ord("1")) + b"\x01" + bytes(255 - ord("1"))


def _pack_flags(kn: bytearray) -> str:
    """The known flags of a tree, 8 a byte, in base64 (resume state's JSON).

    One hex byte per flag was 2 bytes of text per bin, made in the saving
    thread every ``SwiftNode.SAVE_EVERY`` s: 1.6 MB of transient memory for
    100 MiB at 1 KiB, a part of the leecher's peak (docs/swift-perf.md,
    "Peak memory (session 16)"); packed it is a quarter of that."""
    bits = int(kn.translate(_FLAG_DIGITS), 2)  # base 2: no digit limit, linear
    return base64.b64encode(bits.to_bytes((len(kn) + 7) // 8, "big")).decode()


def _unpack_flags(text: str, n: int) -> bytes:
    """:func:`_pack_flags` back to ``n`` flags."""
    bits = int.from_bytes(base64.b64decode(text), "big")
    if bits >> n:
        raise IntegrityError("hash file's known flags have the wrong size")
    return format(bits, f"0{n}b").encode().translate(_DIGIT_FLAGS)


def hasher(func: HashFunc) -> Callable[[bytes], hashlib._Hash]:
    """The hashlib constructor for a PPSPP Merkle hash function (7.6)."""
    ctor: Callable[[bytes], hashlib._Hash] = getattr(hashlib, HASH_NAMES[HashFunc(func)])
    return ctor


class MerkleTree:
    """Hash tree of one content; see the module docstring.

    A seeder builds it from the content (:meth:`build`); a leecher starts
    from the root hash (:meth:`for_root`) and fills it as verified hashes
    arrive.  ``known`` flags which node hashes are trusted.
    """

    def __init__(self, root_hash: bytes, func: HashFunc = HashFunc.SHA256,
                 chunk_size: int = 1024) -> None:
        self.func = HashFunc(func)
        self.hash_size = HASH_SIZES[self.func]
        if len(root_hash) != self.hash_size:
            raise ValueError("root hash size does not match the hash function")
        self._h = hasher(self.func)
        self.zero = bytes(self.hash_size)
        self.chunk_size = chunk_size
        self.root_hash = root_hash
        self.n_chunks: int | None = None
        #: exact content size in bytes once the last chunk is verified
        self.size: int | None = None
        self.root_bin: int | None = None
        self.last_missing = False
        self._hashes = bytearray()
        self._known = bytearray()
        #: (first chunk, end chunk, bin) of each peak, cached by :meth:`_alloc`
        self._peak_ranges: list[tuple[int, int, int]] = []

    # -- construction -----------------------------------------------------------

    def _alloc(self, n_chunks: int) -> None:
        self.n_chunks = n_chunks
        self.root_bin = B.covering(n_chunks)
        nbins = _nbins(n_chunks)
        self._hashes = bytearray(nbins * self.hash_size)
        self._known = bytearray(nbins)
        self._peak_ranges = [(*B.base_range(p), p) for p in B.peaks(n_chunks)]

    @classmethod
    def build(cls, chunks: Iterable[bytes], func: HashFunc = HashFunc.SHA256,
              chunk_size: int = 1024) -> MerkleTree:
        """Hash every chunk and every node (seeder side, section 5.1)."""
        h = hasher(func)
        leaves = bytearray()  # the digests back to back: no object per chunk
        size = 0
        for c in chunks:
            leaves += h(c).digest()
            size += len(c)
        return cls._from_digests(leaves, func, chunk_size, size)

    @classmethod
    def _from_digests(cls, leaves: bytearray, func: HashFunc, chunk_size: int,
                      size: int | None) -> MerkleTree:
        """The tree above leaf digests given back to back, built layer by
        layer in the flat hash buffer itself: no Python object per chunk or
        node (a 100 MiB file at 1 KiB made 200,000 of them and doubled the
        seeder's peak memory; docs/swift.md).  Nodes past the content hash
        from the all-zero hash (5.1, 5.5.1)."""
        hs = HASH_SIZES[HashFunc(func)]
        n = len(leaves) // hs
        if not n:
            raise ValueError("empty content has no Merkle tree")
        hb, kn = cls._buffers(n, hs)
        mv = memoryview(leaves)
        for i in range(n):  # leaf i is bin 2i
            hb[2 * i * hs:(2 * i + 1) * hs] = mv[i * hs:(i + 1) * hs]
        mv.release()
        return cls._above_leaves(hb, kn, n, func, chunk_size, size)

    @staticmethod
    def _buffers(n: int, hs: int) -> tuple[bytearray, bytearray]:
        """The flat hash buffer and known flags of an ``n``-chunk tree (leaves
        flagged known: the caller writes their digests)."""
        nbins = _nbins(n)
        kn = bytearray(nbins)
        kn[0:2 * n:2] = b"\x01" * n
        return bytearray(nbins * hs), kn

    @classmethod
    def _above_leaves(cls, hb: bytearray, kn: bytearray, n: int, func: HashFunc,
                      chunk_size: int, size: int | None) -> MerkleTree:
        """The tree whose ``n`` leaf digests are in place in ``hb`` (leaf i at
        bin 2i): every node above them, in the same buffer."""
        h = hasher(func)
        hs = HASH_SIZES[HashFunc(func)]
        zero = bytes(hs)
        root_bin = B.covering(n)
        m = n  # nodes at the layer below
        for lay in range(1, B.layer(root_bin) + 1):
            half = 1 << (lay - 1)
            base, step = (1 << lay) - 1, 2 << lay
            below, m = m, (m + 1) // 2
            for o in range(m):
                b = base + o * step
                a = bytes(hb[(b - half) * hs:(b - half + 1) * hs])
                c = bytes(hb[(b + half) * hs:(b + half + 1) * hs]) if 2 * o + 1 < below else zero
                d = zero if a == zero and c == zero else h(a + c).digest()
                hb[b * hs:(b + 1) * hs] = d
                kn[b] = 1
        t = cls(bytes(hb[root_bin * hs:(root_bin + 1) * hs]), func, chunk_size)
        t.n_chunks = n
        t.root_bin = root_bin
        t._hashes, t._known = hb, kn
        t._peak_ranges = [(*B.base_range(p), p) for p in B.peaks(n)]
        t.size = size
        return t

    @classmethod
    def from_file(cls, f: BinaryIO, func: HashFunc = HashFunc.SHA256,
                  chunk_size: int = 1024) -> MerkleTree:
        """Build from an open file, reading one chunk at a time.

        A file whose length ``fstat`` gives has each leaf digest written
        straight into its place in the tree's buffer: collecting the digests
        in a buffer of their own first held another n x hash size bytes at the
        build's peak (3.3 MB for 100 MiB at 1 KiB, SHA-256), the seeder's
        highest memory mark (docs/swift-perf.md, "Peak memory (session 16)")."""
        h = hasher(func)
        try:
            known_size = os.fstat(f.fileno()).st_size
        except (AttributeError, OSError, ValueError):
            known_size = 0  # not a file with a descriptor (a pipe's size is 0 too)
        if known_size > 0:
            hs = HASH_SIZES[HashFunc(func)]
            n = -(-known_size // chunk_size)
            hb, kn = cls._buffers(n, hs)
            size = i = 0
            while i < n:
                c = f.read(chunk_size)
                if not c:
                    break
                hb[2 * i * hs:(2 * i + 1) * hs] = h(c).digest()
                size += len(c)
                i += 1
            if i == n and not f.read(1):
                return cls._above_leaves(hb, kn, n, func, chunk_size, size)
            del hb, kn  # its length changed while we read it: hash it as it is now
            f.seek(0)
        leaves = bytearray()
        size = 0
        while True:
            c = f.read(chunk_size)
            if not c:
                break
            size += len(c)
            leaves += h(c).digest()
        return cls._from_digests(leaves, func, chunk_size, size)

    @classmethod
    def for_root(cls, root_hash: bytes, func: HashFunc = HashFunc.SHA256,
                 chunk_size: int = 1024, size: int | None = None) -> MerkleTree:
        """Leecher side: only the trusted root (and maybe the size) is known."""
        t = cls(root_hash, func, chunk_size)
        if size is not None:
            t._alloc(max(1, -(-size // chunk_size)))
            t.size = size
            t._put(t.root_bin, root_hash)  # type: ignore[arg-type]  # _alloc set root_bin
        return t

    # -- access -----------------------------------------------------------------

    def _put(self, b: int, d: bytes) -> None:
        hs = self.hash_size
        self._hashes[b * hs:(b + 1) * hs] = d
        self._known[b] = 1

    def known(self, b: int) -> bool:
        """True when the hash of node ``b`` is trusted."""
        return b < len(self._known) and self._known[b] == 1

    def hash(self, b: int) -> bytes:
        """Trusted hash of node ``b`` (zeros for nodes past the content)."""
        if self.n_chunks is not None and B.first_chunk(b) >= self.n_chunks:
            return self.zero
        if not self.known(b):
            raise KeyError(f"hash of bin {b} is not known")
        hs = self.hash_size
        return bytes(self._hashes[b * hs:(b + 1) * hs])

    @property
    def complete(self) -> bool:
        """True when every leaf hash is known (a seeder's tree)."""
        return self.n_chunks is not None and all(
            self._known[2 * i] for i in range(self.n_chunks))

    def peaks(self) -> list[tuple[int, bytes]]:
        """(bin, hash) of each peak, left to right (section 5.6.1)."""
        if self.n_chunks is None:
            return []
        return [(p, self.hash(p)) for _, _, p in self._peak_ranges]

    # -- section 5.6: automatic size detection --------------------------------

    def root_from_peaks(self, peaks: list[tuple[int, bytes]]) -> bytes | None:
        """Root hash the peaks add up to, or None if they are not well-formed."""
        if not peaks:
            return None
        first = 0
        for b, _ in peaks:
            lo, hi = B.base_range(b)
            if lo != first:
                return None
            first = hi
        if [p for p, _ in peaks] != B.peaks(first):
            return None
        top = B.covering(first)
        i = len(peaks) - 1
        b, d = peaks[i]
        i -= 1
        while b != top:
            if B.is_left(b):
                d = self._h(d + self.zero).digest()
            else:
                if i < 0 or peaks[i][0] != B.sibling(b):
                    return None
                d = self._h(peaks[i][1] + d).digest()
                i -= 1
            b = B.parent(b)
        return d if i < 0 else None

    def offer_peaks(self, peaks: list[tuple[int, bytes]]) -> bool:
        """Check peak hashes against the root; on success learn the chunk count."""
        if self.root_from_peaks(peaks) != self.root_hash:
            return False
        n = sum(B.width(b) for b, _ in peaks)
        if self.n_chunks is None:
            self._alloc(n)
            self._put(self.root_bin, self.root_hash)  # type: ignore[arg-type]  # _alloc set it
        elif self.n_chunks != n:
            return False
        for b, d in peaks:
            self._put(b, d)
        self._fill_above_peaks()
        return True

    def _fill_above_peaks(self) -> None:
        ps = self.peaks_known()
        if ps is None:
            return
        b, d = ps[-1]
        i = len(ps) - 2
        while b != self.root_bin:
            if B.is_left(b):
                d = self._h(d + self.zero).digest()
            else:
                d = self._h(ps[i][1] + d).digest()
                i -= 1
            b = B.parent(b)
            self._put(b, d)

    def peaks_known(self) -> list[tuple[int, bytes]] | None:
        """Peaks if all are trusted."""
        if self.n_chunks is None:
            return None
        out = []
        for p in B.peaks(self.n_chunks):
            if not self.known(p):
                return None
            out.append((p, self.hash(p)))
        return out

    # -- sections 5.2-5.4: verification and uncle hashes ----------------------

    def peak_for(self, chunk: int) -> int:
        """The peak bin above ``chunk``."""
        for lo, hi, p in self._peak_ranges:
            if lo <= chunk < hi:
                return p
        raise IndexError("chunk past the end of the content")

    def uncles(self, chunk: int, peer_has: Any = None) -> list[tuple[int, bytes]]:
        """Hashes the receiver needs for ``chunk``, tree height descending (5.4).

        As libswift does, stop at the chunk's peak and below any node under
        which ``peer_has`` (its acknowledgements; anything with ``any_in(lo,
        hi)``, e.g. a :class:`Binmap`) shows a chunk (5.3).
        """
        # the sibling at each layer below the stop, top down (C; twin in swift/_fast.py)
        return merkle_uncles(self._hashes, self._known, self.hash_size, self.n_chunks or 0,
                             chunk, self._stop_of(chunk, peer_has), self.zero)

    def data_datagram(self, channel: int, chunk: int, peer_has: Any, ts: bytes,
                      src: int | bytes | bytearray | memoryview, offset: int,
                      length: int) -> bytes:
        """One whole DATA datagram for ``chunk`` in chunk32 addressing (RFC
        7574 8.3-8.8): ``channel`` (the receiver's channel ID), an INTEGRITY
        message for each of :meth:`uncles` (``peer_has`` as there), then DATA
        with the packed timestamp ``ts`` and ``length`` payload bytes at
        ``offset`` of ``src`` (a file descriptor to pread, or a buffer).  The
        same bytes as building the messages one by one, in one C call (twin
        in swift/_fast.py); KeyError for an uncle hash not known, ValueError
        for a chunk number past 32 bits."""
        return data_datagram(channel, self._hashes, self._known, self.hash_size,
                             self.n_chunks or 0, chunk, self._stop_of(chunk, peer_has),
                             self.zero, ts, src, offset, length)

    def _peak_top(self, chunk: int) -> int:
        """The layer of the peak whose range holds ``chunk`` (IndexError past
        the end of the content)."""
        # the peaks are the set bits of n (largest first), so the chunk's
        # peak is at the highest bit where the chunk and n differ; a walk
        # over ``_peak_ranges`` (the old way) gives the same layer
        n = self.n_chunks or 0
        if not 0 <= chunk < n:
            raise IndexError("chunk past the end of the content")
        return (chunk ^ n).bit_length() - 1

    def _stop_of(self, chunk: int, peer_has: Any) -> int:
        """:meth:`_uncle_stop` for the usual two binmaps (a peer's acknowledged
        and in-flight chunks: once per DATA sent) in one C call, else that."""
        top = self._peak_top(chunk)
        m1 = getattr(peer_has, "a", peer_has)
        m2 = getattr(peer_has, "b", peer_has)
        if top and type(m1) is Binmap and type(m2) is Binmap:
            return uncle_stop(chunk, top, m1._h, m1._deep, m1.root, m1.root_layer,
                              m2._h, m2._deep, m2.root, m2.root_layer)
        return self._uncle_stop(chunk, peer_has)

    def _uncle_stop(self, chunk: int, peer_has: Any) -> int:
        """The layer below which :meth:`uncles` sends siblings: the chunk's
        peak's, or the lowest whose node covers a chunk ``peer_has`` shows."""
        top = self._peak_top(chunk)
        pair = _binmaps(peer_has) if top else None
        if pair is not None:  # the search below, in one C call (twin in swift/_fast.py)
            m1, m2 = pair
            return uncle_stop(chunk, top, m1._h, m1._deep, m1.root, m1.root_layer,
                              m2._h, m2._deep, m2.root, m2.root_layer)
        if peer_has is not None and top:
            # "peer has a chunk under the ancestor at layer m" is monotone in m
            any_in = peer_has.any_in

            def hit(m: int) -> bool:
                a = (chunk >> m) << m
                return bool(any_in(a, a + (1 << m)))

            return lowest_hit(top, hit)
        return top

    def verify(self, chunk: int, data: bytes, offered: dict[int, bytes] | None = None) -> bool:
        """Check ``data`` as chunk ``chunk`` against trusted hashes (5.2).

        ``offered`` holds untrusted hashes from INTEGRITY messages.  On
        success, every hash on the path becomes trusted; on failure nothing
        changes.
        """
        n = self.n_chunks
        root = self.root_bin  # set with n_chunks
        #: True when the last failed verify lacked a hash (not a mismatch)
        self.last_missing = False
        if n is None or root is None or not 0 <= chunk < n:
            self.last_missing = n is None
            return False
        cs = self.chunk_size
        if chunk < n - 1 and len(data) != cs:
            return False
        if chunk == n - 1 and not 0 < len(data) <= cs:
            return False
        # the walk up to the first trusted node, in C (twin: swift/_fast.py);
        # the bin arithmetic of swift.core.bins (4.2) is inlined there
        got = merkle_walk(self._hashes, self._known, self.hash_size, n, root, chunk,
                          self._h(data).digest(), offered or {}, self._h, self.zero)
        if got != 1:
            self.last_missing = got < 0
            return False
        if chunk == n - 1:
            self.size = (n - 1) * cs + len(data)
        return True

    def leaf_ok(self, chunk: int, data: bytes) -> bool:
        """True when ``data`` hashes to the trusted leaf hash of ``chunk``."""
        b = B.chunk(chunk)
        return self.known(b) and self._h(data).digest() == self.hash(b)

    # -- persistence ------------------------------------------------------------

    def save(self, path: str) -> None:
        """Write ``path`` (hashes by bin, like libswift's .mhash) and ``path.json``."""
        self.write_snapshot(path, self.snapshot())

    def snapshot(self) -> tuple[bytearray, dict[str, Any]]:
        """Hashes and metadata as they are now; :meth:`write_snapshot` can then
        run in another thread (no file I/O on a download's event loop).

        Only the known flags are copied, not the hashes (a copy was the
        tree's whole size again, every ``SwiftNode.SAVE_EVERY`` seconds: 8 MB
        for 100 MiB at 1 KiB chunks): the hash buffer is handed over as it
        is.  That is safe because a trusted hash is written once and never
        changes (:meth:`verify` and :meth:`_put` write only bins not yet
        known, or the same bytes again), so every bin the snapshot's flags
        call known is final; bins verified meanwhile may reach the file
        half-written, but the file's flags call them unknown and
        :meth:`load` ignores them.  The buffer is never resized once
        allocated (:meth:`_alloc` replaces it instead)."""
        kn = self._known
        meta = {"version": 1, "root_hash": self.root_hash.hex(), "hash_func": int(self.func),
                "chunk_size": self.chunk_size, "n_chunks": self.n_chunks, "size": self.size,
                "known": None}
        if kn.find(0) >= 0:
            meta["known_bits"] = _pack_flags(kn)
            meta["known_n"] = len(kn)
        return self._hashes, meta

    @staticmethod
    def write_snapshot(path: str, snap: tuple[bytes | bytearray, dict[str, Any]]) -> None:
        """Write a :meth:`snapshot` to ``path`` and ``path.json`` (atomic renames)."""
        raw, meta = snap
        tmp = path + ".tmp"
        with open(tmp, "wb", buffering=0) as f:  # unbuffered: no copy of the hashes
            view = memoryview(raw)
            while view:
                view = view[f.write(view) or 0:]
        os.replace(tmp, path)
        with open(path + ".json.tmp", "w") as f:
            json.dump(meta, f)
        os.replace(path + ".json.tmp", path + ".json")

    @classmethod
    def load(cls, path: str) -> MerkleTree:
        """Read a tree saved by :meth:`save`; checks it against its root hash."""
        with open(path + ".json") as f:
            meta = json.load(f)
        t = cls(bytes.fromhex(meta["root_hash"]), HashFunc(meta["hash_func"]), meta["chunk_size"])
        if meta["n_chunks"] is None:
            return t
        t._alloc(meta["n_chunks"])
        old = _old_nbins(meta["n_chunks"])  # a file written before session 16: its prefix
        with open(path, "rb", buffering=0) as f:  # straight into the tree: no copy of it
            if os.fstat(f.fileno()).st_size not in (len(t._hashes), old * t.hash_size):
                raise IntegrityError("hash file has the wrong size")
            view = memoryview(t._hashes)
            got = 0
            while got < len(view):
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
            view.release()
        if got != len(t._hashes):
            raise IntegrityError("hash file has the wrong size")
        if meta.get("known_bits") is not None:
            # without known_n: written at 4dd67ea, flags for the old layout
            flags = _unpack_flags(meta["known_bits"], meta.get("known_n", old))
        elif meta["known"]:  # written before session 16: one hex byte per flag
            flags = bytes.fromhex(meta["known"])
        else:
            flags = b"\x01" * len(t._known)
        if len(flags) == old != len(t._known):
            flags = flags[:len(t._known)]  # the bins past it start past the content
        if len(flags) != len(t._known):
            raise IntegrityError("hash file's known flags have the wrong size")
        t._known[:] = flags
        t.size = meta["size"]
        pk = t.peaks_known()
        if pk is None or t.root_from_peaks(pk) != t.root_hash:
            raise IntegrityError("hash file does not add up to its root hash")
        if t.hash(t.root_bin) != t.root_hash:  # type: ignore[arg-type]  # loaded: root_bin set
            raise IntegrityError("hash file root mismatch")
        return t


class DeferredTree(MerkleTree):
    """A complete tree whose hashes are not held until first used.

    It knows its root, size and shape at once; the first access to the hashes
    calls ``load`` (a complete tree of the same root, e.g. read back from the
    cached hash file) and keeps what it gives.  ``ppspp seed`` serves each
    file as a SHA-1 swarm for libswift leechers besides the SHA-256 one
    (docs/swift-libswift-compat.md); the SHA-1 tree was held from the start,
    5.5 MB at 100 MiB and 1 KiB, for a swarm most runs never see a peer of
    (docs/swift-perf.md, "Peak memory (session 16)")."""

    def __init__(self, tree: MerkleTree, load: Callable[[], MerkleTree]) -> None:
        super().__init__(tree.root_hash, tree.func, tree.chunk_size)
        if tree.n_chunks is None:
            raise ValueError("a deferred tree needs a complete tree's shape")
        self.n_chunks, self.root_bin, self.size = tree.n_chunks, tree.root_bin, tree.size
        self._peak_ranges = list(tree._peak_ranges)
        del self._hashes, self._known  # looked up (and loaded) by __getattr__
        self._load: Callable[[], MerkleTree] | None = load

    @property
    def loaded(self) -> bool:
        """True once the hashes are held."""
        return "_hashes" in self.__dict__

    def __getattr__(self, name: str) -> bytearray:
        """Only reached for an attribute the instance lacks: the hashes before
        their first use (afterwards they are plain instance attributes)."""
        load = self.__dict__.get("_load")
        if name not in ("_hashes", "_known") or load is None:
            raise AttributeError(name)
        full = load()
        if (full.root_hash != self.root_hash or full.func != self.func
                or full.n_chunks != self.n_chunks or full.chunk_size != self.chunk_size):
            raise IntegrityError("the reloaded hash tree is not this swarm's (the file changed?)")
        self._hashes, self._known = full._hashes, full._known
        self._load = None
        return self._hashes if name == "_hashes" else self._known
