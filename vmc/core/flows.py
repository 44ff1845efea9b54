"""How concurrent transfers share links: the flow model of :mod:`vmc.sim` (sans-IO, no clock).

:class:`FlowModel` is the interface the simulator drives; :class:`MaxMinFair` is
ours, the fluid max-min fair model. :class:`vmc.sim.SimGridFlows` implements the
same interface on SimGrid (docs/vmc-sim.md).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

#: Bytes below this count as nothing (float progress).
EPS = 1e-6


class FlowModel(Protocol):
    """How concurrent transfers share links (the part SimGrid can replace)."""

    def open(self, fid: Hashable, links: Sequence[str], cap: float) -> None:
        """A new flow over ``links`` (in order), at most ``cap`` bytes/s (0: no cap of its own)."""

    def push(self, fid: Hashable, n: int) -> None:
        """``n`` more bytes to carry on ``fid``."""

    def backlog(self, fid: Hashable) -> float:
        """Bytes ``fid`` still has to carry."""

    def ids(self) -> list[Hashable]:
        """Every open flow."""

    def close(self, fid: Hashable) -> None:
        """Forget ``fid`` (what it still had to carry is dropped)."""

    def rates(self) -> dict[Hashable, float]:
        """The rate of every flow with bytes to carry (recomputed after any change)."""

    def advance(self, dt: float) -> None:
        """Let ``dt`` seconds pass at the current rates."""


@dataclass(slots=True)
class _Flow:
    links: tuple[str, ...]
    cap: float
    backlog: float = 0.0
    rate: float = 0.0


class MaxMinFair:
    """Max-min fair sharing (progressive filling) of link capacities, with per-flow caps.

    The classic fluid model of long-lived TCP flows sharing bottlenecks: every flow
    gets the same share of a bottleneck unless it is limited elsewhere (another
    link, or its own cap). No slow start, no RTT bias, no queueing: the
    differences this makes to the testbed are in docs/vmc-sim.md.
    """

    def __init__(self, links: dict[str, float]) -> None:
        #: Capacity in bytes/s by link name (math.inf: unlimited).
        self.links = {k: (v if v > 0 else math.inf) for k, v in links.items()}
        self.flows: dict[Hashable, _Flow] = {}
        self._dirty = True

    def open(self, fid: Hashable, links: Sequence[str], cap: float) -> None:
        self.flows[fid] = _Flow(tuple(links), cap if cap > 0 else math.inf)
        self._dirty = True

    def push(self, fid: Hashable, n: int) -> None:
        f = self.flows[fid]
        if f.backlog <= EPS:
            self._dirty = True
        f.backlog += n

    def close(self, fid: Hashable) -> None:
        if self.flows.pop(fid, None) is not None:
            self._dirty = True

    def ids(self) -> list[Hashable]:
        return list(self.flows)

    def backlog(self, fid: Hashable) -> float:
        f = self.flows.get(fid)
        return f.backlog if f is not None else 0.0

    def rates(self) -> dict[Hashable, float]:
        if self._dirty:
            self._fill()
        return {k: f.rate for k, f in self.flows.items() if f.backlog > EPS}

    def _fill(self) -> None:
        active = {k: f for k, f in self.flows.items() if f.backlog > EPS}
        for f in self.flows.values():
            f.rate = 0.0
        residual = dict(self.links)
        while active:
            users: dict[str, int] = {}
            for f in active.values():
                for link in f.links:
                    users[link] = users.get(link, 0) + 1
            share = min(
                [residual[link] / n for link, n in users.items()] + [f.cap for f in active.values()]
            )
            if math.isinf(share):
                raise ValueError("a flow crosses no finite link and has no cap")
            tight = {link for link, n in users.items() if residual[link] / n <= share * (1 + 1e-12)}
            done = [
                k
                for k, f in active.items()
                if f.cap <= share * (1 + 1e-12) or tight.intersection(f.links)
            ]
            for k in done:
                f = active.pop(k)
                f.rate = share
                for link in f.links:
                    residual[link] = max(0.0, residual[link] - share)
        self._dirty = False

    def advance(self, dt: float) -> None:
        if dt <= 0:
            return
        for f in self.flows.values():
            if f.backlog > EPS:
                f.backlog = max(0.0, f.backlog - f.rate * dt)
                if f.backlog <= EPS:
                    f.backlog = 0.0
                    self._dirty = True
