"""Whom a VoD leecher asks for chunks, at one instant (session 22, docs/sim-fig6.md).

    python docs/results/swift-sim/vod-requests-probe-s22.py LEECHERS VIDEO_S ALGORITHM AT \
        [LEECHER ...]

Runs one Fig. 6 task (the paper's 20 Mb/s seeder, seed 0) in the simulator until virtual
time AT and prints, for each named leecher (default l000 l001 l004), its fast set and per
channel: the remote node and its group, the requests outstanding there, the request window
(:meth:`PathEstimate.window`), DATA received, the smallest RTT, the delivery rate (chunks/s)
and how many chunks the remote announced. Reads the peers' state; changes nothing."""
from __future__ import annotations

import sys

from deliverykit.sim.pump import Simulation
from swift import sim as ssim
from swift.core.peer import Peer
from swift.experiments import swarm, vod_swarm


def main() -> None:
    n, video_s, algo, until = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    names = sys.argv[5:] or ["l000", "l001", "l004"]
    sc = swarm.vod_scenario(n, video_s, 1e6, 1024, vod_swarm.seeder_rate(n, 1e6, 20e6), seed=0)
    s_cfg, l_cfg = vod_swarm.configs(1024, float(sc.params["bitrate"]), algo)
    app = ssim.SwiftApp(sc, s_cfg, l_cfg, None)
    simu = Simulation(sc, app, seed=None)
    group = {nd.name: nd.group for nd in sc.nodes}
    with ssim.setup_frozen():
        simu.run(until=until)
    name_of: dict[object, str] = {simu.network.address(nm): nm for nm in simu.hosts}
    for x in names:
        peer = simu.hosts[x].core
        assert isinstance(peer, Peer)
        fast = sorted(name_of.get(c.addr, "?") for i, c in peer.channels.items()
                      if i in peer.download.fast)
        print(f"{x} (group {group[x]}) at {until:g} s: holds {peer.content.have.count()} chunks;"
              f" fast set {fast}")
        for c in sorted(peer.channels.values(), key=lambda c: name_of.get(c.addr, "?")):
            nm = name_of.get(c.addr, "?")
            pa = c.path
            print(f"  {nm:7} {group.get(nm, '?')} {c.state.name:5} outstanding {len(c.down.slot):4}"
                  f" window {pa.window(l_cfg.max_outstanding):4} received {pa.received:5}"
                  f" min RTT {pa.min_rtt:.3f} rate {pa.rate:6.1f}/s"
                  f" remote holds {c.remote.have.count():5}")


if __name__ == "__main__":
    main()
