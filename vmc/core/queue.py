"""Per-client queues with detach-on-slow (issue 6: "a slow client never stalls the others").

The session's reader appends each origin chunk to every subscriber's queue
and never waits for a client. A queue is bounded in bytes; the chunk that
would push it past ``limit`` is refused and the queue is marked *detached*:
its owner stops taking the live stream and continues from ``next_offset`` on
its own (buffer, then its own origin Range fetch). Offsets are tracked so the
owner knows exactly where the live stream left it.
"""

from __future__ import annotations

from collections import deque


class ClientQueue:
    """Bounded FIFO of stream chunks for one subscriber, starting at ``offset``."""

    __slots__ = ("limit", "_q", "queued", "next_offset", "detached", "peak", "closed")

    def __init__(self, offset: int, limit: int) -> None:
        if limit <= 0:
            raise ValueError("limit must be > 0")
        self.limit = limit
        self._q: deque[bytes] = deque()
        #: Bytes waiting in the queue.
        self.queued = 0
        #: Stream offset of the first byte not yet taken by the owner (the queue head).
        self.next_offset = offset
        #: Set once a push was refused: the owner must fetch from ``end_offset`` itself.
        self.detached = False
        #: Set by :meth:`close`: no more chunks will come (stream ended or failed).
        self.closed = False
        #: Largest ``queued`` seen.
        self.peak = 0

    @property
    def end_offset(self) -> int:
        """Offset just after the last queued byte: where a detached owner resumes."""
        return self.next_offset + self.queued

    def push(self, offset: int, data: bytes) -> bool:
        """Offer the chunk starting at ``offset``; False (and detached) when it does not fit.

        Chunks must be contiguous; a chunk already (partly) taken is trimmed.
        """
        if self.detached or self.closed:
            return False
        end = self.end_offset
        if offset + len(data) <= end:
            return True
        if offset > end:
            raise ValueError(f"gap in stream: queue at {end}, chunk at {offset}")
        data = data[end - offset :]
        if self.queued + len(data) > self.limit and self.queued > 0:
            self.detached = True
            return False
        self._q.append(data)
        self.queued += len(data)
        self.peak = max(self.peak, self.queued)
        return True

    def pop(self) -> bytes | None:
        """Next chunk, or None when empty."""
        if not self._q:
            return None
        data = self._q.popleft()
        self.queued -= len(data)
        self.next_offset += len(data)
        return data

    def close(self) -> None:
        """No more chunks will be pushed."""
        self.closed = True

    def __len__(self) -> int:
        return len(self._q)
