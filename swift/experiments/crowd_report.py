"""Figs. 7-11 from a flash-crowd sweep (``ppspp experiment flashcrowd --backend sim
--arrivals both --sweep leechers=...``): the CDFs at one swarm size (Fig. 11) and a
markdown table of every point beside the paper's findings.

The sweep's CSV (:mod:`deliverykit.sweep`) holds one row per (point, seed) with
every leecher's completion and start-up times (``completion_times``,
``startup_times``, space-separated); the summary CSV holds mean and 95 % CI.
This module reads both and writes, next to them (``python -m
swift.experiments.crowd_report CSV`` redoes it from a CSV alone, also from the
``.part`` a stopped sweep keeps: then under ``<stem>-partial``, every mean over
the seeds that finished):

- ``<stem>-cdf<N>.png``: completion and start-up CDFs at N leechers, every
  leecher of every seed pooled, one line per arrival pattern (Fig. 11 is the
  Poisson completion CDF at 128 leechers);
- ``<stem>.md``: per arrival pattern and swarm size, completion (mean, its
  spread, last), start-up (mean, quartiles, last), each mean with its 95 % CI
  over seeds, then what the paper found per figure and the same measure of ours.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deliverykit import cliutil
from deliverykit.sweep import SweepResult, ci95

__all__ = ["FINDINGS", "PointTimes", "cdf_size", "from_csv", "load_times", "main", "markdown",
           "report"]

#: the sweep CSV's point columns (the rest are metrics or provenance)
POINT_COLS = ("arrivals", "pattern", "rate", "leechers", "size_mb", "startup_kib", "push")

#: what the paper reports per figure (its values are charts; Section V-B's text)
FINDINGS = {
    "Fig. 7": "flash crowd, mean completion vs swarm size: libswift between uTorrent and "
              "libtorrent, all three scale alike; libswift better than libtorrent below "
              "32 leechers per seeder, libtorrent clearly better above 48",
    "Fig. 8": "flash crowd, start-up (mean and interquartile range, swarms > 48): libswift "
              "almost always within 15 s; some libtorrent peers over a minute",
    "Fig. 9": "Poisson (1 peer/s), mean completion: libswift slightly better than in the "
              "flash crowd",
    "Fig. 10": "Poisson, start-up: the vast majority of libswift peers start within 1 s",
    "Fig. 11": "Poisson, CDF of completion at 128 leechers: libswift's consistent; 25 % of "
               "libtorrent peers much slower",
}


@dataclass(frozen=True, slots=True)
class PointTimes:
    """Every leecher's times at one (arrival pattern, swarm size), pooled over seeds."""

    #: "flash" or "poisson R/s"
    pattern: str
    leechers: int
    seeds: int
    completion: tuple[float, ...]
    startup: tuple[float, ...]


def _floats(cell: str | None) -> list[float]:
    return [float(x) for x in (cell or "").split()]


def load_times(csv_path: str | Path) -> list[PointTimes]:
    """Per (arrivals, leechers), the pooled per-leecher times of the sweep's CSV."""
    pooled: dict[tuple[str, int], tuple[int, list[float], list[float]]] = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row.get("pattern") or row.get("arrivals") or "flash", int(row["leechers"]))
            n, comp, start = pooled.get(key, (0, [], []))
            pooled[key] = (n + 1, comp + _floats(row.get("completion_times")),
                           start + _floats(row.get("startup_times")))
    return [PointTimes(a, n, k, tuple(sorted(c)), tuple(sorted(s)))
            for (a, n), (k, c, s) in sorted(pooled.items())]


def cdf_size(sizes: Iterable[int], asked: int | None = None) -> int:
    """The swarm size of the CDFs: ``asked``, else 128 (the paper's) if swept, else
    the largest."""
    sizes = sorted(set(sizes))
    if not sizes:
        raise ValueError("the sweep has no rows")
    if asked is not None:
        if asked not in sizes:
            raise ValueError(f"--cdf-leechers {asked} was not swept (swept: {sizes})")
        return asked
    return 128 if 128 in sizes else sizes[-1]


def _pm(row: dict[str, Any], m: str) -> str:
    mean, half = row.get(f"{m}_mean"), row.get(f"{m}_ci95")
    if mean is None or mean != mean:
        return "-"
    if half is None or half != half:
        return f"{mean:.2f}"
    return f"{mean:.2f} +- {half:.2f}"


def _share_below(xs: Iterable[float], limit: float) -> str:
    v = list(xs)
    return f"{sum(x < limit for x in v) / len(v):.0%}" if v else "-"


def _label(r: dict[str, Any]) -> str:
    return str(r.get("pattern") or r.get("arrivals") or "flash")


def markdown(summary: list[dict[str, Any]], times: list[PointTimes], cdf_n: int) -> str:
    """The table of every point and the paper's findings beside ours."""
    lines = ["| arrivals | leechers | seeds | completion s | spread (stdev) s | last s "
             "| start-up s | start-up p25-p75 s | start-up max s |",
             "|---|---:|---:|---|---|---|---|---|---|"]
    for r in sorted(summary, key=lambda r: (_label(r), r["leechers"])):
        p25, p75 = r.get("p25_startup_s_mean"), r.get("p75_startup_s_mean")
        iqr = "-" if p25 is None or p25 != p25 else f"{p25:.2f}-{p75:.2f}"
        lines.append(f"| {_label(r)} | {r['leechers']} | {r['n']} "
                     f"| {_pm(r, 'mean_completion_s')} | {_pm(r, 'stdev_completion_s')} "
                     f"| {_pm(r, 'max_completion_s')} | {_pm(r, 'mean_startup_s')} | {iqr} "
                     f"| {_pm(r, 'max_startup_s')} |")
    means: dict[tuple[str, int], float] = {
        (_label(r), int(r["leechers"])): float(r["mean_completion_s_mean"])
        for r in summary if r.get("mean_completion_s_mean") is not None
        and not math.isnan(r["mean_completion_s_mean"])}
    poisson = sorted({t.pattern for t in times if t.pattern.startswith("poisson")})
    big_flash = [x for t in times if t.pattern == "flash" and t.leechers > 48 for x in t.startup]
    fig9, fig10, fig11 = [], [], []
    for pat in poisson:
        ratios = [f"{n}: {means[(pat, n)] / means[('flash', n)]:.2f}"
                  for (a, n) in sorted(means) if a == "flash" and (pat, n) in means
                  and means[("flash", n)] > 0]
        if ratios:
            fig9.append(f"{pat} / flash mean completion per swarm size: " + ", ".join(ratios))
        starts = [x for t in times if t.pattern == pat for x in t.startup]
        if starts:
            fig10.append(f"{pat}: {_share_below(starts, 1.0)} of {len(starts)} start-ups "
                         f"under 1 s")
        cdf = next((t for t in times if t.pattern == pat and t.leechers == cdf_n), None)
        if cdf and cdf.completion:
            fig11.append(f"{pat} at {cdf_n}: completion quartiles "
                         + ", ".join(f"{_q(cdf.completion, q):.2f}" for q in (0.25, 0.5, 0.75, 1.0))
                         + f" s over {len(cdf.completion)} leechers ({cdf.seeds} seeds)")
    ours = {
        "Fig. 7": "see the table (flash rows): ours alone, no BitTorrent arm in the simulator",
        "Fig. 8": (f"flash, swarms > 48: {_share_below(big_flash, 15.0)} of {len(big_flash)} "
                   f"start-ups under 15 s, longest {max(big_flash):.2f} s" if big_flash
                   else "no flash swarm > 48 in this sweep"),
        "Fig. 9": "; ".join(fig9) or "needs flash and Poisson rows",
        "Fig. 10": "; ".join(fig10) or "no Poisson rows",
        "Fig. 11": "; ".join(fig11) or f"no Poisson rows at {cdf_n}",
    }
    lines += ["", "| figure | paper | ours |", "|---|---|---|"]
    lines += [f"| {k} | {v} | {ours[k]} |" for k, v in FINDINGS.items()]
    return "\n".join(lines) + "\n"


def _q(xs: tuple[float, ...], q: float) -> float:
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def _cdf_plot(path: str, times: list[PointTimes], n: int) -> None:
    from swift.experiments.output import pyplot
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, attr, label in ((axes[0], "completion", "completion time (s)"),
                            (axes[1], "startup", "start-up time (s)")):
        for t in times:
            if t.leechers != n:
                continue
            v = getattr(t, attr)
            if v:
                ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post",
                        label=f"{t.pattern} ({t.seeds} seeds)")
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of peers")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{n} leechers, every leecher of every seed (ours, simulator)\n"
                 f"paper {FINDINGS['Fig. 11']}", fontsize=7)
    fig.tight_layout()
    tmp = path + ".tmp"
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)


def report(res: SweepResult, cdf_leechers: int | None = None) -> list[str]:
    """Write the CDF plot and the markdown table next to the sweep's CSV; their paths."""
    times = load_times(res.csv)
    n = cdf_size((t.leechers for t in times), cdf_leechers)
    stem = str(res.csv.with_suffix(""))
    png = f"{stem}-cdf{n}.png"
    _cdf_plot(png, times, n)
    md = f"{stem}.md"
    tmp = md + ".tmp"
    Path(tmp).write_text(markdown(res.summary, times, n))
    os.replace(tmp, md)
    return [png, md]


def _num(x: str) -> float | None:
    try:
        v = float(x)
    except ValueError:
        return None
    return v if not math.isnan(v) else None


def from_csv(path: str | Path, cdf_leechers: int | None = None) -> list[str]:
    """Summary (mean, 95 % CI per point), plots and table from a sweep CSV alone; a
    ``.part`` is copied to ``<stem>-partial.csv`` first.  The paths written."""
    from swift.experiments import sweeps
    path = Path(path)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no rows")
    if path.suffix == ".part":
        csv_path = Path(str(path.with_suffix("")).removesuffix(".csv") + "-partial.csv")
        tmp = Path(f"{csv_path}.tmp")
        tmp.write_bytes(path.read_bytes())
        os.replace(tmp, csv_path)
    else:
        csv_path = path
    cols = [c for c in POINT_COLS if c in rows[0]]
    metrics = [c for c in rows[0] if c not in cols and c not in ("commit", "scenario", "seed")
               and all(_num(r[c]) is not None or r[c] == "" for r in rows)]
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in cols), []).append(r)
    summary = []
    for key, rs in groups.items():
        point: dict[str, Any] = {c: (int(v) if c == "leechers" else v) for c, v in zip(cols, key)}
        row: dict[str, Any] = {**point, "n": len(rs)}
        for m in metrics:
            vals = [v for v in (_num(r[m]) for r in rs) if v is not None]
            row[f"{m}_mean"], row[f"{m}_ci95"] = ci95(vals) if vals else (math.nan, math.nan)
        summary.append(row)
    stem = str(csv_path.with_suffix(""))
    res = SweepResult(csv_path, Path(f"{stem}.summary.csv"), Path(f"{stem}.meta.json"),
                      rows=len(rows), summary=summary)
    tmp = Path(f"{res.summary_csv}.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    os.replace(tmp, res.summary_csv)
    from swift.experiments.flashcrowd import PAPER
    series = "pattern" if "pattern" in cols else "arrivals"
    png = sweeps.plot(res, "leechers", series,
                      [("mean_completion_s", "mean completion (s)"),
                       ("stdev_completion_s", "completion spread, stdev (s)"),
                       ("mean_startup_s", "mean start-up (s)")],
                      "Figs. 7-10 in the simulator (mean, 95 % CI over seeds)", PAPER)
    return [str(csv_path), str(res.summary_csv), png, *report(res, cdf_leechers)]


@cliutil.cli_main("python -m swift.experiments.crowd_report")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m swift.experiments.crowd_report",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=cliutil.existing_file,
                    help="a flashcrowd sweep CSV (or the .part of a stopped one)")
    ap.add_argument("--cdf-leechers", type=cliutil.positive_int, metavar="N",
                    help="swarm size of the CDFs (default 128 if present, else the largest)")
    a = ap.parse_args(argv)
    print(f"files: {', '.join(from_csv(a.csv, a.cdf_leechers))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
