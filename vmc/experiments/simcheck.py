"""Sim vs loopback on one small log, and two of the likely causes of their difference measured
(issue 19 item 3's validation; docs/vmc-sim.md "Validation: causes measured").

The same synthetic log is replayed on loopback (real origin with an emulated shared link, real
proxy: Normal, proxy with sharing off, VMC) and in simulated time (Normal, VMC). Two causes of the
difference are measured, not assumed:

1. *start lateness*: a loopback request is issued later than its logged time (the event loop's
   wake-up, the semaphore); measured per request, and the simulation re-run with the loopback VMC
   arm's actual issue times instead of the logged ones: how much of the bandwidth gap that closes.
2. *the proxy hop*: per request, the proxy with sharing off against Normal (the same origin
   bytes): the time the hop adds, which the simulation does not charge.

Run: ``python -m vmc.experiments.simcheck [-n 300] [--seed 1] [--scenario high-high]``; one JSON
document on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

from deliverykit import cliutil
from vmc.aio.config import ProxyConfig
from vmc.aio.origin import Origin
from vmc.aio.proxy import Proxy
from vmc.sim import Arrival, log_arrivals, replay_arm, saving
from vmc.workload.replay import Replayed, replay
from vmc.workload.squid import LogEntry
from vmc.workload.synth import SCENARIOS, generate


async def loopback_arm(entries: list[LogEntry], link_rate: float, proxy: bool, sharing: bool,
                       window: int) -> tuple[int, list[Replayed], int]:
    """One loopback arm (as :func:`vmc.workload.replay.compare` runs it): origin bytes, every
    request's result (with its actual issue time) and the proxy's joins."""
    origin = await Origin(link_rate=link_rate, digest_limit=0).start()
    px = None
    try:
        if proxy:
            cfg = ProxyConfig(upstreams=[origin.authority], window=window, sharing=sharing,
                              disk_budget=0)
            px = await Proxy(cfg).start()
        addr = f"{px.address[0]}:{px.address[1]}" if px else None
        res = await replay(entries, origin.authority, addr)
        joins = px.stats.joins if px is not None else 0
    finally:
        if px is not None:
            await px.close()
        await origin.close()
    return origin.stats.body_bytes, res, joins


def _ms(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"mean_ms": 1000 * statistics.fmean(xs), "p50_ms": 1000 * xs[len(xs) // 2],
            "p95_ms": 1000 * xs[int(0.95 * (len(xs) - 1))], "max_ms": 1000 * xs[-1]}


def run(scenario: str, n: int, seed: int, link_rate: float,
        window: int = 8 << 20) -> dict[str, Any]:
    entries = generate(SCENARIOS[scenario], n, seed=seed)
    wall = time.monotonic()
    arms = {}
    for name, proxy, sharing in (("normal", False, False), ("proxy", True, False),
                                 ("vmc", True, True)):
        arms[name] = asyncio.run(loopback_arm(entries, link_rate, proxy, sharing, window))
    wall = time.monotonic() - wall
    logged = log_arrivals(entries)

    def lat(res: list[Replayed]) -> float:
        return sum(r.latency or 0.0 for r in res)

    def late(res: list[Replayed]) -> list[float]:
        return [r.start - logged[r.index].at for r in res]

    (nb, nres, _), (pb, pres, _), (vb, vres, vjoins) = arms["normal"], arms["proxy"], arms["vmc"]
    cpu = time.process_time()
    sim_n = replay_arm(logged, False, link_rate, window, seed)
    sim_v = replay_arm(logged, True, link_rate, window, seed)
    actual = [Arrival(r.start, f"r{r.index}", logged[r.index].path)
              for r in sorted(vres, key=lambda r: (r.start, r.index))]
    sim_va = replay_arm(actual, True, link_rate, window, seed)
    sim_na = replay_arm(actual, False, link_rate, window, seed)
    cpu = time.process_time() - cpu
    hop = [(p.latency or 0.0) - (q.latency or 0.0) for p, q in zip(pres, nres, strict=True)]
    return {
        "scenario": scenario, "requests": n, "seed": seed, "link_Bps": link_rate,
        "failed_loopback": sum(1 for a in arms.values() for r in a[1] if r.latency is None),
        "loopback": {
            "normal_MB": nb / 1e6, "proxy_MB": pb / 1e6, "vmc_MB": vb / 1e6,
            "bandwidth_saving_%": saving(nb, vb),
            "latency_sum_saving_%": saving(lat(nres), lat(vres)),
            "latency_sum_saving_vs_proxy_%": saving(lat(pres), lat(vres)),
            "vmc_joins": vjoins,
            "wall_s": wall,
        },
        "sim_logged_times": {
            "normal_MB": sim_n.origin_bytes / 1e6, "vmc_MB": sim_v.origin_bytes / 1e6,
            "bandwidth_saving_%": saving(sim_n.origin_bytes, sim_v.origin_bytes),
            "latency_sum_saving_%": saving(sim_n.latency_sum, sim_v.latency_sum),
            "vmc_joins": sim_v.joins,
        },
        "sim_loopback_issue_times": {  # both arms at the loopback VMC arm's issue times
            "vmc_MB": sim_va.origin_bytes / 1e6,
            "bandwidth_saving_%": saving(sim_na.origin_bytes, sim_va.origin_bytes),
            "latency_sum_saving_%": saving(sim_na.latency_sum, sim_va.latency_sum),
            "vmc_joins": sim_va.joins,
        },
        "cause_start_lateness": {arm: _ms(late(a[1])) for arm, a in arms.items()},
        "cause_proxy_hop": {
            **_ms(hop),
            "share_of_normal_latency_sum_%": 100 * sum(hop) / lat(nres) if lat(nres) else 0.0,
        },
        "sim_cpu_s": cpu,
    }


@cliutil.cli_main("vmc.experiments.simcheck")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vmc.experiments.simcheck",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("-n", type=cliutil.positive_int, default=300, help="requests (default 300)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenario", default="high-high", choices=sorted(SCENARIOS))
    ap.add_argument("--link-rate", type=float, default=4e6,
                    help="the origin's shared link, bytes/s (default 4e6)")
    a = ap.parse_args(argv)
    if a.link_rate <= 0:
        ap.error("--link-rate must be > 0")
    print(json.dumps(run(a.scenario, a.n, a.seed, a.link_rate), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
