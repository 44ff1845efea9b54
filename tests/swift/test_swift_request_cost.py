"""The end game's late-request search (docs/sim.md, "Hot spots" 1).

``RequestPlanner._endgame`` used to walk up to 256 missing chunks on every
flush; it now walks the other channels' late requests, oldest first.  The
model test keeps the old walk as the reference and checks that both pick
the same chunks on randomised channel states; the cost test counts the
binmap look-ups (no clock)."""

from __future__ import annotations

import random
from typing import Any

from swift.core.binmap import Binmap
from swift.core.channel import Channel
from swift.core.requests import RequestPlanner


class _Content:
    def __init__(self, n: int) -> None:
        self.n_chunks = n
        self.have = Binmap()


class _Planner(RequestPlanner):
    """Just the state ``_endgame`` reads (the Peer provides it in real use)."""

    def __init__(self, n: int) -> None:
        self.content = _Content(n)
        self.channels: dict = {}
        self.inflight = Binmap()
        self.moved: dict[int, str] = {}

    def _note_moved(self, chunks: Any, why: str) -> None:
        for c in chunks:
            self.moved[c] = why


def _old_endgame(self: _Planner, ch: Channel, want: int, now: float) -> list[int]:
    """The walk as it was before the fix (reference, verbatim)."""
    holders = [c for c in self.channels.values() if c is not ch and c.requests]
    if not holders:
        return []
    content = self.content
    n = content.n_chunks
    have = content.have
    moved = self.moved
    out: list[int] = []
    pos = have.find_empty(0, n)
    budget = 256
    while pos is not None and pos < n and len(out) < min(want, 32) and budget:
        budget -= 1
        if (self.inflight.has(pos) and pos not in ch.requests and ch.peer_have.has(pos)
                and moved.get(pos) != "endgame"):
            for h in holders:
                t = h.requests.get(pos)
                if t is not None:
                    if now - t > 1.5 * h.rtt:
                        out.append(pos)
                    break
        pos = have.find_empty(pos + 1, n)
    self._note_moved(out, "endgame")
    return out


def _random_state(rng: random.Random) -> tuple[_Planner, Channel, int, float]:
    n = rng.choice([40, 300, 1200])
    p = _Planner(n)
    have_p = rng.choice([0.0, 0.3, 0.8, 0.97])
    for c in range(n):
        if rng.random() < have_p:
            p.content.have.add(c)
    now = 100.0
    for i in range(rng.randint(1, 8)):
        ch = Channel(i + 1, ("127.0.0.1", 7000 + i), True, 0.0, 1400, 64, True)
        ch.rtt = rng.choice([0.01, 0.1, 0.5, 2.0])
        for c in range(n):
            if rng.random() < rng.choice([0.2, 0.9]):
                ch.peer_have.add(c)
        # requests in request order (times never decrease), as _request_msgs makes them
        k = rng.randint(0, min(n, 400))
        chunks = rng.sample(range(n), k)
        times = sorted(now - rng.uniform(0, 4 * ch.rtt) for _ in chunks)
        for c, t in zip(chunks, times):
            ch.requests[c] = t
            if rng.random() < 0.95:
                p.inflight.add(c)
        if k and rng.random() < 0.2:
            # some chunks re-asked (as _request_msgs does when one comes back
            # to the picker): newer times in old slots, so out of order
            for c in rng.sample(chunks, max(1, k // 10)):
                ch.requests[c] = now - rng.uniform(0, ch.rtt)
            p._unordered.add(ch)
        if rng.random() < 0.1:
            ch.requests.clear()
        p.channels[i + 1] = ch
    for c in rng.sample(range(n), n // 10):
        p.moved[c] = rng.choice(["endgame", "timeout", "stale"])
    ch = rng.choice(list(p.channels.values()))
    return p, ch, rng.choice([1, 5, 32, 100]), now


def test_endgame_same_picks_as_the_old_walk() -> None:
    rng = random.Random(14)
    nonempty = 0
    for _ in range(600):
        p, ch, want, now = _random_state(rng)
        moved = dict(p.moved)
        old = _old_endgame(p, ch, want, now)
        old_moved, p.moved = p.moved, moved
        new = p._endgame(ch, want, now)
        assert new == old
        assert p.moved == old_moved
        nonempty += bool(old)
    assert nonempty > 50  # the states exercise the end game, not just its early exits


class _CountingBinmap(Binmap):
    calls = 0

    def find_empty(self, lo: int = 0, hi: int | None = None) -> int | None:
        _CountingBinmap.calls += 1
        return super().find_empty(lo, hi)

    def has(self, i: int) -> bool:
        _CountingBinmap.calls += 1
        return super().has(i)


def test_endgame_cost_follows_late_requests_not_missing_chunks() -> None:
    """1000 missing chunks all in flight elsewhere, none late yet: nothing
    to ask, and the search looks at no chunk (the old walk did 256)."""
    n = 1000
    p = _Planner(n)
    p.content.have = _CountingBinmap()
    p.inflight = _CountingBinmap()
    other = Channel(1, ("127.0.0.1", 7001), True, 0.0, 1400, 64, True)
    ch = Channel(2, ("127.0.0.1", 7002), True, 0.0, 1400, 64, True)
    ch.peer_have.set_range(0, n)
    now = 10.0
    for c in range(n):
        other.requests[c] = now - 0.1  # rtt 0.5: late only after 0.75 s
        p.inflight.add(c)
    p.channels = {1: other, 2: ch}
    _CountingBinmap.calls = 0
    assert p._endgame(ch, 32, now) == []
    assert _CountingBinmap.calls == 0
    # one late request: found with a handful of look-ups
    del other.requests[100]
    other.requests = {100: now - 1.0, **other.requests}
    _CountingBinmap.calls = 0
    assert p._endgame(ch, 32, now) == [100]
    assert _CountingBinmap.calls < 10
    # beyond the first 256 missing chunks the old walk never looked: still not asked
    p.moved.clear()
    del other.requests[700]
    other.requests = {700: now - 1.0, **other.requests}
    assert p._endgame(ch, 32, now) == [100]
    p.moved.clear()
    assert _old_endgame(p, ch, 32, now) == [100]
