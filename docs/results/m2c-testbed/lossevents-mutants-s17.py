"""Session 17: tests/m2c/test_m2c_lossevents.py against mutants of ``ReceiverCC``'s
``LOSS_EVENTS`` rule, each patched in this process only; every mutant must be killed.

    .venv/bin/python docs/results/m2c-testbed/lossevents-mutants-s17.py
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import pytest

from m2c.core.receiver_cc import ReceiverCC as R

ORIG_NEW, ORIG_SWING = R._new_episode, R._queue_swing


def _drained(self: Any, ch: int, upper: bool = True) -> bool:
    ld = self._lost_due(ch) if upper else math.inf
    return any(self._ev_due < d <= ld for d in self._drain_due)


def always(self: Any, now: float, ch: int) -> bool:
    return True


def no_span(self: Any, now: float, ch: int) -> bool:
    return bool(not self.LOSS_EVENTS or self._ev_at == -math.inf or _drained(self, ch))


def drains_ignored(self: Any, now: float, ch: int) -> bool:
    kept = list(self._drain_due)
    self._drain_due.clear()
    try:
        return bool(ORIG_NEW(self, now, ch))
    finally:
        self._drain_due.extend(kept)


def span_one_artt(self: Any, now: float, ch: int) -> bool:
    return bool(not self.LOSS_EVENTS or self._ev_at == -math.inf or _drained(self, ch)
                or now - self._ev_at >= self.rtt.rtt)


def drop_time_ignored(self: Any, now: float, ch: int) -> bool:
    """Any drain after the last event's packets, whenever this loss's packets were due."""
    if not self.LOSS_EVENTS or self._ev_at == -math.inf or _drained(self, ch, upper=False):
        return True
    return bool(ORIG_NEW(self, now, ch))


def no_hysteresis(self: Any, q: float, due: float) -> None:
    """Any fall from the running peak is a drain, and the peak restarts there."""
    if q > self._q_peak:
        self._q_peak = q
    elif q < self._q_peak - self._drain_margin(self._q_peak):
        self.queue_drains += 1
        self._drain_due.append(due)
        self._q_peak = q


def zero_margin(self: Any, q: float, due: float) -> None:
    kept = R.EVENT_DRAIN, R.EVENT_DRAIN_MIN
    R.EVENT_DRAIN, R.EVENT_DRAIN_MIN = 0.0, 1e-6
    try:
        ORIG_SWING(self, q, due)
    finally:
        R.EVENT_DRAIN, R.EVENT_DRAIN_MIN = kept


def no_refill(self: Any, q: float, due: float) -> None:
    """Once drained, never refilled."""
    if self._q_low is None:
        ORIG_SWING(self, q, due)


MUTANTS: dict[str, tuple[str, Callable[..., Any]]] = {
    "always-new": ("_new_episode", always), "no-span": ("_new_episode", no_span),
    "drains-ignored": ("_new_episode", drains_ignored),
    "span-one-artt": ("_new_episode", span_one_artt),
    "drop-time-ignored": ("_new_episode", drop_time_ignored),
    "no-hysteresis": ("_queue_swing", no_hysteresis), "zero-margin": ("_queue_swing", zero_margin),
    "no-refill": ("_queue_swing", no_refill)}


class Patch:
    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name, self.fn = name, fn

    def pytest_sessionstart(self, session: Any) -> None:
        setattr(R, self.name, self.fn)


def main() -> int:
    survived = 0
    for name, (attr, fn) in MUTANTS.items():
        rc = pytest.main(["-q", "-p", "no:cacheprovider", "tests/m2c/test_m2c_lossevents.py"],
                         plugins=[Patch(attr, fn)])
        R._new_episode, R._queue_swing = ORIG_NEW, ORIG_SWING  # type: ignore[method-assign]  # restore
        print(f"MUTANT {name}: {'killed' if rc != 0 else 'SURVIVED'}", flush=True)
        survived += rc == 0
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
