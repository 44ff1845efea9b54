"""What every corecast role shares to be a :class:`deliverykit.protocol.DatagramCore`.

A role's protocol methods (``Itr.handle_inner``, ``Etr.handle_data``,
``Source.tick`` ...) return the datagrams they produce; driven through the one
core protocol, those datagrams wait in the role's outbox until the driver asks
for them (:meth:`Outbox.datagrams_to_send`), and its events wait in a bounded
queue until :meth:`Outbox.next_event`.  The role adds ``datagram_received``,
``get_timer`` and ``handle_timer`` (its real deadlines).

Addresses: a role names a remote as its UDP driver does, ``(host, port)``; the
simulator uses the same tuples (docs/corecast.md, "One core protocol").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

# how a driver names a remote: a socket address on UDP, ``(host, port)`` in the
# simulator (the roles read ``(host, port)`` of it with host_port)
from corecast.core.events import CorecastEvent
from deliverykit.protocol import Address as Address

#: a datagram a role sends: always to ``(host, port)``
Datagram = tuple[bytes, tuple[str, int]]

#: events kept for the application before the oldest are dropped (remote peers drive them)
MAX_PENDING_EVENTS = 4096


class Outbox:
    """The outbox and event queue of a driven role (a mixin; call :meth:`_init_outbox`)."""

    __slots__ = ("_ev", "_out")

    _out: list[Datagram]
    _ev: deque[CorecastEvent]

    def _init_outbox(self) -> None:
        self._out = []
        self._ev = deque(maxlen=MAX_PENDING_EVENTS)

    def _queue(self, items: Iterable[Datagram]) -> None:
        """Datagrams a protocol method produced, for the next :meth:`datagrams_to_send`."""
        self._out.extend(items)

    def _event(self, event: CorecastEvent) -> None:
        self._ev.append(event)

    def datagrams_to_send(self, now: float) -> list[Datagram]:
        """Everything queued since the last call (the driver calls it until it is empty)."""
        out = self._out
        if not out:
            return []
        self._out = []
        return out

    def next_event(self) -> CorecastEvent | None:
        """The oldest event not yet handed out, or None."""
        return self._ev.popleft() if self._ev else None


def host_port(addr: Address) -> tuple[str, int]:
    """``(host, port)`` of a driver's address (a UDP or simulator tuple; IPv6 tuples
    carry flow info and scope id after them)."""
    if not isinstance(addr, tuple) or len(addr) < 2:
        raise TypeError(f"a corecast role needs (host, port) addresses, not {addr!r}")
    return str(addr[0]), int(addr[1])


def just_after(t: float) -> float:
    """A deadline just past ``t``: a check written ``now - start > span`` (or ``>=``
    with ``t = start + span``) holds at it despite float rounding, so a timer set
    for ``t`` never runs twice at the same instant without effect."""
    if t in (float("inf"), float("-inf")):
        return t
    return t + abs(t) * 1e-12 + 1e-9


def earliest(*deadlines: float | None) -> float | None:
    """The earliest of the deadlines that are set (None when none is)."""
    best: float | None = None
    for d in deadlines:
        if d is not None and (best is None or d < best):
            best = d
    return best
