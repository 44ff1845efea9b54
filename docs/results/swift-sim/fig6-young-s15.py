"""Why the 8-leecher VoD swarm stopped stalling when ``Ledbat.YOUNG_BASE`` went
on (60bc618; docs/sim-fig6.md, session 15): one simulated swarm with the switch
as asked, and, sampled every virtual second while a leecher is still
downloading (read only; nothing in the package changes):

* the seeder's channels: smoothed RTT, LEDBAT window, queueing delay as LEDBAT
  reads it, and whether the base delay has fallen 5 ms below its first
  samples (the rule's gate);
* the leechers' channels with DATA queued to upload: RTT, window, gate;
* the leechers' in-order prefixes (chunks per second over the run);
* at the end: stalls, start-up, DATA chunks relayed by the leechers.

    python docs/results/swift-sim/fig6-young-s15.py SEED off|on [LEECHERS] [VIDEO_S] [ALGORITHM]

Defaults: 8 leechers, a 20 s video, ``vod``, the default seeder (0.625 x
demand): the swarm of docs/ledbat.md's simulator table.  One JSON line.
"""

from __future__ import annotations

import json
import statistics as st
import sys
from typing import Any

from swift import sim as S
from swift.core.ledbat import Ledbat
from swift.experiments import swarm, vod_swarm
from swift.experiments.swarm import Backend


def main() -> None:
    seed, switch = int(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    secs = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0
    algo = sys.argv[5] if len(sys.argv) > 5 else "vod"
    Ledbat.YOUNG_BASE = switch == "on"
    acc: dict[str, list[float]] = {k: [] for k in (
        "seeder_srtt_ms", "seeder_cwnd_kib", "seeder_queuing_ms", "seeder_gate_open",
        "relay_srtt_ms", "relay_cwnd_kib", "relay_gate_open")}
    prefix_at: dict[float, int] = {}
    orig = S.SwiftApp._poll
    nxt = [1.0]

    def poll(self: S.SwiftApp, host: Any) -> None:
        sim = host.sim
        if sim.now >= nxt[0] and len(self.completed) < len(self.leecher_names):
            nxt[0] = sim.now + 1.0
            for c in sim.hosts[self.seeder_name].core.channels.values():
                led = c.send.ledbat
                if led.srtt:
                    acc["seeder_srtt_ms"].append(led.srtt * 1e3)
                    acc["seeder_cwnd_kib"].append(led.cwnd / 1024)
                    acc["seeder_queuing_ms"].append(led.queuing_delay * 1e3)
                    acc["seeder_gate_open"].append(
                        float(led.first_delay - led._base > Ledbat.YOUNG_REVISION * led.TARGET))
            total = 0
            for name in self.leecher_names:
                h = sim.hosts[name]
                if not h.present:
                    continue
                e = h.core.content.have.find_empty(0)
                total += self.chunks if e is None else e
                for c in h.core.channels.values():
                    led = c.send.ledbat
                    if led.srtt and c.send.upload.size:
                        acc["relay_srtt_ms"].append(led.srtt * 1e3)
                        acc["relay_cwnd_kib"].append(led.cwnd / 1024)
                        acc["relay_gate_open"].append(
                            float(led.first_delay - led._base > Ledbat.YOUNG_REVISION * led.TARGET))
            prefix_at[round(sim.now, 1)] = total
        orig(self, host)

    S.SwiftApp._poll = poll  # type: ignore[method-assign]
    sc = swarm.vod_scenario(n, secs, 1e6, 1024, vod_swarm.seeder_rate(n, 1e6, None), seed=seed)
    r = vod_swarm.run_one(sc, algo, Backend.SIM)
    ts = sorted(prefix_at)
    ls = r.leechers
    out = {"seed": seed, "young_base": Ledbat.YOUNG_BASE, "leechers": n, "video_s": secs,
           "algorithm": algo,
           "stalls_per_leecher": st.fmean(x.stalls for x in ls),
           "stall_s_per_leecher": round(st.fmean(x.stall_s for x in ls), 3),
           "startup_s": round(st.fmean(x.startup_s for x in ls if x.startup_s is not None), 3),
           "relayed_chunks": sum(x.sent_chunks for x in ls),
           # in-order chunks per leecher per second, first to last sample
           "prefix_chunks_per_s": round((prefix_at[ts[-1]] - prefix_at[ts[0]]) / n
                                        / (ts[-1] - ts[0]), 1) if len(ts) > 1 else None,
           "fates": r.stats.fates if r.stats else None}
    out.update({k: round(st.fmean(v), 3) for k, v in acc.items() if v})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
