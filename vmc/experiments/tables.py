"""Tables 1 and 2 of the paper (and the cumulative-latency plots of Figs. 2-6), on loopback.

For each scenario the synthetic generator writes a Squid-format log; Table 1
gets its files/hour and the calculated latency saving; Table 2 replays it twice
on fresh origins (Normal: straight to the origin; VMC: through the proxy) and
measures origin Mbytes and summed latency. The origin's emulated access link is
sized so the offered load is ``Scenario.utilisation`` of it (low 0.3, high
0.85): contention on that link is what VMC relieves (paper sec. 3.4). Replays
are time-compressed (``speed``) and the link scaled with them.

This is a loopback emulation with synthetic logs, not the paper's testbed with
the Wits logs: the paper's numbers are printed beside ours, not as ours.
The tc-shaped namespace version is future work (see docs/vmc.md).

Run: ``python -m vmc.experiments.tables --quick [--out DIR] [--plot]``.
``--backend sim``: the same tables at the paper's scale in simulated time
(:mod:`vmc.experiments.simtables`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deliverykit import cliutil
from deliverykit.outputs import replacing, write_when_done
from vmc.experiments.progress import RequestProgress
from vmc.workload.replay import compare
from vmc.workload.squid import LogEntry
from vmc.workload.synth import PAPER_TABLE1, PAPER_TABLE2, SCENARIOS, calculated_saving, generate


def _scaled(entries: Sequence[LogEntry], target_seconds: float) -> float:
    """Time compression (or stretch, < 1) so the replay lasts about ``target_seconds``.

    Stretching matters for the busiest logs: 250 requests/s through one Python
    process holding origin, proxy and clients would measure the CPU, not the link.
    """
    span = max(entries[-1].start - entries[0].start, 1e-3)
    return span / target_seconds


def run(quick: bool = True, n: int | None = None, seed: int = 1,
        scenarios: list[str] | None = None, on_done: Callable[[], None] | None = None,
        on_scenario: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Both tables as row dicts (ours beside the paper's), plus the raw latencies per scenario.

    ``on_done()`` is called as each replayed request ends (3 arms x ``n`` per scenario),
    ``on_scenario(name)`` as each scenario ends (progress)."""
    n = n or (120 if quick else 1000)
    target = 2.5 if quick else 30.0
    t1, t2, raw = [], [], {}
    for name in scenarios or list(SCENARIOS):
        sc = SCENARIOS[name]
        entries = generate(sc, n, seed=seed)
        calc = calculated_saving(entries)
        p1 = PAPER_TABLE1[name]
        t1.append({"load": sc.load, "overlap": sc.overlap,
                   "files/hour": round(calc.files_per_hour, 2),
                   "calc. latency saving %": round(calc.latency_saving, 2),
                   "paper files/hour": p1[0], "paper calc. %": p1[1]})
        speed = _scaled(entries, target)
        span = max(entries[-1].start - entries[0].start, 1e-3)
        offered = sum(e.bytes for e in entries) / span * speed
        link = offered / sc.utilisation
        row = asyncio.run(compare(entries, speed=speed, link_rate=link, on_done=on_done))
        p2 = PAPER_TABLE2[name]
        t2.append({"load": sc.load, "overlap": sc.overlap,
                   "Normal MB": round(row["normal_MB"], 2), "VMC MB": round(row["vmc_MB"], 2),
                   "bandwidth %": round(row["bandwidth_saving_%"], 2),
                   "latency %": round(row["latency_saving_%"], 2),
                   "latency % vs proxy-only": round(row["latency_saving_vs_proxy_%"], 2),
                   "calc. latency %": round(row["calculated_latency_saving_%"], 2),
                   "paper Normal MB": p2[0], "paper VMC MB": p2[1], "paper bandwidth %": p2[2],
                   "paper latency %": p2[3], "failed": row["failed"],
                   "link MB/s": round(link / 1e6, 2), "speed": round(speed, 2)})
        raw[name] = {"normal": row["normal_latencies"], "proxy": row["proxy_latencies"],
                     "vmc": row["vmc_latencies"]}
        if on_scenario is not None:
            on_scenario(name)
    return {"table1": t1, "table2": t2, "latencies": raw, "n": n, "seed": seed, "quick": quick}


def _md(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(out)


def plot(result: dict[str, Any], out: Path) -> list[Path]:
    """Cumulative latency, Normal vs VMC, one PNG per scenario (Figs. 2-6 (b))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, lat in result["latencies"].items():
        fig, ax = plt.subplots(figsize=(5, 3.2))
        arms = (("normal", lat["normal"]), ("proxy, no sharing", lat["proxy"]),
                ("VMC", lat["vmc"]))
        for label, xs in arms:
            acc, ys = 0.0, []
            for x in xs:
                acc += x or 0.0
                ys.append(acc)
            ax.plot(range(1, len(ys) + 1), ys, label=label)
        ax.set_xlabel("files downloaded")
        ax.set_ylabel("cumulative latency (s)")
        ax.set_title(f"{name} (loopback emulation)")
        ax.legend()
        fig.tight_layout()
        p = out / f"vmc_cumlat_{name}.png"
        with replacing(p) as tmp:  # never a half-written PNG under the final name
            fig.savefig(tmp, dpi=100, format="png")
        plt.close(fig)
        paths.append(p)
    return paths


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vmc experiment tables", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="120 requests per scenario, each arm compressed into ~2.5 s "
                    "(default 1000 into ~30 s)")
    ap.add_argument("-n", type=cliutil.positive_int, default=None, help="requests per scenario")
    ap.add_argument("--seed", type=int, default=1,
                    help="seed of the synthetic workload generator (default 1)")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS),
                    help="run only this scenario (repeatable; default all six)")
    ap.add_argument("--out", type=Path, default=None,
                    help="directory for results.json, metadata.json and (with --plot) the PNGs")
    ap.add_argument("--plot", action="store_true",
                    help="with --out: cumulative-latency plots, one PNG per scenario "
                    "(Figs. 2-6 (b))")
    ap.add_argument("--backend", choices=("loopback", "sim"), default="loopback",
                    help="loopback (default: real proxy and origin, 120-1,000 requests) or sim "
                    "(simulated time, the paper's scale: vmc/experiments/simtables.py)")
    from vmc.experiments.simtables import add_arguments

    add_arguments(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.backend == "sim":
        from vmc.experiments.simtables import main_sim

        return main_sim(a, ap)
    if a.plot and not a.out:
        ap.error("--plot needs --out DIR (where the PNGs go)")
    names = a.scenario or list(SCENARIOS)
    n = a.n or (120 if a.quick else 1000)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    with RequestProgress("vmc experiment tables", 3 * n * len(names)) as progress:
        res = run(a.quick, n, a.seed, names, on_done=progress.done, on_scenario=progress.stage)
    print("Table 1: scenarios (ours: synthetic logs; paper: Wits Squid logs)\n"
          + _md(res["table1"]))
    print("\nTable 2: measured savings (ours: loopback, emulated origin link)\n"
          + _md(res["table2"]))
    if a.out:
        write_when_done(a.out / "results.json", json.dumps(res, indent=1) + "\n")
        from deliverykit.provenance import run_metadata

        params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
        meta = run_metadata("vmc", **params)
        write_when_done(a.out / "metadata.json", json.dumps(meta, indent=1) + "\n")
        print(f"wrote {a.out / 'results.json'}, {a.out / 'metadata.json'}", file=sys.stderr)
        if a.plot:
            for p in plot(res, a.out):
                print("wrote", p, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
