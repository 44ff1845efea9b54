"""The cost of one simulated VoD task (docs/sim-fig6.md, session 10): CPU s, datagrams,
stalls, start-up and completion of ``vod_swarm.run_one`` on the sweep's ``vod_scenario``
(seed 0, the paper's 20 Mb/s seeder), as one JSON line on stdout.  With ``count``
every datagram a peer builds is decoded and counted by its message types (a second
run: the decoding costs CPU, so that run's CPU is not the figure).

    python docs/results/swift-sim/vod-cost-s10-measure.py LEECHERS VIDEO_S ALGORITHM [count]
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import sys
import time
from typing import Any

from swift.core.peer import Peer
from swift.experiments import swarm, vod_swarm
from swift.wire import codec as C
from swift.wire.constants import MsgType


def _count_kinds(kinds: collections.Counter[str]) -> None:
    """Wrap ``Peer.datagrams_to_send`` to count what every peer builds, by kind."""
    orig = Peer.datagrams_to_send

    def counted(self: Peer, now: float, budget: int = 256) -> list[Any]:
        out = orig(self, now, budget)
        for d, _ in out:
            try:
                _, msgs, _err = C.decode_raw(d, self.ctx)
            except C.DecodeError:
                kinds["undecodable"] += 1
                continue
            types = sorted({MsgType(m[0]).name for m in msgs if m[0] != MsgType.INTEGRITY})
            kinds["DATA" if "DATA" in types else "+".join(types) or "keepalive"] += 1
        return out

    Peer.datagrams_to_send = counted  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    n, video, algo = int(argv[0]), float(argv[1]), argv[2]
    kinds: collections.Counter[str] = collections.Counter()
    if argv[3:] == ["count"]:
        _count_kinds(kinds)
    sc = swarm.vod_scenario(n, video, 1e6, 1024, vod_swarm.seeder_rate(n, 1e6, 20e6), seed=0)
    load0 = os.getloadavg()[0]
    c0 = time.process_time()
    r = vod_swarm.run_one(sc, algo, "sim")
    cpu = time.process_time() - c0
    ls = r.leechers
    assert r.stats is not None
    res: dict[str, Any] = {
        "leechers": n, "algo": algo, "cpu_s": round(cpu, 1),
        "virtual_s": round(r.stats.virtual_s, 2), "datagrams": r.stats.datagrams,
        "verified": sum(x.verified for x in ls), "stalls": sum(x.stalls for x in ls),
        "stall_s": round(sum(x.stall_s for x in ls), 3),
        "mean_startup_s": round(statistics.fmean(
            x.startup_s for x in ls if x.startup_s is not None), 3),
        "mean_completion_s": round(statistics.fmean(
            x.completion_s for x in ls if x.completion_s is not None), 3),
        "leecher_upload_chunks": sum(x.sent_chunks for x in ls),
        "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    if kinds:
        res["kinds"] = dict(kinds.most_common())
        res["non_data"] = sum(v for k, v in kinds.items() if k != "DATA")
        res["have_only"] = kinds.get("HAVE", 0)
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1:])
