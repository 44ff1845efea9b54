"""Parameter sweeps on Dask distributed: points x seeds, one task each, one CSV.

``run_sweep(fn, points, seeds, out)`` submits ``fn(point, seed) -> {metric: number}``
once per (point, seed) with ``client.submit`` on a :class:`distributed.LocalCluster`
(one single-threaded worker process per core by default) or on an existing
scheduler (``scheduler="tcp://host:8786"``).  Results are taken as they finish
(``as_completed``) and written at once, one row each, to ``<out>.part``, which
becomes ``out`` only when the sweep has ended; every row carries its
provenance (git commit, scenario name, seed, the point's parameters).  Then
``<out stem>.summary.csv`` holds, per point, every metric's mean and 95 %
confidence interval (Student's t) over the seeds, and ``<out stem>.meta.json``
the run metadata (:mod:`deliverykit.provenance`).  A task that raises is
reported on stderr and in the result, and the others go on.  Progress (tasks
finished) goes to stderr: a bar on a terminal or when asked, and a final
summary line always.

A sweep that was stopped (Ctrl-C, SIGTERM, a batch job's wall time) leaves
its finished rows in ``<out>.part``; ``resume=True`` (``--resume``) keeps
them and runs only the (point, seed) pairs missing, appending to the same
file.  With no ``.part`` but a finished ``out``, ``resume`` starts from a copy
of ``out`` (to add seeds or points to a finished sweep).  It refuses a
``.part`` written by another commit or scenario, or holding a row of another
point or seed (two codes' results never mix in one CSV), and without
``resume`` an existing ``.part`` is an error, never overwritten.

    python -m deliverykit.sweep swift.sim:sweep_task --points points.json --seeds 0 1 2 \
        --out results/crowd.csv [--workers 2 | --scheduler tcp://host:8786]

``points.json``: a list of objects, each the keyword arguments of one point.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import logging
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deliverykit import cliutil
from deliverykit.provenance import git_commit, run_metadata

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["Failure", "SweepFailed", "SweepResult", "add_run_arguments", "ci95",
           "number_or_text", "run_sweep", "t95"]

#: the provenance columns every row starts with (then the point's, then the metrics)
_LEAD_COLS = ("commit", "scenario", "seed")

Point = dict[str, Any]
TaskFn = Callable[[Point, int], dict[str, Any]]

#: two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """Two-sided 95 % quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("a confidence interval needs at least two samples")
    if df <= len(_T95):
        return _T95[df - 1]
    return 2.021 if df <= 40 else 2.000 if df <= 60 else 1.980 if df <= 120 else 1.960


def ci95(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval); half-width NaN for one value."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


class SweepFailed(Exception):
    """Every task of a sweep failed: there is nothing to write."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One task that raised."""

    point: Point
    seed: int
    #: ``ExceptionType: message`` on one line
    error: str


@dataclass(slots=True)
class SweepResult:
    """What a sweep produced."""

    csv: Path
    summary_csv: Path
    meta: Path
    rows: int = 0
    #: rows taken over from a stopped sweep's ``.part`` (``resume=True``); in ``rows`` too
    resumed: int = 0
    failures: list[Failure] = field(default_factory=list)
    #: one dict per point: its parameters, ``n`` and ``<metric>_mean`` / ``<metric>_ci95``
    summary: list[dict[str, Any]] = field(default_factory=list)


def _call(fn: TaskFn, point: Point, seed: int) -> dict[str, Any]:
    out = fn(dict(point), seed)
    if not isinstance(out, dict):
        raise TypeError(f"a sweep task must return a dict of metrics, not {type(out).__name__}")
    return out


def _key(point: Point) -> str:
    return json.dumps(point, sort_keys=True, default=str)


def number_or_text(text: str) -> int | float | str:
    """``text`` as an int, else a float, else itself (a swept value on the command
    line, a number read back from a sweep's CSV)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _cell(text: str) -> Any:
    """A metric read back from the CSV as the task returned it: csv writes
    ``str(value)``, ``None`` as an empty cell."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    return number_or_text(text)


@dataclass(slots=True)
class _Resumed:
    """What a stopped sweep's ``.part`` holds for this sweep."""

    metric_cols: list[str] | None = None
    #: (point key, seed) -> metrics
    done: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)


def _read_part(part: Path, points: Sequence[Point], seeds: Sequence[int], param_cols: list[str],
               commit: str | None, scenario: str) -> _Resumed:
    """The rows of ``part`` that this sweep can keep; ValueError, saying what
    differs, for a file another code or another sweep wrote."""
    res = _Resumed()
    with open(part, newline="") as fh:
        reader = csv.DictReader(fh)
        head = list(reader.fieldnames or [])
        if not head:
            return res  # stopped before its first row: nothing to keep
        lead = [*_LEAD_COLS, *param_cols]
        if head[:len(lead)] != lead:
            raise ValueError(f"{part}: its columns {head[:len(lead)]} are not this sweep's "
                             f"{lead}; move it away to start afresh")
        res.metric_cols = head[len(lead):]
        by_cells = {tuple(str(p.get(c, "")) for c in param_cols): p for p in points}
        want_seeds = {str(s): s for s in seeds}
        for n, row in enumerate(reader, start=2):
            if None in row.values() or None in row:
                raise ValueError(f"{part} line {n}: not a whole row (cut short?); remove it "
                                 f"and resume again")
            if row["commit"] != (commit or "") or row["scenario"] != scenario:
                raise ValueError(
                    f"{part} line {n}: written by commit {row['commit'] or '?'} scenario "
                    f"{row['scenario']!r}, this sweep is commit {commit or '?'} scenario "
                    f"{scenario!r}: resuming would mix two codes' results in one CSV; resume "
                    f"from a checkout of that commit, or move the .part away")
            p = by_cells.get(tuple(row[c] for c in param_cols))
            seed = want_seeds.get(row["seed"])
            if p is None or seed is None:
                raise ValueError(f"{part} line {n}: point "
                                 f"{ {c: row[c] for c in param_cols} } seed {row['seed']} is "
                                 f"not in this sweep; resume with the same points and seeds")
            res.done.setdefault((_key(p), seed),
                                {m: _cell(row[m]) for m in res.metric_cols})
    return res


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Progress:
    """Tasks finished, on stderr: a rich bar on a terminal (or when asked); elsewhere
    (a log file, a batch job's output) one plain line per finished task, so that a
    long sweep run under nohup or a scheduler still says how far it is."""

    def __init__(self, total: int, show: bool | None) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        if show is None:
            show = sys.stderr.isatty()
        if show:
            from rich.console import Console
            from rich.progress import Progress
            self.bar = Progress(console=Console(stderr=True), transient=False)
            self.bar.start()
            self.task = self.bar.add_task("sweep", total=total)

    def advance(self, what: str = "") -> None:
        self.done += 1
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)
            return
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        print(f"sweep: {self.done}/{self.total} tasks finished{f' ({what})' if what else ''}, "
              f"{elapsed / 60:.1f} min so far, ~{left / 60:.0f} min left at this pace",
              file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _client(scheduler: str | None, workers: int | None) -> tuple[Any, Any]:
    from distributed import Client, LocalCluster
    if scheduler:
        return Client(scheduler), None
    n = workers or os.cpu_count() or 1
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # a free port: never clash with a dashboard already on 8787
        silence_logs=logging.CRITICAL,
    )  # failures: our one line each
    return Client(cluster), cluster


def run_sweep(fn: TaskFn, points: Sequence[Point], seeds: Sequence[int], out: str | Path,
              scenario: str = "", scheduler: str | None = None, workers: int | None = None,
              progress: bool | None = None, resume: bool = False) -> SweepResult:
    """Run ``fn(point, seed)`` for every point and seed (see the module docstring);
    with ``resume``, only those a stopped sweep's ``<out>.part`` does not hold."""
    from distributed import as_completed

    if not points or not seeds:
        raise ValueError("a sweep needs at least one point and one seed")
    out = Path(out)
    stem = out.with_suffix("")
    result = SweepResult(out, Path(f"{stem}.summary.csv"), Path(f"{stem}.meta.json"))
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    commit = git_commit(module.__file__) if module is not None and module.__file__ else None
    param_cols = sorted({k for p in points for k in p})
    part = Path(f"{out}.part")
    out.parent.mkdir(parents=True, exist_ok=True)
    samples: dict[str, list[dict[str, Any]]] = {}
    metric_cols: list[str] | None = None
    prior = _Resumed()
    if resume and not part.exists() and out.exists():
        # more seeds or points for a finished sweep: its CSV is the starting point,
        # copied (the finished file stays as it is until the new one is complete)
        shutil.copyfile(out, part)
    if part.exists():
        if not resume:
            raise ValueError(f"{part} exists (a stopped sweep's rows): resume it (--resume) "
                             f"or move it away; it is never overwritten")
        prior = _read_part(part, points, seeds, param_cols, commit, scenario)
        if prior.done and (commit or "").endswith("+dirty"):
            print(f"sweep: resuming {part.name} in a tree with uncommitted changes: its rows "
                  f"and the new ones carry the same commit, but whether the code is the same "
                  f"cannot be checked", file=sys.stderr)
        metric_cols = prior.metric_cols
        for (k, _seed), metrics in prior.done.items():
            samples.setdefault(k, []).append(metrics)
        result.rows = result.resumed = len(prior.done)
    started = time.monotonic()
    todo = [(p, s) for s in seeds for p in points if (_key(p), s) not in prior.done]
    client, cluster = _client(scheduler, workers)
    bar = _Progress(len(todo), progress)
    try:
        futures = {}
        # seed-major: a sweep cut short (stopped, or a cluster's wall time) has
        # every point at the first seeds rather than the first points at every seed
        for p, s in todo:
            f = client.submit(_call, fn, p, s, pure=False)
            futures[f] = (p, s)
        with open(part, "a" if prior.metric_cols is not None else "w", newline="") as fh:
            writer: csv.DictWriter[str] | None = None
            if metric_cols is not None:
                writer = csv.DictWriter(fh, [*_LEAD_COLS, *param_cols, *metric_cols])
            for f in as_completed(list(futures)):
                p, s = futures[f]
                try:
                    metrics = f.result()
                    if metric_cols is None:
                        metric_cols = sorted(metrics)
                        writer = csv.DictWriter(fh, [*_LEAD_COLS, *param_cols, *metric_cols])
                        writer.writeheader()
                    elif sorted(metrics) != metric_cols:
                        raise ValueError(f"metrics {sorted(metrics)} differ from the first "
                                         f"task's {metric_cols}")
                except Exception as e:  # noqa: BLE001 -- a failed task is reported; the others go on
                    fail = Failure(p, s, _one_line(e))
                    result.failures.append(fail)
                    print(f"sweep: task {_key(p)} seed {s} failed: {fail.error}", file=sys.stderr)
                else:
                    row = {"commit": commit, "scenario": scenario, "seed": s, **p, **metrics}
                    assert writer is not None  # made with the first task's metrics
                    writer.writerow(row)
                    fh.flush()
                    result.rows += 1
                    samples.setdefault(_key(p), []).append(metrics)
                bar.advance(" ".join(f"{k}={v}" for k, v in sorted(p.items())) + f" seed={s}")
                f.release()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (cliutil): keep what finished, say where
        bar.close()
        print(f"sweep: stopped; {result.rows} finished row(s) kept in {part}", file=sys.stderr)
        raise
    finally:
        bar.close()
        client.close()
        if cluster is not None:
            cluster.close()
    if metric_cols is None:
        part.unlink()
        if not result.failures:
            raise SweepFailed("the sweep's .part held no finished row and no task ran")
        raise SweepFailed(f"every task of the sweep failed; first: {result.failures[0].error}")
    os.replace(part, out)
    _summarise(result, points, param_cols, metric_cols, samples)
    meta = run_metadata(getattr(fn, "__module__", "deliverykit"), scenario=scenario,
                        points=list(points), seeds=list(seeds), function=_name(fn),
                        failures=[vars_of(f) for f in result.failures],
                        resumed_rows=result.resumed)
    tmp = Path(f"{result.meta}.tmp")
    tmp.write_text(json.dumps(meta, indent=2, default=str))
    os.replace(tmp, result.meta)
    kept = f" ({result.resumed} kept from {part.name})" if result.resumed else ""
    print(f"sweep: {result.rows} of {len(points) * len(seeds)} tasks done{kept}, "
          f"{len(result.failures)} failed, {time.monotonic() - started:.1f} s -> {out}",
          file=sys.stderr)
    return result


def vars_of(f: Failure) -> dict[str, Any]:
    return {"point": f.point, "seed": f.seed, "error": f.error}


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _summarise(result: SweepResult, points: Sequence[Point], param_cols: list[str],
               metric_cols: list[str], samples: dict[str, list[dict[str, Any]]]) -> None:
    numeric = [m for m in metric_cols
               if all(isinstance(r.get(m), (int, float)) and not isinstance(r.get(m), bool)
                      or r.get(m) is None for rs in samples.values() for r in rs)]
    cols = [*param_cols, "n"] + [f"{m}_{k}" for m in numeric for k in ("mean", "ci95")]
    for p in points:
        rs = samples.get(_key(p), [])
        row: dict[str, Any] = {**p, "n": len(rs)}
        for m in numeric:
            vals = [float(r[m]) for r in rs if r.get(m) is not None]
            mean, half = ci95(vals) if vals else (math.nan, math.nan)
            row[f"{m}_mean"], row[f"{m}_ci95"] = mean, half
        result.summary.append(row)
    tmp = Path(f"{result.summary_csv}.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        w.writerows(result.summary)
    os.replace(tmp, result.summary_csv)


def _load_fn(spec: str) -> TaskFn:
    mod, _, name = spec.partition(":")
    if not mod or not name:
        raise ValueError(f"task {spec!r} is not module:function")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load task {spec!r}: {e}") from None
    if not callable(fn):
        raise ValueError(f"task {spec!r} is not callable")  # noqa: TRY004 -- a usage error
    return fn


def add_run_arguments(g: argparse._ActionsContainer) -> None:
    """Where and how a sweep runs: ``--workers N`` or ``--scheduler ADDRESS``,
    ``--progress``, ``--resume``, the same in every command that sweeps (their
    values are :func:`run_sweep`'s ``workers``, ``scheduler``, ``progress`` and
    ``resume``).  ``g`` is a parser or one of its argument groups."""
    where = g.add_mutually_exclusive_group()
    where.add_argument("--workers", type=cliutil.positive_int, metavar="N",
                       help="local Dask workers (default: one per core)")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="a running Dask scheduler, e.g. tcp://head:8786")
    g.add_argument("--progress", action="store_true",
                   help="progress bar on stderr even when it is not a terminal")
    g.add_argument("--resume", action="store_true",
                   help="keep a stopped sweep's finished rows (its CSV's .part, same commit) "
                   "and run only the missing point x seed tasks")


@cliutil.cli_main("python -m deliverykit.sweep", expected=(SweepFailed,))
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deliverykit.sweep",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("task", help="module:function taking (point dict, seed) -> metrics dict")
    ap.add_argument("--points", type=cliutil.existing_file, required=True,
                    help="JSON list of points (keyword objects)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=cliutil.output_path, required=True, help="results CSV")
    ap.add_argument("--scenario", default="", help="scenario name written in every row")
    add_run_arguments(ap)
    args = ap.parse_args(argv)
    fn = _load_fn(args.task)
    try:
        points = json.loads(Path(args.points).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{args.points}: not JSON: {e}") from None
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise ValueError(f"{args.points}: must be a JSON list of objects")
    res = run_sweep(fn, points, args.seeds, args.out, scenario=args.scenario,
                    scheduler=args.scheduler, workers=args.workers,
                    progress=True if args.progress else None, resume=args.resume)
    return 1 if res.failures else 0


if __name__ == "__main__":
    sys.exit(main())
