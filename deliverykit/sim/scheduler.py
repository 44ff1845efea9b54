"""A deterministic discrete-event scheduler in virtual time.

Events are ``(time, seq, callback, args)`` in a heap; ``seq`` (a counter) breaks
ties, so two events at the same time run in the order they were scheduled and
a run never depends on comparing callbacks.  All randomness of a run comes from
:meth:`Scheduler.stream`: independent ``random.Random`` sub-streams derived from
the run's seed and a name (a link, a node), so adding a link does not shift
the random numbers another link sees.  Same seed -> the same run, bit for bit.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing's own from Python 3.11 (the package supports 3.10)
    from typing_extensions import TypeVarTuple, Unpack

    Ts = TypeVarTuple("Ts")

__all__ = ["Scheduler", "derive_seed"]


def derive_seed(seed: int, name: str) -> int:
    """A 64-bit seed for sub-stream ``name`` of run ``seed`` (stable across processes)."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Scheduler:
    """Virtual clock plus event heap.  ``now`` only moves forward."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.now = 0.0
        #: (time, seq, callback, args): each callback was checked against its args in
        #: :meth:`at`; the heap holds callbacks of every signature
        self._heap: list[tuple[float, int, Callable[..., None], tuple[object, ...]]] = []
        self._seq = 0
        #: events run so far
        self.executed = 0

    def stream(self, name: str) -> random.Random:
        """The random sub-stream ``name`` of this run."""
        return random.Random(derive_seed(self.seed, name))

    def at(self, when: float, callback: Callable[[Unpack[Ts]], None], *args: Unpack[Ts]) -> None:
        """Run ``callback(*args)`` at virtual time ``when`` (not before ``now``)."""
        now = self.now
        if now > when:  # max(when, now), without the call
            when = now
        seq = self._seq = self._seq + 1
        heapq.heappush(self._heap, (when, seq, callback, args))

    def after(self, delay: float, callback: Callable[[Unpack[Ts]], None],
              *args: Unpack[Ts]) -> None:
        """Run ``callback(*args)`` ``delay`` seconds from now."""
        self.at(self.now + delay, callback, *args)

    def __len__(self) -> int:
        return len(self._heap)

    def peek(self) -> float | None:
        """Time of the next event, or None when nothing is scheduled."""
        return self._heap[0][0] if self._heap else None

    def run(self, until: float | None = None, max_events: int | None = None,
            stop: Callable[[], bool] | None = None) -> float:
        """Run events in time order until the heap is empty, the next event is past
        ``until`` (the clock then stops at ``until``), ``max_events`` ran, or
        ``stop()`` is true after an event.  Returns the clock."""
        heap = self._heap
        pop = heapq.heappop
        n = 0
        if max_events is None and stop is not None and until is not None:
            # the loop below for the simulator's usual call (Simulation.run), with the
            # checks that cannot hold taken out: the same events in the same order
            while heap:
                when, _, cb, args = heap[0]
                if when > until:
                    self.now = until
                    break
                pop(heap)
                self.now = when
                cb(*args)
                n += 1
                if stop():
                    break
            else:
                if until > self.now:
                    self.now = until
            self.executed += n
            return self.now
        while heap:
            when = heap[0][0]
            if until is not None and when > until:
                self.now = until
                break
            _, _, cb, args = pop(heap)
            self.now = when
            cb(*args)
            n += 1
            if max_events is not None and n >= max_events:
                break
            if stop is not None and stop():
                break
        else:
            if until is not None and until > self.now:
                self.now = until
        self.executed += n
        return self.now
