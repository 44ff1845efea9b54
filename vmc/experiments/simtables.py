"""Tables 1 and 2 and the (a)/(b) figures of the paper in simulated time (issue 19 item 4).

``vmc experiment tables --backend sim`` replays each scenario's synthetic Squid log
(:mod:`vmc.workload.synth`: stated inputs, the overlap a result) Normal vs VMC through
:class:`vmc.sim.VmcSim` in counting mode, in the paper's 5,000-file batches, the origin's link
shared max-min and sized so the offered load is the scenario's utilisation of it (low 0.3,
high 0.85). Default 25,000 requests a scenario (the paper's smallest workload); ``--paper-size``:
the paper's files/hour x hours (up to 420,000).

Latency, both named: ``elapsed`` (the paper's measure: the elapsed time of the whole workload, the
sum of its batches') and ``per-request sum`` (the sum of every request's completion time). The
paper's claims are checks in the output, PASS or FAIL with the figures: the latency gain exceeds
the bandwidth gain (every scenario with overlap), and with no overlap VMC's latency overhead stays
under 1%.

``--seeds 1 2 3`` runs every (scenario, seed) as one task on Dask (:mod:`deliverykit.sweep`), the
rows in ``--out``/sweep.csv with means and 95% intervals in sweep.summary.csv.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from deliverykit.outputs import replacing, write_when_done
from vmc.sim import compare_log
from vmc.workload.synth import PAPER_TABLE1, PAPER_TABLE2, SCENARIOS, calculated_saving, generate

#: The paper's run size (sec. 3.3: "runs of 5,000 files at a time").
PAPER_BATCH = 5000
#: Requests a scenario by default: the paper's smallest workload.
DEFAULT_REQUESTS = 25_000


class Verdict(Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCOMPLETE = "INCOMPLETE"
    """The run was cut by its event bound: no verdict on partial figures."""


@dataclass(frozen=True)
class Check:
    """One of the paper's claims, computed on our run."""

    claim: str
    scenario: str
    measure: str
    figures: str
    verdict: Verdict


def run_scenario(name: str, n: int, seed: int, batch: int = PAPER_BATCH,
                 latencies: bool = False) -> dict[str, Any]:
    """One scenario: its log's Table 1 figures and the Normal vs VMC replay."""
    sc = SCENARIOS[name]
    entries = generate(sc, n, seed=seed)
    calc = calculated_saving(entries)
    span = max(entries[-1].start - entries[0].start, 1e-3)
    link = sum(e.bytes for e in entries) / span / sc.utilisation
    cpu, wall = time.process_time(), time.monotonic()
    row = compare_log(entries, link_rate=link, seed=seed, batch=batch, counting=True,
                      latencies=latencies)
    row.update(
        scenario=name, seed=seed, link_MBps=link / 1e6,
        files_per_hour=calc.files_per_hour, calc_latency_saving_pct=calc.latency_saving,
        calc_bandwidth_saving_pct=calc.bandwidth_saving, overlaps=calc.overlaps,
        cpu_s=time.process_time() - cpu, wall_s=time.monotonic() - wall,
    )
    return row


def sweep_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One (scenario, seed) for :func:`deliverykit.sweep.run_sweep`: ``point`` holds ``scenario``,
    ``n`` and ``batch``; the numeric figures of :func:`run_scenario`."""
    row = run_scenario(point["scenario"], int(point["n"]), seed, int(point["batch"]))
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "seed"}


def checks(rows: list[dict[str, Any]]) -> list[Check]:
    """The paper's claims on our rows (one per scenario)."""
    out = []
    for r in rows:
        name, bw = r["scenario"], r["bandwidth_saving_%"]
        cut = r.get("incomplete_batches", 0) > 0
        for measure, key in (("elapsed", "elapsed_saving_%"),
                             ("per-request sum", "latency_saving_%")):
            lat = r[key]
            if cut:
                out.append(Check("(any)", name, measure,
                                 f"{r['incomplete_batches']} batch(es) cut by the event bound",
                                 Verdict.INCOMPLETE))
                continue
            if SCENARIOS[name].unique:
                overhead = -lat
                out.append(Check("no-overlap latency overhead < 1%", name, measure,
                                 f"overhead {overhead:.3f}%",
                                 Verdict.PASS if overhead < 1.0 else Verdict.FAIL))
            else:
                out.append(Check("latency gain > bandwidth gain", name, measure,
                                 f"latency {lat:.3f}% vs bandwidth {bw:.3f}%",
                                 Verdict.PASS if lat > bw else Verdict.FAIL))
    return out


def table1(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        sc, p = SCENARIOS[r["scenario"]], PAPER_TABLE1[r["scenario"]]
        out.append({"load": sc.load, "overlap": sc.overlap, "requests": r["requests"],
                    "files/hour": round(r["files_per_hour"], 2),
                    "calc. latency saving %": round(r["calc_latency_saving_pct"], 3),
                    "bytes shared (calc.) %": round(r["calc_bandwidth_saving_pct"], 3),
                    "paper files/hour": p[0], "paper calc. %": p[1]})
    return out


def table2(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        sc, p = SCENARIOS[r["scenario"]], PAPER_TABLE2[r["scenario"]]
        out.append({"load": sc.load, "overlap": sc.overlap,
                    "Normal MB": round(r["normal_MB"], 2), "VMC MB": round(r["vmc_MB"], 2),
                    "bandwidth %": round(r["bandwidth_saving_%"], 3),
                    "latency % (elapsed)": round(r["elapsed_saving_%"], 3),
                    "latency % (per-request sum)": round(r["latency_saving_%"], 3),
                    "paper Normal MB": p[0], "paper VMC MB": p[1], "paper bandwidth %": p[2],
                    "paper latency %": p[3], "right bodies": f"{r['right_bodies']}/{r['requests']}",
                    "incomplete batches": r["incomplete_batches"],
                    "cpu s": round(r["cpu_s"], 1)})
    return out


def md(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def figure_series(r: dict[str, Any]) -> list[dict[str, Any]]:
    """One scenario's (a)/(b) curves, one row per file downloaded (arrival order): cumulative
    origin MB of both arms and saved by VMC, cumulative latency (s) of both arms."""
    out: list[dict[str, Any]] = []
    no = vo = 0
    nl = vl = 0.0
    for i, (x, y, a, b) in enumerate(zip(r["normal_origin"], r["vmc_origin"],
                                         r["normal_latencies"], r["vmc_latencies"], strict=True)):
        no, vo, nl, vl = no + x, vo + y, nl + a, vl + b
        out.append({"files": i + 1, "normal_origin_MB": no / 1e6, "vmc_origin_MB": vo / 1e6,
                    "saved_MB": (no - vo) / 1e6, "normal_latency_s": nl, "vmc_latency_s": vl})
    return out


def write_series_csv(r: dict[str, Any], path: Path) -> None:
    """The (a)/(b) curves of one scenario as CSV (renamed into place when complete)."""
    import csv
    import io

    rows = figure_series(r)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["files"], lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: (f"{v:.6f}" if isinstance(v, float) else v) for k, v in row.items()})
    write_when_done(path, buf.getvalue())


def draw(r: dict[str, Any], series: list[dict[str, Any]]) -> Any:
    """One scenario's (a)/(b) figure (a matplotlib Figure; the caller saves and closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    paper = PAPER_TABLE2[r["scenario"]]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    xs = [row["files"] for row in series]
    a.plot(xs, [row["saved_MB"] for row in series])
    a.set_ylabel("origin MB saved by VMC")
    a.set_title(f"(a) {r['scenario']}: ours {r['bandwidth_saving_%']:.2f}%, "
                f"paper {paper[2]}%", fontsize=9)
    for label, key in (("normal", "normal_latency_s"), ("VMC", "vmc_latency_s")):
        b.plot(xs, [row[key] for row in series], label=label)
    b.set_ylabel("cumulative latency (s)")
    b.set_title(f"(b) {r['scenario']} (sim): ours {r['latency_saving_%']:.2f}%, "
                f"paper {paper[3]}%", fontsize=9)
    b.legend()
    # thousands as "50k": at the paper's sizes (up to 420,000) full numbers run into each other
    thousands = FuncFormatter(lambda x, _pos: f"{x / 1000:g}k" if abs(x) >= 1000 else f"{x:g}")
    for ax in (a, b):
        ax.set_xlabel("files downloaded")
        ax.xaxis.set_major_formatter(thousands)
    fig.tight_layout()
    return fig


def figures(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Per scenario, as the paper's Figs. 2-6: (a) cumulative origin bytes saved by VMC and (b)
    cumulative latency, Normal vs VMC, against files downloaded; the curves also as CSV
    (``vmc_sim_<scenario>.csv``), the paper's end figures (Table 2) in the titles."""
    import matplotlib.pyplot as plt

    paths = []
    for r in rows:
        if r["incomplete_batches"]:
            print(f"no figure for {r['scenario']}: {r['incomplete_batches']} batch(es) cut by the "
                  "event bound", file=sys.stderr)
            continue
        series = figure_series(r)
        write_series_csv(r, out / f"vmc_sim_{r['scenario']}.csv")
        fig = draw(r, series)
        p = out / f"vmc_sim_{r['scenario']}.png"
        with replacing(p) as tmp:  # never a half-written PNG under the final name
            fig.savefig(tmp, dpi=100, format="png")
        plt.close(fig)
        paths.append(p)
    return paths


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``--backend sim`` (beside the loopback experiment's)."""
    g = ap.add_argument_group("--backend sim")
    g.add_argument("--table", choices=("1", "2"), default=None,
                   help="print only Table 1 (the logs alone, no replay) or Table 2 (default both)")
    g.add_argument("--figures", action="store_true",
                   help="with --out: the (a)/(b) figures, one PNG per scenario")
    g.add_argument("--paper-size", action="store_true",
                   help="the paper's workload sizes: files/hour x hours, at most 420,000 "
                   f"(default -n or {DEFAULT_REQUESTS:,})")
    g.add_argument("--batch", type=int, default=PAPER_BATCH,
                   help=f"requests per run (the paper's {PAPER_BATCH:,}; 0: one run)")
    g.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="several seeds: one Dask task per (scenario, seed) "
                   "(deliverykit.sweep)")
    g.add_argument("--workers", type=int, default=None,
                   help="Dask worker processes (default: cores)")


def main_sim(a: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    """``vmc experiment tables --backend sim``."""
    names = a.scenario or list(SCENARIOS)
    if a.batch < 0:
        ap.error("--batch must be >= 0")
    if a.figures and not a.out:
        ap.error("--figures needs --out DIR (where the PNGs go)")
    if a.seeds and a.figures:
        ap.error("--figures plots one seed: use --seed, not --seeds")

    def size(name: str) -> int:
        return SCENARIOS[name].paper_requests if a.paper_size else (a.n or DEFAULT_REQUESTS)

    print("Inputs (stated, not fitted to the paper; vmc/workload/synth.py):")
    for name in names:
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in SCENARIOS[name].inputs().items()))
    print()
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    if a.seeds:
        return _sweep(a, names, size)
    rows = []
    for name in names:
        if a.table == "1":
            sc, n = SCENARIOS[name], size(name)
            entries = generate(sc, n, seed=a.seed)
            calc = calculated_saving(entries)
            rows.append({"scenario": name, "requests": n, "files_per_hour": calc.files_per_hour,
                         "calc_latency_saving_pct": calc.latency_saving,
                         "calc_bandwidth_saving_pct": calc.bandwidth_saving})
            continue
        r = run_scenario(name, size(name), a.seed, a.batch, latencies=a.figures)
        print(f"vmc experiment tables --backend sim: {name}: {r['requests']} requests, "
              f"{r['cpu_s']:.1f} s CPU, {r['wall_s']:.1f} s wall", file=sys.stderr)
        rows.append(r)
    print(f"Table 1: scenarios (ours: synthetic logs from stated inputs, seed {a.seed}; "
          "paper: Wits Squid logs)\n" + md(table1(rows)))
    if a.table == "1":
        return 0
    if a.table is None or a.table == "2":
        print(f"\nTable 2: measured savings (ours: simulated time, counting mode, batches of "
              f"{a.batch or 'all'}; latency as the paper measures it = elapsed, and our "
              "per-request sum)\n" + md(table2(rows)))
    found = checks(rows)
    print("\nThe paper's claims, checked on our run:")
    for c in found:
        print(f"  {c.verdict.value}  {c.claim} [{c.scenario}, {c.measure}]: {c.figures}")
    if a.out:
        keep = [{k: v for k, v in r.items() if not k.endswith(("latencies", "origin"))}
                for r in rows]
        doc = {"rows": keep, "checks": [dict(asdict(c), verdict=c.verdict.value) for c in found]}
        write_when_done(a.out / "sim_results.json", json.dumps(doc, indent=1) + "\n")
        from deliverykit.provenance import run_metadata

        meta = run_metadata("vmc", **{k: (str(v) if isinstance(v, Path) else v)
                                      for k, v in vars(a).items()})
        write_when_done(a.out / "metadata.json", json.dumps(meta, indent=1) + "\n")
        print(f"wrote {a.out / 'sim_results.json'}", file=sys.stderr)
        if a.figures:
            for p in figures(rows, a.out):
                print("wrote", p, file=sys.stderr)
    return 0


def _sweep(a: argparse.Namespace, names: list[str], size: Any) -> int:
    from deliverykit.sweep import run_sweep

    out = (a.out or Path(".")) / "sweep.csv"
    points = [{"scenario": n, "n": size(n), "batch": a.batch} for n in names]
    res = run_sweep(sweep_task, points, a.seeds, out, scenario="vmc-tables-sim",
                    workers=a.workers)
    print(f"Table 2 over seeds {a.seeds} (mean and 95% interval; rows in {out})")
    keys = ("bandwidth_saving_%", "elapsed_saving_%", "latency_saving_%",
            "calc_latency_saving_pct")
    print("| scenario | " + " | ".join(keys) + " | paper bandwidth % | paper latency % |\n|"
          + "---|" * (len(keys) + 3))
    for s in res.summary:
        cells = [f"{s[k + '_mean']:.3f} +- {s[k + '_ci95']:.3f}" for k in keys]
        paper = PAPER_TABLE2[s["scenario"]]
        print(f"| {s['scenario']} | " + " | ".join(cells) + f" | {paper[2]} | {paper[3]} |")
    means = [{"scenario": s["scenario"], **{k: s[k + "_mean"] for k in keys}} for s in res.summary]
    print("\nThe paper's claims, checked on the means:")
    for c in checks(means):
        print(f"  {c.verdict.value}  {c.claim} [{c.scenario}, {c.measure}]: {c.figures}")
    return 1 if res.failures else 0
