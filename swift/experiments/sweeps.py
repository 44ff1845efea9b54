"""``--sweep NAME=v1,v2,... --seeds N`` for the swift experiments (issue 14).

Every point x seed is one task on Dask distributed (:mod:`deliverykit.sweep`):
a LocalCluster with one worker per core by default (``--workers``), or an
existing scheduler (``--scheduler tcp://host:8786``; docs/sim.md shows
dask-jobqueue on SLURM).  Rows stream into ``<out>/<base>-sweep.csv`` with
provenance (commit, seed, scenario); ``...-sweep.summary.csv`` has mean and
95 % CI per point; ``...-sweep.png`` plots the means with their intervals
beside the paper's finding.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

from deliverykit import cliutil
from deliverykit.sweep import SweepResult, add_run_arguments, number_or_text, run_sweep

__all__ = ["add_arguments", "parse_sweep", "plot", "sweep"]


def parse_sweep(text: str) -> tuple[str, list[int | float | str]]:
    """``leechers=32,48,64`` -> ("leechers", [32, 48, 64])."""
    name, sep, values = text.partition("=")
    name = name.strip().replace("-", "_")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not name.isidentifier() or not vals:
        raise argparse.ArgumentTypeError(f"--sweep takes NAME=v1,v2,... , not {text!r}")
    return name, [number_or_text(v) for v in vals]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The sweep options every swift experiment takes."""
    g = ap.add_argument_group("sweeps (--backend sim only; Dask distributed)")
    g.add_argument("--sweep", type=parse_sweep, metavar="NAME=V1,V2,...",
                   help="run every value x seed as one Dask task (e.g. leechers=32,64,128)")
    g.add_argument("--seeds", type=cliutil.positive_int, default=None, metavar="N",
                   help="seeds 0..N-1 per point (default 3 with --sweep)")
    add_run_arguments(g)


def check(ap: argparse.ArgumentParser, a: argparse.Namespace, allowed: Sequence[str]) -> None:
    """Refuse sweep options that do not fit (a usage error, exit 2)."""
    if a.sweep is None:
        if a.seeds or a.workers or a.scheduler or a.resume:
            ap.error("--seeds, --workers, --scheduler and --resume go with --sweep")
        return
    if a.backend != "sim":
        ap.error("--sweep runs on the simulator: add --backend sim")
    if a.sweep[0] not in allowed:
        ap.error(f"--sweep: {a.sweep[0]!r} is not one of {', '.join(allowed)}")


def sweep(task: Callable[[dict[str, Any], int], dict[str, Any]], base: dict[str, Any],
          series: Sequence[dict[str, Any]], a: argparse.Namespace, out_dir: str,
          name: str, scenario: str) -> SweepResult:
    """Points: ``base`` x each ``series`` entry x the swept values; seeds 0..N-1."""
    key, values = a.sweep
    points = [{**base, **s, key: v} for s in series for v in values]
    os.makedirs(out_dir, exist_ok=True)
    return run_sweep(task, points, list(range(a.seeds or 3)),
                     os.path.join(out_dir, f"{name}-sweep.csv"), scenario=scenario,
                     scheduler=a.scheduler, workers=a.workers,
                     progress=True if a.progress else None, resume=a.resume)


def plot(res: SweepResult, x: str, series: str, metrics: Sequence[tuple[str, str]],
         title: str, paper: str) -> str:
    """Mean +- 95 % CI of each metric against ``x``, one line per ``series`` value;
    the paper's finding under the title.  Written atomically next to the CSV."""
    from swift.experiments.output import pyplot
    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    labels = list(dict.fromkeys(str(r.get(series, "")) for r in res.summary))
    for ax, (m, label) in zip(axes[0], metrics):
        for lab in labels:
            rows = sorted((r for r in res.summary if str(r.get(series, "")) == lab),
                          key=lambda r: r[x])
            ci = [0.0 if r[f"{m}_ci95"] != r[f"{m}_ci95"] else r[f"{m}_ci95"] for r in rows]
            ax.errorbar([r[x] for r in rows], [r[f"{m}_mean"] for r in rows], yerr=ci,
                        marker="o", capsize=3, label=lab or None)
        ax.set_xlabel(x)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if any(labels):
            ax.legend(fontsize=7)
    fig.suptitle(f"{title}\n{paper}", fontsize=7)
    fig.tight_layout()
    path = str(res.csv.with_suffix(".png"))
    tmp = path + ".tmp"
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path
