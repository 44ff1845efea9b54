"""Where a simulated VoD swarm's upload goes (session 22, docs/sim-fig6.md).

    python docs/results/swift-sim/vod-uplink-s22.py LEECHERS VIDEO_S ALGORITHM [SEED]

Runs one Fig. 6 task (the paper's 20 Mb/s seeder, 1.2 Mb/s leecher uplinks) in the
simulator exactly as the sweep does, and counts, per virtual second, the bytes each
uplink carried: datagrams of at least one chunk (DATA, with its INTEGRITY) and the
rest (HAVE, ACK, REQUEST, handshakes, PEX). Prints per-second swarm totals and a
summary: the leechers' upload against their capacity while present, and the share of
it that carried chunks. Reads the simulator's own counters; changes nothing."""
from __future__ import annotations

import json
import sys

from deliverykit.sim.pump import Simulation
from swift import sim as ssim
from swift.experiments import swarm, vod_swarm


def main() -> None:
    n, video_s, algo = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    sc = swarm.vod_scenario(n, video_s, 1e6, 1024, vod_swarm.seeder_rate(n, 1e6, 20e6), seed=seed)
    seed_cfg, leech_cfg = vod_swarm.configs(1024, float(sc.params["bitrate"]), algo)
    app = ssim.SwiftApp(sc, seed_cfg, leech_cfg, None)
    simu = Simulation(sc, app, seed=None)
    chunk = int(sc.params["chunk_size"])
    # per source node: [data-bearing bytes, other bytes] this second, and over the run
    acc: dict[str, list[int]] = {}
    whole: dict[str, list[int]] = {}
    send = simu.network.send

    def counted(src_name: str, data: bytes, dst: object) -> None:
        a = acc.setdefault(src_name, [0, 0])
        a[0 if len(data) >= chunk else 1] += len(data)
        w = whole.setdefault(src_name, [0, 0])
        w[0 if len(data) >= chunk else 1] += len(data)
        send(src_name, data, dst)  # type: ignore[arg-type]

    simu.network.send = counted  # type: ignore[method-assign]
    seeder = next(s.name for s in sc.nodes if s.name not in app.leecher_names)
    series = []

    def sample(now: float) -> None:
        present = [x for x in app.leecher_names if x in simu.hosts and x not in app.left_at]
        ld = sum(acc.get(x, [0, 0])[0] for x in app.leecher_names)
        lo = sum(acc.get(x, [0, 0])[1] for x in app.leecher_names)
        sd, so = acc.get(seeder, [0, 0])
        series.append({"t": round(now, 1), "present": len(present),
                       "complete": len(app.completed), "seeder_data_Mbps": sd * 8e-6,
                       "seeder_other_Mbps": so * 8e-6, "leechers_data_Mbps": ld * 8e-6,
                       "leechers_other_Mbps": lo * 8e-6})
        acc.clear()

    with ssim.setup_frozen():
        stats = simu.run(progress=sample)
    cap = swarm.VOD_LEECHER_UP / 1e6
    for s in series:
        s["leechers_capacity_Mbps"] = s["present"] * cap
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in s.items()}))
    ld = sum(s["leechers_data_Mbps"] for s in series)
    lo = sum(s["leechers_other_Mbps"] for s in series)
    lcap = sum(s["leechers_capacity_Mbps"] for s in series)
    sd = sum(s["seeder_data_Mbps"] for s in series)
    so = sum(s["seeder_other_Mbps"] for s in series)
    def total(key: str, names: list[str]) -> int:
        return sum(getattr(simu.hosts[x].core, "stats", {}).get(key, 0)
                   for x in names if x in simu.hosts)

    leech = list(app.leecher_names)
    counts = {"seeder_sent_chunks": total("sent_data", [seeder]),
              "leechers_sent_chunks": total("sent_data", leech),
              "leechers_verified": total("verified", leech),
              "leechers_dup_chunks": total("dup", leech),
              "leechers_late": total("late", leech)}
    print(json.dumps(counts))
    # each leecher's upload over the run (Mb of data-bearing datagrams, of the rest),
    # with its group (delay ms, loss %) and how long it was present
    groups = {nd.name: nd.group for nd in sc.nodes}
    for x in leech:
        w = whole.get(x, [0, 0])
        print(json.dumps({"leecher": x, "group": groups[x], "data_Mb": round(w[0] * 8e-6, 2),
                          "other_Mb": round(w[1] * 8e-6, 2),
                          "sent_chunks": getattr(simu.hosts[x].core, "stats", {}).get(
                              "sent_data", 0) if x in simu.hosts else 0,
                          "startup_s": app.startup.get(x), "completion_s": app.completed.get(x),
                          "stalls": app.players[x].stalls if x in app.players else None,
                          "left": app.left_at.get(x)}))
    print(json.dumps({"leechers": n, "video_s": video_s, "algorithm": algo, "seed": seed,
                      "virtual_s": round(stats.virtual_s, 1), "cpu_s": round(stats.cpu_s, 1),
                      "leecher_uplink_used": round((ld + lo) / lcap, 3),
                      "leecher_uplink_data": round(ld / lcap, 3),
                      "leecher_upload_share_data": round(ld / (ld + lo), 3),
                      "seeder_Mb": round(sd + so, 1), "leechers_data_Mb": round(ld, 1),
                      "leechers_other_Mb": round(lo, 1),
                      "share_of_chunks_from_leechers": round(ld / (ld + sd), 3)}))


if __name__ == "__main__":
    main()
