"""Content of one swarm: Merkle tree, verified-chunk binmap and storage.

Storage is injected (anything with ``read(offset, n)``/``write(offset, data)``):
the sans-IO core never opens files itself; :mod:`swift.aio.storage` gives a
file-backed one that never buffers the whole content in RAM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.core.live import LiveContent
from swift.core.merkle import MerkleTree


class Storage(Protocol):
    """Byte-addressed content store."""

    def read(self, offset: int, n: int) -> bytes: ...

    def write(self, offset: int, data: bytes) -> None: ...


#: where a chunk's bytes can be read from straight into a datagram: a file
#: descriptor to pread, or a buffer
PayloadSource = int | bytes | bytearray | memoryview


@runtime_checkable
class DirectSource(Protocol):
    """A :class:`Storage` that also lends its bytes to the DATA builder
    (:meth:`MerkleTree.data_datagram`), so no bytes object is made per chunk:
    :class:`MemoryStorage` and :class:`swift.aio.storage.FileStorage`."""

    def payload_source(self) -> PayloadSource: ...


@runtime_checkable
class Gathers(Protocol):
    """A :class:`Storage` that gathers writes and must be told to write them
    (:class:`swift.aio.storage.FileStorage`: consecutive chunks, one pwrite)."""

    def flush(self) -> None: ...


class MemoryStorage:
    """Storage in a bytearray (tests and small demos)."""

    def __init__(self, data: bytes = b"") -> None:
        self.buf = bytearray(data)

    def read(self, offset: int, n: int) -> bytes:
        return bytes(self.buf[offset:offset + n])

    def payload_source(self) -> PayloadSource:
        return self.buf

    def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > len(self.buf):
            self.buf.extend(bytes(end - len(self.buf)))
        self.buf[offset:end] = data


class _Either:
    """Union view of two binmaps for :meth:`MerkleTree.uncles`."""

    __slots__ = ("a", "b")

    def __init__(self, a: Binmap, b: Binmap) -> None:
        self.a, self.b = a, b

    def find_filled(self, lo: int, hi: int) -> int | None:
        x = self.a.find_filled(lo, hi)
        y = self.b.find_filled(lo, hi if x is None else x)
        return y if y is not None else x

    def is_empty(self, b: int) -> bool:
        return self.a.is_empty(b) and self.b.is_empty(b)

    def any_in(self, lo: int, hi: int) -> bool:
        return self.b.any_in(lo, hi) or self.a.any_in(lo, hi)


class Content:
    """What a peer knows and holds of one swarm's content."""

    live = False

    def __init__(self, tree: MerkleTree, storage: Storage) -> None:
        self.tree = tree
        self.storage = storage
        #: the storage lends its bytes to the DATA builder (decided once here)
        self._direct = isinstance(storage, DirectSource)
        self._gathers = isinstance(storage, Gathers)
        self.chunk_size = tree.chunk_size
        #: verified chunks on storage (local availability, section 3.2)
        self.have = Binmap()
        # :attr:`complete` without a binmap search per verified chunk: how
        # many chunks of [0, _cn) binmap _cm held at its version _cv.
        # store_chunk keeps the count while nothing else touched the binmap;
        # any other change (another version, binmap or n_chunks) recounts
        self._cm: Binmap | None = None
        self._cv = -1
        self._cn = -1
        self._filled = 0

    @classmethod
    def seeded(cls, tree: MerkleTree, storage: Storage) -> Content:
        """A complete copy (seeder)."""
        c = cls(tree, storage)
        c.have.set_range(0, tree.n_chunks or 0)
        return c

    @property
    def n_chunks(self) -> int | None:
        """Number of chunks once known."""
        return self.tree.n_chunks

    @property
    def complete(self) -> bool:
        """True when every chunk is verified and stored (``have`` holds all
        of ``[0, n_chunks)``: the count kept by :meth:`store_chunk`, recounted
        when the binmap changed otherwise)."""
        n = self.tree.n_chunks
        if n is None:
            return False
        have = self.have
        if have is not self._cm or have.version != self._cv or n != self._cn:
            self._recount(have, n)
        return self._filled >= n

    def _recount(self, have: Binmap, n: int) -> None:
        filled = 0
        for lo, hi in have.ranges():
            if lo >= n:
                break
            filled += min(hi, n) - lo
        self._cm, self._cv, self._cn, self._filled = have, have.version, n, filled

    def read_chunk(self, i: int) -> bytes:
        """Chunk ``i`` from storage."""
        return self.storage.read(i * self.chunk_size, self.chunk_size)

    def payload_source(self) -> PayloadSource | None:
        """What :meth:`MerkleTree.data_datagram` reads chunks from, or None
        when the storage offers only :meth:`Storage.read`."""
        return cast(DirectSource, self.storage).payload_source() if self._direct else None

    def store_chunk(self, i: int, data: bytes) -> None:
        """Write a verified chunk and mark it present."""
        self.storage.write(i * self.chunk_size, data)
        have = self.have
        if have is self._cm and have.version == self._cv and i >= 0:
            # the count is current: keep it so (add_new: True when i was empty)
            if have.add_new(i) and i < self._cn:
                self._filled += 1
            self._cv = have.version
        else:
            have.add(i)

    def flush(self) -> None:
        """Let the storage write what it gathered (``FileStorage`` gathers
        consecutive chunk writes into one pwrite)."""
        if self._gathers:
            cast(Gathers, self.storage).flush()

    def holds(self, i: int, data: bytes) -> bool:
        """True when ``data`` is chunk ``i`` as we hold it (its trusted leaf
        hash matches): a duplicate DATA we may acknowledge (3.4)."""
        return self.have.has(i) and self.tree.leaf_ok(i, data)

    def resume(self) -> int:
        """Mark chunks already on storage whose leaf hash is trusted; returns count."""
        n = self.tree.n_chunks
        if n is None:
            return 0
        got = 0
        for i in range(n):
            if self.tree.known(B.chunk(i)):
                data = self.read_chunk(i)
                if i == n - 1 and self.tree.size is not None:
                    data = data[:self.tree.size - i * self.chunk_size]
                if data and self.tree.leaf_ok(i, data):
                    self.have.set(B.chunk(i))
                    got += 1
        return got

    def chunk_bytes(self, i: int) -> bytes:
        """Chunk ``i`` trimmed to the content size."""
        data = self.read_chunk(i)
        t = self.tree
        if i == (t.n_chunks or 0) - 1 and t.size is not None:
            data = data[:t.size - i * self.chunk_size]
        return data

    def integrity_for(self, i: int, peer_have: Binmap, cold: bool,
                      sent: Binmap | None = None) -> list[tuple[str, int, bytes]]:
        """Items ("h", bin, hash) to put before DATA i: peaks for a cold peer
        (5.6.2), then uncle hashes by height descending (5.4).

        ``sent`` (chunks already sent, not yet acknowledged) lets us skip
        hashes those datagrams carried, the optimisation of section 5.3; a
        chunk sent before is a retransmission and gets its full uncle list.
        """
        hs = list(self.tree.peaks()) if cold else []
        known: Binmap | _Either = peer_have
        if sent is not None and not sent.has(i):
            known = _Either(peer_have, sent)
        hs.extend(self.tree.uncles(i, known))
        return [("h", b, h) for b, h in hs]

    def verify(self, i: int, data: bytes, hashes: list[tuple[int, bytes]],
               sigs: dict[int, tuple[int, bytes]], now: float) -> bool:
        """Learn the size from peak hashes if needed, then check chunk ``i``."""
        t = self.tree
        if t.n_chunks is None and hashes:
            peaks = []
            first = 0
            last_w = 1 << 62
            for b, h in hashes:
                lo, hi = B.base_range(b)
                if lo != first or hi - lo >= last_w:
                    break
                peaks.append((b, h))
                first, last_w = hi, hi - lo
            if not peaks or not t.offer_peaks(peaks):
                return False
        return t.verify(i, data, dict(hashes))


@dataclass(frozen=True, slots=True)
class ContentView:
    """A swarm's content seen as the one kind it is: static (a Merkle tree
    over a fixed size, :class:`Content`) or live (:class:`LiveContent`).

    The Peer and its components (``RequestScheduler``, ``UploadScheduler``,
    ``Verifier``) each branch on that kind; they read it here instead of
    each testing the content's class in its constructor, and nothing probes
    a content for attributes only one kind has."""

    #: the content, whichever kind
    content: Content | LiveContent
    #: the content as live content (None: static)
    live: LiveContent | None
    #: the content as static content (None: live)
    static: Content | None
    #: ``live is not None``
    is_live: bool

    @classmethod
    def of(cls, content: Content | LiveContent | ContentView) -> ContentView:
        """The view of ``content`` (itself, if it is one already)."""
        if isinstance(content, ContentView):
            return content
        live = content if isinstance(content, LiveContent) else None
        static = content if isinstance(content, Content) else None
        return cls(content, live, static, live is not None)
