"""Client connection slots and request deadlines, sans-IO (for
:class:`vmc.core.http.HttpSharingCore`).

At most ``max_connections`` connections hold a slot (:class:`~vmc.core.admission.Admission`:
at the limit a newcomer takes the slot of the connection that has waited longest without a
complete request, else of the longest idle kept-alive one; if every slot is answering a
request it is refused). Deadlines, each 0 = none: ``idle_timeout`` for the first byte of a
request (new or kept-alive connection; closed quietly), ``head_timeout`` for the whole head
from its first byte and ``body_timeout`` for the body once the head is in (408 both).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass
from typing import cast

from vmc.core.admission import INCOMPLETE, Admission, Decision, Phase
from vmc.core.reasons import Refused

__all__ = ["ConnectionSlots", "SlotLimits"]


@dataclass(frozen=True, slots=True)
class SlotLimits:
    """The proxy's names and defaults (:class:`vmc.aio.config.ProxyConfig`); 0 = no limit."""

    max_connections: int = 0
    idle_timeout: float = 0.0
    head_timeout: float = 0.0
    body_timeout: float = 0.0


class ConnectionSlots:
    """Slots and the one deadline per connection (module docstring)."""

    def __init__(self, limits: SlotLimits) -> None:
        self.limits = limits
        self.admission = Admission(limits.max_connections) if limits.max_connections > 0 else None
        #: conn -> (deadline, what passing it means: None = idle, close quietly; else the 408's)
        self._due: dict[Hashable, tuple[float, Refused | None]] = {}
        #: The same deadlines as a heap (deadline, tie, conn) for :meth:`deadline` and
        #: :meth:`expired` without a walk over every connection (called after every input);
        #: an entry whose deadline ``_due`` no longer holds is stale and skipped.
        self._heap: list[tuple[float, int, Hashable]] = []
        self._tie = itertools.count()
        self._phase: dict[Hashable, Phase] = {}

    def opened(self, conn: Hashable, now: float) -> Decision:
        """A new connection; the decision says whom to evict first, or to refuse it."""
        d = Decision(True)
        if self.admission is not None:
            d = self.admission.admit(cast(int, conn), now)
            if d.evict is not None:
                self.closed(d.evict)
            if not d.admitted:
                return d
        self._phase[conn] = Phase.NEW
        self._arm(conn, now, self.limits.idle_timeout, None)
        return d

    @staticmethod
    def eviction_reason(d: Decision) -> Refused:
        """The ``refused`` counter of an eviction."""
        if d.evicted_phase in INCOMPLETE:
            return Refused.EVICTED_INCOMPLETE_HEAD
        return Refused.EVICTED_IDLE

    def bytes_in(self, conn: Hashable, now: float) -> None:
        """Bytes arrived: the first of a request starts its head deadline."""
        if self._phase.get(conn) in (Phase.NEW, Phase.KEPT):
            self._move(conn, Phase.HEAD, now)
            self._arm(conn, now, self.limits.head_timeout, Refused.HEAD_TIMEOUT)

    def head_in(self, conn: Hashable, now: float) -> None:
        """The head is complete; its body (if any) is awaited."""
        self._move(conn, Phase.BODY, now)
        self._arm(conn, now, self.limits.body_timeout, Refused.BODY_TIMEOUT)

    def busy(self, conn: Hashable, now: float) -> None:
        """The whole request is in and being answered: no deadline here (the machine's own)."""
        self._move(conn, Phase.BUSY, now)
        self._due.pop(conn, None)

    def kept(self, conn: Hashable, now: float) -> None:
        """Answered and kept alive: waiting for the next request."""
        self._move(conn, Phase.KEPT, now)
        self._arm(conn, now, self.limits.idle_timeout, None)

    def closed(self, conn: Hashable) -> None:
        self._phase.pop(conn, None)
        self._due.pop(conn, None)
        if self.admission is not None:
            self.admission.leave(cast(int, conn))

    def deadline(self) -> float | None:
        heap = self._heap
        while heap:
            t, _, conn = heap[0]
            due = self._due.get(conn)
            if due is not None and due[0] == t:
                return t
            heapq.heappop(heap)  # stale: re-armed, disarmed or closed since
        return None

    def expired(self, now: float) -> list[tuple[Hashable, Refused | None]]:
        """Connections whose deadline passed (dropped from the deadlines), with why, earliest
        first."""
        out: list[tuple[Hashable, Refused | None]] = []
        while (t := self.deadline()) is not None and t <= now:
            _, _, conn = heapq.heappop(self._heap)
            out.append((conn, self._due.pop(conn)[1]))
        return out

    def _move(self, conn: Hashable, phase: Phase, now: float) -> None:
        if conn in self._phase:
            self._phase[conn] = phase
            if self.admission is not None:
                self.admission.move(cast(int, conn), phase, now)

    def _arm(self, conn: Hashable, now: float, timeout: float, why: Refused | None) -> None:
        if timeout > 0:
            self._due[conn] = (now + timeout, why)
            heapq.heappush(self._heap, (now + timeout, next(self._tie), conn))
            if len(self._heap) > 2 * len(self._due) + 64:  # stale entries: bounded
                self._heap = [(t, next(self._tie), c) for c, (t, _) in self._due.items()]
                heapq.heapify(self._heap)
        else:
            self._due.pop(conn, None)
