"""Which client connection gives up its slot when the proxy is full (issue 13 item 8).

A slow-loris client opens many connections and trickles a request head, one
header line every few seconds, so that every slot is held by a request that
never completes. Two rules defeat it:

- a request head has a total deadline (the driver's ``head_timeout``), not a
  per-read one;
- when a new connection arrives at the limit, the connection that has held a
  slot longest *without a complete request* (silent since it connected, part of
  a head, or a request body still arriving) is evicted to make room; failing
  that, the longest idle kept-alive connection (its client has been served and
  reconnects if it needs to). A connection whose request is being answered is
  never evicted: then the newcomer is refused (503).

Sans-IO: the driver says when a connection moves between phases, with ``now``.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass


class Phase(enum.Enum):
    """Where a client connection is in its request cycle."""

    NEW = "new"
    """Connected, no byte of a request yet."""
    HEAD = "head"
    """Part of a request head received."""
    BODY = "body"
    """Head complete, the request body still arriving."""
    BUSY = "busy"
    """A complete request is being answered."""
    KEPT = "kept"
    """Kept alive after a completed exchange, waiting for the next request."""


#: Phases in which a connection holds a slot without a complete request: evicted first.
INCOMPLETE = frozenset({Phase.NEW, Phase.HEAD, Phase.BODY})


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a new connection."""

    admitted: bool
    """True when the new connection may proceed (it now holds a slot)."""
    evict: int | None = None
    """A connection to close first to make room (None: none needed)."""
    evicted_phase: Phase | None = None
    """The phase the evicted connection was in."""


class Admission:
    """At most ``limit`` connections hold slots; see the module docstring for who is evicted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._phase: dict[int, Phase] = {}
        #: Slot holders without a complete request, oldest first (time of entering that group).
        self._incomplete: OrderedDict[int, float] = OrderedDict()
        #: Kept-alive connections, longest idle first.
        self._kept: OrderedDict[int, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._phase)

    def phase(self, conn: int) -> Phase | None:
        return self._phase.get(conn)

    def admit(self, conn: int, now: float) -> Decision:
        """A new connection ``conn`` arrived at ``now``."""
        victim: int | None = None
        if len(self._phase) >= self.limit:
            pool = self._incomplete or self._kept
            if not pool:
                return Decision(False)
            victim = next(iter(pool))
        decision = Decision(True, victim, self._phase.get(victim) if victim is not None else None)
        if victim is not None:
            self.leave(victim)
        self._phase[conn] = Phase.NEW
        self._incomplete[conn] = now
        return decision

    def move(self, conn: int, phase: Phase, now: float) -> None:
        """``conn`` entered ``phase`` at ``now`` (ignored for a connection that holds no slot)."""
        old = self._phase.get(conn)
        if old is None or old is phase:
            return
        self._phase[conn] = phase
        was_incomplete, is_incomplete = old in INCOMPLETE, phase in INCOMPLETE
        if was_incomplete and not is_incomplete:
            del self._incomplete[conn]
        if old is Phase.KEPT:
            del self._kept[conn]
        if is_incomplete and not was_incomplete:
            self._incomplete[conn] = now
        if phase is Phase.KEPT:
            self._kept[conn] = now

    def leave(self, conn: int) -> None:
        """``conn`` closed (or was evicted): its slot is free."""
        self._phase.pop(conn, None)
        self._incomplete.pop(conn, None)
        self._kept.pop(conn, None)
