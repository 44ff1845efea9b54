"""The simulator against the netns testbed: the same requests on both backends (needs root).

Issue 19 item 3's validation. One workload (:mod:`vmc.workload.synth`, a scenario, ``-n``
requests, a seed) runs

- on the testbed of :mod:`vmc.experiments.testbed` (network namespaces: unmodified clients, the
  VMC router by nftables REDIRECT, nginx behind a tc tbf link of ``--link-mbit``), Normal, proxy
  with sharing off and VMC, at the pace that loads the link to the scenario's utilisation;
- in simulated time (:func:`vmc.sim.compare_log`): the same requests at the same (compressed)
  times, the origin's link shared max-min at the tbf rate's TCP goodput, the same window, no disk
  store (as the testbed's router).

Printed: one row per metric, testbed beside sim and their difference; with ``--out`` also as
JSON (``simvalidate.json``) with the testbed's raw arms. What differs and why is in
docs/vmc-sim.md ("Validation against the netns testbed").

Run: ``sudo python -m vmc.experiments.simvalidate [-n 120] [--scenario high-high]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deliverykit import cliutil
from deliverykit.outputs import write_when_done
from vmc.sim import compare_log
from vmc.workload.synth import SCENARIOS, generate

#: TCP payload per Ethernet frame at MTU 1500 with timestamps (1448 of 1514 bytes): what a tbf
#: rate (counted on frames) leaves for HTTP bodies.
GOODPUT = 1448 / 1514


@dataclass(frozen=True)
class Metric:
    """One row of the comparison."""

    name: str
    testbed: float | None
    sim: float | None

    @property
    def difference(self) -> float | None:
        """sim - testbed."""
        if self.testbed is None or self.sim is None:
            return None
        return self.sim - self.testbed


def _pct(a: float, b: float) -> float | None:
    return 100.0 * (1 - b / a) if a else None


def compare(tb: dict[str, Any], sim: dict[str, Any], n: int) -> list[Metric]:
    """The per-metric table from a testbed run (:func:`vmc.experiments.testbed.run`) and a
    simulated one (:func:`vmc.sim.compare_log` with ``latencies=True``) of the same ``n``
    requests."""
    nm, pm, vm = tb["normal"], tb["proxy"], tb["vmc"]
    joins = (vm.get("proxy") or {}).get("joins")
    sim_n = sim["normal_latencies"]
    sim_v = sim["vmc_latencies"]
    return [
        Metric("requests completed, Normal", n - nm["failed"], len(sim_n)),
        Metric("requests completed, VMC", n - vm["failed"], sim["right_bodies"]),
        Metric("origin body MB, Normal", nm["origin_body_MB"], sim["normal_MB"]),
        Metric("origin body MB, VMC", vm["origin_body_MB"], sim["vmc_MB"]),
        Metric("bandwidth saving %", _pct(nm["origin_body_MB"], vm["origin_body_MB"]),
               sim["bandwidth_saving_%"]),
        Metric("VMC joins", joins, sim["joins"]),
        Metric("latency sum Normal (s)", nm["latency_sum_s"], sim["latency_sum_normal_s"]),
        Metric("latency sum proxy, no sharing (s)", pm["latency_sum_s"], None),
        Metric("latency sum VMC (s)", vm["latency_sum_s"], sim["latency_sum_vmc_s"]),
        Metric("latency saving % (per-request sum)",
               _pct(nm["latency_sum_s"], vm["latency_sum_s"]), sim["latency_saving_%"]),
        Metric("mean latency Normal (ms)", 1e3 * nm["latency_sum_s"] / max(1, n - nm["failed"]),
               1e3 * sum(sim_n) / max(1, len(sim_n))),
        Metric("mean latency VMC (ms)", 1e3 * vm["latency_sum_s"] / max(1, n - vm["failed"]),
               1e3 * sum(sim_v) / max(1, len(sim_v))),
    ]


def run(scenario: str = "high-high", n: int = 120, link_mbit: float = 20.0, seed: int = 1,
        window: int = 8 << 20) -> dict[str, Any]:
    """Both backends on one workload; the metrics and both raw results."""
    from vmc.experiments import testbed

    cpu, wall = time.process_time(), time.monotonic()
    tb = testbed.run(quick=True, scenario=scenario, n=n, link_mbit=link_mbit, window=window,
                     seed=seed)
    tb_wall = time.monotonic() - wall
    entries = generate(SCENARIOS[scenario], n, seed=seed)
    c0 = time.process_time()
    sim = compare_log(entries, speed=tb["speed"], link_rate=link_mbit * 1e6 / 8 * GOODPUT,
                      window=window, seed=seed, batch=0, counting=True, latencies=True)
    sim_cpu = time.process_time() - c0
    metrics = compare(tb, sim, n)
    return {
        "scenario": scenario, "requests": n, "seed": seed, "link_mbit": link_mbit,
        "speed": tb["speed"], "testbed_wall_s": round(tb_wall, 1), "sim_cpu_s": round(sim_cpu, 2),
        "cpu_s": round(time.process_time() - cpu, 1),
        "metrics": [dict(asdict(m), difference=m.difference) for m in metrics],
        "testbed": {arm: {k: v for k, v in tb[arm].items() if k != "saved_bytes"}
                    for arm in ("normal", "proxy", "vmc")},
        "sim": {k: v for k, v in sim.items() if not k.endswith(("latencies", "origin"))},
    }


def _cell(v: float | None) -> str:
    return "-" if v is None else f"{v:,.3f}"


def table(metrics: list[dict[str, Any]]) -> str:
    lines = ["| metric | testbed (netns) | sim | sim - testbed |", "|---|---|---|---|"]
    lines += [f"| {m['name']} | {_cell(m['testbed'])} | {_cell(m['sim'])} | "
              f"{_cell(m['difference'])} |" for m in metrics]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vmc.experiments.simvalidate",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="high-high", choices=sorted(SCENARIOS),
                    help="the workload's overlap structure (default high-high)")
    ap.add_argument("-n", type=cliutil.positive_int, default=120, help="requests (default 120)")
    ap.add_argument("--link-mbit", type=cliutil.positive_float, default=20.0, metavar="MBIT",
                    help="the origin link's tbf rate (default 20)")
    ap.add_argument("--seed", type=int, default=1,
                    help="the workload's seed: both backends replay the same requests (default 1)")
    ap.add_argument("--out", type=Path, metavar="DIR", help="write simvalidate.json here")
    return ap


@cliutil.cli_main("python -m vmc.experiments.simvalidate")
def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    res = run(a.scenario, a.n, a.link_mbit, a.seed)
    print(f"{a.scenario}, {a.n} requests, seed {a.seed}, link {a.link_mbit} Mbit/s, "
          f"pace x{res['speed']}")
    print(table(res["metrics"]))
    print(f"testbed {res['testbed_wall_s']} s wall; sim {res['sim_cpu_s']} s CPU", file=sys.stderr)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        write_when_done(a.out / "simvalidate.json", json.dumps(res, indent=1) + "\n")
        print(f"wrote {a.out / 'simvalidate.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
