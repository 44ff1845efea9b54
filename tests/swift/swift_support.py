"""In-memory swarms for the sans-IO peer tests: build seeders and leechers, and move
datagrams between them on a fake clock (no sockets: the cores are fed bytes and ``now``);
and ``SwiftProcess``, a real ``python -m swift`` seeder or live source for the CLI tests."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable

from swift.core.binmap import Binmap
from swift.core.channel import Channel
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.core.picker import Availability, PickState


def make_tree(data: bytes, cfg: PeerConfig) -> MerkleTree:
    cs = cfg.chunk_size
    return MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], cfg.hash_func, cs)


def seeder(data: bytes, cfg: PeerConfig) -> Peer:
    return Peer(Content.seeded(make_tree(data, cfg), MemoryStorage(data)), cfg)


def leecher(root: bytes, cfg: PeerConfig) -> Peer:
    tree = MerkleTree.for_root(root, cfg.hash_func, cfg.chunk_size)
    return Peer(Content(tree, MemoryStorage()), cfg)


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


def live_feeder(src_peer: Peer, feed: bool,
                make: Callable[[], bytes]) -> Callable[[int, float], None] | None:
    """A ``tick`` that appends ``make()`` to a live source every other step (None when
    not feeding)."""
    if not feed:
        return None
    return lambda step, now: src_peer.live_append(make(), now) if step % 2 == 0 else None


class SwiftProcess:
    """A ``python -m swift`` command that prints an ID (root hash, swarm key) on stdout,
    then a line ending ``HOST:PORT`` on stderr once it listens (``marker`` in it)."""

    def __init__(self, argv: list[str], host: str = "127.0.0.1", marker: str = " on ") -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "swift", *argv],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.id = self.p.stdout.readline().strip()
        line = self.p.stderr.readline()
        assert marker in line, line
        self.port = int(line.rsplit(":", 1)[1])
        self.peer = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        self.p.stdout.close()
        self.p.stderr.close()


SEED_ADDR, LEECH_ADDR = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


def started_pair(chunks: int) -> tuple[Peer, Peer, float]:
    """A seeder of ``chunks`` random 1 KiB chunks and a leecher part-way through: it has
    verified one chunk (so the size is known) and others are still missing.  Sans-IO, two
    cores in memory at SEED_ADDR and LEECH_ADDR; returns (seeder, leecher, now)."""
    import os

    s = seeder(os.urandom(chunks * 1024), PeerConfig(seed=1))
    lp = leecher(s.swarm_id, PeerConfig(seed=2))
    lp.connect(SEED_ADDR, 100.0)
    now = pump({SEED_ADDR: s, LEECH_ADDR: lp}, t0=100.0,
               until=lambda: lp.stats["verified"] >= 1)
    assert not lp.content.complete
    return s, lp, now


def seeder_data(s: Peer, i: int, sent: float, uncles: int | None = None,
                payload: bytes | None = None) -> bytes:
    """The seeder's DATA datagram for chunk ``i`` sent at ``sent``, with its first
    ``uncles`` uncle hashes (all: None) and its own bytes unless ``payload`` is given."""
    from swift.core import bins as B
    from swift.wire import codec as C

    sch = next(iter(s.channels.values()))
    msgs: list = []
    for b, h in s.content.tree.uncles(i)[:uncles]:
        lo, hi = B.base_range(b)
        msgs.append(C.Integrity(lo, hi - 1, h))
    body = payload if payload is not None else s.content.chunk_bytes(i)
    msgs.append(C.Data(i, i, int(sent * 1e6), body))
    return C.encode_datagram(s.ctx, sch.remote_id, msgs)


def pick_state(n: int, seed: int, playpos: int = 0) -> PickState:
    """A picker's view of an empty download of ``n`` chunks at ``playpos``, its own rng."""
    return PickState(Binmap(), Binmap(), Availability(), n, playpos, random.Random(seed))


def full_binmap(n: int) -> Binmap:
    """A peer that has every one of ``n`` chunks."""
    b = Binmap()
    b.set_range(0, n)
    return b


def udp_drops(port: int, missing: int | None = None) -> int:
    """The kernel's drop counter of the IPv4 UDP socket bound to ``port``
    (``/proc/net/udp``); ``missing`` when no socket is bound there (None: an
    AssertionError)."""
    with open("/proc/net/udp") as f:
        next(f)
        for line in f:
            cols = line.split()
            if int(cols[1].split(":")[1], 16) == port:
                return int(cols[12])
    if missing is None:
        raise AssertionError(f"no UDP socket on port {port}")
    return missing


def take_over_channel(seeder: Peer, leech: Peer, now: float, seed_addr: tuple[str, int],
                      leech_addr: tuple[str, int]) -> Channel:
    """Run the handshake of ``leech`` (a real leecher core, connecting to ``seed_addr``)
    with ``seeder``, then hand the seeder's channel to the test, which plays the leecher
    from here: what the handshake leecher asked is forgotten (the upload queue cleared)."""
    leech.connect(seed_addr, now)
    for _ in range(3):
        for d, _ in leech.datagrams_to_send(now):
            seeder.datagram_received(d, leech_addr, now)
        for d, _ in seeder.datagrams_to_send(now):
            leech.datagram_received(d, seed_addr, now)
    ch = next(iter(seeder.channels.values()))
    ch.send.upload.clear()
    return ch


def ledbat_state(led, young: bool = True) -> tuple:
    """Everything a Ledbat keeps between calls (the window, flight, RTT estimate,
    delay histories and, with ``young``, the base delay's age and first sample, which
    only YOUNG_BASE reads), to compare two of them."""
    state = (led.cwnd, led.flightsize, led.srtt, led.rttvar, led.cto, led.min_rtt,
             led.slow_start, led.peak_flight, led.peak_time, list(led.base_delays),
             list(led.current_delays), led.acks, led.last_ack)
    return state + (led.history_start, led.first_delay) if young else state


def ledbat_side_by_side(a, b, ack_a: Callable, ack_b: Callable,
                        evs: list[tuple[float, int, float, bool]], seed: int,
                        at_half: Callable[[], None] | None = None, young: bool = True) -> None:
    """Feed Ledbats ``a`` and ``b`` the same events, ACKs through ``ack_a`` and
    ``ack_b`` (``ledbat_on_ack``'s signature): each event (seconds since the last, or
    ms when <= 5; kind 0 send / 1 ack / 2 loss / 3 timeout check; delay ms; with an RTT
    sample); ``at_half`` runs once halfway.  Asserts the same state after each
    (:func:`ledbat_state` with ``young``)."""
    rnd = random.Random(seed)
    now = 1000.0
    for i, (dt, kind, delay_ms, with_rtt) in enumerate(evs):
        now += dt if dt > 5 else dt / 1000  # mostly ms apart, some seconds to minutes
        if at_half is not None and i == len(evs) // 2:
            at_half()
        if kind == 0:
            n = rnd.choice((1024, 8192, 300))
            a.on_send(n, now)
            b.on_send(n, now)
        elif kind == 1:
            n = rnd.choice((1024, 2048, 0, 8192))
            rtt = delay_ms / 500 if with_rtt else None
            ack_a(a, delay_ms / 1000, n, now, rtt)
            ack_b(b, delay_ms / 1000, n, now, rtt)
        elif kind == 2:
            a.on_loss(1024, now)
            b.on_loss(1024, now)
        else:
            assert a.check_timeout(now) == b.check_timeout(now)
        assert ledbat_state(a, young) == ledbat_state(b, young)
