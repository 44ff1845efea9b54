"""The 8-leecher VoD twin (docs/sim-fig6.md, session 18) with the HAVE grid
(``PeerConfig.have_grid``) off or on, one run, one JSON line of per-leecher means.

    python docs/results/swift-sim/vod-twin-grid-s24.py GRID(0|1) BACKEND(netns|sim) ALGORITHM SEED

Session 24 ran it for seeds 0-2, the three algorithms, off and on interleaved,
on each backend (the testbed needs root): vod-twin-grid-s24-{netns,sim}.jsonl."""
import json
import os
import statistics
import sys
import time

from swift.experiments import swarm, vod_swarm

grid, backend, algo, seed = sys.argv[1] == "1", sys.argv[2], sys.argv[3], int(sys.argv[4])
n, secs, bps = 8, 24.0, 1e6
sc = swarm.vod_scenario(n, secs, bps, 1024, vod_swarm.seeder_rate(n, bps, None), seed=seed)
load0 = os.getloadavg()[0]
t0 = time.time()
r = vod_swarm.run_one(sc, algo, backend, have_grid=grid)
ls = r.leechers
f = statistics.fmean
print(json.dumps({
    "grid": grid, "backend": backend, "algo": algo, "seed": seed,
    "stalls": f(x.stalls for x in ls), "stall_s": f(x.stall_s for x in ls),
    "startup": f(x.startup_s for x in ls if x.startup_s is not None),
    "completion": f(x.completion_s for x in ls if x.completion_s is not None),
    "completed": sum(x.completion_s is not None for x in ls),
    "verified": sum(x.verified for x in ls),
    "uploaded": sum(x.sent_chunks for x in ls),
    "wall": round(r.wall_s, 1), "cpu": r.stats.cpu_s if r.stats else None,
    "load0": load0, "load1": os.getloadavg()[0], "t0": t0}), flush=True)
