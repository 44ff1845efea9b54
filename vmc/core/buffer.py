"""The per-session buffer: a sliding window over the bytes that have flowed (paper sec. 2, 3.2).

"The router ... can send the missed content to the client from its buffer."
Memory must stay bounded, so the buffer keeps at most ``window`` bytes: the
most recent ones. It always knows which span it still holds,
``[base, received)``; anything before ``base`` must come from the origin by
Range (or from a joiner's own fetch). A window of 0 keeps nothing (pure
live relay); a window >= the object length keeps the whole object for the
session's life.

Chunks are kept as the ``bytes`` objects received (no copying on append); a
chunk straddling ``base`` is kept whole but reads never return bytes before
``base``, so what the buffer reports is exactly what a reader can get.
"""

from __future__ import annotations

from collections import deque

from vmc.core.errors import BufferGone


class SessionBuffer:
    """Bounded window over a byte stream that started at offset 0."""

    __slots__ = ("window", "_chunks", "_held", "received", "base", "peak")

    def __init__(self, window: int) -> None:
        if window < 0:
            raise ValueError("window must be >= 0")
        self.window = window
        self._chunks: deque[tuple[int, bytes]] = deque()  # (start offset, data)
        self._held = 0  # sum of len(data) over _chunks
        #: Bytes appended so far: the live edge of the stream.
        self.received = 0
        #: First offset still readable; ``received`` when nothing is held.
        self.base = 0
        #: Largest number of bytes held at once (for the memory figures).
        self.peak = 0

    @property
    def held(self) -> int:
        """Bytes currently readable: ``received - base``."""
        return self.received - self.base

    @property
    def memory(self) -> int:
        """Bytes of chunk storage referenced (>= held by at most one chunk)."""
        return self._held

    def append(self, data: bytes) -> None:
        """Add the next bytes of the stream and drop what falls out of the window."""
        if not data:
            return
        start = self.received
        self.received += len(data)
        if self.window == 0:
            self.base = self.received
            return
        self._chunks.append((start, bytes(data)))
        self._held += len(data)
        self.base = max(self.base, self.received - self.window)
        while self._chunks and self._chunks[0][0] + len(self._chunks[0][1]) <= self.base:
            _, old = self._chunks.popleft()
            self._held -= len(old)
        self.peak = max(self.peak, self._held)

    def holds(self, first: int, end: int | None = None) -> bool:
        """True when ``[first, end)`` (``end`` default first+1) is inside ``[base, received)``."""
        end = first + 1 if end is None else end
        return self.base <= first and end <= self.received and first < end

    def read(self, first: int, end: int) -> bytes:
        """Bytes ``[first, min(end, received))``; BufferGone if ``first`` is not held."""
        end = min(end, self.received)
        if not self.holds(first, end):
            raise BufferGone(f"[{first}, {end}) not in [{self.base}, {self.received})")
        parts: list[bytes] = []
        for start, data in self._chunks:
            stop = start + len(data)
            if stop <= first:
                continue
            if start >= end:
                break
            parts.append(data[max(first, start) - start : min(end, stop) - start])
        return b"".join(parts)

    def clear(self) -> None:
        """Release all held bytes (end of session)."""
        self._chunks.clear()
        self._held = 0
        self.base = self.received
