"""Chunk addressing for :class:`swift.core.peer.Peer` (RFC 7574 4.3, 8.4).

:class:`ChunkSpecs` converts between chunk ranges ``[lo, hi)`` and the wire
chunk specifications of the swarm's addressing method (chunk ranges, bins,
byte ranges).  It holds no protocol state: the swarm's metadata and the
content, whose size ends a byte range.
"""

from __future__ import annotations

import dataclasses
import struct

from swift.core import bins as B
from swift.core.config import PeerConfig
from swift.core.content import Content
from swift.core.live import LiveContent
from swift.core.merkle import MerkleTree
from swift.wire import codec as C
from swift.wire.constants import VARIABLE_CHUNK_SIZE, ChunkAddressing, MsgType

_PACK_II = struct.Struct(">II").pack


class ChunkSpecs:
    """The swarm's chunk addressing, both ways."""

    def __init__(self, config: PeerConfig, content: Content | LiveContent,
                 ctx: C.WireContext) -> None:
        self.config = config
        self.content = content
        self.ctx = ctx
        #: chunk ranges as two 32-bit numbers (the default): packed at once
        self.chunk32 = config.addressing == ChunkAddressing.CHUNK32

    def to_chunks(self, start: int, end: int) -> tuple[int, int]:
        """Wire chunk spec (``start``, ``end`` as decoded) -> chunks ``[lo, hi)``."""
        if self.chunk32:  # the default (twice per libswift HAVE i, ACK i datagram)
            return start, end + 1
        a = self.config.addressing
        if a in (ChunkAddressing.BIN32, ChunkAddressing.BIN64):
            if start in (B.NONE32, B.NONE64):
                return 0, 0
            return B.base_range(start)
        if a == ChunkAddressing.BYTE64:
            cs = self.config.chunk_size
            return start // cs, end // cs + 1
        return start, end + 1

    def specs(self, lo: int, hi: int, clip: bool = True) -> list[tuple[int, int]]:
        """Chunks ``[lo, hi)`` -> wire (start, end) pairs.

        Byte ranges end at the content size (``clip``) except for Merkle
        nodes, whose range is the whole subtree (section 5.4).
        """
        a = self.config.addressing
        if a in (ChunkAddressing.BIN32, ChunkAddressing.BIN64):
            return [(b, b) for b in B.from_range(lo, hi - 1)]
        if a == ChunkAddressing.BYTE64:
            cs = self.config.chunk_size
            end = hi * cs
            tree = self.content.tree
            size = tree.size if isinstance(tree, MerkleTree) else None  # live: unbounded
            if clip and size is not None:
                end = min(end, size)
            return [(lo * cs, end - 1)]
        return [(lo, hi - 1)]

    def size_seen(self, data: bytes, msgs: list[C.RawMessage], error: str | None) -> int | None:
        """Until a chunk verifies: a DATA longer than our chunk size (its tail
        then misreads as more messages) or shorter for a chunk that is not the
        last one is another swarm's chunking; its size (a power of two, RFC
        7574 8.1 leaves it to the swarm metadata), or None."""
        cs = self.config.chunk_size
        n = self.content.n_chunks
        sizes = []
        if error:
            try:
                _, whole, _ = C.decode_raw(data, dataclasses.replace(
                    self.ctx, chunk_size=VARIABLE_CHUNK_SIZE))
            except C.DecodeError:
                return None
            sizes = [len(m[4]) for m in whole if m[0] == MsgType.DATA and len(m[4]) > cs]
        for m in msgs:
            if (m[0] == MsgType.DATA and len(m[4]) < cs and self.chunk32 and n is not None
                    and m[2] + 1 < n):
                sizes.append(len(m[4]))
        for size in sizes:
            if size >= 64 and not size & (size - 1):
                return size
        return None

    def wire(self, lo: int, hi: int, clip: bool = False) -> bytes:
        """On-the-wire chunk specification of the aligned range [lo, hi)
        (``clip``: a byte range ends at the content size, as for DATA)."""
        if self.chunk32 and 0 <= lo < hi <= 1 << 32:  # the default: no list, one pack
            return _PACK_II(lo, hi - 1)
        s, t = self.specs(lo, hi, clip)[0]
        return C.encode_spec(self.ctx, s, t)
