"""The upstream cap in the sans-IO core (issue 6: "limits on ... connections"): at most
``limit`` origin fetches out at once; more wait FIFO up to ``wait`` s (at most ``max_waiting``
of them), then the request gets 503 + Retry-After (``Refused.UPSTREAM_BUSY``).

What :class:`vmc.aio.upstream.Limiter` does with futures, done with a queue and a deadline:
the HTTP core offers each :class:`~vmc.core.events.Fetch` the machine asks for, tells the gate
when a fetch ends or is cancelled, and asks it on its timer which waiters gave up. A joiner
of a live stream asks for no fetch, so it needs no slot. Never reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from vmc.core.events import Fetch


@dataclass
class GateStats:
    """The proxy's ``upstream_limit`` figures."""

    peak: int = 0
    #: Fetches that had to wait for a slot, and those that gave up (503).
    queued: int = 0
    refused: int = 0


@dataclass
class FetchGate:
    """``limit`` 0: no cap (every fetch goes at once; the simulator's default)."""

    limit: int = 0
    wait: float = 10.0
    max_waiting: int = 1024
    stats: GateStats = field(default_factory=GateStats)
    #: Fetch ids out at the origin.
    out: set[int] = field(default_factory=set)
    #: Waiting fetches, oldest first, each with its give-up time.
    waiting: OrderedDict[int, tuple[Fetch, float]] = field(default_factory=OrderedDict)

    def offer(self, f: Fetch, now: float) -> Fetch | None | bool:
        """The fetch if it may go now; None if it waits; False if refused at once (queue full)."""
        if self.limit <= 0 or (len(self.out) < self.limit and not self.waiting):
            self._take(f.fetch)
            return f
        if len(self.waiting) >= self.max_waiting:
            self.stats.refused += 1
            return False
        self.waiting[f.fetch] = (f, now + self.wait)
        self.stats.queued += 1
        return None

    def _take(self, fetch: int) -> None:
        self.out.add(fetch)
        self.stats.peak = max(self.stats.peak, len(self.out))

    def cancelled(self, fetch: int) -> tuple[bool, list[Fetch]]:
        """A fetch the machine no longer wants: (whether it was out, so the driver must cancel
        it, and the waiters that now go)."""
        if self.waiting.pop(fetch, None) is not None:
            return False, []
        return fetch in self.out, self.ended(fetch)

    def ended(self, fetch: int) -> list[Fetch]:
        """A fetch's answer ended (whole or failed): its slot passes to the oldest waiters."""
        if fetch not in self.out:
            return []
        self.out.discard(fetch)
        go: list[Fetch] = []
        while self.waiting and len(self.out) < self.limit:
            _, (f, _) = self.waiting.popitem(last=False)
            self._take(f.fetch)
            go.append(f)
        return go

    def hand_over(self, old: int, new: int) -> None:
        """Fetch ``new`` takes ``old``'s slot (a broken stream's resume: it continues the same
        transfer and must not queue behind the waiters)."""
        if old in self.out:
            self.out.discard(old)
            self.out.add(new)

    def deadline(self) -> float | None:
        """The oldest waiter's give-up time (FIFO with one ``wait``: the earliest)."""
        if not self.waiting:
            return None
        return next(iter(self.waiting.values()))[1]

    def expired(self, now: float) -> list[Fetch]:
        """Waiters past their time, out of the queue, each counted refused."""
        gone: list[Fetch] = []
        while self.waiting:
            fetch, (f, until) = next(iter(self.waiting.items()))
            if until > now:
                break
            del self.waiting[fetch]
            self.stats.refused += 1
            gone.append(f)
        return gone

    def snapshot(self) -> dict[str, int | float]:
        return {"max": self.limit, "open": len(self.out), "peak": self.stats.peak,
                "queued": self.stats.queued, "refused": self.stats.refused,
                "waiting": len(self.waiting), "wait": self.wait}
