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
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deliverykit.fastpath import load

if TYPE_CHECKING:  # typing's own from Python 3.11 (the package supports 3.10)
    from typing_extensions import TypeVarTuple, Unpack

    from deliverykit._speedups import EventHeap

    Ts = TypeVarTuple("Ts")

__all__ = ["PyEventHeap", "Scheduler", "derive_seed", "py_sim_heap", "sim_heap"]


class PyEventHeap:
    """The scheduler's event heap (twin of the C ``EventHeap``, deliverykit/csrc/sim.c):
    entries ``(when, seq, callback, args)`` leave in ``(when, seq)`` order; ``seq`` is
    unique, so the order never depends on comparing callbacks."""

    __slots__ = ("_h",)

    def __init__(self) -> None:
        self._h: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []

    def push(self, when: float, seq: int, callback: Callable[..., None],
             args: tuple[Any, ...]) -> None:
        """An event at virtual time ``when`` (a number, as C's PyFloat_AsDouble takes)."""
        if type(when) is not float and not (hasattr(type(when), "__float__")
                                            or hasattr(type(when), "__index__")):
            raise TypeError(f"an event's time must be a number, not {type(when).__name__}")
        heapq.heappush(self._h, (when, seq, callback, args))

    def pop_until(self, until: float
                  ) -> tuple[float, Callable[..., None], tuple[Any, ...]] | None:
        """The earliest event, unless the heap is empty or it is after ``until``."""
        h = self._h
        if not h or h[0][0] > until:
            return None
        when, _, cb, args = heapq.heappop(h)
        return when, cb, args

    def peek(self) -> float | None:
        """The earliest event's time, or None."""
        return self._h[0][0] if self._h else None

    def __len__(self) -> int:
        return len(self._h)


def py_sim_heap() -> PyEventHeap:
    return PyEventHeap()


#: the C heap where built (its keys inline: a pop compares no Python object), else the twin
sim_heap = load("sim_heap", py_sim_heap)


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
        self._heap: EventHeap | PyEventHeap = sim_heap()
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
        self._heap.push(when, seq, callback, args)

    def after(self, delay: float, callback: Callable[[Unpack[Ts]], None],
              *args: Unpack[Ts]) -> None:
        """Run ``callback(*args)`` ``delay`` seconds from now."""
        self.at(self.now + delay, callback, *args)

    def __len__(self) -> int:
        return len(self._heap)

    def peek(self) -> float | None:
        """Time of the next event, or None when nothing is scheduled."""
        return self._heap.peek()

    def run(self, until: float | None = None, max_events: int | None = None,
            stop: Callable[[], bool] | None = None) -> float:
        """Run events in time order until the heap is empty, the next event is past
        ``until`` (the clock then stops at ``until``), ``max_events`` ran, or
        ``stop()`` is true after an event.  Returns the clock."""
        heap = self._heap
        pop = heap.pop_until
        n = 0
        if max_events is None and stop is not None and until is not None:
            # the loop below for the simulator's usual call (Simulation.run), with the
            # checks that cannot hold taken out: the same events in the same order
            while True:
                item = pop(until)
                if item is None:
                    self._stopped_at(until)
                    break
                when, cb, args = item
                self.now = when
                cb(*args)
                n += 1
                if stop():
                    break
            self.executed += n
            return self.now
        limit = math.inf if until is None else until
        while True:
            item = pop(limit)
            if item is None:
                if until is not None:
                    self._stopped_at(until)
                break
            when, cb, args = item
            self.now = when
            cb(*args)
            n += 1
            if max_events is not None and n >= max_events:
                break
            if stop is not None and stop():
                break
        self.executed += n
        return self.now

    def _stopped_at(self, until: float) -> None:
        """The run reached ``until`` with nothing left before it: the clock moves to
        ``until`` (back to it, as before, when the next event lies beyond it)."""
        if len(self._heap) or until > self.now:
            self.now = until
