"""File-backed chunk storage: positional reads/writes, nothing buffered in RAM."""

from __future__ import annotations

import os


class FileStorage:
    """``read(offset, n)``/``write(offset, data)`` on a file via pread/pwrite."""

    def __init__(self, path: str, writable: bool = False) -> None:
        self.path = path
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        self.fd = os.open(path, flags, 0o644)

    def read(self, offset: int, n: int) -> bytes:
        return os.pread(self.fd, n, offset)

    def write(self, offset: int, data: bytes) -> None:
        os.pwrite(self.fd, data, offset)

    def truncate(self, size: int) -> None:
        """Cut the file to the exact content size."""
        os.ftruncate(self.fd, size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
