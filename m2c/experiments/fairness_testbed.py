"""Paper section 7.3, M2C against M2C on the namespace testbed (root): the twin of
:mod:`m2c.experiments.fairness` with real sockets.

The topology is fig5.py's, read from the simulator's scenario
(:func:`m2c.experiments.fairness.scenario`): two sender hosts on a bridge with
IGMP snooping and a querier ("core"), a link from it to a second bridge ("edge")
holding the two receivers; the core's port toward the edge is shaped with tbf at
the scenario's bottleneck rate and queue (packets) and is the shared bottleneck, and
has fast leave (the scenario's 50 ms leave latency; each group has one member
behind it). Each session's group addresses and ports, its rates, TSD and K and
its symbol size are the scenario's; session B's sender and receiver start the
scenario's ``offset`` seconds after A's. Not built: the scenario's 5 ms link
delays (the veths add well under a millisecond) and its start jitter (two real
senders never run at the same instants).

Measured as in the simulator: each session's rate while both run, from B's
receiver's start until the first receiver has recovered the file, here from a
capture of the bottleneck's output (tcpdump on the edge side, IP bytes of each
session's groups), then shares and Jain's index. A sender is stopped when its
receiver is done (its packets stop crossing, as the simulated router prunes).
"""

from __future__ import annotations

import os
import random
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deliverykit.pcap import Reader
from deliverykit.sim import LinkSpec, QueueUnit, Scenario
from m2c.aio.driver import ReceiveResult, make_session
from m2c.experiments import roles
from m2c.experiments.fairness import SESSIONS, _view, jain, scenario

SUBNET = "10.0.6"
CAPTURE_SNAPLEN = 96
"""bytes per captured frame: the IP and UDP headers are all the rates need"""
SENDER_LEAD = 0.3
"""s between a sender's start and its receiver's (fig5.py waits as long)"""
POLL_S = 0.2
"""how often the run checks whether a receiver is done (to stop its sender)"""


@dataclass(frozen=True, slots=True)
class TimedReceive:
    """A receiver's result and when it started, on the clock the capture uses."""

    started: float
    """time.time() when the receiver started"""
    result: ReceiveResult

    @property
    def done_at(self) -> float | None:
        """time.time() when it had the file verified (None when it did not)"""
        return self.started + self.result.metrics.time if self.result.ok else None


def timed_receive(sd_json: str, out: str, iface: str, timeout: float,
                  controller: str) -> TimedReceive:
    """:func:`m2c.experiments.roles.receive`, with when it started (time.time())."""
    started = time.time()
    return TimedReceive(started, roles.receive(sd_json, out, iface, timeout, controller))


@dataclass(frozen=True, slots=True)
class Plan:
    """What the testbed builds from the simulator's scenario."""

    rate_bps: float
    """the shared link (tbf rate)"""
    queue_pkts: int
    """its tbf queue, packets"""
    offset: float
    """s between A's start and B's"""
    size: int
    """each session's file, bytes"""
    groups: tuple[tuple[str, int], ...]
    """each session's base group and port (channel 0; channel c is +c on both)"""
    params: dict[str, Any]
    """the session parameters (rates in packets/s, TSD, K, symbol size, memory)"""
    timeout: float
    """s each receiver may take at most (the scenario's duration)"""


@dataclass(frozen=True, slots=True)
class Topology:
    """What :func:`build` made of a simulator scenario on a testbed."""

    core: Any
    """the bridge of the nodes in front of the shared link (all nodes when there is none)"""
    edge: Any
    """the bridge behind the shared link (None without one)"""
    hosts: dict[str, tuple[Any, str]] = field(default_factory=dict)
    """node name -> (its testbed host, its address)"""
    shaped: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """shaped link (the bottleneck's name, or the node whose downlink it is) -> (the
    testbed host holding the shaped end, that end): tc's counters are read there"""


def _tbf(link: LinkSpec) -> Any:
    from deliverykit.testbed import Tbf

    if link.rate is None or link.queue is None or link.queue_unit is not QueueUnit.PACKETS:
        raise ValueError("a shaped link needs a rate and a queue in packets (tbf limit)")
    # tbf's own bucket (Tbf's default burst), whatever the scenario's link models:
    # the testbed has no pure serialiser
    return Tbf(rate_bps=int(link.rate), limit_pkts=link.queue)


def build(tb: Any, sc: Scenario, subnet: str, host_name: Callable[[str], str]) -> Topology:
    """Build ``sc``'s topology on the testbed ``tb``: a bridge with IGMP snooping and a
    querier ("core") holding every node in front of the scenario's one shared link,
    and, with a shared link, a second bridge ("edge") behind it holding the nodes of
    its far side; the core's port toward the edge is tbf at the link's rate and queue
    (packets), with fast leave. A node's downlink with a rate is tbf on its bridge
    port. Addresses ``subnet``.1 up on the core, ``subnet``.11 up on the edge, in node
    order; ``host_name`` gives a node's testbed host name (short: interface names are
    built from it). Not built: delays, loss, uplink rates (refused)."""
    if len(sc.bottlenecks) > 1:
        raise ValueError("the testbed twin builds at most one shared link")
    core = tb.bridge("core")
    edge: Any = None
    lk: Any = None
    tbf: Any = None
    behind: tuple[str, ...] = ()
    if sc.bottlenecks:
        bn = sc.bottlenecks[0]
        tbf = _tbf(bn.link)  # refused before anything is built
        behind = bn.b
        edge = tb.bridge("edge", snooping=False, querier=False)
        lk = tb.trunk(core, edge, fastleave=True)
    topo = Topology(core, edge)
    counts = {"core": 0, "edge": 0}
    for n in sc.nodes:
        if n.up.rate is not None:
            raise ValueError(f"node {n.name}: the testbed twin does not shape uplinks")
        side = "edge" if edge is not None and n.group in behind else "core"
        br: Any = edge if side == "edge" else core
        counts[side] += 1
        ip = f"{subnet}.{counts[side] + (10 if side == 'edge' else 0)}"
        h = tb.host(host_name(n.name))
        port = tb.attach(h, br, f"{ip}/24")
        tb.mroute(h, port.a)
        topo.hosts[n.name] = (h, ip)
        if n.down.rate is not None:
            tb.shape(port.b, tbf=_tbf(n.down))
            topo.shaped[n.name] = (br.host, port.b)
    if lk is not None:
        tb.shape(lk.a, tbf=tbf)
        topo.shaped[sc.bottlenecks[0].name] = (core.host, lk.a)
    tb.settle(core)
    return topo


def qdisc_stats(tb: Any, topo: Topology) -> dict[str, dict[str, int]]:
    """tc's counters of each shaped link's tbf (``tc -s qdisc`` in its namespace):
    sent packets, dropped, overlimits (a packet had to wait for tokens), requeues."""
    return {name: tb.tbf_counters(host, end) for name, (host, end) in topo.shaped.items()}


def plan(bottleneck_bps: float, size: int, offset: float, seed: int) -> Plan:
    """The testbed's shape from :func:`m2c.experiments.fairness.scenario`; a scenario
    the testbed cannot build (no shared link, or a queue not in packets) is refused."""
    sc = scenario(bottleneck_bps, size, offset, seed)
    if len(sc.bottlenecks) != 1:
        raise ValueError("the testbed twin builds exactly one shared link")
    link = sc.bottlenecks[0].link
    if link.rate is None or link.queue is None or link.queue_unit is not QueueUnit.PACKETS:
        raise ValueError("the shared link needs a rate and a queue in packets (tbf limit)")
    groups = tuple(_view(sc, s, i).multicast[0].addr for i, s in enumerate(SESSIONS))
    return Plan(link.rate, link.queue, float(sc.params["offset"]), int(sc.params["size"]),
                groups, dict(sc.params), sc.duration)


def session_bytes(pcap: str, groups: dict[str, str], t0: float,
                  t1: float) -> tuple[dict[str, int], dict[str, int]]:
    """IP bytes of each session (``groups``: destination address -> session) captured
    between ``t0`` and ``t1``, and the reader's counters."""
    got = dict.fromkeys(SESSIONS, 0)
    reader = Reader(pcap)
    for fr in reader:
        s = groups.get(fr.dst)
        if s is not None and t0 <= fr.ts <= t1:
            got[s] += fr.length
    return got, dict(reader.stats)


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_one(bottleneck_bps: float, size: int, offset: float, seed: int,
            controller: str = "m2c") -> dict[str, Any]:
    """One run on the testbed: the row :func:`m2c.experiments.fairness.run_one` gives,
    from real sockets and a capture (``backend`` "netns")."""
    from deliverykit.testbed import Testbed

    p = plan(bottleneck_bps, size, offset, seed)
    sc = scenario(bottleneck_bps, size, offset, seed)
    cpu0, wall0 = _cpu(), time.monotonic()
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="m2c-fair-") as d, Testbed(prefix="m2cfair") as tb:
        # hosts "as" / "ar" (session a's sender, receiver) ...; the shared link shaped
        topo = build(tb, sc, SUBNET, lambda n: n[0] + ("s" if n.endswith("sender") else "r"))
        edge: Any = topo.edge
        senders, receivers, sds, srcs = [], [], [], []
        for i, s in enumerate(SESSIONS):
            senders.append(topo.hosts[f"{s}-sender"])
            receivers.append(topo.hosts[f"{s}-r1"])
            src = os.path.join(d, f"{s}.bin")
            with open(src, "wb") as f:
                f.write(rng.randbytes(p.size))
            group, port = p.groups[i]
            sds.append(make_session(src, group=group, port=port, interface=senders[i][1],
                                    min_rate=p.params["min_rate"], max_rate=p.params["max_rate"],
                                    tsd=p.params["tsd"], k=p.params["k"],
                                    symbol_size=p.params["symbol_size"],
                                    memory=p.params["memory"]))
            srcs.append(src)
        owner = {g: s for s, sd in zip(SESSIONS, sds, strict=True) for g, _port in sd.groups}
        pcap = os.path.join(d, "bottleneck.pcap")
        with tb.capture(edge.host, "to-core", pcap, filter="udp and dst net 239.0.0.0/8",
                        snaplen=CAPTURE_SNAPLEN) as cap:
            snd: list[Any] = [None] * len(SESSIONS)
            rx: list[Any] = [None] * len(SESSIONS)
            # each session's sender at i x offset, its receiver SENDER_LEAD s later
            starts = sorted([(i * p.offset, 0, i) for i in range(len(SESSIONS))]
                            + [(i * p.offset + SENDER_LEAD, 1, i) for i in range(len(SESSIONS))])
            t_begin = time.monotonic()
            for at, is_rx, i in starts:
                time.sleep(max(0.0, t_begin + at - time.monotonic()))
                if is_rx:
                    rx[i] = tb.spawn(receivers[i][0], timed_receive, sds[i].to_json(),
                                     os.path.join(d, f"out-{SESSIONS[i]}"),
                                     str(receivers[i][1]), p.timeout, controller)
                else:
                    snd[i] = tb.spawn(senders[i][0], roles.send, sds[i].to_json(), srcs[i],
                                      p.timeout + 10)
            deadline = time.monotonic() + p.timeout + 20
            while time.monotonic() < deadline and any(t.alive for t in rx):
                for t, sender in zip(rx, snd, strict=True):
                    if not t.alive:
                        sender.kill()  # its receiver is done: its packets stop crossing
                time.sleep(POLL_S)
            res: list[TimedReceive] = [t.result(timeout=20) for t in rx]
            for sender in snd:
                sender.kill()
        dropped = cap.dropped
        row = _row(p, seed, res, pcap, owner)
    row.update(capture_dropped=dropped, cpu_s=_cpu() - cpu0, wall_s=time.monotonic() - wall0,
               controller=controller)
    return row


def _row(p: Plan, seed: int, res: list[TimedReceive], pcap: str,
         owner: dict[str, str]) -> dict[str, Any]:
    """fairness.run_one's row from the receivers' results and the capture."""
    row: dict[str, Any] = {"backend": "netns", "bottleneck_mbps": p.rate_bps / 1e6,
                           "size": p.size, "offset": p.offset, "seed": seed}
    for s, r in zip(SESSIONS, res, strict=True):
        row[f"{s}_time"] = r.result.metrics.time if r.result.ok else None
        row[f"{s}_verified"] = r.result.ok
        row[f"{s}_end"] = r.result.end
    dones = [r.done_at for r in res]
    if all(x is not None for x in dones):
        t0 = max(r.started for r in res)  # both run from B's receiver's start ...
        t1 = min(x for x in dones if x is not None)  # ... until the first has the file
        got, stats = session_bytes(pcap, owner, t0, t1)
        rates = {s: got[s] * 8 / (t1 - t0) / 1000 for s in SESSIONS}
        total = sum(rates.values())
        row.update(both_s=t1 - t0, **{f"{s}_bytes": got[s] for s in SESSIONS},
                   **{f"{s}_kbps": rates[s] for s in SESSIONS},
                   **{f"{s}_share": rates[s] / total if total else None for s in SESSIONS},
                   jain=jain(list(rates.values())), link_use=total * 1000 / p.rate_bps,
                   capture_frames_malformed=stats.get("malformed", 0))
    return row
