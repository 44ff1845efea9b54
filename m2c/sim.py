"""M2C in the packet-level simulator (deliverykit.sim, docs/sim.md).

The sender and receiver cores that :mod:`m2c.aio.driver` puts on multicast
sockets (:class:`m2c.core.session.SenderCore`, :class:`~m2c.core.session.ReceiverCore`)
run unchanged in virtual time: one sender, N receivers, one multicast group
per channel.  A receiver's :class:`~m2c.core.events.Join` / ``Leave`` events
become ``Network.join`` / ``leave`` (effective after the scenario's join and
leave latencies, as IGMP and the routers' grafts and prunes take).

The default topology is Fig. 5's M2C_ft path without the competing TCP
traffic: the sender's uplink unshaped, each receiver behind a bottleneck of
``down_bps`` (4 Mb/s) with a 25-packet drop-tail queue (tbf on the testbed),
1,500-byte packets, rates 256 kb/s to 8 Mb/s, TSD 2 s, K = 2.  In the
simulator each receiver has its own downlink (on the testbed the receivers
share one shaped link, which a multicast packet crosses once: the same for
M2C alone; competing TCP stays on the testbed).

    python -m m2c.sim --receivers 3 --size-kib 256 [--down-bps 4e6 ...] [--loss 0.02]
        [--seed S] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from deliverykit.cliutil import cli_main
from deliverykit.sim import (
    BottleneckSpec,
    Host,
    LinkSpec,
    LossKind,
    LossSpec,
    MulticastGroupSpec,
    NodeSpec,
    QueueUnit,
    RunStats,
    Scenario,
    Simulation,
    derive_seed,
    node_address,
)
from m2c.core.events import Join, Leave
from m2c.core.filetx import SessionDescription
from m2c.core.groups import make_schedule
from m2c.core.session import (
    Decoded,
    ReceiverCore,
    Recovered,
    SenderCore,
    SessionEnded,
    describe_session,
)
from m2c.fec import ldpc
from m2c.wire import codec

__all__ = ["M2CApp", "ReceiverResult", "TransferResult", "file_transfer", "run", "sweep_task"]

SENDER = "sender"
RECEIVER = "receiver"
PACKET = 1500
"""IP packet bytes, as Fig. 5 and the heterogeneous experiment send"""
GROUP = "239.196.1.1"
PORT = 45000
DECODINGS = ("ml", "iterative")
"""LDPC decoding at the receivers: iterative then Gaussian elimination, or iterative only"""


def file_transfer(receivers: int = 3, size: int = 256 << 10, *,
                  down_bps: float | list[float] = 4e6, queue_pkts: int = 25,
                  delay: float | list[float] = 0.005, loss: float | list[float] = 0.0,
                  min_rate_bps: float = 256_000, max_rate_bps: float = 8_000_000,
                  tsd: float = 2.0, k: int = 2, join_latency: float = 0.01,
                  leave_latency: float = 0.05, controller: str = "m2c", seed: int = 0,
                  duration: float = 600.0, core_bps: float | None = None,
                  decoding: str = "ml", memory: int = 256 << 20,
                  block_length: int | None = None,
                  sender_delay: float | None = None) -> Scenario:
    """One sender, ``receivers`` receivers of a ``size``-byte file, as data.

    ``down_bps``, ``loss`` (a fraction, Bernoulli), ``delay`` (s): one value for
    every receiver or one per receiver; each receiver's downlink queues
    ``queue_pkts`` packets and adds its delay; the sender's (unshaped) uplink adds
    ``sender_delay`` (s; None: the first receiver's delay, the testbed pair's shape,
    where every path is one delay longer than its receiver's own).  ``core_bps``: a
    shared link of that rate between the sender and every receiver (a backbone,
    crossed once per multicast datagram; queue 1,000 packets).  Rates of the
    schedule in bit/s of 1,500-byte packets.
    ``decoding``: "ml" (iterative, then Gaussian elimination) or "iterative"
    (no elimination, as the paper's LDPC-Triangle receivers).  The file's bytes
    come from ``params["content_seed"]`` (fixed across run seeds).  ``memory``: the
    receivers' memory bound (bytes) and ``block_length``: the LDPC block length (the
    default's 3,000 symbols when None), as :func:`m2c.core.session.describe_session`
    takes them: together they say whether the file is carouselled by windows."""
    if receivers < 1 or size < 1:
        raise ValueError("need at least one receiver and one byte")
    downs = down_bps if isinstance(down_bps, list) else [down_bps] * receivers
    losses = loss if isinstance(loss, list) else [loss] * receivers
    delays = delay if isinstance(delay, list) else [delay] * receivers
    if len(downs) != receivers or len(losses) != receivers or len(delays) != receivers:
        raise ValueError(f"{receivers} receivers: give one rate, loss and delay, or one each")
    if decoding not in DECODINGS:
        raise ValueError(f"decoding: one of {', '.join(DECODINGS)}, not {decoding!r}")
    params: dict[str, Any] = {
        "size": size, "content_seed": 0, "min_rate": min_rate_bps / 8 / PACKET,
        "max_rate": max_rate_bps / 8 / PACKET, "tsd": tsd, "k": k,
        "symbol_size": PACKET - codec.packet_overhead(), "controller": controller,
        "decoding": decoding, "memory": memory}
    if block_length is not None:
        params["block_length"] = block_length
    sched = make_schedule("wave", min_rate=params["min_rate"], max_rate=params["max_rate"],
                          tsd=tsd, k=k)
    a, b, c, d = (int(x) for x in GROUP.split("."))
    base = a << 24 | b << 16 | c << 8 | d
    groups = []
    for ch in range(sched.channels + 1):
        g = base + ch
        groups.append(MulticastGroupSpec(
            f"{g >> 24 & 255}.{g >> 16 & 255}.{g >> 8 & 255}.{g & 255}", PORT + ch,
            join_latency, leave_latency))
    if sender_delay is not None and not 0 <= sender_delay < math.inf:
        raise ValueError(f"sender_delay: a delay in seconds >= 0, not {sender_delay!r}")
    up_delay = delays[0] if sender_delay is None else sender_delay
    nodes = [NodeSpec(SENDER, role=SENDER, group=SENDER, up=LinkSpec(delay=up_delay))]
    for i in range(receivers):
        lossy = LossSpec(LossKind.BERNOULLI, p=losses[i]) if losses[i] > 0 else LossSpec()
        nodes.append(NodeSpec(f"r{i + 1:03d}", role=RECEIVER, group=RECEIVER, down=LinkSpec(
            rate=downs[i], delay=delays[i], queue=queue_pkts, queue_unit=QueueUnit.PACKETS,
            loss=lossy)))
    core = () if core_bps is None else (BottleneckSpec("core", LinkSpec(
        rate=core_bps, queue=1000, queue_unit=QueueUnit.PACKETS), (SENDER,), (RECEIVER,)),)
    return Scenario(f"m2c-ft-{receivers}x{size}", tuple(nodes), multicast=tuple(groups),
                    bottlenecks=core, seed=seed, duration=duration, params=params)


@dataclass(frozen=True, slots=True)
class ReceiverResult:
    """One receiver's transfer."""

    name: str
    #: seconds from its start to the file's recovery (None: not recovered)
    completion_s: float | None
    #: the recovered bytes hash to the session's SHA-256
    verified: bool
    #: paper section 7.2 criteria (time, gput, tput, loss, net, dup, sym, head, comp)
    metrics: dict[str, Any]
    joins: int
    leaves: int
    loss_events: int
    #: highest and final level of the cumulative hierarchy
    max_level: int
    end: str | None = None
    #: per-epoch (t, level, cumulative rate, target, lost, received, ARTT, loss events)
    trace: tuple[tuple[float, int, float, float, int, int, float, int], ...] = ()
    #: losses the controller took for loss on the link, not congestion (no queue, a
    #: hole in a busy link's departures, or a queue well below the fullest seen)
    random_losses: int = 0
    #: of those, the ones found by the hole rule (``ReceiverCC.HOLE_SLACK``)
    link_losses: int = 0
    #: of those, the ones found by the drain rule (``ReceiverCC.DRAIN_OVER``)
    drain_losses: int = 0


@dataclass(frozen=True, slots=True)
class TransferResult:
    """Per-receiver outcome and what the run cost."""

    scenario: str
    seed: int
    receivers: tuple[ReceiverResult, ...]
    run: RunStats
    sender: dict[str, int] = field(default_factory=dict)
    #: SHA-256 over every datagram's fate, time, endpoints and size (``run(trace=True)``)
    trace_hash: str | None = None
    #: virtual times of the receivers' membership reports (IGMP joins and leaves,
    #: the leaves of a receiver that is done included), in order
    membership_s: tuple[float, ...] = ()

    @property
    def all_verified(self) -> bool:
        return all(r.verified for r in self.receivers)

    def summary(self) -> dict[str, Any]:
        done = [r.completion_s for r in self.receivers if r.completion_s is not None]
        return {"scenario": self.scenario, "seed": self.seed, "receivers": len(self.receivers),
                "verified": sum(r.verified for r in self.receivers),
                "mean_completion_s": sum(done) / len(done) if done else None,
                "max_completion_s": max(done) if done else None,
                "virtual_s": self.run.virtual_s, "cpu_s": self.run.cpu_s,
                "datagrams": self.run.datagrams, **self.run.fates,
                "sender_packets": self.sender.get("packets", 0),
                # what a network operator asks at scale: membership reports (IGMP
                # joins and leaves) per second over the run, all receivers together
                "joins_leaves_per_s": (sum(r.joins + r.leaves for r in self.receivers)
                                       / self.run.virtual_s if self.run.virtual_s > 0 else 0.0)}

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary(),
                "receivers": [{k: v for k, v in asdict(r).items() if k != "trace"}
                              for r in self.receivers]}


class M2CApp:
    """:class:`deliverykit.sim.Application`: one M2C sender, N receivers of one file."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        p = scenario.params
        self.size = int(p["size"])
        self.data = random.Random(int(p.get("content_seed", 0))).randbytes(self.size)
        senders = [i for i, n in enumerate(scenario.nodes) if n.role == SENDER]
        if len(senders) != 1:
            raise ValueError(f"the m2c scenario needs exactly one {SENDER!r} node")
        src_ip = node_address(senders[0], scenario.port)[0]
        if not scenario.multicast:
            raise ValueError("the m2c scenario needs its multicast groups")
        g0 = scenario.multicast[0]
        self.sd: SessionDescription = describe_session(
            "sim.bin", self.size, hashlib.sha256(self.data).hexdigest(),
            session=derive_seed(seed, "m2c/session") & 0xFFFFFFFF,
            fec_seed=1 + derive_seed(seed, "m2c/fec") % 0x7FFFFFFD,
            group=g0.ip, port=g0.port, interface=src_ip, min_rate=float(p["min_rate"]),
            max_rate=float(p["max_rate"]), tsd=float(p["tsd"]), k=int(p["k"]),
            symbol_size=int(p["symbol_size"]), memory=int(p.get("memory", 256 << 20)),
            max_block_length=(int(p["block_length"]) if p.get("block_length") is not None
                              else None))
        if len(self.sd.groups) != len(scenario.multicast):
            raise ValueError(f"the schedule has {len(self.sd.groups)} channels, the scenario "
                             f"{len(scenario.multicast)} multicast groups")
        self.controller = str(p.get("controller", "m2c"))
        self.receiver_names = [n.name for n in scenario.nodes if n.role == RECEIVER]
        self.matched: dict[str, set[int]] = {}
        """per receiver: offsets of decoded blocks equal, byte for byte, to the file's"""
        self.mismatched: dict[str, int] = {}
        """per receiver: decoded blocks that differ from the file (never, unless a bug)"""
        self.block_bytes: dict[str, int] = {}
        self.recovered: dict[str, float] = {}
        self.ended: dict[str, str] = {}
        self.joined: dict[str, set[tuple[str, int]]] = {}
        self.membership: list[float] = []
        self.sender: SenderCore | None = None

    def make_core(self, node: NodeSpec, addr: Any, sim: Simulation) -> SenderCore | ReceiverCore:
        if node.role == SENDER:
            data = self.data
            self.sender = SenderCore(self.sd, lambda off, n: data[off:off + n], quantum=0.0)
            return self.sender
        if node.role != RECEIVER:
            raise ValueError(f"node {node.name}: unknown m2c role {node.role!r}")
        self.matched[node.name] = set()
        self.mismatched[node.name] = 0
        self.block_bytes[node.name] = 0
        self.joined[node.name] = set()
        return ReceiverCore(self.sd, controller=self.controller, source=self.sd.source,
                            where=node.name, progress_interval=None)

    def on_start(self, host: Host) -> None:
        core = host.core
        assert isinstance(core, (SenderCore, ReceiverCore))
        core.start(host.sim.now)

    def on_event(self, host: Host, event: object) -> None:
        name, net = host.name, host.sim.network
        if isinstance(event, Join):
            addr = (self.sd.groups[event.channel][0], int(self.sd.groups[event.channel][1]))
            self.joined[name].add(addr)
            self.membership.append(host.sim.now)
            net.join(name, addr)
        elif isinstance(event, Leave):
            addr = (self.sd.groups[event.channel][0], int(self.sd.groups[event.channel][1]))
            self.joined[name].discard(addr)
            self.membership.append(host.sim.now)
            net.leave(name, addr)
        elif isinstance(event, Decoded):
            self.check(name, event)
        elif isinstance(event, Recovered):
            self.recovered[name] = event.at - host.spec.arrive
            self._finish(host)
        elif isinstance(event, SessionEnded):
            self.ended[name] = event.text
            self._finish(host)

    def _finish(self, host: Host) -> None:
        """The receiver is done: it leaves every group (and the run, at once)."""
        for addr in sorted(self.joined[host.name]):
            self.membership.append(host.sim.now)
            host.sim.network.leave(host.name, addr)
        self.joined[host.name].clear()
        host.sim.depart(host.name)

    def on_stop(self, host: Host) -> None:
        pass

    def done(self, sim: Simulation) -> bool:
        return len(self.recovered) + len(self.ended) >= len(self.receiver_names)

    def check(self, name: str, d: Decoded) -> None:
        """Compare decoded bytes with the file's at once (no copy of the file is kept
        per receiver: 1,000 receivers of a 4 MB file would hold 4 GB)."""
        n = len(d.data)
        if d.offset in self.matched[name]:
            return
        if self.data[d.offset:d.offset + n] == d.data:
            self.matched[name].add(d.offset)
            self.block_bytes[name] += n
        else:
            self.mismatched[name] += 1

    def verified(self, name: str) -> bool:
        """Recovered, every decoded block equal to the file's bytes (whose SHA-256 the
        session description carries), and the blocks cover the whole file."""
        return (name in self.recovered and self.mismatched[name] == 0
                and self.block_bytes[name] == self.size)


def run(scenario: Scenario, seed: int | None = None, progress: bool = False,
        trace: bool = False) -> TransferResult:
    """Run an M2C file transfer scenario until every receiver recovered the file or
    ended (or the scenario's duration); ``progress``: one updating line on stderr."""
    seed = scenario.seed if seed is None else seed
    app = M2CApp(scenario, seed)
    sim = Simulation(scenario, app, seed=seed, trace=trace)

    def show(now: float) -> None:
        print(f"\rvirtual {now:7.1f} s, {len(app.recovered)}/{len(app.receiver_names)} "
              f"recovered", end="", file=sys.stderr, flush=True)

    # the receivers' FileReceivers create their LDPC decoders while the run goes on
    with ldpc.decoding(str(scenario.params.get("decoding", "ml"))):
        stats = sim.run(progress=show if progress else None)
    if progress:
        print(file=sys.stderr)
    out = []
    for name in app.receiver_names:
        host = sim.hosts.get(name)
        core = host.core if host is not None else None
        if not isinstance(core, ReceiverCore):
            out.append(ReceiverResult(name, None, False, {}, 0, 0, 0, 0, "never arrived"))
            continue
        t_end = core.t0 + app.recovered.get(name, stats.virtual_s - core.t0)
        m = asdict(core.metrics(t_end))
        out.append(ReceiverResult(
            name, app.recovered.get(name), app.verified(name), m, core.joins, core.leaves,
            core.cc.loss_events, max((e[1] for e in core.trace), default=0),
            app.ended.get(name) or (None if name in app.recovered else "not complete "
                                    f"after {stats.virtual_s:g} virtual s"),
            tuple(core.trace), core.cc.random_losses, core.cc.link_losses,
            core.cc.drain_losses))
    snd = app.sender
    sender = {"packets": snd.sent, "bytes": snd.bytes, "buffers": snd.buffers} if snd else {}
    return TransferResult(scenario.name, seed, tuple(out), stats, sender,
                          sim.network.trace_hash() if trace else None, tuple(app.membership))


METRICS = ("time", "gput", "tput", "loss", "net", "dup", "sym", "head", "comp")


def sweep_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One transfer for :func:`deliverykit.sweep.run_sweep`: ``point`` holds
    :func:`file_transfer`'s keyword arguments (``size_kib`` may stand for ``size``);
    the metrics are the receivers' means."""
    kw = dict(point)
    if "size_kib" in kw:
        kw["size"] = int(kw.pop("size_kib")) * 1024
    res = run(file_transfer(**kw, seed=seed))
    if not res.all_verified:
        raise ValueError(f"{sum(not r.verified for r in res.receivers)} receiver(s) "
                         f"not verified")
    row: dict[str, Any] = {}
    for m in METRICS:
        vals = [r.metrics[m] for r in res.receivers if r.metrics.get(m) is not None]
        row[m] = sum(vals) / len(vals) if vals else None
    row.update(virtual_s=res.run.virtual_s, cpu_s=res.run.cpu_s)
    return row


@cli_main("python -m m2c.sim")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m m2c.sim", description=__doc__.splitlines()[0])
    ap.add_argument("--receivers", type=int, default=3)
    ap.add_argument("--size-kib", type=int, default=256)
    ap.add_argument("--down-bps", type=float, nargs="+", default=[4e6], metavar="BPS",
                    help="each receiver's bottleneck, bit/s (one value, or one per receiver)")
    ap.add_argument("--loss", type=float, nargs="+", default=[0.0], metavar="P",
                    help="Bernoulli loss on each receiver's link (one, or one per receiver)")
    ap.add_argument("--queue-pkts", type=int, default=25)
    ap.add_argument("--controller", default="m2c")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--progress", action="store_true",
                    help="progress line on stderr even when it is not a terminal")
    args = ap.parse_args(argv)
    if args.receivers < 1 or args.size_kib < 1 or args.queue_pkts < 1:
        ap.error("--receivers, --size-kib and --queue-pkts must be positive")
    for name, vals in (("--down-bps", args.down_bps), ("--loss", args.loss)):
        if len(vals) not in (1, args.receivers):
            ap.error(f"{name}: one value or {args.receivers}")
    if any(v <= 0 for v in args.down_bps) or any(not 0 <= v < 1 for v in args.loss):
        ap.error("--down-bps must be positive and --loss in [0, 1)")
    from m2c.core.controllers import CONTROLLERS
    if args.controller not in CONTROLLERS:
        ap.error(f"--controller: one of {', '.join(sorted(CONTROLLERS))}")

    def per(vals: list[float]) -> float | list[float]:
        return vals[0] if len(vals) == 1 else list(vals)

    sc = file_transfer(args.receivers, args.size_kib * 1024, down_bps=per(args.down_bps),
                       loss=per(args.loss), queue_pkts=args.queue_pkts,
                       controller=args.controller, seed=args.seed)
    res = run(sc, progress=args.progress or sys.stderr.isatty())
    if args.json:
        print(json.dumps(res.to_json(), indent=2))
    else:
        print(f"{'receiver':>9} {'done s':>8} {'ok':>3} " + " ".join(f"{m:>7}" for m in METRICS)
              + f" {'joins':>5} {'leaves':>6} {'lossev':>6} {'maxlvl':>6}")
        for r in res.receivers:
            vals = " ".join(f"{r.metrics.get(m):7.2f}" if isinstance(r.metrics.get(m), float)
                            else f"{'-':>7}" for m in METRICS)
            done = f"{r.completion_s:8.3f}" if r.completion_s is not None else f"{'-':>8}"
            print(f"{r.name:>9} {done} {'yes' if r.verified else 'no':>3} {vals} "
                  f"{r.joins:5d} {r.leaves:6d} {r.loss_events:6d} {r.max_level:6d}")
            if r.end:
                print(f"{r.name:>9}: {r.end}")
        s = res.summary()
        print(f"virtual {s['virtual_s']:.3f} s, CPU {s['cpu_s']:.2f} s, "
              f"{s['datagrams']} datagrams sent, {s['delivered']} delivered, "
              f"{s['queue_drop']} queue drops, {s['loss']} lost, "
              f"{s['joins_leaves_per_s']:.1f} joins+leaves/s")
    return 0 if res.all_verified else 1


if __name__ == "__main__":
    sys.exit(main())
