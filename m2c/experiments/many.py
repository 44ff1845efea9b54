"""One M2C sender, 1,000 heterogeneous receivers in the simulator: completion over link-ideal.

Issue 18: every receiver within 1.10x of its own link-ideal time, at 1,000
receivers (TCP alone on the link: 1.045x on the testbed), and the receivers'
membership load on the groups (IGMP joins and leaves per second), which is what
a network operator asks at that scale.

The receivers' links, drawn from the run's seed (``random.Random`` seeded with
``derive_seed(seed, "m2c/many/links")``), the distribution stated here:

- downlink rate: log-uniform over [``--min-mbps``, ``--max-mbps``] (0.5-6 Mb/s:
  DSL to cable access, inside the session's 256 kb/s-8 Mb/s schedule), a
  25-packet drop-tail queue (the testbed's tbf);
- one-way delay of that link: uniform over [5, 50] ms;
- random loss: none for half the receivers (a coin per receiver), Bernoulli
  with p uniform over [0, 2] % for the other half.

The sender's uplink is unshaped and adds no delay, so each receiver's drawn delay
is its whole path's (before session 14 the uplink added the first receiver's delay,
47.5 ms at seed 0, to every path: ``m2c.sim.file_transfer``'s default, the testbed
pair's shape; the ideal below never counted it); a 100 Mb/s backbone (a shared link, queue 1,000
packets) carries each multicast datagram once and the network copies it to the
receivers only at their access links (deliverykit/sim/network.py).  Join latency
10 ms, leave latency 50 ms.

A receiver's link-ideal time is the file's payload bits over what its link
delivers, ``size * 8 / (rate * (1 - p))``, plus its one-way delay (as
m2c.experiments.hetero counts it on the testbed: payload only, no headers).

Outputs (``--out DIR``, each written whole): ``many-receivers.csv`` (one row per
receiver: link, time, ideal, ratio, joins, leaves, loss events, losses taken for loss
on the link and, of those, the ones found by the hole rule and by the drain rule),
``many-cdf.csv`` (ratio, fraction of receivers at or below it), ``many-cdf.png``, ``many.json``
(percentiles, the goal's verdict, membership load, run metadata), and with
``--trace r042,r091`` ``many-trace.csv`` (those receivers' per-epoch level,
joined rate, target, losses, ARTT: where their start-up time goes).  Prints the
percentiles and ``goal every receiver <= 1.10x: PASS`` or ``FAIL``.

    m2c experiment many [--quick] [--receivers 1000] [--size BYTES] [--seed S] --out DIR
        [--trace r042,r091]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from deliverykit import cliutil
from deliverykit.outputs import replace_when_done
from deliverykit.sim import Scenario, derive_seed

GOAL = 1.10
BACKBONE_BPS = 100e6


@dataclass(frozen=True, slots=True)
class Links:
    """Per-receiver access links (bit/s, seconds, loss fraction)."""

    rate_bps: tuple[float, ...]
    delay_s: tuple[float, ...]
    loss: tuple[float, ...]


def draw_links(receivers: int, seed: int, min_mbps: float = 0.5,
               max_mbps: float = 6.0) -> Links:
    """The stated distribution (module docstring), from ``seed``."""
    rng = random.Random(derive_seed(seed, "m2c/many/links"))
    lo, hi = math.log(min_mbps * 1e6), math.log(max_mbps * 1e6)
    rates, delays, losses = [], [], []
    for _ in range(receivers):
        rates.append(math.exp(rng.uniform(lo, hi)))
        delays.append(rng.uniform(0.005, 0.050))
        losses.append(rng.uniform(0.0, 0.02) if rng.random() < 0.5 else 0.0)
    return Links(tuple(rates), tuple(delays), tuple(losses))


def ideal_s(size: int, rate_bps: float, delay_s: float, loss: float) -> float:
    """Payload bits over the link's delivered rate, plus its one-way delay."""
    return size * 8 / (rate_bps * (1 - loss)) + delay_s


def percentile(sorted_vals: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 100]) of already sorted values."""
    if not sorted_vals:
        raise ValueError("no values")
    i = max(0, math.ceil(q / 100 * len(sorted_vals)) - 1)
    return sorted_vals[i]


def membership_load(times: list[float] | tuple[float, ...]) -> dict[str, float]:
    """Joins + leaves per second: over the run, and the busiest 1 s bin."""
    if not times:
        return {"reports": 0, "mean_per_s": 0.0, "peak_per_s": 0.0}
    span = max(times) - min(times)
    bins: dict[int, int] = {}
    for t in times:
        bins[int(t)] = bins.get(int(t), 0) + 1
    return {"reports": len(times), "mean_per_s": len(times) / span if span > 0 else 0.0,
            "peak_per_s": float(max(bins.values()))}


TRACE_FIELDS = ("receiver", "t_s", "level", "joined_pps", "target_pps", "lost", "received",
                "artt_s", "loss_events")
"""``many-trace.csv``: one row per epoch of each receiver asked for with ``--trace``"""


def scenario(receivers: int = 1000, size: int = 2 << 20, seed: int = 0,
             min_mbps: float = 0.5, max_mbps: float = 6.0) -> tuple[Scenario, Links]:
    """The crowd as data: the links drawn from ``seed`` (:func:`draw_links`), each
    receiver's delay its whole path's (the sender's uplink adds none)."""
    from m2c import sim

    links = draw_links(receivers, seed, min_mbps, max_mbps)
    slowest = min(links.rate_bps) * (1 - max(links.loss))
    sc = sim.file_transfer(receivers, size, down_bps=list(links.rate_bps),
                           delay=list(links.delay_s), loss=list(links.loss),
                           core_bps=BACKBONE_BPS, seed=seed, sender_delay=0.0,
                           duration=10 * size * 8 / slowest + 60)
    return sc, links


def run(receivers: int = 1000, size: int = 2 << 20, seed: int = 0, min_mbps: float = 0.5,
        max_mbps: float = 6.0, progress: bool = False,
        trace: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run the scenario; returns rows, percentiles, verdict and membership load (and the
    per-epoch join trace of the receivers named in ``trace``: level, joined rate, ...)."""
    from m2c import sim

    sc, links = scenario(receivers, size, seed, min_mbps, max_mbps)
    res = sim.run(sc, progress=progress)
    rows: list[dict[str, Any]] = []
    traced = [(r.name, *e) for r in res.receivers if r.name in trace for e in r.trace]
    for i, r in enumerate(res.receivers):
        ideal = ideal_s(size, links.rate_bps[i], links.delay_s[i], links.loss[i])
        t = r.completion_s
        rows.append({"receiver": r.name, "rate_mbps": links.rate_bps[i] / 1e6,
                     "delay_ms": links.delay_s[i] * 1e3, "loss_pct": links.loss[i] * 100,
                     "time_s": t, "ideal_s": ideal,
                     "ratio": None if t is None or not r.verified else t / ideal,
                     "verified": r.verified, "joins": r.joins, "leaves": r.leaves,
                     "max_level": r.max_level, "loss_events": r.loss_events,
                     "random_losses": r.random_losses, "link_losses": r.link_losses,
                     "drain_losses": r.drain_losses,
                     **{m: r.metrics.get(m) for m in ("loss", "dup", "sym")}})
    ratios: list[float] = sorted(float(x["ratio"]) for x in rows if x["ratio"] is not None)
    failed = len(rows) - len(ratios)
    pct = {f"p{q:g}": percentile(ratios, q) for q in (50, 90, 95, 99, 100)} if ratios else {}
    within = sum(1 for x in ratios if x <= GOAL)
    return {"rows": rows, "ratios": ratios, "percentiles": pct, "failed": failed,
            "within_goal": within, "goal": GOAL,
            "passed": failed == 0 and within == len(rows),
            "membership": membership_load(res.membership_s),
            "summary": res.summary(), "trace": traced, "links": {
                "rate": f"log-uniform [{min_mbps:g}, {max_mbps:g}] Mb/s",
                "delay": "uniform [5, 50] ms", "loss": "0 for half; uniform [0, 2] % else",
                "backbone_mbps": BACKBONE_BPS / 1e6}}


def write_outputs(out_dir: str, result: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The CSVs, the CDF plot and the JSON (each appears whole or not at all)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    p = os.path.join(out_dir, "many-receivers.csv")
    with replace_when_done(p, newline="") as f:
        w = csv.DictWriter(f, list(result["rows"][0]))
        w.writeheader()
        w.writerows(result["rows"])
    paths.append(p)
    p = os.path.join(out_dir, "many-cdf.csv")
    n = len(result["rows"])
    with replace_when_done(p, newline="") as f:
        w2 = csv.writer(f)
        w2.writerow(["ratio", "fraction"])
        for i, r in enumerate(result["ratios"]):
            w2.writerow([f"{r:.5f}", f"{(i + 1) / n:.5f}"])
    paths.append(p)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the CSV holds the same curve
        print("m2c experiment many: matplotlib missing, no plot", file=sys.stderr)
    else:
        fig, ax = plt.subplots(figsize=(6, 4))
        rs = result["ratios"]
        ax.step(rs, [(i + 1) / n for i in range(len(rs))], where="post", label="M2C (sim)")
        ax.axvline(GOAL, color="red", ls="--", label=f"goal {GOAL:.2f}x")
        ax.axvline(1.045, color="grey", ls=":", label="TCP alone (testbed) 1.045x")
        ax.set_xlabel("completion time / link-ideal time")
        ax.set_ylabel("fraction of receivers")
        ax.set_title(f"{n} receivers, {meta['size']} B, seed {meta['seed']}")
        ax.legend(loc="lower right")
        ax.grid(alpha=0.3)
        p = os.path.join(out_dir, "many-cdf.png")
        with replace_when_done(p, "wb") as f:
            fig.savefig(f, format="png", dpi=120, bbox_inches="tight")
        plt.close(fig)
        paths.append(p)
    if result.get("trace"):
        p = os.path.join(out_dir, "many-trace.csv")
        with replace_when_done(p, newline="") as f:
            w3 = csv.writer(f)
            w3.writerow(TRACE_FIELDS)
            w3.writerows(result["trace"])
        paths.append(p)
    p = os.path.join(out_dir, "many.json")
    with replace_when_done(p) as f:
        json.dump({"meta": meta, **{k: v for k, v in result.items()
                                    if k not in ("ratios", "trace")}}, f, indent=1)
    paths.append(p)
    return paths


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("give receiver names, e.g. r042,r091")
    return names


def _out_dir(text: str) -> str:
    if not text or (os.path.exists(text) and not os.path.isdir(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return text


@cliutil.cli_main("m2c experiment many")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="m2c experiment many",
                                 description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="20 receivers, 256 KiB")
    ap.add_argument("--receivers", type=cliutil.positive_int, help="default 1000")
    ap.add_argument("--size", type=cliutil.positive_int, metavar="BYTES",
                    help="file size (default 2 MiB)")
    ap.add_argument("--seed", type=int, default=0,
                    help="the run's seed: links, session and losses (default %(default)s)")
    ap.add_argument("--min-mbps", type=float, default=0.5,
                    help="slowest downlink of the log-uniform draw, Mb/s (default %(default)s)")
    ap.add_argument("--max-mbps", type=float, default=6.0,
                    help="fastest downlink of the log-uniform draw, Mb/s (default %(default)s)")
    ap.add_argument("--out", type=_out_dir, metavar="DIR",
                    help="directory for the CSVs, the CDF plot and many.json")
    ap.add_argument("--trace", type=_names, default=(), metavar="r001,r002",
                    help="receivers whose per-epoch join trace goes to many-trace.csv")
    ap.add_argument("--progress", action="store_true",
                    help="progress line on stderr even when it is not a terminal")
    a = ap.parse_args(argv)
    if not 0.256 <= a.min_mbps <= a.max_mbps <= 8.0:
        ap.error("need 0.256 <= --min-mbps <= --max-mbps <= 8 (the session's schedule)")
    receivers = a.receivers or (20 if a.quick else 1000)
    size = a.size or ((256 << 10) if a.quick else (2 << 20))
    meta = dict(**_provenance(), receivers=receivers, size=size, seed=a.seed)
    t0, c0 = time.monotonic(), time.process_time()
    names = {f"r{i + 1:03d}" for i in range(receivers)}  # as m2c.sim names them
    unknown = [n for n in a.trace if n not in names]
    if unknown:
        ap.error(f"--trace: no receiver {unknown[0]!r} (r001 to r{receivers:03d})")
    if a.trace and not a.out:
        ap.error("--trace needs --out DIR (the trace goes to many-trace.csv)")
    res = run(receivers, size, a.seed, a.min_mbps, a.max_mbps,
              progress=a.progress or sys.stderr.isatty(), trace=a.trace)
    meta.update(wall_s=time.monotonic() - t0, cpu_s=time.process_time() - c0)
    pct = res["percentiles"]
    print(f"{receivers} receivers, {size} B, seed {a.seed}: completion / link-ideal "
          + ", ".join(f"{k} {v:.3f}" for k, v in pct.items()))
    print(f"within {GOAL:.2f}x: {res['within_goal']} of {receivers}; not recovered: "
          f"{res['failed']}")
    mb = res["membership"]
    print(f"membership reports (IGMP joins + leaves): {mb['reports']}, "
          f"{mb['mean_per_s']:.1f}/s over the run, {mb['peak_per_s']:.0f} in the busiest second")
    print(f"wall {meta['wall_s']:.1f} s, CPU {meta['cpu_s']:.1f} s, "
          f"virtual {res['summary']['virtual_s']:.1f} s")
    print(f"goal every receiver <= {GOAL:.2f}x: {'PASS' if res['passed'] else 'FAIL'}")
    if a.out:
        for p in write_outputs(a.out, res, meta):
            print("wrote", p)
    return 0


def _provenance() -> dict[str, Any]:
    from deliverykit.provenance import run_metadata

    return run_metadata("m2c")


if __name__ == "__main__":
    sys.exit(main())
