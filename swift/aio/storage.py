"""File-backed chunk storage: positional reads/writes, at most 256 KiB buffered."""

from __future__ import annotations

import os


class FileStorage:
    """``read(offset, n)``/``write(offset, data)`` on a file via pread/pwrite.

    Writes that continue the previous one are gathered (up to
    ``GATHER`` bytes) and written with one pwrite at the next :meth:`flush`,
    read, truncate or close: a sequential download then costs one system
    call per receive batch instead of one per 1 KiB chunk.  The peer flushes
    at the end of every batch of datagrams (``Peer.datagrams_to_send``), so
    nothing waits longer than that; the content is never held whole in RAM.
    """

    GATHER = 256 * 1024

    def __init__(self, path: str, writable: bool = False) -> None:
        self.path = path
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        self.fd = os.open(path, flags, 0o644)
        self._off = 0
        self._buf = bytearray()

    def read(self, offset: int, n: int) -> bytes:
        if self._buf:
            self.flush()
        return os.pread(self.fd, n, offset)

    def payload_source(self) -> int:
        """The file descriptor for ``MerkleTree.data_datagram`` to pread a
        chunk from straight into its datagram (no bytes object per chunk),
        after writing what :meth:`write` gathered, as :meth:`read` does."""
        if self._buf:
            self.flush()
        return self.fd

    def write(self, offset: int, data: bytes) -> None:
        buf = self._buf
        if buf and offset == self._off + len(buf) and len(buf) < self.GATHER:
            buf += data
            return
        if buf:
            self.flush()
        self._off = offset
        self._buf = bytearray(data)

    def flush(self) -> None:
        """Write what :meth:`write` gathered."""
        if not self._buf:
            return
        view = memoryview(self._buf)
        off = self._off
        while view:
            n = os.pwrite(self.fd, view, off)
            view = view[n:]
            off += n
        self._buf = bytearray()

    def truncate(self, size: int) -> None:
        """Cut the file to the exact content size."""
        self.flush()
        os.ftruncate(self.fd, size)

    def close(self) -> None:
        if self.fd >= 0:
            self.flush()
            os.close(self.fd)
            self.fd = -1
