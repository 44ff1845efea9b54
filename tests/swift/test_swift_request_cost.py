"""The end game's late-request search (docs/sim.md, "Hot spots" 1).

``RequestScheduler._endgame`` used to walk up to 256 missing chunks on every
flush; it now walks the other channels' late requests, oldest first.  The
model test keeps the old walk as the reference and checks that both pick
the same chunks on randomised channel states; the cost test counts the
binmap look-ups (no clock)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.core.channel import Channel, DownloadSide
from swift.core.chanstate import ChannelEvent
from swift.core.config import PeerConfig
from swift.core.picker import Availability
from swift.core.requests import RequestScheduler


class _Content:
    """Just what ``_endgame`` reads of the content (a size and ``have``)."""

    complete = False

    def __init__(self, n: int) -> None:
        self.n_chunks = n
        self.have = Binmap()


def _Planner(n: int) -> RequestScheduler:  # noqa: N802  (it was a class)
    """A RequestScheduler on its own: the channels, counters and content the
    Peer would hand in, with no Peer."""
    return RequestScheduler(PeerConfig(), _Content(n), {}, Availability(),  # type: ignore[arg-type]  # a content stand-in: n_chunks and have only
                            random.Random(0), {}, lambda lo, hi, clip=True: [])


def _old_endgame(self: RequestScheduler, ch: Channel, want: int, now: float) -> list[int]:
    """The walk as it was before the fix (reference, verbatim)."""
    holders = [c for c in self.channels.values() if c is not ch and c.down.requests]
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
        if (self.inflight.has(pos) and pos not in ch.down.requests and ch.remote.have.has(pos)
                and moved.get(pos) != "endgame"):
            for h in holders:
                t = h.down.requests.get(pos)
                if t is not None:
                    if now - t > 1.5 * h.path.rtt:
                        out.append(pos)
                    break
        pos = have.find_empty(pos + 1, n)
    self.note_moved(out, "endgame")
    return out


def _random_state(rng: random.Random) -> tuple[RequestScheduler, Channel, int, float]:
    n = rng.choice([40, 300, 1200])
    p = _Planner(n)
    have_p = rng.choice([0.0, 0.3, 0.8, 0.97])
    for c in range(n):
        if rng.random() < have_p:
            p.content.have.add(c)
    now = 100.0
    for i in range(rng.randint(1, 8)):
        ch = Channel(i + 1, ("127.0.0.1", 7000 + i), True, 0.0, 1400, 64, True)
        ch.path.rtt = rng.choice([0.01, 0.1, 0.5, 2.0])
        for c in range(n):
            if rng.random() < rng.choice([0.2, 0.9]):
                ch.remote.have.add(c)
        # requests in request order (times never decrease), as _request_msgs makes them
        k = rng.randint(0, min(n, 400))
        chunks = rng.sample(range(n), k)
        times = sorted(now - rng.uniform(0, 4 * ch.path.rtt) for _ in chunks)
        for c, t in zip(chunks, times):
            ch.down.ask(c, t)
            if rng.random() < 0.95:
                p.inflight.add(c)
        if k and rng.random() < 0.2:
            # some chunks re-asked (as _request_msgs does when one comes back
            # to the picker): newer times in old slots, so out of order
            for c in rng.sample(chunks, max(1, k // 10)):
                ch.down.ask(c, now - rng.uniform(0, ch.path.rtt))
            p._unordered.add(ch)
        if rng.random() < 0.1:
            ch.down.clear()
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


def _to_front(d: DownloadSide, c: int, t: float) -> None:
    """Chunk ``c`` asked at ``t`` before every other request of ``d``."""
    rest = [(x, s) for x, s in d.items() if x != c]
    d.clear()
    for x, s in [(c, t), *rest]:
        d.ask(x, s)


def test_endgame_cost_follows_late_requests_not_missing_chunks() -> None:
    """1000 missing chunks all in flight elsewhere, none late yet: nothing
    to ask, and the search looks at no chunk (the old walk did 256)."""
    n = 1000
    p = _Planner(n)
    p.content.have = _CountingBinmap()
    p.inflight = _CountingBinmap()
    other = Channel(1, ("127.0.0.1", 7001), True, 0.0, 1400, 64, True)
    ch = Channel(2, ("127.0.0.1", 7002), True, 0.0, 1400, 64, True)
    ch.remote.have.set_range(0, n)
    now = 10.0
    for c in range(n):
        other.down.ask(c, now - 0.1)  # rtt 0.5: late only after 0.75 s
        p.inflight.add(c)
    p.channels = {1: other, 2: ch}
    _CountingBinmap.calls = 0
    assert p._endgame(ch, 32, now) == []
    assert _CountingBinmap.calls == 0
    # one late request: found with a handful of look-ups
    _to_front(other.down, 100, now - 1.0)
    _CountingBinmap.calls = 0
    assert p._endgame(ch, 32, now) == [100]
    assert _CountingBinmap.calls < 10
    # beyond the first 256 missing chunks the old walk never looked: still not asked
    p.moved.clear()
    _to_front(other.down, 700, now - 1.0)
    assert p._endgame(ch, 32, now) == [100]
    p.moved.clear()
    assert _old_endgame(p, ch, 32, now) == [100]


# -- the picker's memo (docs/sim.md, "Hot spots" 2) ------------------------------------------


def test_binmap_version_moves_with_every_change_and_never_back() -> None:
    b = Binmap()
    seen = [b.version]
    for op in (lambda: b.add(5), lambda: b.set_range(10, 40), lambda: b.reset_range(12, 20),
               lambda: b.discard(5), lambda: b.set(B.make(3, 2)), lambda: b.reset(B.make(1, 5)),
               lambda: b.set_range(100_000, 100_001), lambda: b.clear()):
        op()
        assert b.version > seen[-1]
        seen.append(b.version)
    # a binmap made fresh has version 0; one cleared keeps counting up
    assert Binmap().version == 0 and b.version > 0


def _twin_leechers(picker: str, n: int, k: int, seed: int) -> tuple[Any, Any]:
    """Two identical leechers (same content, seed, channels), one with the
    memos off: the reference."""
    from swift.core.config import PeerConfig
    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer
    cs = 1024
    data = random.Random(seed).randbytes(n * cs - 100)
    cfg = PeerConfig(picker=picker, seed=seed, high_window=16, mid_window=64, bitrate=50_000.0)
    tree = MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], cfg.hash_func, cs)
    out = []
    for memos in (True, False):
        p = Peer(Content(tree, MemoryStorage()), cfg)
        p.download._memos = memos
        for i in range(k):
            ch = p._new_channel(("127.0.0.1", 7000 + i), True, 0.0)
            ch.remote_id, ch.liveness.last_recv = 1000 + i, 0.0
            ch.handle(ChannelEvent.HANDSHAKE_REPLY)
            ch.path.rtt = ch.path.min_rtt = 0.05 * (i + 1)
        out.append(p)
    return out[0], out[1]


@pytest.mark.parametrize("picker", ["linear", "rarest", "std-vod", "vod"])
def test_memoised_picks_equal_the_unmemoised_ones(picker: str) -> None:
    """Random sequences of HAVEs, chunk arrivals, channel drops, playback
    moves, timers and flushes, applied to a leecher with the memos and to
    one without: every flush sends the same datagrams, the random draws stay
    in step, the same chunks are in flight; and the memo skipped pickers."""
    n, k = 300, 6
    total_skips = 0
    for seed in range(6):
        memo, ref = _twin_leechers(picker, n, k, seed)
        ops = random.Random(1000 + seed)
        now = 0.0
        calls = {"memo": 0, "ref": 0}
        for key, p in (("memo", memo), ("ref", ref)):
            def counted(*a: Any, _o: Any = p.picker.pick, _k: str = key,
                        _calls: dict[str, int] = calls) -> Any:
                _calls[_k] += 1
                return _o(*a)
            p.picker.pick = counted
        flushes = 0
        for _ in range(400):
            r = ops.random()
            ids = [c for c in memo.channels]
            if r < 0.25 and ids:  # a HAVE from one peer
                i = ops.choice(ids)
                lo = ops.randrange(n)
                hi = min(n, lo + ops.choice([1, 4, 32, 300]))
                for p in (memo, ref):
                    p._peer_has(p.channels[i], lo, hi)
            elif r < 0.45:  # chunks arrive: no longer in flight, now held
                asked = sorted({c for ch in memo.channels.values() for c in ch.down.requests})
                for c in ops.sample(asked, min(len(asked), ops.randint(0, 8))):
                    for p in (memo, ref):
                        for ch in p.channels.values():
                            if c in ch.down.slot:
                                ch.down.drop(c)
                        p.inflight.discard(c)
                        p.content.have.add(c)
            elif r < 0.5:
                pos = ops.randrange(n)
                buf = ops.random() < 0.3
                for p in (memo, ref):
                    p.set_playpos(pos, buffering=buf)
            elif r < 0.52 and len(ids) > 2:  # a peer leaves
                i = ops.choice(ids)
                for p in (memo, ref):
                    p._drop(p.channels[i], "test", notify=False)
            elif r < 0.65:
                now += ops.choice([0.01, 0.1, 0.6])
                for p in (memo, ref):
                    p.handle_timer(now)
            else:
                got = memo.datagrams_to_send(now)
                assert got == ref.datagrams_to_send(now)
                flushes += 1
            assert memo.rng.getstate() == ref.rng.getstate()
            assert list(memo.inflight.ranges()) == list(ref.inflight.ranges())
        assert flushes > 50 and calls["memo"] > 0
        total_skips += calls["ref"] - calls["memo"]
    assert total_skips > 100  # the memo did skip pickers that would have found nothing


# -- handle_timer's stale check and re-asked chunks ---------------------------------------------


def _leecher_with(chans: int) -> Any:
    """A leecher whose linear picker keeps plain order (no twist): the tests below
    name the chunks it picks next."""
    memo, _ = _twin_leechers("linear", 64, chans, 1)
    memo.download.picker.twist = 0
    return memo, list(memo.channels.values())


@pytest.mark.parametrize("b_late", [False, True])
def test_stale_request_asked_again_elsewhere_stays_in_flight(b_late: bool) -> None:
    """Chunk 3 asked of A at t = 0 and, late, of B by the end game at t = 0.9;
    at t = 1 A's stale check drops it (and chunk 4) from A: chunk 4 goes
    back to the picker, chunk 3 is still in flight at B (not handed to a
    third peer) and keeps why it moved -- unless B's request is late
    itself (older than 1.5 x B's request->DATA time), then it goes back too."""
    p, (a, b, c) = _leecher_with(3)
    for ch in (a, b, c):
        ch.liveness.last_recv = ch.down.last_progress = 1.0
        ch.remote.have.set_range(0, 64)
    a.path.rtt = c.path.rtt = 0.05
    b.path.rtt = 0.05 if b_late else 0.2  # 0.1 s after asking: late only at 0.05
    for x, t in {3: 0.0, 4: 0.0, 9: 0.99}.items():
        a.down.ask(x, t)
    b.down.ask(3, 0.9)
    p.inflight.set_range(3, 5)
    p.inflight.add(9)
    p.moved[3] = "endgame"
    p.handle_timer(1.0)
    assert 3 not in a.down.requests and 4 not in a.down.requests and 9 in a.down.requests
    assert not p.inflight.has(4) and p.moved[4] == "stale"
    if b_late:
        assert not p.inflight.has(3) and p.moved[3] == "stale"
        assert p.download._pick(c, 64, 4) == [0, 1, 2, 3]
    else:
        assert p.inflight.has(3) and p.moved[3] == "endgame"
        # the picker gives C chunk 4 again, not chunk 3
        assert p.download._pick(c, 64, 4) == [0, 1, 2, 4]


def test_stale_check_sees_old_requests_behind_a_re_asked_one() -> None:
    """A re-asked chunk keeps its old slot with a newer time: the requests
    behind it that are old are still found stale."""
    p, (a, b) = _leecher_with(2)
    for ch in (a, b):
        ch.liveness.last_recv = ch.down.last_progress = 1.0
        ch.path.rtt = 0.05
    for x, t in {2: 0.0, 5: 0.0, 6: 0.99}.items():
        a.down.ask(x, t)
    a.down.ask(2, 0.95)  # asked again: newer time, first slot
    p.download._unordered.add(a)
    p.inflight.set_range(2, 7)
    p.handle_timer(1.0)
    assert 5 not in a.down.requests and not p.inflight.has(5)
    assert 2 in a.down.requests and 6 in a.down.requests


def test_request_timeout_keeps_chunks_asked_elsewhere_in_flight() -> None:
    """A channel without progress for the request timeout gives every
    request back, but one also asked of another peer stays in flight."""
    p, (a, b) = _leecher_with(2)
    for ch in (a, b):
        ch.liveness.last_recv = 1.0
    a.path.rtt, b.path.rtt = 0.05, 0.2
    a.down.last_progress = 0.0
    b.down.last_progress = 1.0
    for x, t in {7: 0.0, 8: 0.0}.items():
        a.down.ask(x, t)
    b.down.ask(8, 0.9)
    p.inflight.set_range(7, 9)
    p.handle_timer(1.0)
    assert not a.down.requests and p.stats["timeouts"] == 1
    assert not p.inflight.has(7) and p.inflight.has(8)
