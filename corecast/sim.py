"""CoreCast in the packet-level simulator (deliverykit.sim, docs/sim.md, docs/corecast.md).

The real sans-IO roles, the objects :mod:`corecast.aio.nodes` puts on sockets,
run unchanged in virtual time: one source streaming one channel, one ITR
(Algorithm 1) in the source's domain, ``K`` ASes with a CoreCast ETR
(Algorithm 2) each and ``N`` clients behind every ETR.  The source sends its
inner packets to the ITR's inside address, the ITR LISP-encapsulates one
payload per AS and one header per client to the ETRs (the *transit* traffic,
the paper's eq. 3), and each ETR unicasts the payload to its clients (the
*local* traffic, eq. 5).  Bytes are counted by the simulator's links (each
datagram plus its IPv4/UDP headers), not by the cores.

    python -m corecast.sim --ases K --clients N --seconds S [--seed X] [--loss P] [--json]

The ITR's map-cache is static (each AS's EID prefixes -> its ETR, as the mapping
system would answer), the subscriptions are made at time 0 and never time out (no
heartbeats in the simulation), inter-domain delays are drawn per AS from the run's
seed.  ``--itr source`` runs section 3.4's source-as-ITR (the source's core calls
Algorithm 1 itself): the same packets enter and stay inside every AS, and the
source's header packets to a separate ITR, which no count of the paper includes,
are not simulated (a third of the datagrams; docs/corecast-multidomain.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import gc
import ipaddress
import json
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.core.source import Source, pattern_media
from corecast.plan import eq3_transit, eq5_local, our_sizes
from deliverykit.cliutil import cli_main
from deliverykit.protocol import DatagramCore, SimAddr
from deliverykit.sim import (
    Host,
    LinkSpec,
    LossKind,
    LossSpec,
    NodeSpec,
    PairDelay,
    RunStats,
    Scenario,
    Simulation,
    derive_seed,
)

__all__ = ["AsBytes", "CoreCastApp", "ItrPlacement", "Role", "SimResult", "gc_paused", "run",
           "scenario", "sweep_task"]

#: the channel's EID, in the reserved CoreCast range (simulator addresses are 10.x.y.z
#: with x < 255 below 16 million nodes)
CHANNEL = "10.255.0.1"
RESERVED = "10.255.0.0/16"
#: bytes the simulator adds per datagram: IPv4 20 + UDP 8 (eqs. 3 and 5 count these)
IP_UDP = 28


class Role(enum.Enum):
    """What a simulated node runs."""

    SOURCE = "source"
    ITR = "itr"
    ETR = "etr"
    CLIENT = "client"


class ItrPlacement(enum.Enum):
    """Where Algorithm 1 runs."""

    #: on its own node in the source's domain, fed the source's inner packets over a
    #: link (Fig. 2)
    SEPARATE = "separate"
    #: inside the source (section 3.4, source-as-ITR): the source's core hands each
    #: inner packet to the ITR's core, whose LISP packets leave the source's uplink
    SOURCE = "source"


def scenario(ases: int = 3, clients: int = 4, seconds: float = 2.0, seed: int = 0,
             bitrate: float = 384_000, chunk_size: int = 1200, loss: float = 0.0,
             transit_rate: float = 1e9, local_rate: float = 100e6,
             sizes: Sequence[int] | None = None,
             itr: ItrPlacement = ItrPlacement.SEPARATE) -> Scenario:
    """The source's domain (source, ITR) and ``ases`` ASes of one ETR and ``clients``
    clients each, as data; or, with ``sizes``, ``len(sizes)`` ASes where AS ``a`` has
    ``sizes[a]`` clients (``ases`` and ``clients`` are then ignored).  Inter-domain
    delay per AS: 5-50 ms drawn from ``seed``; ``loss``: Bernoulli loss on every ETR's
    downlink (the transit path into its AS).  ``transit_rate`` (the ITR's uplink) and
    ``local_rate`` (each ETR's) are raised to twice the load the stream offers them
    when that is more.  ``itr``: where Algorithm 1 runs (:class:`ItrPlacement`); with
    ``SOURCE`` the source's uplink is the transit uplink and there is no ITR node."""
    per_as = list(sizes) if sizes is not None else [clients] * ases
    if not per_as or min(per_as) < 1 or seconds <= 0:
        raise ValueError("need at least one AS, one client per AS and a positive duration")
    ases = len(per_as)
    # links are sized at least at twice what the stream offers them, so a run measures
    # bytes, not a bottleneck: the ITR's uplink carries eq. 3 per chunk, an ETR's uplink
    # one H_I + D packet per client per chunk (a 45,000-client AS needs ~18 Gb/s)
    per_s = bitrate / (8 * chunk_size)
    transit_rate = max(transit_rate, 2 * 8 * per_s * eq3_transit(our_sizes("udp"), chunk_size,
                                                                  ases, sum(per_as)))
    rnd = random.Random(derive_seed(seed, "as-delays"))
    transit_loss = LossSpec(LossKind.BERNOULLI, p=loss) if loss > 0 else LossSpec()
    if itr is ItrPlacement.SOURCE:
        nodes = [NodeSpec("source", role=Role.SOURCE.value, group="home",
                          up=LinkSpec(rate=transit_rate))]
    else:
        nodes = [NodeSpec("source", role=Role.SOURCE.value, group="home"),
                 NodeSpec("itr", role=Role.ITR.value, group="home",
                          up=LinkSpec(rate=transit_rate))]
    delays = []
    for a, n in enumerate(per_as):
        group = f"as{a}"
        nodes.append(NodeSpec(f"etr{a}", role=Role.ETR.value, group=group,
                              down=LinkSpec(loss=transit_loss),
                              up=LinkSpec(rate=max(local_rate, 2 * 8 * per_s * n
                                                   * (chunk_size + IP_UDP)))))
        nodes += [NodeSpec(f"c{a}.{i}", role=Role.CLIENT.value, group=group,
                           down=LinkSpec(delay=0.001)) for i in range(n)]
        delays.append(PairDelay("home", group, round(rnd.uniform(0.005, 0.05), 6)))
    chunks = max(1, round(seconds * bitrate / (8 * chunk_size)))
    name = f"corecast-{ases}x{clients}" if sizes is None else f"corecast-{ases}as-{sum(per_as)}"
    return Scenario(name, tuple(nodes), tuple(delays), seed=seed,
                    duration=seconds + 10.0, overhead=IP_UDP,
                    params={"bitrate": bitrate, "chunk_size": chunk_size, "chunks": chunks,
                            "itr": itr.value})


class CoreCastApp:
    """:class:`deliverykit.sim.Application`: makes each node's role, nothing else."""

    def __init__(self, sc: Scenario) -> None:
        p = sc.params
        self.bitrate = float(p.get("bitrate", 384_000))
        self.chunk_size = int(p.get("chunk_size", 1200))
        self.chunks = int(p.get("chunks", 80))
        self.placement = ItrPlacement(p.get("itr", ItrPlacement.SEPARATE.value))
        self.port = sc.port
        self.nodes = {n.name: n for n in sc.nodes}
        roles = [Role(n.role) for n in sc.nodes]
        itrs = 1 if self.placement is ItrPlacement.SEPARATE else 0
        if roles.count(Role.SOURCE) != 1 or roles.count(Role.ITR) != itrs:
            raise ValueError(f"the corecast scenario needs exactly one source and {itrs} ITR "
                             f"node(s) with the ITR placed '{self.placement.value}'")
        self.source_name = next(n.name for n in sc.nodes if Role(n.role) is Role.SOURCE)
        #: the node whose address is the ITR's RLOC (the source's, in source-as-ITR mode)
        self.itr_name = next((n.name for n in sc.nodes if Role(n.role) is Role.ITR),
                             self.source_name)
        self.clients: dict[str, Client] = {}
        self.sources: list[Source] = []
        self.itrs: list[Itr] = []
        self.etrs: dict[str, Etr] = {}
        #: clients that may still miss chunks (see done)
        self._waiting: list[Client] = []
        #: the source's counters, once it exists (see done)
        self._sent: dict[str, int] | None = None
        #: ETR name -> its site's EID prefixes (the ITR's map-cache and the ETR's EIDs)
        self._sites: dict[str, list[tuple[bytes, int]]] = {}
        #: client name -> its AS's ETR name
        self.etr_of = {n.name: "etr" + n.group[2:] for n in sc.nodes
                       if Role(n.role) is Role.CLIENT}
        #: ETR name -> its clients' names (in scenario order)
        self.members: dict[str, list[str]] = {n.name: [] for n in sc.nodes
                                              if Role(n.role) is Role.ETR}
        for c, e in self.etr_of.items():
            self.members[e].append(c)

    def _addr(self, sim: Simulation, name: str) -> tuple[str, int]:
        a = sim.network.address(name)
        return (str(a[0]), int(a[1]))

    def make_core(self, node: NodeSpec, addr: SimAddr, sim: Simulation) -> DatagramCore:
        makers: dict[Role, Callable[[NodeSpec, Simulation], DatagramCore]] = {
            Role.SOURCE: self._source, Role.ITR: self._itr, Role.ETR: self._etr,
            Role.CLIENT: self._client}
        return makers[Role(node.role)](node, sim)

    def _site(self, sim: Simulation, etr: str) -> list[tuple[bytes, int]]:
        """The fewest prefixes that cover the AS's clients: they have consecutive
        simulator addresses (the range may include unused .0/.255 addresses, which no
        node has), as a real site is configured with its EID prefixes, not one /32 per
        host."""
        got = self._sites.get(etr)
        if got is None:
            mine = [ipaddress.IPv4Address(self._addr(sim, c)[0]) for c in self.members[etr]]
            got = self._sites[etr] = [
                (net.network_address.packed, net.prefixlen)
                for net in ipaddress.summarize_address_range(min(mine), max(mine))]
        return got

    def _source(self, node: NodeSpec, sim: Simulation) -> Source:
        host, _ = self._addr(sim, node.name)
        if self.placement is ItrPlacement.SOURCE:
            src = Source(host, itr=self._itr_core(sim), heartbeat_timeout=float("inf"))
        else:
            src = Source(host, self._addr(sim, self.itr_name), heartbeat_timeout=float("inf"))
        media = pattern_media(CHANNEL)
        last = self.chunks

        def finite(seq: int, n: int) -> bytes | None:
            return media(seq, n) if seq < last else None

        src.add_channel(CHANNEL, self.bitrate, self.chunk_size, finite)
        for name in self.etr_of:
            c_host, c_port = self._addr(sim, name)
            src.join(CHANNEL, c_host, c_port, True, sim.now)
        self._sent = src.counters
        self.sources.append(src)
        return src

    def _itr_core(self, sim: Simulation) -> Itr:
        """Algorithm 1 with its RLOC at :attr:`itr_name`'s address; its map-cache maps
        each AS's EID prefixes to that AS's ETR."""
        host, port = self._addr(sim, self.itr_name)
        mc = MapCache()
        mc.load_static("\n".join(f"{ipaddress.IPv4Address(net)}/{plen} {self._addr(sim, e)[0]}"
                                 for e in self.members for net, plen in self._site(sim, e)))
        itr = Itr(host, [parse_prefix(RESERVED)], mc, data_port=port)
        self.itrs.append(itr)
        return itr

    def _itr(self, node: NodeSpec, sim: Simulation) -> Itr:
        itr = self._itr_core(sim)
        itr.inside.add(self._addr(sim, self.source_name))
        return itr

    def _etr(self, node: NodeSpec, sim: Simulation) -> Etr:
        etr = Etr([parse_prefix(RESERVED)], eids=self._site(sim, node.name),
                  trusted_rlocs=[parse_prefix(self._addr(sim, self.itr_name)[0] + "/32")])
        self.etrs[node.name] = etr
        return etr

    def _client(self, node: NodeSpec, sim: Simulation) -> Client:
        # no SHA-1 kept per chunk: nothing here reads it, and at 100,000 clients x 2,400
        # chunks it would be 240 M digests
        client = Client(accept={self._addr(sim, self.etr_of[node.name])[0]},
                        keep_digests=False)
        self.clients[node.name] = client
        self._waiting.append(client)
        return client

    def on_start(self, host: Host) -> None:
        pass

    def on_event(self, host: Host, event: object) -> None:
        pass

    def on_stop(self, host: Host) -> None:
        pass

    def done(self, sim: Simulation) -> bool:
        """Every client has every chunk.  The simulator asks after every event: until
        the source has sent its last chunk one counter says no; then the clients not
        known to be finished are kept in a list checked from its end (amortised O(1)
        per call, not O(clients))."""
        sent = self._sent
        if sent is None or sent["chunks"] < self.chunks or len(self.clients) < len(self.etr_of):
            return False
        w = self._waiting
        while w and w[-1].received >= self.chunks:
            w.pop()
        return not w


@dataclass(frozen=True, slots=True)
class AsBytes:
    """What one AS received, measured on the simulator's links (IPv4/UDP included)."""

    name: str
    clients: int
    #: into the AS: the ETR's downlink (LISP-encapsulated payloads and headers)
    transit_bytes: int
    #: inside the AS: its clients' downlinks
    local_bytes: int

    @property
    def unicast_transit_bytes(self) -> int:
        """What unicast from the source would carry into this AS: one native packet
        (H_I + D) per client per chunk, the very packets the ETR delivers locally."""
        return self.local_bytes

    @property
    def saving(self) -> float:
        """Unicast over CoreCast transit bytes into this AS (Fig. 6's per-AS ratio,
        against unicast): below 1 for a one-client AS, growing with its clients."""
        return self.unicast_transit_bytes / self.transit_bytes if self.transit_bytes else 0.0


@dataclass(frozen=True, slots=True)
class SimResult:
    """What one run carried, beside the model's prediction."""

    scenario: str
    seed: int
    ases: int
    clients: int
    #: chunks the source sent
    chunks: int
    chunk_size: int
    #: bytes into the ASes (LISP-encapsulated payloads and headers, IPv4/UDP included)
    transit_bytes: int
    #: bytes the ETRs delivered inside their ASes (IPv4/UDP included)
    local_bytes: int
    #: eq. 3 (TT_CC) times the chunks, with our header sizes
    model_transit_bytes: int
    #: eq. 5 (LT_CC) times the chunks
    model_local_bytes: int
    #: chunks received, summed over the clients
    received: int
    lost: int
    run: RunStats
    #: SHA-256 over every datagram's fate, time, endpoints and size (``run(trace=True)``)
    trace: str | None = None
    #: per AS, in scenario order
    per_as: tuple[AsBytes, ...] = ()

    def summary(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("run", "trace", "per_as")}
        d["total_clients"] = sum(a.clients for a in self.per_as)
        d.update(virtual_s=self.run.virtual_s, cpu_s=self.run.cpu_s,
                 datagrams=self.run.datagrams, **self.run.fates)
        return d


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, then back as it was.

    A run allocates a few tuples per datagram (heap entries, addresses) and keeps
    hundreds of thousands alive (the nodes, their cores, the datagrams in flight),
    so the collector ran every ~700 allocations and regularly traversed everything
    alive: ~40 % of the CPU of a 10,000-client run, for nothing, since a run makes no
    reference cycles (tests/corecast/test_corecast_sim_scale.py checks that a run
    leaves none).  Reference counting still frees everything else at once."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(sc: Scenario, progress: bool = False, trace: bool = False) -> SimResult:
    """Run a corecast scenario until every client has every chunk (or its duration),
    with the garbage collector paused (:func:`gc_paused`)."""
    with gc_paused():
        return _run(sc, progress, trace)


def _run(sc: Scenario, progress: bool, trace: bool) -> SimResult:
    app = CoreCastApp(sc)
    sim = Simulation(sc, app, trace=trace)
    # no node leaves a corecast run: a datagram to a client (a downlink with a delay
    # only) takes one event instead of two, at the same time and with the same fate
    sim.network.direct_downlinks = True

    def show(now: float) -> None:
        got = sum(c.received for c in app.clients.values())
        print(f"\rvirtual {now:7.1f} s, {got} chunks received", end="", file=sys.stderr,
              flush=True)

    stats = sim.run(progress=show if progress else None)
    if progress:
        print(file=sys.stderr)
    net = sim.network.nodes
    etrs = [n.name for n in sc.nodes if Role(n.role) is Role.ETR]
    transit = sum(net[e].down.bytes for e in etrs)
    local = sum(net[c].down.bytes for c in app.etr_of)
    members = app.members
    per_as = tuple(AsBytes(e, len(members[e]), net[e].down.bytes,
                           sum(net[c].down.bytes for c in members[e])) for e in etrs)
    src = app.sources[0]
    chunks = src.counters["chunks"]
    k = len(app.etr_of)
    sizes = our_sizes("udp")
    d = app.chunk_size
    return SimResult(
        sc.name, sim.seed, len(etrs), k // max(1, len(etrs)), chunks, d, transit, local,
        chunks * eq3_transit(sizes, d, len(etrs), k), chunks * eq5_local(sizes, d, k),
        sum(c.received for c in app.clients.values()),
        sum(c.stats()["lost"] for c in app.clients.values()), stats,
        sim.network.trace_hash() if trace else None, per_as)


def sweep_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One run for :func:`deliverykit.sweep.run_sweep`: ``point`` holds
    :func:`scenario`'s keyword arguments (``ases``, ``clients``, ``seconds``,
    ``loss``, ``bitrate``, ``chunk_size``)."""
    res = run(scenario(**point, seed=seed))
    s = res.summary()
    return {k: s[k] for k in ("chunks", "transit_bytes", "model_transit_bytes", "local_bytes",
                              "model_local_bytes", "received", "lost", "virtual_s", "cpu_s")}


@cli_main("python -m corecast.sim")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m corecast.sim",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ases", type=int, default=3, help="ASes with a CoreCast ETR (K)")
    ap.add_argument("--clients", type=int, default=4, help="clients per ETR (N)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds of stream")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bitrate", type=float, default=384_000, help="channel bit/s")
    ap.add_argument("--chunk-size", type=int, default=1200, help="bytes per chunk (D)")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="Bernoulli loss on the transit link into each AS (0..1)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--progress", action="store_true",
                    help="progress line on stderr even when it is not a terminal")
    args = ap.parse_args(argv)
    if args.ases < 1 or args.clients < 1 or args.seconds <= 0:
        ap.error("--ases, --clients and --seconds must be positive")
    if not 0 <= args.loss < 1:
        ap.error("--loss must be in [0, 1)")
    try:
        sc = scenario(args.ases, args.clients, args.seconds, args.seed, args.bitrate,
                      args.chunk_size, args.loss)
        res = run(sc, progress=args.progress or sys.stderr.isatty())
    except ValueError as e:
        ap.error(str(e))
    s = res.summary()
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        for key in ("transit_bytes", "model_transit_bytes", "local_bytes", "model_local_bytes",
                    "chunks", "received", "lost", "virtual_s", "cpu_s"):
            v = s[key]
            print(f"{key:>20}: {v:.4g}" if isinstance(v, float) else f"{key:>20}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
