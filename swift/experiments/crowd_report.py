"""Figs. 7-11 from a flash-crowd sweep (``ppspp experiment flashcrowd --backend sim
--arrivals both --sweep leechers=...``): the CDFs at one swarm size (Fig. 11) and a
markdown table of every point beside the paper's findings.

The sweep's CSV (:mod:`deliverykit.sweep`) holds one row per (point, seed) with
every leecher's completion and start-up times (``completion_times``,
``startup_times``, space-separated); the summary CSV holds mean and 95 % CI.
This module reads both and writes, next to them:

- ``<stem>-cdf<N>.png``: completion and start-up CDFs at N leechers, every
  leecher of every seed pooled, one line per arrival pattern (Fig. 11 is the
  Poisson completion CDF at 128 leechers);
- ``<stem>.md``: per arrival pattern and swarm size, completion (mean, its
  spread, last), start-up (mean, quartiles, last), each mean with its 95 % CI
  over seeds, then what the paper found per figure and the same measure of ours.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deliverykit.sweep import SweepResult

__all__ = ["FINDINGS", "PointTimes", "cdf_size", "load_times", "markdown", "report"]

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
