"""Where a simulated VoD flash crowd's start-up goes (docs/sim-fig6.md, session 11).

Runs the Fig. 6 scenario (``swarm.vod_scenario``: the paper's 20 Mb/s seeder,
groups A-D, 1.2 Mb/s leecher uplinks, an ``VIDEO_S`` s video, seed 0) with one
picker and prints, every ``EVERY`` virtual seconds until every leecher has
started playing, one JSON line: leechers started, DATA sent by the seeder and by
the leechers, the leechers' in-order prefix and chunks held (medians), the
upload queues and LEDBAT windows of their channels that have something queued,
and their uplinks' sent / queue-dropped / lost datagrams.  A variant changes
one input to see whether it is the limit (each a separate run):

    python docs/results/swift-sim/startup-trace-s11.py LEECHERS VIDEO_S ALGORITHM [EVERY] [VARIANT]

VARIANT: ``base``; ``noloss`` (no random loss on the leechers' uplinks);
``qMS`` (leecher uplink queue of MS ms instead of 50); ``capMBPS`` (the
leechers' own upload cap, ``PeerConfig.upload_rate``, as libswift's
``--uprate``).  The last line, on stderr, is the run's CPU and mean start-up.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from typing import Any

from deliverykit.sim import Simulation
from swift import sim as ssim
from swift.experiments import swarm, vod_swarm


def scenario(n: int, video: float, variant: str) -> tuple[Any, Any, Any]:
    sc = swarm.vod_scenario(n, video, 1e6, 1024, vod_swarm.seeder_rate(n, 1e6, 20e6), seed=0)
    p = sc.params
    seed_cfg, leech_cfg = vod_swarm.configs(int(p["chunk_size"]), float(p["bitrate"]), ALGO)
    nodes = list(sc.nodes)

    def leechers(f: Any) -> list[Any]:
        return [dataclasses.replace(x, up=f(x.up)) if x.role == "leecher" else x for x in nodes]

    if variant == "noloss":
        nodes = leechers(lambda up: ssim.uplink(up.rate, up.delay))
    elif variant.startswith("q"):
        qs = float(variant[1:]) / 1000
        nodes = leechers(lambda up: ssim.uplink(up.rate, up.delay, queue_s=qs, loss=up.loss.p))
    elif variant.startswith("cap"):
        leech_cfg = dataclasses.replace(leech_cfg, upload_rate=float(variant[3:]) * 1e6 / 8)
    elif variant != "base":
        raise SystemExit(f"unknown variant {variant!r}")
    return sc.replace(nodes=tuple(nodes)), seed_cfg, leech_cfg


def sample(sim: Simulation, app: ssim.SwiftApp, every: float) -> None:
    seeder = sim.hosts[app.seeder_name]
    hosts = [sim.hosts[nm] for nm in app.leecher_names if sim.hosts[nm].present]
    prefix, held, cwnds = [], [], []
    queued = chans_queued = 0
    for h in hosts:
        peer: Any = h.core
        e = peer.content.have.find_empty(0)
        prefix.append(e if e is not None else app.chunks)
        held.append(peer.content.have.count())
        for c in peer.channels.values():
            if c.send.upload.size:
                queued += c.send.upload.size
                chans_queued += 1
                cwnds.append(c.send.ledbat.cwnd / c.send.ledbat.mss)
    ups = [sim.network.nodes[h.name].up for h in hosts]
    cores: list[Any] = [h.core for h in hosts]  # a swift host's core is a Peer
    seed_core: Any = seeder.core
    row = {"t": round(sim.now, 2), "started": len(app.startup),
           "seeder_data": seed_core.stats.get("sent_data", 0),
           "leecher_data": sum(c.stats.get("sent_data", 0) for c in cores),
           "prefix_median": statistics.median(prefix), "held_median": statistics.median(held),
           "upload_queued": queued, "channels_queued": chans_queued,
           "cwnd_median_mss": round(statistics.median(cwnds), 1) if cwnds else 0,
           "uplink_sent": sum(u.sent for u in ups),
           "uplink_queue_drops": sum(u.queue_drops for u in ups),
           "uplink_losses": sum(u.losses for u in ups)}
    print(json.dumps(row), flush=True)
    if len(app.startup) < len(app.leecher_names):
        sim.sched.at(sim.now + every, sample, sim, app, every)


if __name__ == "__main__":
    n, video, ALGO = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    every = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    sc, seed_cfg, leech_cfg = scenario(n, video, sys.argv[5] if len(sys.argv) > 5 else "base")
    app = ssim.SwiftApp(sc, seed_cfg, leech_cfg)
    sim = Simulation(sc, app)
    sim.sched.at(0.01, sample, sim, app, every)
    c0 = time.process_time()
    with ssim.setup_frozen():
        sim.run()
    print(f"cpu {time.process_time() - c0:.1f} s, mean start-up "
          f"{statistics.fmean(app.startup.values()):.2f} s", file=sys.stderr)
