"""Paper section 7, Fig. 5: M2C file transfer vs a TCP download at a tbf bottleneck.

The bottleneck is 1 or 4 Mb/s with a 25-packet queue; the competing traffic
is one long TCP stream or Poisson short-TCP background traffic (10 flows/min,
exponential sizes with 85 % under 6 KB); 1 or more receivers.

Topology (deliverykit.testbed): the sender host s (M2C sender, TCP servers)
on a bridge with IGMP snooping and a querier ("core"), linked to a second
bridge ("edge") holding the receivers r1..rN; the core->edge link is shaped
with tbf and is the shared bottleneck, downstream of snooping as the paper's
router is downstream of PIM pruning (a multicast packet crosses it once for
all receivers, each TCP download pays for itself).  TCP uses Reno (the
paper: NewReno with SACK).

    sudo .venv/bin/python -m m2c.experiments.fig5 [--quick] [--bottleneck 1e6 4e6]
         [--competing stream|background] [--receivers 1 2] [--size BYTES]
         [--repeats N] [--out DIR]

With ``--repeats N`` every configuration runs N times and the output gives
per metric the mean +- the 95 % confidence half-width (Student t, N - 1
degrees of freedom, over runs) beside the paper's mean +- its interval
(Fig. 5(c)); ``--out DIR`` writes the per-run rows and the summary as CSV
and everything with its metadata (command, commit, times, load) as JSON.

``--backend sim`` runs M2C_ft in the packet-level simulator (:mod:`m2c.sim`: the
same sender and receiver cores, virtual time, no root): each receiver behind
the bottleneck rate with a 25-packet drop-tail queue, run ``r`` with seed
``r``.  TCP_ft and the competing TCP traffic stay on the testbed (real Linux
TCP; the simulator has none), so the sim rows are M2C_ft alone, competing
``none``.  ``--sweep NAME=V1,V2,... --seeds N`` (sim only) runs every
configuration x value x seed as one task on Dask distributed
(:mod:`deliverykit.sweep`; ``--workers N`` or ``--scheduler ADDRESS``):
``<out>/fig5-sim-sweep.csv`` with provenance, ``...-sweep.summary.csv`` with
mean and 95 % CI per point.

    m2c experiment fig5 --backend sim --size 4000000 --bottleneck 1e6 4e6 --receivers 5 \
        --sweep size=4000000,48000000 --seeds 20 --out results/fig5-sim
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import fcntl
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deliverykit import cliutil
from deliverykit.outputs import replace_when_done
from m2c.experiments.tcpflows import download, serve

if TYPE_CHECKING:  # the M2C modules load only for M2C_ft: TCP_ft runs without m2c.core
    from m2c.aio.driver import ReceiveResult

# What the paper prints: Fig. 5(c) (48 MB, 5 receivers, background traffic), mean of
# its runs and the 95 % interval, as (mean, +-); 5(a) and 5(b) are plots, their text in "text"
PAPER: dict[str, Any] = {
    "5(c) 1 Mb/s": {"TCP_ft": {"time": (2055, 30), "gput": (192, 3), "tput": (199, 3),
                               "loss": (5.86, 1.85), "net": (3.71, 0.06)},
                    "M2C_ft": {"time": (495, 65), "gput": (801, 97), "tput": (921, 129),
                               "loss": (9.86, 9.5), "net": (11.64, 7.27), "dup": (0.51, 1.29),
                               "sym": (6.49, 1.79), "comp": (3.04, 2.67)}},
    "5(c) 4 Mb/s": {"TCP_ft": {"time": (512, 8), "gput": (770, 13), "tput": (799, 13),
                               "loss": (4.03, 0.11), "net": (3.68, 0.26)},
                    "M2C_ft": {"time": (146, 28), "gput": (2733, 467), "tput": (3360, 754),
                               "loss": (8.17, 3.36), "net": (11.38, 1.41), "dup": (0.21, 1.08),
                               "sym": (6.06, 0.93), "comp": (10.17, 7.61)}},
    "text": "5(a), 99 MB: M2C_ft net ~10 % (sym >= 5.66 %, head 4.6 %); 4 MB: net 13-16 %, "
            "sym ~8 %; TCP net < 5 %.",
}
METRICS = ("time", "gput", "tput", "loss", "net", "dup", "sym", "comp")
KEYS = ("bottleneck_mbps", "competing", "receivers", "size", "flow")
LONG_PORT, FT_PORT, BG_PORT = 5001, 5002, 5003


def _bg_sizes(rng: random.Random) -> int:
    mean = 6000 / math.log(1 / 0.15)  # P(size < 6 KB) = 0.85
    return max(1, int(rng.expovariate(1 / mean)))


async def _bg_server(host: str, port: int, ready) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            n = int.from_bytes(await reader.readexactly(4), "big")
            writer.write(b"\x5a" * n)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port)
    ready.set()
    async with server:
        await asyncio.sleep(3600)


async def _bg_clients(host: str, port: int, duration: float, seed: int) -> int:
    rng = random.Random(seed)
    t_end = time.monotonic() + duration
    flows = 0
    tasks = []

    async def one(n: int) -> None:
        try:
            r, w = await asyncio.open_connection(host, port)
            w.write(n.to_bytes(4, "big"))
            await w.drain()
            while await r.read(65536):
                pass
            w.close()
        except OSError:
            pass

    while time.monotonic() < t_end:
        await asyncio.sleep(rng.expovariate(10 / 60))
        tasks.append(asyncio.create_task(one(_bg_sizes(rng))))
        flows += 1
    await asyncio.gather(*tasks, return_exceptions=True)
    return flows


TRANSFER_NICE = 19
"""TCP_ft's transfer-phase processes (server, downloads, background traffic) run at this
niceness: they mostly wait (the bottleneck is 1-4 Mb/s), and at nice 19 the hundreds of
them of concurrent repetitions leave the CPU to testbeds being built and to other work"""


def _at_nice(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` (a coroutine is returned, for the spawned child to run) at
    :data:`TRANSFER_NICE`; for :meth:`Testbed.spawn`."""
    os.nice(max(0, TRANSFER_NICE - os.nice(0)))
    return fn(*args)


def m2c_rows(results: list[ReceiveResult], controller: str) -> list[dict[str, Any]]:
    """One M2C_ft row per receiver (1, 2, ...) from the receivers' typed results."""
    from m2c.experiments.hetero import compact_trace

    rows = []
    for i, r in enumerate(results):
        m = r.metrics
        rows.append({"flow": "M2C_ft", "controller": controller, "receiver": i + 1,
                     "ok": r.ok, **{k: getattr(m, k) for k in METRICS},
                     "loss_events": r.loss_events, "trace": compact_trace(r.trace)})
    return rows


def one_run(kind: str, bottleneck: float, size: int, receivers: int, competing: str,
            timeout: float, controller: str = "m2c", *, prefix: str = "m2cf5", seed: int = 0,
            deadline: float | None = None, setup_lock: str | None = None,
            marks: dict[str, float] | None = None, needs: float = 0.0,
            together: tuple[str, int] | None = None) -> list[dict]:
    """kind: 'TCP_ft' or 'M2C_ft'; returns one row per receiver (``testbed``: the run's
    namespace stem, ``<prefix>-<pid>-<4 hex>``).  ``seed`` draws the background
    traffic (receiver ``i`` uses ``7 + i + 1000 * seed``); ``deadline`` (``time.time()``
    epoch): the transfer is given up then (``TestbedTimeout``), its namespaces removed.
    ``setup_lock``: a file whose lock (flock) is held from the first namespace until the
    transfer starts, so that runs started at once build their testbeds one at a time
    (building is CPU work under the testbed's 30 s timeouts; the transfer is waiting).
    ``marks`` gets ``setup`` and ``transfer`` (``time.time()`` when each began).
    ``needs``: seconds the transfer needs at least; a run that would not end before
    the deadline does not start (``TestbedTimeout``), leaving the lock to shorter ones.
    ``together`` = (directory, n): once built, wait (bounded) until n runs have built
    theirs, so that their transfers start at the same time (``marks["waited"]``)."""
    from deliverykit.testbed import TestbedTimeout

    def left(wanted: float) -> float:
        if deadline is None:
            return wanted
        rest = deadline - time.time()
        if rest <= 0:
            raise TestbedTimeout("stopped at the deadline before the transfer ended")
        return min(wanted, rest)

    marks = {} if marks is None else marks
    with contextlib.ExitStack() as held:
        if together is not None:  # runs last, when the build lock is free again

            def built(exc_type: Any, *_: Any) -> None:
                if exc_type is None:  # a build that failed is not waited for
                    _barrier(together[0], together[1], left, marks)

            held.push(built)
        if setup_lock is not None:
            fd = held.enter_context(open(setup_lock, "a"))  # noqa: SIM115 -- held till the transfer
            fcntl.flock(fd, fcntl.LOCK_EX)
            # the processes the run forks inherit the file: closing ours would not free
            # the lock while they live; unlocking frees it for all of them
            held.callback(fcntl.flock, fd, fcntl.LOCK_UN)
        if deadline is not None and time.time() + needs > deadline:
            raise TestbedTimeout(f"not started: it needs {needs:.0f} s and would not end "
                                 "before the deadline")
        marks["setup"] = time.time()
        return _one_run(kind, bottleneck, size, receivers, competing, timeout, controller,
                        prefix, seed, left, held, marks)


def _barrier(directory: str, n: int, left: Callable[[float], float],
             marks: dict[str, float]) -> None:
    """Say this run is built (a file in ``directory``), then wait until ``n`` runs have
    said so; given up after 30 min or at the deadline (``marks["waited"]`` = seconds)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{os.getpid()}-{time.monotonic_ns()}"), "w"):
        pass
    t0 = time.monotonic()
    while len(os.listdir(directory)) < n and time.monotonic() - t0 < left(1800):
        time.sleep(0.5)
    marks["waited"] = time.monotonic() - t0


def _one_run(kind: str, bottleneck: float, size: int, receivers: int, competing: str,
             timeout: float, controller: str, prefix: str, seed: int,
             left: Callable[[float], float], held: contextlib.ExitStack,
             marks: dict[str, float]) -> list[dict]:
    from deliverykit.testbed import Tbf, Testbed, TestbedTimeout

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="m2c-f5-") as d, Testbed(prefix=prefix) as tb:
        src = os.path.join(d, "file.bin")
        if kind != "TCP_ft":  # TCP_ft's server sends a pattern: no file to write
            with open(src, "wb") as f:
                f.write(os.urandom(size))
        # the sender's bridge prunes with IGMP snooping; the shaped link toward the
        # receivers' bridge is the shared bottleneck (like the paper's router)
        core = tb.bridge("core")
        edge = tb.bridge("edge", snooping=False, querier=False)
        lk = tb.trunk(core, edge)
        s = tb.host("s")
        ps = tb.attach(s, core, "10.0.5.1/24")
        rs = []
        for i in range(receivers):
            h = tb.host(f"r{i + 1}")
            p = tb.attach(h, edge, f"10.0.5.{11 + i}/24")
            rs.append((h, p))
        for h, p in [(s, ps)] + rs:
            tb.mroute(h, p.a)
            tb.sysctl(h, "net.ipv4.tcp_congestion_control", "reno")
        tb.shape(lk.a, tbf=Tbf(rate_bps=int(bottleneck), limit_pkts=25))
        tb.settle(core)
        # competing traffic toward the first receiver
        comp = []
        ev = tb.event()
        tcp = kind == "TCP_ft"  # M2C_ft's roles keep their niceness, as before

        def spawn(h: Any, fn: Callable[..., Any], *args: Any) -> Any:
            return tb.spawn(h, _at_nice, fn, *args) if tcp else tb.spawn(h, fn, *args)

        if competing == "stream":
            comp.append(spawn(s, serve, "10.0.5.1", LONG_PORT, None, ev))
            if not ev.wait(60):
                raise TestbedTimeout("the competing traffic's server did not start in 60 s")
            comp.append(spawn(rs[0][0], download, "10.0.5.1", LONG_PORT, None, timeout + 30))
        else:
            comp.append(spawn(s, _bg_server, "10.0.5.1", BG_PORT, ev))
            if not ev.wait(60):
                raise TestbedTimeout("the competing traffic's server did not start in 60 s")
            for i, (h, _p) in enumerate(rs):
                comp.append(spawn(h, _bg_clients, "10.0.5.1", BG_PORT, timeout + 30,
                                  7 + i + 1000 * seed))
        time.sleep(2.0)  # let the competing traffic settle
        marks["built"] = time.time()
        held.close()  # the setup lock: the next run may build its testbed
        before = [tb.counters(h, p.a) for h, p in rs]
        t_before = time.monotonic()
        if kind == "TCP_ft":
            ev2 = tb.event()
            stats: dict = {}
            srv = spawn(s, serve, "10.0.5.1", FT_PORT, size, ev2, stats, receivers)
            if not ev2.wait(60):
                raise TestbedTimeout("the TCP_ft server did not start in 60 s")
            marks["transfer"] = time.time()
            tasks = [spawn(h, download, "10.0.5.1", FT_PORT, size) for h, _p in rs]
            try:
                res = [t.result(timeout=left(timeout)) for t in tasks]
                flows = srv.result(timeout=left(30)).get("flows", [])
            except TestbedTimeout:
                if left(1) < 1:  # raises at the deadline
                    raise TestbedTimeout("stopped at the deadline before the transfer "
                                         "ended") from None
                raise
            for i, r in enumerate(res):
                fl = flows[i] if i < len(flows) else {}
                mss_pkts = max(1, size // 1448)
                link = size + 52 * mss_pkts  # IPv4 + TCP (timestamps) headers, like M2C's IP level
                ok = r["bytes"] == size and r["time"] > 0
                # a failed download has no goodput or overhead: null, as M2C_ft's
                rows.append({"flow": "TCP_ft", "receiver": i + 1, "ok": ok,
                             "bytes": r["bytes"],
                             "time": r["time"], "gput": size * 8 / r["time"] / 1000 if ok else None,
                             "tput": link * 8 / r["time"] / 1000 if ok else None,
                             "loss": 100 * fl.get("total_retrans", 0)
                             / max(1, fl.get("segs_out", 1)),
                             "net": (link / size - 1) * 100 if ok else None})
        else:
            from m2c.aio.driver import make_session
            from m2c.experiments import roles
            from m2c.wire import codec

            pkt = 1500  # IP packets of 1500 bytes, as in the heterogeneous experiment
            symbol = pkt - codec.packet_overhead()  # LDPC, the default FEC
            sd = make_session(src, group="239.196.1.1", port=45000, interface="10.0.5.1",
                              min_rate=256_000 / 8 / pkt, max_rate=8_000_000 / 8 / pkt,
                              tsd=2.0, k=2, symbol_size=symbol)
            sdj = sd.to_json()
            snd = tb.spawn(s, roles.send, sdj, src, timeout + 10)
            time.sleep(0.3)
            tasks = [tb.spawn(h, roles.receive, sdj, os.path.join(d, f"out{i}"), p.a.ip, timeout,
                              controller)
                     for i, (h, p) in enumerate(rs)]
            marks["transfer"] = time.time()
            res = [t.result(timeout=timeout + 20) for t in tasks]
            snd.kill()
            rows.extend(m2c_rows(res, controller))
        after = [tb.counters(h, p.a) for h, p in rs]
        # The counters span the whole window (lead-in, joins, competing traffic), which is
        # longer than a receiver's transfer time: divide by the window, not by row["time"].
        window = time.monotonic() - t_before
        for row, b, a in zip(rows, before, after, strict=False):
            row["link_rx_kbps_all_flows"] = (a["rx_bytes"] - b["rx_bytes"]) * 8 / window / 1000
        for t in comp:
            t.kill()
    for r in rows:
        r.update(bottleneck_mbps=bottleneck / 1e6, size=size, receivers=receivers,
                 competing=competing, testbed=tb.run_id)
    return rows


def run(quick: bool = True, bottlenecks=(4e6,), competing=("stream",), receivers=(1,),
        size: int | None = None, repeats: int = 1, controller: str = "m2c",
        backend: str = "netns") -> list[dict]:
    """Every configuration ``repeats`` times (TCP_ft and M2C_ft alternate within a
    repeat, so slow drifts of the shared machine hit both); rows carry ``run``.
    ``backend="sim"``: M2C_ft only, in the simulator, run ``r`` with seed ``r``."""
    size = size or ((1 << 20) if quick else 4_000_000)
    rows = []
    if backend == "sim":
        for rep in range(repeats):
            for bn in bottlenecks:
                for n in receivers:
                    for r in sim_run(bn, size, n, rep, controller):
                        r["run"] = rep
                        rows.append(r)
        return rows
    for rep in range(repeats):
        for bn in bottlenecks:
            for comp in competing:
                for n in receivers:
                    timeout = 10 * size * 8 / bn + 60
                    for kind in ("TCP_ft", "M2C_ft"):
                        for r in one_run(kind, bn, size, n, comp, timeout, controller):
                            r["run"] = rep
                            rows.append(r)
    return rows


SIM_QUEUE_PKTS = 25
"""the testbed's tbf queue at the bottleneck (limit_pkts)"""


def sim_run(bottleneck: float, size: int, receivers: int, seed: int,
            controller: str = "m2c", decoding: str = "ml") -> list[dict]:
    """M2C_ft in the simulator: one row per receiver, as :func:`one_run`'s
    (``decoding``: "ml" or "iterative", :data:`m2c.sim.DECODINGS`)."""
    from m2c import sim

    res = sim.run(sim.file_transfer(receivers, size, down_bps=bottleneck,
                                    queue_pkts=SIM_QUEUE_PKTS, controller=controller,
                                    seed=seed, duration=10 * size * 8 / bottleneck + 60,
                                    decoding=decoding))
    rows = []
    for i, r in enumerate(res.receivers):
        m = r.metrics
        rows.append({"flow": "M2C_ft", "controller": controller, "receiver": i + 1,
                     "ok": r.verified, "backend": "sim", "seed": seed,
                     **{k: m.get(k) for k in METRICS}, "head": m.get("head"),
                     "joins": r.joins, "leaves": r.leaves, "loss_events": r.loss_events,
                     "end": r.end, "bottleneck_mbps": bottleneck / 1e6, "size": size,
                     "receivers": receivers, "competing": "none"})
    return rows


def sim_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One simulated M2C_ft run for :func:`deliverykit.sweep.run_sweep`: ``point``
    holds ``bottleneck`` (bit/s), ``size`` (bytes), ``receivers``, ``controller``,
    ``decoding``; the metrics are the receivers' means (a receiver not verified fails
    the task)."""
    rows = sim_run(float(point["bottleneck"]), int(point["size"]), int(point["receivers"]),
                   seed, str(point.get("controller", "m2c")), str(point.get("decoding", "ml")))
    bad = [r for r in rows if not r["ok"]]
    if bad:
        raise ValueError(f"{len(bad)} receiver(s) did not recover the file: {bad[0]['end']}")
    out: dict[str, Any] = {}
    for m in (*METRICS, "head"):
        vals = [r[m] for r in rows if r.get(m) is not None]
        out[m] = sum(vals) / len(vals) if vals else None
    return out


SWEEPABLE = ("bottleneck", "size", "receivers")


def _parse_sweep(text: str) -> tuple[str, list[float]]:
    """``size=4000000,48000000`` -> ("size", [4000000, 48000000])."""
    name, sep, values = text.partition("=")
    name = name.strip()
    try:
        vals = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        vals = []
    if not sep or name not in SWEEPABLE or not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(
            f"--sweep takes NAME=V1,V2,... with NAME one of {', '.join(SWEEPABLE)} and "
            f"positive numbers, not {text!r}")
    return name, vals


def sweep(a: argparse.Namespace, out_dir: str) -> Any:
    """Every configuration x swept value x seed as a Dask task (see the module docstring)."""
    from deliverykit.sweep import run_sweep

    key, values = a.sweep
    base = [{"bottleneck": bn, "receivers": n, "size": a.size or (1 << 20),
             "controller": a.controller, "decoding": a.decoding}
            for bn in a.bottleneck for n in a.receivers]
    points, seen = [], set()
    for b in base:
        for v in values:
            p = {**b, key: int(v) if key != "bottleneck" else v}
            if repr(sorted(p.items())) not in seen:
                seen.add(repr(sorted(p.items())))
                points.append(p)
    os.makedirs(out_dir, exist_ok=True)
    return run_sweep(sim_task, points, list(range(a.seeds or 3)),
                     os.path.join(out_dir, "fig5-sim-sweep.csv"), scenario="m2c-fig5-M2C_ft",
                     scheduler=a.scheduler, workers=a.workers,
                     progress=True if a.progress else None, resume=a.resume)


SWEEP_METRICS = ("time", "gput", "tput", "loss", "net", "dup", "sym", "head", "comp")
#: the paper's 5(a) text for 99 MB: head 4.6 % (the only head figure it gives)
PAPER_HEAD = (4.6, None)


def sweep_table(csv_path: str) -> str:
    """A markdown table from a sweep CSV (``fig5-sim-sweep.csv``, or its ``.part`` while
    it runs): per bottleneck, size and decoding, mean +- 95 % CI (Student t) over the
    seeds, and the paper's Fig. 5(c) M2C_ft row (48 MB, background traffic) beside."""
    import csv

    from deliverykit.sweep import ci95

    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    groups: dict[tuple[float, int, str], list[dict]] = {}
    for r in rows:
        key = (float(r["bottleneck"]), int(r["size"]), r.get("decoding") or "ml")
        groups.setdefault(key, []).append(r)
    head = ["configuration", "n", *SWEEP_METRICS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for bn in sorted({k[0] for k in groups}):
        for key in sorted((k for k in groups if k[0] == bn), key=lambda k: (k[1], k[2] != "ml")):
            rs = groups[key]
            cells = []
            for m in SWEEP_METRICS:
                vals = [float(r[m]) for r in rs if r.get(m) not in (None, "")]
                if not vals:
                    cells.append("")
                    continue
                mean, half = ci95(vals)
                nd = 0 if m in ("gput", "tput") else 2
                cells.append(f"{mean:,.{nd}f}" if len(vals) < 2 or math.isnan(half)
                             else f"{mean:,.{nd}f} +- {half:,.{nd}f}")
            dec = "" if key[2] == "ml" else f", {key[2]}-only decoding"
            out.append(f"| {bn / 1e6:g} Mb/s, sim, {key[1] / 1e6:g} MB{dec} | {len(rs)} | "
                       + " | ".join(cells) + " |")
        p = PAPER.get(f"5(c) {bn / 1e6:g} Mb/s", {}).get("M2C_ft")
        if p:
            cells = []
            for m in SWEEP_METRICS:
                mean, ci = p.get(m, PAPER_HEAD if m == "head" else (None, None))
                nd = 0 if m in ("gput", "tput") else 2
                cells.append("" if mean is None else f"{mean:,.{nd}f}" if ci is None
                             else f"{mean:,.{nd}f} +- {ci:,.{nd}f}")
            out.append(f"| {bn / 1e6:g} Mb/s, paper 5(c), 48 MB, background TCP | 20 | "
                       + " | ".join(cells) + " |")
    return "\n".join(out)


TCPFT_PREFIX = "m2cft"
"""namespace prefix of the concurrent TCP_ft repetitions (``m2cft-<pid>-<4 hex>-<host>``)"""
TCPFT_METRICS = ("time", "gput", "tput", "loss", "net")
SETUP_LOCK = os.path.join(tempfile.gettempdir(), "m2c-fig5-tcpft-setup.lock")
"""held while a repetition builds its testbed: one build at a time on the machine"""
SETUP_ATTEMPTS = 3


def tcpft_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One TCP_ft repetition on the testbed for :func:`deliverykit.sweep.run_sweep`
    (``seed``: the repetition, which also draws the background traffic): its own
    namespaces and tbf, so repetitions run at once without meeting.  ``point``:
    ``bottleneck`` (bit/s), ``size`` (bytes), ``receivers``, ``competing``, and
    ``deadline`` (epoch s or None).  Metrics: the receivers' means, their slowest
    time, and the namespace stem and wall-clock span of the run."""
    bn, size = float(point["bottleneck"]), int(point["size"])
    started = time.time()
    for attempt in range(1, SETUP_ATTEMPTS + 1):
        marks: dict[str, float] = {}
        try:
            rows = one_run("TCP_ft", bn, size, int(point["receivers"]), str(point["competing"]),
                           10 * size * 8 / bn + 60, prefix=TCPFT_PREFIX, seed=seed,
                           deadline=point.get("deadline"),
                           setup_lock=point.get("setup_lock") or SETUP_LOCK, marks=marks,
                           # the receivers share the link: their files' bits over its rate
                           needs=int(point["receivers"]) * size * 8 / bn,
                           together=(point["together"], int(point["together_n"]))
                           if point.get("together") else None)
            break
        except TimeoutError as e:  # TestbedTimeout is one
            # a testbed not built in time on a loaded machine is no measurement: build
            # it again (the transfer had not begun); a transfer that timed out is final
            if "transfer" in marks or "deadline" in str(e) or attempt == SETUP_ATTEMPTS:
                raise
            print(f"fig5 TCP_ft repetition {seed}: setup failed ({e}); again",
                  file=sys.stderr)
    bad = [r for r in rows if not r["ok"]]
    if bad:
        raise ValueError(f"{len(bad)} of {len(rows)} download(s) incomplete: "
                         f"{bad[0]['bytes']} of {size} bytes")
    out: dict[str, Any] = {m: sum(r[m] for r in rows) / len(rows) for m in TCPFT_METRICS}
    out.update(time_max=max(r["time"] for r in rows), testbed=rows[0]["testbed"],
               started_utc=_utc(started), finished_utc=_utc(time.time()),
               setup_started=marks["setup"], built=marks["built"],
               transfer_started=marks["transfer"],
               setup_attempts=attempt, waited=marks.get("waited"))
    return out


def _utc(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="seconds")


def tcpft_sweep(a: argparse.Namespace, out_dir: str) -> Any:
    """TCP_ft only, ``a.repeats`` repetitions per bottleneck x size, ``a.workers`` at
    once (Dask, one process each); the namespaces of a worker that died are removed
    afterwards (:func:`deliverykit.testbed.cleanup_stale`)."""
    from deliverykit.sweep import run_sweep
    from deliverykit.testbed import cleanup_stale

    size = a.size or 4_000_000
    points = [{"bottleneck": bn, "size": size, "receivers": n, "competing": c,
               "deadline": a.deadline, "setup_lock": a.setup_lock,
               "together": tempfile.mkdtemp(prefix="m2c-fig5-together-")
               if a.together else None, "together_n": a.repeats}
              for bn in a.bottleneck for n in a.receivers for c in a.competing]
    os.makedirs(out_dir, exist_ok=True)
    name = (f"fig5-tcpft-{size / 1e6:g}MB-{'-'.join(f'{bn / 1e6:g}' for bn in a.bottleneck)}"
            f"Mbps-w{a.workers or len(points) * a.repeats}"
            + (f"-from{a.first_repeat}" if a.first_repeat else "") + ".csv")
    try:
        reps = list(range(a.first_repeat, a.first_repeat + a.repeats))
        return run_sweep(tcpft_task, points, reps, os.path.join(out_dir, name),
                         scenario="m2c-fig5-TCP_ft", scheduler=a.scheduler,
                         workers=a.workers or len(points) * a.repeats,
                         progress=True if a.progress else None, resume=a.resume)
    finally:
        for p in points:
            if p["together"]:
                shutil.rmtree(p["together"], ignore_errors=True)
        left = cleanup_stale(TCPFT_PREFIX)
        if left:
            print(f"m2c experiment fig5: removed {len(left)} namespace(s) of stopped "
                  "repetitions", file=sys.stderr)


def tcpft_table(csv_path: str) -> str:
    """Markdown: per bottleneck and size, TCP_ft mean +- 95 % CI over the repetitions
    (n), and the paper's Fig. 5(c) TCP_ft row (48 MB, background traffic) beside."""
    import csv

    from deliverykit.sweep import ci95

    with open(csv_path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("scenario") == "m2c-fig5-TCP_ft"]
    if not rows:
        raise ValueError("no m2c-fig5-TCP_ft rows")
    groups: dict[tuple[float, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((float(r["bottleneck"]), int(r["size"])), []).append(r)
    head = ["configuration", "n", *TCPFT_METRICS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(mh: tuple[float, float | None], m: str) -> str:
        mean, half = mh
        nd = 0 if m in ("time", "gput", "tput") else 2
        return (f"{mean:,.{nd}f}" if half is None or math.isnan(half)
                else f"{mean:,.{nd}f} +- {half:,.{nd}f}")

    for bn in sorted({k[0] for k in groups}):
        for key in sorted(k for k in groups if k[0] == bn):
            rs = groups[key]
            cells = [cell(ci95([float(r[m]) for r in rs]), m) for m in TCPFT_METRICS]
            out.append(f"| {bn / 1e6:g} Mb/s, testbed, {key[1] / 1e6:g} MB | {len(rs)} | "
                       + " | ".join(cells) + " |")
        p = PAPER.get(f"5(c) {bn / 1e6:g} Mb/s", {}).get("TCP_ft")
        if p:
            out.append(f"| {bn / 1e6:g} Mb/s, paper 5(c), 48 MB | 20 | "
                       + " | ".join(cell(p[m], m) for m in TCPFT_METRICS) + " |")
    return "\n".join(out)


def paper_for(row: dict) -> dict | None:
    """The paper's Fig. 5(c) figures when ``row`` is that configuration (background
    traffic, 5 receivers; the paper's file is 48 MB); also beside the simulator's
    M2C_ft with 5 receivers (competing ``none``: no TCP in the simulator)."""
    if row.get("receivers") != 5 or row.get("competing") not in ("background", "none"):
        return None  # "none": the simulator's M2C_ft, beside the paper's (with background)
    return PAPER.get(f"5(c) {row['bottleneck_mbps']:g} Mb/s", {}).get(row["flow"])


def summary(rows: list[dict], level: float = 0.95) -> list[dict]:
    """Mean and t-distribution CI per configuration and metric (over runs; the
    receivers of one run are averaged first), with the paper's value beside."""
    from m2c.experiments.stats import summarise

    out = summarise(rows, KEYS, METRICS, level)
    for r in out:
        vals = [x for x in rows if all(x.get(k) == r[k] for k in KEYS)]
        r["ok_runs"] = sum(1 for run in {x["run"] for x in vals}
                           if all(x["ok"] for x in vals if x["run"] == run))
        p = paper_for(r)
        for m in METRICS:
            if p and m in p:
                r[m + "_paper"], r[m + "_paper_ci"] = p[m]
    return out


def _fmt(v: float | None, ci: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.2f}" if ci is None else f"{v:.2f} +- {ci:.2f}"


def write_outputs(out_dir: str, rows: list[dict], summ: list[dict], meta: dict) -> list[str]:
    """fig5-runs.csv (one row per receiver and run), fig5-summary.csv (mean, CI and
    the paper's mean and interval per metric) and fig5.json (all of it + metadata)."""
    import csv

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    run_cols = ["run", "flow", "controller", "bottleneck_mbps", "competing", "receivers", "size",
                "receiver",
                "ok", *METRICS, "link_rx_kbps_all_flows"]
    p = os.path.join(out_dir, "fig5-runs.csv")
    with replace_when_done(p, newline="") as f:
        w = csv.DictWriter(f, run_cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    paths.append(p)
    sum_cols = [*KEYS, "runs", "ok_runs"] + [c for m in METRICS for c in
                                             (m, m + "_ci", m + "_paper", m + "_paper_ci")]
    p = os.path.join(out_dir, "fig5-summary.csv")
    with replace_when_done(p, newline="") as f:
        w = csv.DictWriter(f, sum_cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(summ)
    paths.append(p)
    p = os.path.join(out_dir, "fig5.json")
    with replace_when_done(p) as f:
        json.dump({"meta": meta, "summary": summ, "rows": rows, "paper": PAPER}, f, indent=1)
    paths.append(p)
    return paths


def _meta(argv: list[str] | None, a: argparse.Namespace) -> dict:
    """Run metadata: deliverykit.provenance's (commit of the m2c tree with ``+dirty``
    for local changes, host, load, time) plus this experiment's arguments."""
    from deliverykit.provenance import run_metadata

    prov = run_metadata("m2c")
    return {"experiment": "m2c.experiments.fig5", "argv": sys.argv[1:] if argv is None else argv,
            "args": {k: v if v is None or isinstance(v, (int, float, str, list, tuple)) else str(v)
                     for k, v in vars(a).items()}, "commit": prov["commit"], "confidence": 0.95,
            "interval": "two-sided Student t over runs (receivers of a run averaged first)",
            "started_utc": prov["utc"], "host": prov["host"], "python": prov["python"],
            "load_average": prov["load_average"], "cpus": prov["cpus"]}


def _deadline(text: str) -> float:
    """``HH:MM`` UTC (today, or tomorrow when that has passed) -> epoch seconds."""
    try:
        hh, mm = (int(x) for x in text.split(":"))
        now = datetime.datetime.now(datetime.timezone.utc)
        t = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--deadline takes HH:MM (UTC), not {text!r}") from None
    if t <= now:
        t += datetime.timedelta(days=1)
    return t.timestamp()


def _out_dir(text: str) -> str:
    """A directory to write into: it exists, or its nearest existing ancestor is a
    writable directory (checked while parsing, not after the run)."""
    p = os.path.abspath(text)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    if not os.path.isdir(p) or not os.access(p, os.W_OK | os.X_OK):
        why = "not writable" if os.path.isdir(p) else "not a directory"
        raise argparse.ArgumentTypeError(f"{text}: cannot make or write a directory there "
                                         f"({p} is {why})")
    return text


@cliutil.cli_main("m2c experiment fig5")
def main(argv: list[str] | None = None) -> int:
    # the docstring's first two paragraphs (the summary line and the setup), plain text
    import textwrap

    from deliverykit.sweep import add_run_arguments

    desc = "\n\n".join(textwrap.fill(" ".join(p.split()), 79)
                        for p in __doc__.split("\n\n")[:2])
    ap = argparse.ArgumentParser(description=desc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="one short configuration: a 1 MiB file, 4 Mb/s, one long TCP stream")
    ap.add_argument("--bottleneck", type=cliutil.positive_float, nargs="+", default=[4e6],
                    metavar="BPS", help="tbf bottleneck rate(s) in bit/s (the paper: 1e6 and "
                    "4e6; default: 4e6)")
    ap.add_argument("--competing", nargs="+", default=["stream"], choices=["stream", "background"],
                    help="competing traffic: one long TCP stream, or Poisson short TCP flows "
                    "(10/min, 85 %% under 6 KB); default: stream")
    ap.add_argument("--receivers", type=cliutil.positive_int, nargs="+", default=[1], metavar="N",
                    help="number(s) of receivers behind the bottleneck (the paper: 1, 2, 5; "
                    "default: 1)")
    ap.add_argument("--size", type=cliutil.positive_int, metavar="BYTES",
                    help="file size in bytes (default: 1 MiB with --quick, else 4000000; "
                    "the paper: 4 MB and 48 MB)")
    ap.add_argument("--repeats", type=cliutil.positive_int, default=1,
                    help="runs per configuration; >= 2 gives 95 %% t-intervals "
                    "(default: %(default)s)")
    from m2c.core.receiver_cc import CONTROLLERS

    ap.add_argument("--controller", default="m2c", choices=sorted(CONTROLLERS),
                    help="M2C_ft receivers' rate controller (default: %(default)s)")
    ap.add_argument("--out", metavar="DIR", type=_out_dir,
                    help="directory for fig5-runs.csv, fig5-summary.csv, fig5.json")
    ap.add_argument("--json", metavar="FILE", type=cliutil.output_path,
                    help="also write the rows, summary and metadata here as JSON")
    ap.add_argument("--backend", choices=["netns", "sim"], default="netns",
                    help="netns: the namespace testbed, real time (root); sim: M2C_ft in "
                    "the packet-level simulator (TCP_ft and competing TCP only on netns)")
    ap.add_argument("--flows", choices=["both", "TCP_ft"], default="both",
                    help="TCP_ft: only the TCP download, --repeats repetitions as Dask tasks, "
                    "--workers at once (default: all), each in its own namespaces and tbf; "
                    "CSV <out>/fig5-tcpft-<size>MB-<bottlenecks>Mbps-w<workers>.csv "
                    "(default: both, one after the other)")
    ap.add_argument("--setup-lock", metavar="FILE",
                    help="with --flows TCP_ft: the lock file that lets one repetition at a "
                    f"time build its testbed (default: {SETUP_LOCK}); commands given "
                    "different files build at the same time")
    ap.add_argument("--together", action="store_true",
                    help="with --flows TCP_ft: the repetitions of a configuration start "
                    "their transfers at the same time, once all are built (use with "
                    "--workers = --repeats)")
    ap.add_argument("--first-repeat", type=int, default=0, metavar="K",
                    help="with --flows TCP_ft: number the repetitions (and draw their "
                    "background traffic) from K, e.g. to add repetitions to a CSV's "
                    "(default: 0)")
    ap.add_argument("--deadline", type=_deadline, metavar="HH:MM",
                    help="with --flows TCP_ft: a repetition still running at this UTC time "
                    "is stopped (its namespaces removed) and counted as failed")
    g = ap.add_argument_group("sweeps (--backend sim, or --flows TCP_ft; Dask distributed)")
    g.add_argument("--sweep", type=_parse_sweep, metavar="NAME=V1,V2,...",
                   help=f"run every value x seed as one task; NAME: {', '.join(SWEEPABLE)}")
    g.add_argument("--seeds", type=cliutil.positive_int, metavar="N",
                   help="seeds 0..N-1 per point (default 3 with --sweep)")
    add_run_arguments(g)
    g.add_argument("--decoding", choices=["ml", "iterative"], default="ml",
                   help="the receivers' LDPC decoding: iterative then Gaussian elimination "
                   "(ml), or iterative only, as the paper's LDPC-Triangle receivers "
                   "(default: %(default)s)")
    g.add_argument("--table", metavar="CSV", type=cliutil.existing_file,
                   help="only print the markdown table (mean +- CI beside the paper's) of "
                   "an existing sweep CSV")
    a = ap.parse_args(argv)
    if a.table:
        try:
            with open(a.table, newline="") as f:
                first = f.readline() + f.readline()
            table = (tcpft_table if "m2c-fig5-TCP_ft" in first else sweep_table)(str(a.table))
        except (KeyError, ValueError, UnicodeDecodeError) as e:
            ap.error(f"--table {a.table}: not a fig5 sweep CSV ({e!r})")
        print(table)
        return 0
    tcpft = a.flows == "TCP_ft"
    if tcpft and a.backend != "netns":
        ap.error("--flows TCP_ft runs on the testbed (--backend netns): the simulator has no TCP")
    if (a.deadline is not None or a.first_repeat or a.setup_lock) and not tcpft:
        ap.error("--deadline, --first-repeat and --setup-lock go with --flows TCP_ft")
    if a.first_repeat < 0:
        ap.error("--first-repeat takes a number >= 0")
    if a.sweep is None and (a.seeds or ((a.workers or a.scheduler or a.resume) and not tcpft)):
        ap.error("--seeds goes with --sweep; --workers, --scheduler and --resume with --sweep "
                 "or --flows TCP_ft")
    if tcpft:
        from deliverykit.sweep import SweepFailed

        t0 = time.monotonic()
        try:
            res = tcpft_sweep(a, a.out or "fig5-tcpft")
        except SweepFailed as e:
            print(f"m2c experiment fig5: {e}", file=sys.stderr)
            return 1
        print(tcpft_table(str(res.csv)))
        print(f"wall time {time.monotonic() - t0:.0f} s; wrote {res.csv}, {res.summary_csv}, "
              f"{res.meta}")
        return 1 if res.failures else 0
    if a.sweep is not None and a.backend != "sim":
        ap.error("--sweep runs on the simulator: add --backend sim")
    if a.backend == "sim":
        print("m2c experiment fig5 --backend sim: M2C_ft only (TCP_ft and the competing TCP "
              "traffic run on the testbed: --backend netns)", file=sys.stderr)
    if a.sweep is not None:
        from deliverykit.sweep import SweepFailed

        try:
            res = sweep(a, a.out or "fig5-sim")
        except SweepFailed as e:
            print(f"m2c experiment fig5: {e}", file=sys.stderr)
            return 1
        for r in res.summary:
            print(json.dumps(r))
        print(sweep_table(str(res.csv)))
        print(f"wrote {res.csv}, {res.summary_csv}, {res.meta}")
        return 1 if res.failures else 0
    meta = _meta(argv, a)
    rows = run(a.quick, tuple(a.bottleneck), tuple(a.competing), tuple(a.receivers), a.size,
               a.repeats, a.controller, a.backend)
    cols = ["run", "flow", "bottleneck_mbps", "competing", "receivers", "receiver", "ok", "time",
            "gput", "tput", "loss", "net", "dup", "sym", "comp"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r.get(c), float) else
                                "null" if r.get(c, "") is None else str(r.get(c, ""))
                                for c in cols) + " |")
    summ = summary(rows)
    print()
    print("mean +- 95 % CI (Student t) over runs; paper: mean +- its 95 % interval "
          "(Fig. 5(c) only: background traffic, 5 receivers, 48 MB)")
    for r in summ:
        print(f"{r['flow']} {r['bottleneck_mbps']:g} Mb/s, {r['competing']}, "
              f"{r['receivers']} receiver(s), {r['size']} B: {r['runs']} runs ({r['ok_runs']} ok)")
        for m in METRICS:
            if m not in r:
                continue
            ours = _fmt(r[m], r[m + "_ci"])
            paper = _fmt(r.get(m + "_paper"), r.get(m + "_paper_ci")) or "n/a"
            print(f"  {m:5s} ours {ours:>22s}   paper {paper}")
    print("paper text:", PAPER["text"])
    meta["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    if a.out:
        for p in write_outputs(a.out, rows, summ, meta):
            print("wrote", p)
    if a.json:
        with replace_when_done(a.json) as f:
            json.dump({"meta": meta, "rows": rows, "summary": summ, "paper": PAPER}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
