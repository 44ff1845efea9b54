"""``deliverykit sim validate``: the same small scenarios on the namespace testbed
and in the simulator, per metric side by side with the relative difference
(issue 14; the full result and the explanation of every difference over 10 %
are in docs/sim.md).

The scenarios come from the protocol packages through the entry-point group
``deliverykit.sim_validations`` (deliverykit never imports a protocol package),
each one :class:`deliverykit.sim.Scenario` both backends read.  A case may carry
its own metric table (``Case.metrics``) and the word for its nodes
(``Case.nodes``); without them it has :data:`METRICS` and "leechers".  swift's
three swarms (:mod:`swift.experiments.validation`):

- ``crowd6``: a 6-leecher flash crowd with the paper's link parameters
  (seeder 20 Mb/s, leecher upload 1.2 Mb/s);
- ``lossy2``: 4 leechers, 2 % loss on every packet every peer sends;
- ``hetero-delay``: 4 leechers in the Fig. 5 groups' delays (10, 25, 50,
  100 ms one way on what they send), no loss.

M2C's cases (:mod:`m2c.experiments.validation`): the heterogeneous pair and
Fig. 5's M2C_ft alone behind one shared bottleneck, with per-receiver time
against the link-ideal, loss, duplicates and the shaped queues' drops.

Each runs ``repeats`` times per backend (seeds 1..repeats); the table shows
the means.  ``--quick`` (what CI runs): 256 KiB of content and one repeat.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deliverykit import cliutil
from deliverykit.provenance import run_metadata
from deliverykit.sim.scenario import Scenario

__all__ = ["METRICS", "BACKENDS", "Case", "RunResult", "Comparison", "cases", "compare", "main"]

#: metric -> what it is (the table's order): a case's table unless it has its own
METRICS: Mapping[str, str] = {
    "mean_completion_s": "mean completion time, s from arrival",
    "min_completion_s": "first leecher complete, s",
    "max_completion_s": "last leecher complete, s",
    "mean_startup_s": "mean start-up (first 64 KiB in order), s",
    "leecher_upload_share": "share of the leechers' chunks uploaded by leechers",
    "chunks_got_per_chunk": "DATA chunks received (verified + duplicate) per chunk needed",
}


#: the two backends, by the names the packages' runners take
BACKENDS = ("netns", "sim")

#: What the namespace testbed adds to a path, as the validation scenarios model it
#: (measured on a quiet host; ``python -m deliverykit.testbed latency`` measures both
#: again).  One unshaped access link's one-way delay, s: a UDP ping-pong between two
#: namespaces on one bridge took 0.28 ms median round trip, four link crossings
#: (docs/sim.md, session 17).
TESTBED_ACCESS_DELAY = 0.00007
#: An IGMPv3 join's or leave's latency through the testbed's snooping bridge with fast
#: leave, s: the kernel sends the state-change report two to three timer ticks (4 ms at
#: HZ 250) after the call; joins and leaves both took 9-15 ms, median ~13-14
#: (docs/m2c-results.md, session 19).
TESTBED_IGMP_LATENCY = 0.013
#: entry-point group: each entry is a ``() -> list[Case]`` of a protocol package
GROUP = "deliverykit.sim_validations"


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run of one case on one backend, as :func:`compare` needs it."""

    metrics: dict[str, float | None]
    wall_s: float
    verified: int
    complete: int
    total: int


@dataclass(frozen=True, slots=True)
class Case:
    """One validation scenario: its name, what it tests, and how to run it."""

    name: str
    about: str
    #: (size in bytes, seed) -> the scenario (for inspection and tests)
    build: Callable[[int, int], Scenario]
    #: (size in bytes, seed, backend name) -> the run's metrics and record
    run: Callable[[int, int, str], RunResult]
    #: metric -> what it is, in the table's order (the runs' ``metrics`` keys)
    metrics: Mapping[str, str] = field(default_factory=lambda: METRICS)
    #: what the verified / total counts count ("leechers", "receivers", ...)
    nodes: str = "leechers"


def cases() -> list[Case]:
    """Every package's validation cases, in entry-point order."""
    from importlib.metadata import entry_points

    out: list[Case] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        out.extend(ep.load()())
    return out


@dataclass(frozen=True, slots=True)
class Comparison:
    """One metric of one scenario on both backends (means over the repeats)."""

    scenario: str
    metric: str
    netns: float | None
    sim: float | None

    @property
    def rel_diff(self) -> float | None:
        """(sim - netns) / netns; None when either is missing or netns is 0."""
        if self.netns is None or self.sim is None or self.netns == 0:
            return None
        return (self.sim - self.netns) / abs(self.netns)


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def compare(quick: bool = True, repeats: int | None = None, size: int | None = None,
            only: list[str] | None = None,
            log: Callable[[str], None] = lambda s: None,
            given: Sequence[Case] | None = None) -> tuple[list[Comparison], dict[str, Any]]:
    """Run every case (``given``, else the entry points') on both backends; the
    comparisons and a record of the runs (wall time per backend, nodes verified /
    complete / total, under the case's word for its nodes)."""
    size = size or (256 * 1024 if quick else 1024 * 1024)
    repeats = repeats or (1 if quick else 3)
    out: list[Comparison] = []
    record: dict[str, Any] = {"size": size, "repeats": repeats, "cases": {}}
    chosen = [c for c in (cases() if given is None else given) if not only or c.name in only]
    per: dict[tuple[str, str], list[dict[str, float | None]]] = {}
    # every testbed run first, then the simulator: the testbed's netlink helper
    # forks, better from a process that has not grown by a simulation yet
    for backend in BACKENDS:
        for case in chosen:
            rec = record["cases"].setdefault(case.name, {"about": case.about,
                                                         "nodes": case.nodes})
            wall, verified, complete, total = 0.0, 0, 0, 0
            runs: list[dict[str, Any]] = []
            for seed in range(1, repeats + 1):
                r = case.run(size, seed, backend)
                wall += r.wall_s
                verified += r.verified
                complete += r.complete
                total += r.total
                per.setdefault((case.name, backend), []).append(r.metrics)
                runs.append({"seed": seed, "wall_s": round(r.wall_s, 1), **r.metrics})
                log(f"{case.name}: {backend} seed {seed} done in {r.wall_s:.1f} s")
            rec[backend] = {"wall_s": round(wall, 1), "verified": verified,
                            "complete": complete, case.nodes: total, "runs": runs}
    for case in chosen:
        for m in case.metrics:
            out.append(Comparison(case.name, m,
                                  _mean([x[m] for x in per[(case.name, "netns")]]),
                                  _mean([x[m] for x in per[(case.name, "sim")]])))
    return out, record


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(rows: list[Comparison]) -> str:
    lines = [f"{'scenario':<13} {'metric':<24} {'netns':>9} {'sim':>9} {'diff':>8}"]
    for c in rows:
        d = c.rel_diff
        flag = " *" if d is not None and abs(d) > 0.10 else ""
        lines.append(f"{c.scenario:<13} {c.metric:<24} {_fmt(c.netns):>9} {_fmt(c.sim):>9} "
                     f"{'-' if d is None else f'{d:+.0%}':>8}{flag}")
    return "\n".join(lines)


def _write_csv(path: str, rows: list[Comparison]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "metric", "netns", "sim", "rel_diff"])
        for c in rows:
            w.writerow([c.scenario, c.metric, c.netns, c.sim, c.rel_diff])
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deliverykit sim validate",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="256 KiB of content and one repeat per backend (what CI runs)")
    ap.add_argument("--repeats", type=cliutil.positive_int, metavar="N",
                    help="runs per scenario and backend, seeds 1..N (default 1 quick, else 3)")
    ap.add_argument("--size-kib", type=cliutil.positive_int, metavar="KIB",
                    help="content size (default 256 quick, else 1024)")
    ap.add_argument("--only", metavar="LIST", help="comma-separated scenarios: "
                    + ", ".join(c.name for c in cases()))
    ap.add_argument("--out", type=cliutil.output_path, metavar="CSV",
                    help="also write the comparison as CSV (and <stem>.json with the run record)")
    a = ap.parse_args(argv)
    only = [x for x in a.only.split(",") if x] if a.only else None
    known = {c.name for c in cases()}
    if only and set(only) - known:
        ap.error(f"--only: unknown scenario(s) {sorted(set(only) - known)}; known: {sorted(known)}")
    if os.geteuid() != 0:
        print("deliverykit sim validate: the netns backend needs root (network namespaces); "
              "run it with sudo", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    rows, record = compare(a.quick, a.repeats, a.size_kib * 1024 if a.size_kib else None, only,
                           log=lambda s: print(s, file=sys.stderr))
    print(table(rows))
    bad: dict[str, list[str]] = {}  # the cases' word for their nodes -> case/backend
    for name, rec in record["cases"].items():
        for b in ("netns", "sim"):
            r = rec[b]
            total = r[rec["nodes"]]
            print(f"{name}: {b} {r['verified']}/{total} verified, {r['wall_s']} s wall")
            if r["verified"] != total:
                bad.setdefault(rec["nodes"], []).append(f"{name}/{b}")
    record["wall_s"] = round(time.monotonic() - t0, 1)
    record["metadata"] = run_metadata("deliverykit", quick=a.quick, repeats=a.repeats,
                                      size_kib=a.size_kib, only=sorted(only) if only else None)
    if a.out:
        _write_csv(a.out, rows)
        meta = Path(a.out).with_suffix(".json")
        tmp = f"{meta}.tmp"
        Path(tmp).write_text(json.dumps(record, indent=2))
        os.replace(tmp, meta)
    print(f"validate: {len(rows)} comparisons, * = over 10 % apart, {record['wall_s']} s",
          file=sys.stderr)
    for word, where in bad.items():
        print(f"validate: {word} not verified in {', '.join(where)}", file=sys.stderr)
    if bad:
        return 1
    return 0
