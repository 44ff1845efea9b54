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
        return min((t for t, _ in self._due.values()), default=None)

    def expired(self, now: float) -> list[tuple[Hashable, Refused | None]]:
        """Connections whose deadline passed (dropped from the deadlines), with why."""
        out = [(c, why) for c, (t, why) in self._due.items() if t <= now]
        for c, _ in out:
            del self._due[c]
        return out

    def _move(self, conn: Hashable, phase: Phase, now: float) -> None:
        if conn in self._phase:
            self._phase[conn] = phase
            if self.admission is not None:
                self.admission.move(cast(int, conn), phase, now)

    def _arm(self, conn: Hashable, now: float, timeout: float, why: Refused | None) -> None:
        if timeout > 0:
            self._due[conn] = (now + timeout, why)
        else:
            self._due.pop(conn, None)
