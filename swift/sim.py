"""The swift peer in the packet-level simulator (deliverykit.sim, docs/sim.md).

Real :class:`swift.core.peer.Peer` objects, the ones ``swift/aio/node.py``
puts on sockets, run unchanged in virtual time: a seeder and N leechers with
in-memory content (:class:`swift.core.content.MemoryStorage`).  The flash
crowd mirrors ``swift/experiments/flashcrowd.py`` on the namespace testbed:
the seeder's uplink 20 Mb/s, leechers' uplinks capped (queues as tbf's
default: its bucket plus 50 ms at the rate), downlinks unshaped, leechers
learn of each other through the seeder's PEX (``pex_connect``) and leave once
complete.  Every leecher's content is compared byte for byte with the seeder's.

    python -m swift.sim --leechers 16 --size-kib 1024 [--arrivals poisson] [--seed N] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import gc
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deliverykit.cliutil import cli_main
from deliverykit.sim import (
    Host,
    LinkSpec,
    LossKind,
    LossSpec,
    NodeSpec,
    QueueUnit,
    RunStats,
    Scenario,
    Simulation,
    derive_seed,
)
from deliverykit.testbed.shaping import Tbf
from swift.core import events as ev
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.core.player import Player

__all__ = [
    "Arrivals",
    "AvailabilitySample",
    "FlashCrowdResult",
    "LeecherResult",
    "SwiftApp",
    "flash_crowd",
    "run",
    "sweep_task",
    "uplink",
    "upload_diag",
]

SEEDER = "seeder"
LEECHER = "leecher"
#: bytes tbf counts per datagram on the testbed's veth links: Ethernet 14 + IPv4 20 + UDP 8
ETHERNET_OVERHEAD = 42
#: seconds between two polls of a leecher's progress (player tick, start-up, completion),
#: as the testbed's leecher loop polls (swift/experiments/swarm.py)
POLL_S = 0.05


def uplink(bps: float, delay: float = 0.001, queue_s: float = 0.05, loss: float = 0.0) -> LinkSpec:
    """An access uplink as the testbed shapes it: tbf at ``bps`` with tbf's bucket
    (``Tbf.burst``: 10 ms at the rate, at least 3,000 bytes; its queue: the bucket
    plus ``queue_s`` at the rate, bytes), netem ``delay`` and Bernoulli ``loss``
    (a fraction) on every outgoing packet."""
    tbf = Tbf(int(bps), latency_ms=queue_s * 1000)
    return LinkSpec(rate=bps, delay=delay, queue=tbf.limit_bytes, queue_unit=QueueUnit.BYTES,
                    loss=LossSpec(LossKind.BERNOULLI, p=loss) if loss > 0 else LossSpec(),
                    burst=tbf.burst)


def upload_diag(peer: Peer) -> dict[str, int]:
    """Where uploads went unused, over the channels still open (docs/swift.md,
    flash crowd): DATA LEDBAT counted lost, its timeouts, requests given up."""
    chans = list(peer.channels.values())
    return {"up_losses": sum(c.send.ledbat.losses for c in chans),
            "up_timeouts": sum(c.send.ledbat.timeouts for c in chans),
            "requests_lost": sum(c.path.lost for c in chans)}


class Arrivals(enum.Enum):
    """How leechers arrive (the paper's Figs. 7-11: flash crowd and Poisson)."""

    #: all at time 0
    FLASH = "flash"
    #: uniformly within ``spread`` seconds
    UNIFORM = "uniform"
    #: a Poisson process of ``rate`` arrivals per second, the first at 0
    #: (swift/experiments/flashcrowd.py --arrivals poisson)
    POISSON = "poisson"


def flash_crowd(leechers: int = 6, size: int = 1 << 20, seeder_up: float = 20e6,
                leecher_up: float = 4e6, delay: float = 0.001, queue_s: float = 0.05,
                arrivals: Arrivals | str = Arrivals.FLASH, spread: float = 0.0,
                rate: float = 1.0, linger: float | None = 0.0, seed: int = 0,
                duration: float = 600.0) -> Scenario:
    """A swarm as data: one seeder, ``leechers`` arriving by ``arrivals``.

    Rates in bit/s; each uplink queues as the testbed's tbf with latency
    ``queue_s`` (its bucket plus ``queue_s`` at the rate), counting Ethernet
    headers; ``delay`` one-way per access link; ``linger``: seconds a
    leecher stays after completing (None: to the end).  Arrival times come
    from the run ``seed``; the content (``size`` bytes) from
    ``params["content_seed"]``, fixed across run seeds."""
    if leechers < 1 or size < 1:
        raise ValueError("need at least one leecher and one byte of content")
    try:
        kind = Arrivals(arrivals)
    except ValueError:
        raise ValueError(f"arrivals must be one of {[a.value for a in Arrivals]}, "
                         f"not {arrivals!r}") from None
    if kind is Arrivals.POISSON and rate <= 0:
        raise ValueError("the Poisson arrival rate must be positive")

    def up(bps: float) -> LinkSpec:
        return uplink(bps, delay, queue_s)

    rnd = random.Random(derive_seed(seed, "arrivals"))
    times = [0.0] * leechers
    if kind is Arrivals.UNIFORM and spread > 0:
        times = [rnd.uniform(0, spread) for _ in range(leechers)]
    elif kind is Arrivals.POISSON:
        for i in range(1, leechers):
            times[i] = times[i - 1] + rnd.expovariate(rate)
    nodes = [NodeSpec(SEEDER, role=SEEDER, up=up(seeder_up), down=LinkSpec(delay=delay))]
    nodes += [NodeSpec(f"l{i:03d}", role=LEECHER, up=up(leecher_up), down=LinkSpec(delay=delay),
                       arrive=times[i]) for i in range(leechers)]
    return Scenario(f"swift-{kind.value}-{leechers}x{size}", tuple(nodes), seed=seed,
                    duration=duration, overhead=ETHERNET_OVERHEAD,
                    params={"size": size, "content_seed": 0, "linger": linger})


@dataclass(frozen=True, slots=True)
class LeecherResult:
    """One leecher's run."""

    name: str
    #: virtual time it arrived
    arrive: float
    #: seconds from arrival to DownloadComplete (None: did not complete)
    completion_s: float | None
    #: its stored content equals the seeder's, byte for byte
    verified: bool
    #: chunks it uploaded
    sent_chunks: int
    #: seconds from arrival until the start-up bytes (``params["startup_bytes"]``) were
    #: verified in order, or until the player started (VoD); None: not reached
    startup_s: float | None = None
    #: playback stalls after start-up (VoD runs; 0 otherwise)
    stalls: int = 0
    #: seconds spent stalled (VoD runs)
    stall_s: float = 0.0
    #: the peer's counters at the end (``Peer.stats`` plus :func:`upload_diag`)
    stats: dict[str, int] = dataclasses.field(default_factory=dict)
    #: virtual time it left (None: still there at the end)
    left: float | None = None


@dataclass(frozen=True, slots=True)
class FlashCrowdResult:
    """Per-leecher outcome and what the run cost."""

    scenario: str
    seed: int
    leechers: tuple[LeecherResult, ...]
    run: RunStats
    #: availability samples (``params["availability_every"]`` > 0), in time order
    availability: tuple[AvailabilitySample, ...] = ()

    @property
    def all_verified(self) -> bool:
        return all(r.verified for r in self.leechers)

    @property
    def completion_times(self) -> list[float | None]:
        return [r.completion_s for r in self.leechers]

    def summary(self) -> dict[str, Any]:
        done = [t for t in self.completion_times if t is not None]
        return {
            "scenario": self.scenario, "seed": self.seed, "leechers": len(self.leechers),
            "completed": len(done), "verified": sum(r.verified for r in self.leechers),
            "mean_completion_s": sum(done) / len(done) if done else None,
            "max_completion_s": max(done) if done else None,
            "virtual_s": self.run.virtual_s, "cpu_s": self.run.cpu_s,
            "datagrams": self.run.datagrams, "events": self.run.events,
            "datagrams_per_cpu_s": self.run.datagrams_per_cpu_s,
            "virtual_s_per_cpu_s": self.run.virtual_per_cpu_s, **self.run.fates,
        }


@dataclass(frozen=True, slots=True)
class AvailabilitySample:
    """The availability picture at one instant (the paper's availability tree,
    seen from outside): how many present peers hold each chunk."""

    #: virtual time
    t: float
    #: peers present (the seeder included while it is there)
    present: int
    #: present peers holding the whole content (the seeder, completed leechers that stay)
    seeds: int
    #: per chunk, the number of present peers that hold it
    holders: tuple[int, ...]

    @property
    def rarest(self) -> int:
        """Holders of the rarest chunk (0: some chunk is held by nobody present)."""
        return min(self.holders) if self.holders else 0

    @property
    def lost(self) -> int:
        """Chunks no present peer holds."""
        return sum(1 for h in self.holders if h == 0)


class SwiftApp:
    """:class:`deliverykit.sim.Application` for a static swift swarm (seeder + leechers)."""

    def __init__(self, scenario: Scenario, seeder_config: PeerConfig | None = None,
                 leecher_config: PeerConfig | None = None,
                 node_configs: dict[str, PeerConfig] | None = None) -> None:
        p = scenario.params
        #: node name -> its own PeerConfig instead of the seeder's or leechers'
        #: (e.g. leechers that keep different numbers of requests outstanding)
        self.node_configs = dict(node_configs or {})
        self.size = int(p.get("size", 1 << 20))
        self.linger: float | None = p.get("linger", 0.0)
        self.seeder_config = seeder_config or PeerConfig()
        self.leecher_config = leecher_config or PeerConfig(pex_connect=True)
        cs = self.seeder_config.chunk_size
        if any(c.chunk_size != cs for c in (self.leecher_config, *self.node_configs.values())):
            raise ValueError("seeder and leechers must share the chunk size")
        self.data = random.Random(int(p.get("content_seed", 0))).randbytes(self.size)
        self.tree = MerkleTree.build([self.data[i:i + cs] for i in range(0, self.size, cs)],
                                     self.seeder_config.hash_func, cs)
        seeders = [n for n in scenario.nodes if n.role == SEEDER]
        if len(seeders) != 1:
            raise ValueError(f"the swift scenario needs exactly one {SEEDER!r} node")
        self.seeder_name = seeders[0].name
        self.leecher_names = [n.name for n in scenario.nodes if n.role == LEECHER]
        self.seeder_addr: Any = None
        self.completed: dict[str, float] = {}
        self.left: set[str] = set()
        self.left_at: dict[str, float] = {}
        #: leechers whose departure is scheduled
        self.leaving: set[str] = set()
        #: VoD: the video's bit rate in bytes/s (0: no player) and the player's start-up buffer
        self.bitrate = float(p.get("bitrate", 0.0))
        self.prebuffer = float(p.get("prebuffer", 5.0))
        #: bytes that must be verified in order for start-up (0: not measured)
        self.startup_bytes = int(p.get("startup_bytes", 0))
        self.players: dict[str, Player] = {}
        self.startup: dict[str, float] = {}
        #: seconds between two availability samples (0: none), ``params["availability_every"]``
        self.availability_every = float(p.get("availability_every", 0.0))
        self.availability: list[AvailabilitySample] = []
        #: peers a tracker introduces to a newcomer besides the seeder (:meth:`_introduce`)
        self.tracker = int(p.get("tracker", 0))
        self.chunks = -(-self.size // cs)

    def make_core(self, node: NodeSpec, addr: Any, sim: Simulation) -> Peer:
        seed = derive_seed(sim.seed, f"peer/{node.name}")
        if node.role == SEEDER:
            self.seeder_addr = addr
            base = self.node_configs.get(node.name, self.seeder_config)
            cfg = dataclasses.replace(base, seed=seed)
            return Peer(Content.seeded(self.tree, MemoryStorage(self.data)), cfg)
        if node.role != LEECHER:
            raise ValueError(f"node {node.name}: unknown swift role {node.role!r}")
        cfg = dataclasses.replace(self.node_configs.get(node.name, self.leecher_config), seed=seed)
        tree = MerkleTree.for_root(self.tree.root_hash, cfg.hash_func, cfg.chunk_size)
        return Peer(Content(tree, MemoryStorage()), cfg)

    def on_start(self, host: Host) -> None:
        if self.availability_every > 0 and not self.availability:
            self._sample(host.sim)
        if host.spec.role == LEECHER:
            if self.seeder_addr is None:
                raise ValueError(f"{host.name} arrived before the seeder")
            peer: Peer = host.core  # type: ignore[assignment]  # a swift host's core is a Peer
            now = host.sim.now
            seeder = host.sim.hosts.get(self.seeder_name)
            if seeder is not None and seeder.present:
                peer.connect(self.seeder_addr, now)
            for addr in self._introduce(host):
                peer.connect(addr, now)
            if self.bitrate > 0:
                self.players[host.name] = Player(self.bitrate, self.leecher_config.chunk_size,
                                                 self.size, now, self.prebuffer)
            if self.bitrate > 0 or self.startup_bytes > 0:
                host.sim.sched.at(now + POLL_S, self._poll, host)

    def _introduce(self, host: Host) -> list[Any]:
        """A tracker's answer (``params["tracker"]`` = k > 0): up to k present peers
        other than the seeder, drawn from the run's "tracker" stream.  0 (the paper's
        set-up): newcomers know the seeder only and learn the rest by its PEX, so
        after the seeder leaves they find nobody."""
        if self.tracker <= 0:
            return []
        sim = host.sim
        others = [h.addr for h in sim.hosts.values()
                  if h.present and h is not host and h.name != self.seeder_name]
        if len(others) > self.tracker:
            others = sim.sched.stream(f"tracker/{host.name}").sample(others, self.tracker)
        return others

    def _sample(self, sim: Simulation) -> None:
        """Count, per chunk, the present peers that hold it; again in ``availability_every``."""
        diff = [0] * (self.chunks + 1)
        present = seeds = 0
        for h in sim.hosts.values():
            if not h.present:
                continue
            present += 1
            content = h.core.content  # type: ignore[attr-defined]  # a swift host's core is a Peer
            seeds += content.complete
            for lo, hi in content.have.ranges():
                if lo < self.chunks:
                    diff[lo] += 1
                    diff[min(hi, self.chunks)] -= 1
        holders, run = [], 0
        for d in diff[:-1]:
            run += d
            holders.append(run)
        self.availability.append(AvailabilitySample(sim.now, present, seeds, tuple(holders)))
        sim.sched.at(sim.now + self.availability_every, self._sample, sim)

    def _poll(self, host: Host) -> None:
        """What the testbed's leecher loop does every POLL_S: tick the player (its
        playback position steers the VoD pickers) or check the start-up bytes."""
        if not host.present:
            return
        sim, name = host.sim, host.name
        now = sim.now
        peer: Peer = host.core  # type: ignore[assignment]  # a swift host's core is a Peer
        have = peer.content.have
        player = self.players.get(name)
        if player is not None:
            pos = player.tick(now, have)
            peer.set_playpos(pos, buffering=player.state == "buffering")
            if player.startup is not None:
                self.startup.setdefault(name, player.startup)
            host.flush()
            if player.done and name in self.completed:
                stay = self._stay(host)
                if stay is not None:
                    sim.depart(name, now + stay)
                    self.leaving.add(name)
                return
        elif name not in self.startup:
            e = have.find_empty(0)
            if e is None or e * self.leecher_config.chunk_size >= self.startup_bytes:
                self.startup[name] = now - host.spec.arrive
            else:
                sim.sched.at(now + POLL_S, self._poll, host)
            return
        sim.sched.at(now + POLL_S, self._poll, host)

    def on_event(self, host: Host, event: object) -> None:
        if isinstance(event, ev.DownloadComplete) and host.name not in self.completed:
            sim = host.sim
            self.completed[host.name] = sim.now - host.spec.arrive
            if self.startup_bytes > 0:  # as the testbed: complete before the check = start-up
                self.startup.setdefault(host.name, self.completed[host.name])
            stay = self._stay(host)
            if stay is not None and host.name not in self.players:
                sim.depart(host.name, sim.now + stay)  # a player leaves when it is done
                self.leaving.add(host.name)

    def _stay(self, host: Host) -> float | None:
        """Seconds a finished leecher stays: its own (``NodeSpec.stay``, churn), else
        ``params["linger"]`` (None: to the end)."""
        return host.spec.stay if host.spec.stay is not None else self.linger

    def on_stop(self, host: Host) -> None:
        self.left.add(host.name)
        self.left_at[host.name] = host.sim.now
        peer: Peer = host.core  # type: ignore[assignment]  # a swift host's core is a Peer
        host.send(peer.close(host.sim.now))  # closing handshakes (RFC 7574 3.1.1 step 8)

    def done(self, sim: Simulation) -> bool:
        """Every leecher complete (and its video played), and every departure that
        was scheduled taken: a leecher that stays (churn) seeds until it leaves."""
        return (len(self.completed) == len(self.leecher_names)
                and all(p.done for p in self.players.values())
                and len(self.left & self.leaving) == len(self.leaving))

    def verified(self, host: Host) -> bool:
        peer: Peer = host.core  # type: ignore[assignment]  # a swift host's core is a Peer
        content = peer.content
        assert isinstance(content, Content), "the flash crowd shares static content"
        storage = content.storage
        assert isinstance(storage, MemoryStorage)
        return peer.content.complete and bytes(storage.buf[:self.size]) == self.data


@contextlib.contextmanager
def setup_frozen() -> Iterator[None]:
    """The objects alive before the block (the nodes, their cores, hash trees and
    content) out of the cyclic collector's sight for the block (``gc.freeze``),
    then back.  A run allocates a few objects per datagram and keeps the set-up
    alive throughout, so the collector's full passes kept traversing it: a
    quarter of an 8-leecher VoD task's CPU (docs/sim-fig6.md, session 10).
    Unlike turning the collector off, cycles made during the run are still
    collected; the results do not change (tests/swift/test_swift_sim_gc.py)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run(scenario: Scenario, seed: int | None = None, trace: bool = False,
        progress: bool = False, seeder_config: PeerConfig | None = None,
        leecher_config: PeerConfig | None = None,
        node_configs: dict[str, PeerConfig] | None = None) -> FlashCrowdResult:
    """Run a swift scenario to completion (or its duration) and check every leecher.
    ``progress``: one updating line on stderr (virtual time, leechers complete);
    the configs default to :class:`SwiftApp`'s (``PeerConfig()``, and with PEX);
    ``node_configs``: per node name, overriding both."""
    app = SwiftApp(scenario, seeder_config, leecher_config, node_configs)
    sim = Simulation(scenario, app, seed=seed, trace=trace)

    def show(now: float) -> None:
        print(f"\rvirtual {now:7.1f} s, {len(app.completed)}/{len(app.leecher_names)} complete",
              end="", file=sys.stderr, flush=True)

    with setup_frozen():
        stats = sim.run(progress=show if progress else None)
    if progress:
        print(file=sys.stderr)
    out = []
    for name in app.leecher_names:
        host = sim.hosts.get(name)
        core = host.core if host is not None else None
        peer: Peer | None = core  # type: ignore[assignment]  # a swift host's core is a Peer
        player = app.players.get(name)
        out.append(LeecherResult(
            name, host.spec.arrive if host is not None else float("nan"),
            app.completed.get(name), host is not None and app.verified(host),
            peer.stats["sent_data"] if peer is not None else 0,
            startup_s=app.startup.get(name),
            stalls=player.stalls if player is not None else 0,
            stall_s=player.stall_time if player is not None else 0.0,
            stats={**peer.stats, **upload_diag(peer)} if peer is not None else {},
            left=app.left_at.get(name)))
    return FlashCrowdResult(scenario.name, sim.seed, tuple(out), stats, tuple(app.availability))


def sweep_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One flash crowd for :func:`deliverykit.sweep.run_sweep`: ``point`` holds
    :func:`flash_crowd`'s keyword arguments (``size_kib`` may stand for ``size``)."""
    kw = dict(point)
    if "size_kib" in kw:
        kw["size"] = int(kw.pop("size_kib")) * 1024
    res = run(flash_crowd(**kw, seed=seed))
    if not res.all_verified:
        raise ValueError(f"{sum(not r.verified for r in res.leechers)} leecher(s) not verified")
    s = res.summary()
    return {k: s[k] for k in ("completed", "mean_completion_s", "max_completion_s", "virtual_s",
                              "cpu_s", "datagrams", "delivered", "queue_drop")}


@cli_main("python -m swift.sim")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m swift.sim", description=__doc__.splitlines()[0])
    ap.add_argument("--leechers", type=int, default=16)
    ap.add_argument("--size-kib", type=int, default=1024)
    ap.add_argument("--leecher-up", type=float, default=4e6, help="bit/s (default 4e6)")
    ap.add_argument("--arrivals", choices=[a.value for a in Arrivals], default="flash")
    ap.add_argument("--rate", type=float, default=1.0, help="Poisson arrivals per second")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenario", help="a scenario JSON file instead of the flash crowd options")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--push", action="store_true",
                    help="push mode (PeerConfig.push): the seeder sends DATA unasked")
    ap.add_argument("--progress", action="store_true",
                    help="progress line on stderr even when it is not a terminal")
    args = ap.parse_args(argv)
    if args.leechers < 1 or args.size_kib < 1:
        ap.error("--leechers and --size-kib must be positive")
    if args.scenario:
        try:
            sc = Scenario.load(args.scenario)
        except (OSError, ValueError) as e:
            ap.error(str(e))
    else:
        sc = flash_crowd(args.leechers, args.size_kib * 1024, leecher_up=args.leecher_up,
                         arrivals=args.arrivals, rate=args.rate, seed=args.seed)
    seeder_cfg = PeerConfig(push=True) if args.push else None
    leecher_cfg = PeerConfig(pex_connect=True, push=True) if args.push else None
    res = run(sc, seed=args.seed, progress=args.progress or sys.stderr.isatty(),
              seeder_config=seeder_cfg, leecher_config=leecher_cfg)
    s = res.summary()
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        for k, v in s.items():
            print(f"{k:>22}: {v:.4g}" if isinstance(v, float) else f"{k:>22}: {v}")
    return 0 if res.all_verified else 1


if __name__ == "__main__":
    sys.exit(main())
