"""Lingering close, sans-IO: a connection answered with an error and closed by us still reads.

A server that closes a socket with the client's bytes unread (or still arriving) makes the
kernel answer them with a reset, and a client still sending its request then gets a broken
pipe or a reset before it reads the answer it was sent (the 503 written at connect when every
slot is busy; a 400, 408, 413 or 431 while the request is still leaving). So after such an
answer the core ends its side (:class:`HalfClose`: the transport sends FIN once the answer has
left), then reads and discards what the client sends, and closes when the client ends its side,
or after ``idle`` s without a byte, or ``total`` s in all, or past ``max_bytes`` discarded
(each bounded: a lingering connection holds no slot, so it must not stay).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["HalfClose", "Lingering", "LingerLimits"]


@dataclass(frozen=True, slots=True)
class HalfClose:
    """End our side of ``conn`` (FIN) once what was written has left; keep reading."""

    conn: Hashable
    """The client connection."""


@dataclass(frozen=True, slots=True)
class LingerLimits:
    """How long a lingering connection may keep us reading."""

    idle: float = 2.0
    """Seconds without a byte from the client before we close."""
    total: float = 10.0
    """Seconds in all."""
    max_bytes: int = 1 << 20
    """Bytes discarded before we close (a client streaming a large body)."""


@dataclass(slots=True)
class _Linger:
    until: float
    last_byte: float
    discarded: int = 0


class Lingering:
    """The connections in a lingering close (module docstring)."""

    def __init__(self, limits: LingerLimits | None = None) -> None:
        self.limits = limits or LingerLimits()
        self._conns: dict[Hashable, _Linger] = {}

    def __contains__(self, conn: object) -> bool:
        return conn in self._conns

    def __len__(self) -> int:
        return len(self._conns)

    def start(self, conn: Hashable, now: float) -> None:
        """Our answer is written and our side ended: read what still comes."""
        self._conns[conn] = _Linger(now + self.limits.total, now)

    def received(self, conn: Hashable, n: int, now: float) -> bool:
        """``n`` bytes arrived on ``conn`` (0: the client ended its side); True: close it now."""
        lg = self._conns.get(conn)
        if lg is None:
            return False
        lg.discarded += n
        lg.last_byte = now
        if n == 0 or lg.discarded > self.limits.max_bytes:
            del self._conns[conn]
            return True
        return False

    def forget(self, conn: Hashable) -> None:
        """``conn`` is gone."""
        self._conns.pop(conn, None)

    def _due(self, lg: _Linger) -> float:
        return min(lg.until, lg.last_byte + self.limits.idle)

    def deadline(self) -> float | None:
        return min((self._due(lg) for lg in self._conns.values()), default=None)

    def expired(self, now: float) -> list[Hashable]:
        """Connections whose linger is over (forgotten here): close them."""
        out = [c for c, lg in self._conns.items() if self._due(lg) <= now]
        for c in out:
            del self._conns[c]
        return out
