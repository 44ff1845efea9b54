"""In-memory swarms for the sans-IO peer tests: build seeders and leechers, and move
datagrams between them on a fake clock (no sockets: the cores are fed bytes and ``now``)."""

from __future__ import annotations

from collections.abc import Callable

from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig


def make_tree(data: bytes, cfg: PeerConfig) -> MerkleTree:
    cs = cfg.chunk_size
    return MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], cfg.hash_func, cs)


def seeder(data: bytes, cfg: PeerConfig) -> Peer:
    return Peer(Content.seeded(make_tree(data, cfg), MemoryStorage(data)), cfg)


def leecher(root: bytes, cfg: PeerConfig) -> Peer:
    return Peer(Content(MerkleTree.for_root(root, cfg.hash_func, cfg.chunk_size), MemoryStorage()), cfg)


def pump(nodes: dict, steps: int = 4000, until: Callable[[], bool] | None = None, t0: float = 0.0,
         dt: float = 0.002, timer_every: int = 10,
         tick: Callable[[int, float], None] | None = None) -> float:
    """Move datagrams between in-memory peers for ``steps`` steps of ``dt`` s from ``t0``;
    ``tick(step, now)`` runs first in each step (e.g. a live source appending data), timers
    every ``timer_every`` steps; stops early once ``until()``. Returns the fake clock."""
    now = t0
    for step in range(steps):
        now += dt
        if tick is not None:
            tick(step, now)
        for addr, p in nodes.items():
            for d, dst in p.datagrams_to_send(now):
                if dst in nodes:
                    nodes[dst].datagram_received(d, addr, now)
        if step % timer_every == 0:
            for p in nodes.values():
                p.handle_timer(now)
        if until is not None and until():
            break
    return now


def live_feeder(src_peer: Peer, feed: bool, make: Callable[[], bytes]) -> Callable[[int, float], None] | None:
    """A ``tick`` that appends ``make()`` to a live source every other step (None when not feeding)."""
    if not feed:
        return None
    return lambda step, now: src_peer.live_append(make(), now) if step % 2 == 0 else None
