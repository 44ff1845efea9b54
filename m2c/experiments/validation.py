"""M2C's scenarios for ``deliverykit sim validate`` (entry point
``deliverykit.sim_validations``, issues 14 and 18): each one
:class:`deliverykit.sim.Scenario` that the simulator (:func:`m2c.sim.run`) and the
namespace testbed (:func:`m2c.experiments.fairness_testbed.build`, real sockets,
tbf) both read.

- ``m2c-pair``: the heterogeneous pair: one sender, r1 behind 4 Mb/s and r2
  behind 1 Mb/s, 25-packet queues (:mod:`m2c.experiments.hetero`);
- ``m2c-fig5``: M2C_ft alone, 3 receivers behind one shared 4 Mb/s bottleneck
  with a 25-packet queue (Fig. 5's topology, no TCP).

The session is Fig. 5's (256 kb/s-8 Mb/s, TSD 2 s, K = 2, 1,500-byte
packets). Metrics (:data:`METRICS`): each receiver's time against its
link-ideal (file bits / the rate of the slowest link on its path, payload only,
as hetero's), its loss, duplicate and network-overhead percentages (section
7.2, as the receivers report them), and the packets the shaped queues dropped
(the simulator's queue drops; the testbed's from tc's counters). The cases'
scenarios give the shaped links the bucket tbf has on the testbed
(:func:`with_tbf_bucket`; ``bucket=False`` for the paper's serialisers), the
testbed's measured link delay and IGMP join and leave latency instead of the
figure scenarios' 5 ms links and 10/50 ms (``path=FIGURE_PATH`` for those), and
start each receiver up to :data:`START_JITTER` late: docs/m2c-results.md, sessions
18 and 19, has the numbers behind all three.
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from deliverykit.sim import (
    BottleneckSpec,
    LinkSpec,
    QueueUnit,
    Scenario,
    Simulation,
    derive_seed,
)
from deliverykit.sim.validate import (
    TESTBED_ACCESS_DELAY,
    TESTBED_IGMP_LATENCY,
    Case,
    RunResult,
)
from m2c import sim
from m2c.core.session import ReceiverCore
from m2c.experiments import fairness_testbed, roles
from m2c.fec import ldpc

QUEUE_PKTS = 25
PAIR_BPS = [4e6, 1e6]
FIG5_BPS = 4e6
FIG5_RECEIVERS = 3
SUBNET = "10.0.7"
SENDER_LEAD = 0.3
"""s between the sender's start and its receivers' (as fairness_testbed)"""
START_JITTER = 0.1
"""s: each receiver starts up to this much late (uniform, drawn from the seed), as
the fairness scenario's sessions; without it the simulator's receivers run in
lockstep, which real receivers never do"""

#: metric -> what it is (the validation table's order)
METRICS = {
    "time_ideal_mean": "receivers' mean time / link-ideal (file bits / path rate)",
    "time_ideal_max": "the slowest receiver's time / link-ideal",
    "loss_pct_mean": "receivers' mean loss %, packets lost / sent to them",
    "loss_pct_max": "the highest receiver loss %",
    "dup_pct_mean": "receivers' mean duplicate % (symbols beyond those needed)",
    "net_pct_mean": "receivers' mean network overhead %",
    "queue_drops": "packets the shaped links' queues dropped (tc's drops on the testbed)",
}


def jittered(sc: Scenario, jitter: float) -> Scenario:
    """``sc`` with each receiver arriving up to ``jitter`` s late (uniform, from the seed)."""
    if jitter <= 0:
        return sc
    rng = random.Random(derive_seed(sc.seed, "m2c/validation/start"))
    return dataclasses.replace(sc, nodes=tuple(
        dataclasses.replace(n, arrive=n.arrive + rng.uniform(0.0, jitter))
        if n.role == sim.RECEIVER else n for n in sc.nodes))


@dataclasses.dataclass(frozen=True, slots=True)
class PathModel:
    """The links' one-way delay and the groups' join and leave latency, s."""

    delay: float
    join: float
    leave: float


#: the testbed's, measured (deliverykit.sim.validate's constants)
TESTBED_PATH = PathModel(TESTBED_ACCESS_DELAY, TESTBED_IGMP_LATENCY, TESTBED_IGMP_LATENCY)
#: the figure scenarios' (m2c.sim.file_transfer's defaults)
FIGURE_PATH = PathModel(0.005, 0.01, 0.05)


def pair_scenario(size: int, seed: int, jitter: float = START_JITTER,
                  bucket: bool = True, path: PathModel = TESTBED_PATH) -> Scenario:
    """The heterogeneous pair: each receiver's own shaped downlink; ``bucket``: the
    links are tbf's token buckets, as on the testbed (else serialisers, as the paper's
    links and m2c's figure scenarios); ``path``: the links' delay and the groups' join
    and leave latency, the testbed's measured ones (:data:`TESTBED_PATH`) or the
    figure scenarios' (:data:`FIGURE_PATH`)."""
    sc = jittered(sim.file_transfer(2, size, down_bps=list(PAIR_BPS), queue_pkts=QUEUE_PKTS,
                                    seed=seed, duration=3 * size * 8 / min(PAIR_BPS) + 60,
                                    delay=path.delay, join_latency=path.join,
                                    leave_latency=path.leave),
                  jitter)
    return with_tbf_bucket(sc) if bucket else sc


def fig5_scenario(size: int, seed: int, jitter: float = START_JITTER,
                  bucket: bool = True, path: PathModel = TESTBED_PATH) -> Scenario:
    """Fig. 5's M2C_ft alone: the receivers behind one shared link (crossed once by a
    multicast packet), their own downlinks unshaped; ``bucket`` and ``path`` as
    :func:`pair_scenario`."""
    sc = jittered(sim.file_transfer(FIG5_RECEIVERS, size, seed=seed,
                                    duration=3 * size * 8 / FIG5_BPS + 60, delay=path.delay,
                                    join_latency=path.join, leave_latency=path.leave),
                  jitter)
    nodes = tuple(n if n.role != sim.RECEIVER else
                  dataclasses.replace(n, down=LinkSpec(delay=n.down.delay)) for n in sc.nodes)
    bn = BottleneckSpec("bottleneck", LinkSpec(rate=FIG5_BPS, queue=QUEUE_PKTS,
                                               queue_unit=QueueUnit.PACKETS),
                        (sim.SENDER,), (sim.RECEIVER,))
    sc = dataclasses.replace(sc, name=f"m2c-fig5-{FIG5_RECEIVERS}x{size}", nodes=nodes,
                             bottlenecks=(bn,))
    return with_tbf_bucket(sc) if bucket else sc


def tbf_burst(rate_bps: float) -> int:
    """The bucket tbf has on the testbed at this rate (deliverykit.testbed.Tbf's default)."""
    from deliverykit.testbed import Tbf

    return Tbf(rate_bps=int(rate_bps)).burst


def with_tbf_bucket(sc: Scenario) -> Scenario:
    """``sc`` with every shaped link (downlinks and shared links with a rate) given the
    bucket tbf has on the testbed (``LinkSpec.burst``)."""
    def bucket(link: LinkSpec) -> LinkSpec:
        if link.rate is None:
            return link
        return dataclasses.replace(link, burst=tbf_burst(link.rate))

    nodes = tuple(dataclasses.replace(n, down=bucket(n.down)) for n in sc.nodes)
    bns = tuple(dataclasses.replace(b, link=bucket(b.link)) for b in sc.bottlenecks)
    return dataclasses.replace(sc, nodes=nodes, bottlenecks=bns)


def path_rates(sc: Scenario) -> dict[str, float]:
    """Each receiver's link-ideal rate: the slowest rate on its path from the sender."""
    shared = [b.link.rate for b in sc.bottlenecks
              if b.link.rate is not None and sim.RECEIVER in b.b]
    out = {}
    for n in sc.nodes:
        if n.role == sim.RECEIVER:
            rates = [r for r in [n.down.rate, *shared] if r is not None]
            if not rates:
                raise ValueError(f"receiver {n.name} has no shaped link: no link-ideal")
            out[n.name] = min(rates)
    return out


def metrics(sc: Scenario, per: dict[str, dict[str, Any]],
            drops: int | None) -> dict[str, float | None]:
    """The table's metrics from each receiver's section 7.2 metrics (``time``, ``loss``,
    ``dup``, ``net``; ``time`` None when it did not recover the file)."""
    size = int(sc.params["size"])
    rates = path_rates(sc)
    ratios = [m["time"] * rates[name] / (size * 8) for name, m in per.items()
              if m.get("time") is not None]

    def vals(k: str) -> list[float]:
        return [float(m[k]) for m in per.values() if m.get(k) is not None]

    def mean(xs: list[float]) -> float | None:
        return statistics.fmean(xs) if xs else None

    return {"time_ideal_mean": mean(ratios), "time_ideal_max": max(ratios, default=None),
            "loss_pct_mean": mean(vals("loss")), "loss_pct_max": max(vals("loss"), default=None),
            "dup_pct_mean": mean(vals("dup")), "net_pct_mean": mean(vals("net")),
            "queue_drops": None if drops is None else float(drops)}


def run_sim(sc: Scenario) -> tuple[RunResult, dict[str, Any]]:
    """One run in the simulator (:class:`m2c.sim.M2CApp`, as :func:`m2c.sim.run`): the
    validation's result and a record (per receiver, and each shaped link's drops:
    packets its queue dropped, as tc counts them, not the copies the receivers
    behind it missed)."""
    t0 = time.monotonic()
    app = sim.M2CApp(sc, sc.seed)
    s = Simulation(sc, app, seed=sc.seed)
    with ldpc.decoding(str(sc.params.get("decoding", "ml"))):
        stats = s.run()
    per: dict[str, dict[str, Any]] = {}
    verified = 0
    for name in app.receiver_names:
        host = s.hosts.get(name)
        core = host.core if host is not None else None
        done = app.recovered.get(name)
        if not isinstance(core, ReceiverCore):
            per[name] = {"time": None}
            continue
        m = dataclasses.asdict(core.metrics(core.t0 + (done if done is not None
                                                        else stats.virtual_s - core.t0)))
        per[name] = {k: v for k, v in m.items() if k != "raw"} | {"time": done}
        verified += app.verified(name)
    # a link's name is its node's ("r001.down") or the shared link's ("bottleneck.ab")
    links = {ln.name.split(".")[0]: ln.queue_drops for ln in s.network.links()
             if ln.rate is not None and ln.sent + ln.queue_drops > 0}
    drops = sum(links.values())
    out = RunResult(metrics(sc, per, drops), time.monotonic() - t0, verified,
                    sum(p["time"] is not None for p in per.values()), len(per))
    return out, {"receivers": per, "link_drops": links, "queue_drops": drops,
                 "cpu_s": stats.cpu_s}


def _host_name(node: str) -> str:
    """Short testbed host names: "s" for the sender, "r1".. for r001.."""
    return "s" if node == sim.SENDER else f"r{int(node[1:])}"


def run_netns(sc: Scenario) -> tuple[RunResult, dict[str, Any]]:
    """One run on the namespace testbed (root): the scenario's topology
    (:func:`m2c.experiments.fairness_testbed.build`), the session its parameters give,
    real sockets; each receiver starts its node's ``arrive`` s after the first could
    (the sender :data:`SENDER_LEAD` s before); the drops from tc's counters of the
    shaped links. The record has each receiver's measured start, s after the first's."""
    from deliverykit.testbed import Testbed
    from m2c.aio.driver import make_session

    t0 = time.monotonic()
    p = sc.params
    receivers = sorted((n.arrive, n.name) for n in sc.nodes if n.role == sim.RECEIVER)
    budget = sc.duration
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="m2c-val-") as d, Testbed(prefix="m2cval") as tb:
        topo = fairness_testbed.build(tb, sc, SUBNET, _host_name)
        src = os.path.join(d, "file.bin")
        with open(src, "wb") as f:
            f.write(sim.M2CApp(sc, sc.seed).data)
        shost, sip = topo.hosts[sim.SENDER]
        g0 = sc.multicast[0]
        sdj = make_session(src, group=g0.ip, port=g0.port, interface=sip,
                           min_rate=p["min_rate"], max_rate=p["max_rate"], tsd=p["tsd"],
                           k=p["k"], symbol_size=p["symbol_size"],
                           memory=p["memory"]).to_json()
        sender = tb.spawn(shost, roles.send, sdj, src, budget + 10)
        time.sleep(SENDER_LEAD)
        tasks = []
        t_begin = time.monotonic()
        for at, name in receivers:
            time.sleep(max(0.0, t_begin + at - time.monotonic()))
            h, ip = topo.hosts[name]
            tasks.append(tb.spawn(h, fairness_testbed.timed_receive, sdj,
                                  os.path.join(d, f"out-{name}"), ip, budget,
                                  str(p.get("controller", "m2c"))))
        timed = [t.result(timeout=budget + 20) for t in tasks]
        sender.kill()
        qd = fairness_testbed.qdisc_stats(tb, topo)
    per: dict[str, dict[str, Any]] = {}
    first = min(t.started for t in timed)
    for (_at, name), t in zip(receivers, timed, strict=True):
        r = t.result
        m = dataclasses.asdict(r.metrics)
        m["time"] = r.metrics.time if r.ok else None
        per[name] = {k: v for k, v in m.items() if k != "raw"} | {
            "ok": r.ok, "end": r.end, "started_s": t.started - first}
    drops = sum(q["drops"] for q in qd.values())
    ok = [bool(per[n]["ok"]) for _at, n in receivers]
    out = RunResult(metrics(sc, per, drops), time.monotonic() - t0, sum(ok), sum(ok),
                    len(receivers))
    return out, {"receivers": per, "qdisc": qd, "queue_drops": drops, "load1": load}


def _runner(build: Callable[[int, int], Scenario]) -> Callable[[int, int, str], RunResult]:
    def run_case(size: int, seed: int, backend: str) -> RunResult:
        sc = build(size, seed)
        if backend == "sim":
            return run_sim(sc)[0]
        if backend == "netns":
            return run_netns(sc)[0]
        raise ValueError(f"unknown backend {backend!r}")
    return run_case


def cases() -> list[Case]:
    specs = [
        ("m2c-pair", "one M2C sender; r1 behind 4 Mb/s, r2 behind 1 Mb/s, 25-packet queues",
         pair_scenario),
        ("m2c-fig5", "M2C_ft alone: 3 receivers behind one 4 Mb/s link, 25-packet queue",
         fig5_scenario),
    ]
    return [Case(name, about, build, _runner(build), METRICS, "receivers")
            for name, about, build in specs]
