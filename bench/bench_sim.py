"""Simulator speed: the swift flash crowd in virtual time, by swarm size.

Real swift Peer objects in deliverykit.sim (swift/sim.py).  Per swarm size:
simulated datagrams per CPU second and virtual seconds per CPU second, so the
table shows how the cost grows with the swarm (docs/sim.md).  Full mode: 16,
32 and 64 leechers; quick mode: 16 leechers and a smaller file.  The issue's
target (a later step): the 208-leecher flash crowd on one core in under 30
minutes.
"""

from __future__ import annotations

import sys

from swift.sim import flash_crowd, run as run_swarm

FULL_SIZES = (16, 32, 64)
QUICK_SIZES = (16,)
#: content per run (KiB): small because the cost today is dominated by the peer's
#: per-datagram request planning, which grows with the swarm (docs/sim.md, hot spots)
FULL_KIB = 64
QUICK_KIB = 32


def run(quick: bool) -> dict:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    kib = QUICK_KIB if quick else FULL_KIB
    rows = []
    for n in sizes:
        res = run_swarm(flash_crowd(n, kib * 1024, seed=1))
        s = res.summary()
        rows.append({
            "subject": f"swift flash crowd {n}x{kib} KiB",
            "leechers": n,
            "verified": f"{s['verified']}/{n}",
            "mean completion s (virtual)": s["mean_completion_s"],
            "virtual s": s["virtual_s"],
            "CPU s": s["cpu_s"],
            "datagrams": s["datagrams"],
            "events": s["events"],
            "datagrams/CPU-s": s["datagrams_per_cpu_s"],
            "virtual-s/CPU-s": s["virtual_s_per_cpu_s"],
            "CPU ms per datagram": 1e3 * s["cpu_s"] / max(1, s["datagrams"]),
        })
        print(f"bench_sim: {n} leechers done ({s['cpu_s']:.1f} CPU s)", file=sys.stderr)
    first, last = rows[0], rows[-1]
    ratios = {}
    if len(rows) > 1:
        ratios[f"datagrams/CPU-s at {last['leechers']} / at {first['leechers']}"] = (
            last["datagrams/CPU-s"] / first["datagrams/CPU-s"])
    return {
        "title": "Simulator: swift flash crowd in virtual time (deliverykit.sim)",
        "rows": rows,
        "ratios": ratios,
        "targets": {},
        "notes": [
            "one process, one core; CPU time of the run only (content and tree built before)",
            "target of issue 14 (later): 208 leechers on one core in < 30 min; see docs/sim.md",
        ],
    }
