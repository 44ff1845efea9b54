"""Paper section 7.3, M2C against M2C: two sessions share one bottleneck (simulator or testbed).

Two M2C senders, each with its own file, session (TSI) and multicast groups,
and one receiver each; both sessions' packets cross one shared link of
``--bottleneck`` bit/s with a 25-packet drop-tail queue (the testbed's tbf) on
their way to the receivers, whose own access links are unshaped. A router
forwards a group's packet over the bottleneck once, and only while a receiver
behind it is a member (deliverykit/sim/network.py). Session B starts
``--offset`` seconds after A; each session's start is also delayed by a jitter
drawn from the seed, uniform over [0, 100] ms (without it both senders would
run the same schedule at the same instants and the simulator's tie-break, node
order, would put A's packet first in the queue every time). Each session's
throughput is counted over the time both run (from B's start until the first
receiver has the whole file): its share of the two and Jain's fairness index (1
= equal shares, 0.5 = one session has everything), mean and 95 % CI over
``--seeds`` runs. Same session parameters as Fig. 5 (256 kb/s-8 Mb/s, TSD 2 s,
K = 2, 1,500-byte packets).

    m2c experiment fairness [--quick] [--bottleneck 4e6] [--size BYTES] [--offset S]
        [--seeds N] [--backend sim|netns] [--out DIR]

``--backend netns`` (root) runs the same scenario on the namespace testbed with
real sockets, ``--seeds N`` runs of it (:mod:`m2c.experiments.fairness_testbed`:
fig5.py's topology with two senders, the rates from a capture of the shared
link's output).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import time
from typing import Any

from deliverykit import cliutil
from deliverykit.outputs import replace_when_done
from deliverykit.sim import (
    BottleneckSpec,
    Host,
    LinkSpec,
    MulticastGroupSpec,
    NodeSpec,
    QueueUnit,
    Scenario,
    Simulation,
    derive_seed,
)
from deliverykit.sweep import ci95
from m2c import sim
from m2c.core.events import Join
from m2c.core.groups import make_schedule
from m2c.core.session import ReceiverCore, Recovered
from m2c.fec import ldpc

SESSIONS = ("a", "b")
BASES = ("239.196.1.1", "239.196.2.1")
PORTS = (45000, 46000)
OTHER = "other"
QUEUE_PKTS = 25
START_JITTER = 0.1
"""seconds: each session starts up to this much late (drawn from the seed)"""


def _groups(base: str, port: int, channels: int, join: float,
            leave: float) -> list[MulticastGroupSpec]:
    a, b, c, d = (int(x) for x in base.split("."))
    ip = a << 24 | b << 16 | c << 8 | d
    return [MulticastGroupSpec(f"{g >> 24 & 255}.{g >> 16 & 255}.{g >> 8 & 255}.{g & 255}",
                               port + ch, join, leave)
            for ch, g in enumerate(range(ip, ip + channels + 1))]


def scenario(bottleneck_bps: float = 4e6, size: int = 8_000_000, offset: float = 0.0,
             seed: int = 0, delay: float = 0.005) -> Scenario:
    """Two senders ("a-sender", "b-sender") and their receivers behind one shared link."""
    one = sim.file_transfer(1, size, seed=seed)  # the session parameters, as Fig. 5's
    p = one.params
    sched = make_schedule("wave", min_rate=p["min_rate"], max_rate=p["max_rate"],
                          tsd=p["tsd"], k=p["k"])
    groups = [g for base, port in zip(BASES, PORTS, strict=True)
              for g in _groups(base, port, sched.channels, 0.01, 0.05)]
    rng = random.Random(derive_seed(seed, "m2c/fairness/start"))
    starts = [i * offset + rng.uniform(0.0, START_JITTER) for i in range(len(SESSIONS))]
    nodes = []
    for i, s in enumerate(SESSIONS):
        nodes.append(NodeSpec(f"{s}-sender", role=sim.SENDER, group="senders",
                              up=LinkSpec(delay=delay), arrive=starts[i]))
    for i, s in enumerate(SESSIONS):
        nodes.append(NodeSpec(f"{s}-r1", role=sim.RECEIVER, group="receivers",
                              down=LinkSpec(delay=delay), arrive=starts[i]))
    link = LinkSpec(rate=bottleneck_bps, delay=delay, queue=QUEUE_PKTS,
                    queue_unit=QueueUnit.PACKETS)
    bn = BottleneckSpec("shared", link, ("senders",), ("receivers",))
    return Scenario(f"m2c-fairness-{bottleneck_bps:g}", tuple(nodes), multicast=tuple(groups),
                    bottlenecks=(bn,), seed=seed,
                    duration=20 * size * 8 / bottleneck_bps + 60 + offset,
                    params={**p, "offset": offset})


def _view(sc: Scenario, s: str, i: int) -> Scenario:
    """Session ``s``'s scenario as M2CApp reads it: the other session's nodes in place
    (node indices give addresses) but in role "other", and only its own groups."""
    nodes = tuple(n if n.name.startswith(f"{s}-") else dataclasses.replace(n, role=OTHER)
                  for n in sc.nodes)
    per = len(sc.multicast) // len(SESSIONS)
    return dataclasses.replace(sc, nodes=nodes, multicast=sc.multicast[i * per:(i + 1) * per])


class FairnessApp:
    """:class:`deliverykit.sim.Application` over two :class:`m2c.sim.M2CApp` sessions."""

    def __init__(self, sc: Scenario, seed: int) -> None:
        self.apps = {s: sim.M2CApp(_view(sc, s, i), derive_seed(seed, f"m2c/fairness/{s}"))
                     for i, s in enumerate(SESSIONS)}
        self.cores: dict[str, ReceiverCore] = {}
        #: (virtual time, {session: link bytes so far}) when B's receiver starts and
        #: when the first receiver has the file
        self.marks: list[tuple[float, dict[str, float]]] = []
        self.first_join: dict[str, float] = {}

    def _app(self, name: str) -> sim.M2CApp:
        return self.apps[name.split("-", 1)[0]]

    def make_core(self, node: NodeSpec, addr: Any, s: Simulation) -> Any:
        core = self._app(node.name).make_core(node, addr, s)
        if isinstance(core, ReceiverCore):
            self.cores[node.name.split("-", 1)[0]] = core
        return core

    def _bytes(self, now: float) -> dict[str, float]:
        """Link bytes each session's receiver has had until ``now`` (tput x time)."""
        out = {}
        for s, c in self.cores.items():
            m = c.metrics(now)
            out[s] = (m.tput or 0.0) * 1000 / 8 * max(now - c.t0, 0.0)
        return out

    def on_start(self, host: Host) -> None:
        self._app(host.name).on_start(host)
        if len(self.cores) == len(SESSIONS) and not self.marks:  # both receivers run
            self.marks.append((host.sim.now, self._bytes(host.sim.now)))

    def on_event(self, host: Host, event: object) -> None:
        if isinstance(event, Join):
            self.first_join.setdefault(host.name, host.sim.now)
        if isinstance(event, Recovered) and len(self.marks) == 1:
            self.marks.append((host.sim.now, self._bytes(host.sim.now)))
        self._app(host.name).on_event(host, event)

    def on_stop(self, host: Host) -> None:
        self._app(host.name).on_stop(host)

    def done(self, s: Simulation) -> bool:
        return all(a.done(s) for a in self.apps.values())


def jain(xs: list[float]) -> float:
    """Jain's fairness index of the allocations ``xs`` (1: all equal)."""
    sq = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * sq) if sq > 0 else 1.0


def run_one(bottleneck_bps: float, size: int, offset: float, seed: int) -> dict[str, Any]:
    """One run: each session's rate while both run, shares, Jain's index, completions."""
    sc = scenario(bottleneck_bps, size, offset, seed)
    app = FairnessApp(sc, seed)
    s = Simulation(sc, app, seed=seed)
    with ldpc.decoding("ml"):
        stats = s.run()
    row: dict[str, Any] = {"bottleneck_mbps": bottleneck_bps / 1e6, "size": size,
                           "offset": offset, "seed": seed, "cpu_s": stats.cpu_s,
                           "virtual_s": stats.virtual_s}
    for name, a in app.apps.items():
        rname = a.receiver_names[0]
        row[f"{name}_time"] = a.recovered.get(rname)
        row[f"{name}_verified"] = a.verified(rname)
    if len(app.marks) == 2:
        (t0, b0), (t1, b1) = app.marks
        rates = {x: (b1[x] - b0.get(x, 0.0)) * 8 / (t1 - t0) / 1000 for x in SESSIONS}
        total = sum(rates.values())
        row.update(both_s=t1 - t0, **{f"{x}_kbps": rates[x] for x in SESSIONS},
                   **{f"{x}_share": rates[x] / total if total else None for x in SESSIONS},
                   jain=jain(list(rates.values())),
                   link_use=total * 1000 / bottleneck_bps)
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Mean and 95 % CI half-width (Student t) of each numeric result over the runs."""
    keys = ["a_kbps", "b_kbps", "a_share", "b_share", "jain", "link_use", "a_time", "b_time",
            "both_s", "cpu_s"]
    out = {}
    for k in keys:
        vals = [float(r[k]) for r in rows if r.get(k) is not None]
        if vals:
            out[k] = ci95(vals)
    return out


def _out_dir(text: str) -> str:
    if not text or (os.path.exists(text) and not os.path.isdir(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return text


@cliutil.cli_main("m2c experiment fairness")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="m2c experiment fairness",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 MB, 2 seeds")
    ap.add_argument("--bottleneck", type=cliutil.positive_float, default=4e6, metavar="BPS",
                    help="the shared link's rate, bit/s (default 4e6)")
    ap.add_argument("--size", type=cliutil.positive_int, metavar="BYTES",
                    help="each session's file (default 8000000)")
    ap.add_argument("--offset", type=cliutil.nonnegative_float, default=0.0, metavar="S",
                    help="session B starts this many seconds after A (default 0)")
    ap.add_argument("--seeds", type=cliutil.positive_int, help="runs (default 5)")
    ap.add_argument("--backend", choices=["sim", "netns"], default="sim",
                    help="sim: the packet-level simulator (default); netns: the namespace "
                    "testbed, real sockets and time (root)")
    ap.add_argument("--out", type=_out_dir, metavar="DIR",
                    help="fairness.json (sim) or fairness-netns.json (netns) here")
    a = ap.parse_args(argv)
    size = a.size or (1_000_000 if a.quick else 8_000_000)
    seeds = a.seeds or (2 if a.quick else 5)
    t0 = time.monotonic()
    one = run_one
    refused: tuple[type[Exception], ...] = ()  # what ends the runs with one line
    if a.backend == "netns":
        from deliverykit.testbed import TestbedError
        from m2c.experiments import fairness_testbed

        one, refused = fairness_testbed.run_one, (TestbedError,)
    rows = []
    tty = sys.stderr.isatty()
    for seed in range(seeds):
        if tty:  # progress: one updating line, only on a terminal
            print(f"\rrun {seed + 1} of {seeds} ({a.backend}), {time.monotonic() - t0:.0f} s",
                  end="", file=sys.stderr, flush=True)
        try:
            rows.append(one(a.bottleneck, size, a.offset, seed))
        except refused as e:  # no root, a tool missing, a child that failed
            nl = "\n" if tty else ""
            print(f"{nl}m2c experiment fairness: error: {e}", file=sys.stderr)
            return 1
    if tty:
        print(file=sys.stderr)
    wall = time.monotonic() - t0
    summ = summarise(rows)
    bad = [r for r in rows if not (r["a_verified"] and r["b_verified"])]
    print(f"two M2C sessions ({a.backend}), {a.bottleneck / 1e6:g} Mb/s shared, {size} B each, "
          f"B starts {a.offset:g} s after A, {seeds} seeds (mean +- 95 % CI):")
    for k, (m, h) in summ.items():
        print(f"  {k:9s} {m:10.3f}" + ("" if h != h else f" +- {h:.3f}"))
    print(f"wall {wall:.1f} s; {len(bad)} run(s) with a receiver not verified")
    if a.out:
        from deliverykit.provenance import run_metadata

        os.makedirs(a.out, exist_ok=True)
        name = "fairness.json" if a.backend == "sim" else "fairness-netns.json"
        p = os.path.join(a.out, name)
        with replace_when_done(p) as f:
            json.dump({"meta": {**run_metadata("m2c"), "wall_s": wall, "backend": a.backend,
                                "argv": sys.argv[1:] if argv is None else argv},
                       "rows": rows,
                       "summary": summ}, f, indent=1)
        print("wrote", p)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
