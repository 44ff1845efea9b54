"""Paper section IV-A / Fig. 6: stalls per download algorithm in a VoD swarm.

Topology (network namespaces on one bridge, ``deliverykit.testbed``): one
seeder on a 20 Mb/s link whose packets get 5 ms extra latency, leechers with
upload capped at 1.2 Mb/s in four groups A-D with per-group delay and loss on
every outgoing packet (Fig. 5).  All leechers join at once, bootstrap from the
seeder and find each other through PEX, play a ~1 Mb/s video with the
emulated player (5 s initial buffer) and leave when done (selfish peers).

The paper's Fig. 5 values are in a figure we do not have as text; GROUPS
below are our assumption, printed with the results.  The paper ran 32-208
leechers on DAS-4; two shared cores hold far fewer, so the swarm is small
and the numbers are not the paper's.

Seeder link, scaled to the swarm: in the paper even the smallest swarm (32
leechers of a 1 Mb/s video on a 20 Mb/s seeder) could not be served by the
seeder alone (supply 0.625 x demand), so leecher upload and the choice of
peers decide who stalls.  With 20 Mb/s and the 4-12 leechers that fit here
the seeder alone oversupplies the swarm and the algorithms cannot be told
apart.  By default the seeder link is therefore ``SUPPLY`` x leechers x
bit rate (at least 2x the bit rate); ``--seeder-mbps 20`` restores the
paper's absolute value.

    python -m swift.experiments.vod_swarm --quick [--out DIR] [--backend netns|sim]
    python -m swift.experiments.vod_swarm --backend sim --sweep leechers=32,64 --seeds 3 \
        [--workers N | --scheduler ADDRESS]

The swarm is one scenario (:func:`swift.experiments.swarm.vod_scenario`) that
both backends run: the testbed above, or the simulator (docs/sim.md) with the
same peers and player in virtual time.  ``--sweep`` (simulator only) runs
every value x seed as a Dask task (:mod:`swift.experiments.sweeps`).

Output (``--out``, default ``swift-results``): ``vod_swarm-<n>.csv`` (one row
per leecher and algorithm: group, stalls, stall time, start-up, completion,
upload), ``vod_swarm-<n>.json`` (parameters, versions, git commit, date,
host load, summary) and ``vod_swarm-<n>-fig6.png`` (stalls per algorithm and
group, the paper's Fig. 6 at our swarm size).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from typing import Any

from deliverykit import cliutil
from deliverykit.sim import Scenario
from deliverykit.sweep import SweepFailed
from swift.core.config import PeerConfig
from swift.experiments import swarm, sweeps
from swift.experiments.swarm import GROUPS, Backend

#: seeder supply / aggregate video rate in the paper's smallest swarm (20 Mb/s, 32 x 1 Mb/s)
SUPPLY = 20 / 32
PAPER = ("paper Fig. 6 (32-208 leechers, seeder 20 Mb/s, leecher upload 1.2 Mb/s): linear "
         "stalls most, std-vod fewer above 96 leechers, the three-priority vod algorithm "
         "fewest; start-up 3-7 s for all three")


def configs(chunk_size: int, bitrate: float, picker: str) -> tuple[PeerConfig, PeerConfig]:
    """(seeder, leecher) peer configurations of the VoD swarm (``bitrate`` in bytes/s).

    The leechers' linear picker has no twist (``picker_twist``): a leecher
    plays from chunk 0, an in-order consumer from its first request, and the
    paper's linear "retrieves data in order".  The twist is off only once
    the player's first poll attaches it, and the first requests, sent before
    that poll (groups A and B), were rotated in their block: linear started
    1.35 s later than std-vod and stalled less for it (docs/sim-fig6.md,
    "Why linear stalls least", session 14)."""
    return (PeerConfig(chunk_size=chunk_size),
            PeerConfig(chunk_size=chunk_size, picker=picker, pex_connect=True, bitrate=bitrate,
                       high_window=max(8, int(10 * bitrate) // chunk_size),
                       picker_twist=False))


def seeder_rate(leechers: int, bitrate_bps: float, seeder_bps: float | None) -> int:
    """The seeder's uplink: ``seeder_bps``, else the paper's supply ratio (module docstring)."""
    return int(seeder_bps or max(2 * bitrate_bps, SUPPLY * leechers * bitrate_bps))


def run_one(scenario: Scenario, algorithm: str, backend: Backend | str,
            have_grid: bool = False) -> swarm.SwarmRun:
    """One algorithm on one scenario (:func:`swarm.vod_scenario`) on one backend;
    ``have_grid``: every peer's HAVEs that wait go on one grid (``PeerConfig.have_grid``)."""
    p = scenario.params
    seed_cfg, leech_cfg = (dataclasses.replace(c, have_grid=have_grid) for c in
                           configs(int(p["chunk_size"]), float(p["bitrate"]), algorithm))
    return swarm.run(scenario, backend, seed_cfg, leech_cfg, prefix="swvod")


def run(quick: bool = True, leechers: int | None = None, video_s: float | None = None,
        algorithms: tuple[str, ...] = ("linear", "std-vod", "vod"), bitrate_bps: float = 1e6,
        chunk_size: int = 1024, seeder_bps: float | None = None, out: str | None = None,
        backend: Backend | str = Backend.NETNS, seed: int = 0,
        have_grid: bool = False) -> list[dict]:
    """One flash-crowd run per algorithm; rows with stalls and start-up times.
    With ``out`` also the per-leecher CSV, JSON metadata and the Fig. 6 plot."""
    backend = Backend(backend)
    started, load0 = time.time(), os.getloadavg()
    n = leechers or (4 if quick else 12)
    secs = video_s or (15.0 if quick else 60.0)
    seed_bps = seeder_rate(n, bitrate_bps, seeder_bps)
    sc = swarm.vod_scenario(n, secs, bitrate_bps, chunk_size, seed_bps, seed=seed)
    size = int(sc.params["size"])
    rows = []
    per_leecher: list[dict] = []
    for algo in algorithms:
        r = run_one(sc, algo, backend, have_grid)
        res = [(r.group(x.name), x) for x in r.leechers]
        for i, (g, x) in enumerate(res):
            per_leecher.append({"algorithm": algo, "leecher": i, "group": g,
                                "delay_ms": GROUPS[g][0], "loss_pct": GROUPS[g][1],
                                "stalls": x.stalls, "stall_s": round(x.stall_s, 3),
                                "startup_s": x.startup_s, "completion_s": x.completion_s,
                                "uploaded_chunks": x.sent_chunks,
                                "rejected": x.stats.get("rejected", 0), "verified": x.verified})
        starts = [x.startup_s for _, x in res if x.startup_s is not None]
        comps = [x.completion_s for _, x in res if x.completion_s is not None]
        rows.append({
            "system": "swift", "what": f"VoD swarm {n} leechers, {algo}", "backend": backend.value,
            "mean stalls": round(statistics.mean(x.stalls for _, x in res), 2),
            "mean stall s": round(statistics.mean(x.stall_s for _, x in res), 2),
            "mean start-up s": round(statistics.mean(starts), 2) if starts else None,
            "completed": f"{len(comps)}/{n}",
            "per group stalls": {g: [x.stalls for gg, x in res if gg == g] for g in "ABCD"},
            "rejected chunks": sum(x.stats.get("rejected", 0) for _, x in res),
            "groups (delay ms, loss %)": GROUPS,
            "seeder Mb/s": round(seed_bps / 1e6, 2),
            "leecher upload chunks": sum(x.sent_chunks for _, x in res),
            "wall s": round(r.wall_s, 1),
        })
    if out:
        params = {"leechers": n, "video_s": secs, "bitrate_bps": bitrate_bps, "size_bytes": size,
                  "chunk_size": chunk_size, "algorithms": list(algorithms),
                  "backend": backend.value,
                  "seed": seed, "seeder_up_bps": seed_bps, "have_grid": have_grid,
                  "seeder_supply_ratio": round(seed_bps / (n * bitrate_bps), 3),
                  "leecher_up_bps": swarm.VOD_LEECHER_UP, "groups_delay_ms_loss_pct": GROUPS,
                  "quick": quick, "scenario": sc.to_dict()}
        _write(out, f"vod_swarm-{n}" + ("-sim" if backend is Backend.SIM else ""), params, rows,
               per_leecher, started, load0)
    return rows


#: metrics of one sweep task (per algorithm, over the swarm's leechers)
SWEEP_METRICS = ("mean_stalls", "mean_stall_s", "mean_startup_s", "mean_completion_s",
                 "completed", "verified", "virtual_s", "cpu_s")


def sweep_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One simulated VoD swarm for :func:`deliverykit.sweep.run_sweep`: ``point`` holds
    ``leechers``, ``algorithm`` and optionally ``video_s``, ``bitrate_bps``,
    ``seeder_bps``, ``chunk_size``, ``have_grid``."""
    n = int(point["leechers"])
    bitrate_bps = float(point.get("bitrate_bps", 1e6))
    sc = swarm.vod_scenario(n, float(point.get("video_s", 60.0)), bitrate_bps,
                            int(point.get("chunk_size", 1024)),
                            seeder_rate(n, bitrate_bps, point.get("seeder_bps")), seed=seed)
    r = run_one(sc, str(point["algorithm"]), Backend.SIM, bool(point.get("have_grid", False)))
    ls = r.leechers
    if not all(x.verified for x in ls):
        raise ValueError(f"{sum(not x.verified for x in ls)} leecher(s) not verified")
    starts = [x.startup_s for x in ls if x.startup_s is not None]
    comps = [x.completion_s for x in ls if x.completion_s is not None]
    assert r.stats is not None
    return {"mean_stalls": statistics.fmean(x.stalls for x in ls),
            "mean_stall_s": statistics.fmean(x.stall_s for x in ls),
            "mean_startup_s": statistics.fmean(starts) if starts else None,
            "mean_completion_s": statistics.fmean(comps) if comps else None,
            "completed": len(comps), "verified": sum(x.verified for x in ls),
            "virtual_s": r.stats.virtual_s, "cpu_s": r.stats.cpu_s}


def _write(out: str, base: str, params: dict, rows: list, per_leecher: list, started: float,
           load0: tuple) -> None:
    from swift.experiments import output as O
    os.makedirs(out, exist_ok=True)
    O.write_csv(os.path.join(out, base + ".csv"), per_leecher)
    meta = O.metadata("swift.experiments.vod_swarm", params, load0, started)
    meta["summary"] = rows
    meta["paper"] = PAPER
    O.write_json(os.path.join(out, base + ".json"), meta)
    plt = O.pyplot()
    algos = list(dict.fromkeys(r["algorithm"] for r in per_leecher))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8, 3.5))
    w = 0.8 / max(1, len(algos))
    for k, algo in enumerate(algos):
        mine = [r for r in per_leecher if r["algorithm"] == algo]
        by_g = [statistics.mean([r["stalls"] for r in mine if r["group"] == g] or [0])
                for g in "ABCD"]
        a1.bar([x + k * w for x in range(4)], by_g, w, label=algo)
        a2.bar([k], [statistics.mean(r["stall_s"] for r in mine)], 0.6, label=algo)
    a1.set_xticks([x + w * (len(algos) - 1) / 2 for x in range(4)],
                  [f"{g}\n{GROUPS[g][0]} ms, {GROUPS[g][1]} %" for g in "ABCD"], fontsize=7)
    a1.set_ylabel("mean stalls per peer")
    a1.legend(fontsize=7)
    a2.set_xticks(range(len(algos)), algos)
    a2.set_ylabel("mean stall time per peer (s)")
    fig.suptitle(f"Fig. 6 at our scale: {params['leechers']} leechers, seeder "
                 f"{params['seeder_up_bps'] / 1e6:.1f} Mb/s "
                 f"(supply {params['seeder_supply_ratio']} x demand)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, base + "-fig6.png"), dpi=110)
    plt.close(fig)


@cliutil.cli_main("ppspp experiment vod-swarm", expected=(SweepFailed,))
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="ppspp experiment vod-swarm", description=__doc__.splitlines()[0],
        epilog="--backend netns needs root (network namespaces). Prints one JSON object per "
               "algorithm, then a "
               "summary beside the paper's numbers.")
    ap.add_argument("--quick", action="store_true",
                    help="4 leechers and a 15 s video instead of 12 and 60 s (what CI runs)")
    ap.add_argument("--leechers", type=cliutil.positive_int, metavar="N",
                    help="leechers in the swarm (default 4 with --quick, else 12)")
    ap.add_argument("--video-s", type=cliutil.positive_float, metavar="SECONDS",
                    help="length of the 1 Mb/s video (default 15 with --quick, else 60)")
    ap.add_argument("--algorithms", default="linear,std-vod,vod", metavar="LIST",
                    help="comma-separated download algorithms to compare (default: %(default)s)")
    ap.add_argument("--seeder-mbps", type=cliutil.positive_float, default=None, metavar="MBPS",
                    help=f"seeder link; default {SUPPLY:.3f} x leechers x bit rate, the paper's "
                         "supply ratio (20 restores the paper's absolute value)")
    ap.add_argument("--out", default="swift-results", metavar="DIR",
                    help="directory for the CSV, JSON and PNG files (default: %(default)s)")
    ap.add_argument("--backend", choices=[b.value for b in Backend], default="netns",
                    help="netns: the namespace testbed in real time (root); sim: the same "
                         "scenario in the packet-level simulator (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="run seed (simulator)")
    ap.add_argument("--have-grid", action="store_true",
                    help="every peer's HAVEs that wait for their interval go on one grid "
                         "(PeerConfig.have_grid): less CPU in the simulator; recorded in the "
                         "sweep's point (docs/sim-fig6.md, session 24)")
    sweeps.add_arguments(ap)
    a = ap.parse_args(argv)
    sweeps.check(ap, a, ("leechers", "video_s", "seeder_bps", "bitrate_bps"))
    algos = tuple(x for x in a.algorithms.split(",") if x)
    seeder_bps = a.seeder_mbps * 1e6 if a.seeder_mbps else None
    if a.sweep is not None:
        base: dict[str, Any] = {"video_s": a.video_s or (15.0 if a.quick else 60.0)}
        if a.leechers:
            base["leechers"] = a.leechers
        if seeder_bps:
            base["seeder_bps"] = seeder_bps
        if a.have_grid:  # only when set: part files of sweeps without it still resume
            base["have_grid"] = True
        res = sweeps.sweep(sweep_task, base, [{"algorithm": x} for x in algos], a, a.out,
                           "vod_swarm", "vod_swarm (paper IV-A, Fig. 6)")
        png = sweeps.plot(res, a.sweep[0], "algorithm",
                          [("mean_stalls", "mean stalls per peer"),
                           ("mean_stall_s", "mean stall time per peer (s)"),
                           ("mean_startup_s", "mean start-up (s)")],
                          "Fig. 6 in the simulator (mean, 95 % CI over seeds)", PAPER)
        print(f"files: {res.csv}, {res.summary_csv}, {png}", file=sys.stderr)
        return 1 if res.failures else 0
    rows = run(a.quick, a.leechers, a.video_s, algos, seeder_bps=seeder_bps, out=a.out,
               backend=a.backend, seed=a.seed, have_grid=a.have_grid)
    for r in rows:
        print(json.dumps(r))
    print(f"ours (seeder {rows[0]['seeder Mb/s']} Mb/s for {rows[0]['what'].split()[2]} leechers; "
          "the paper's supply ratio, not its 20 Mb/s):")
    for r in rows:
        print(f"  {r['what'].rsplit(', ', 1)[1]:<8} mean stalls {r['mean stalls']}, stall time "
              f"{r['mean stall s']} s, start-up {r['mean start-up s']} s, "
              f"completed {r['completed']}")
    print("  " + PAPER)
    print(f"files in {a.out}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
