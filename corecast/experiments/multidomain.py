"""CoreCast across many domains in the simulator (issue 18): eqs. 3 and 5 and Fig. 6's
per-AS saving, measured on the real source, ITR, ETR and client cores.

    corecast experiment multidomain --backend sim [--ases 1000] [--clients 100000]
        [--seconds 60] [--seed 0] [--itr separate|source] [--out DIR] [--cost-curve]

Population: ``--ases`` ASes holding ``--clients`` clients from the rank-size law of
:func:`corecast.workload.rank_size` (half the ASes with one client, Fig. 4(a); the
exponent fitted to the total).  One channel at 384 kb/s in 1,200-byte chunks for
``--seconds``.  Measured on the simulator's links: transit bytes (into each AS's
ETR) and local bytes (to each client), IPv4/UDP headers included, against eq. 3 and
eq. 5 with our sizes; per AS, unicast over CoreCast transit bytes (Fig. 6's per-AS
comparison, with unicast -- one native packet per client, what the ETR delivers
locally -- in place of the paper's hypothetical P2P network).  ``--itr source`` runs
Algorithm 1 inside the source (section 3.4) instead of on its own node: the same bytes
enter and stay inside every AS, for two thirds of the simulated datagrams
(docs/corecast-multidomain.md).

Writes ``multidomain.csv`` (one row per quantity: ours, the model, the paper's) and
``multidomain-as.csv`` (one row per AS) under ``--out``, each under its final name
only once complete.  ``--cost-curve`` runs 100, 1,000, 10,000 and 100,000 clients
for ``--seconds`` each and writes ``multidomain-cost.csv`` (CPU seconds per run and
per client-chunk, the unit the simulation's cost grows with, and the load beside).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from corecast.sim import ItrPlacement, SimResult, gc_paused, run, scenario
from corecast.workload import PAPER_TOP3_SHARE, rank_size
from deliverykit.cliutil import cli_main

#: Fig. 6 and section 5.2-5.3, in words (the paper's comparison is with P2P, ours with unicast)
PAPER = {
    "single_client_as_fraction": "just over 0.5 (Fig. 4a)",
    "as_saving_below_1_fraction": "~0.5: one-client ASes, CoreCast slightly worse (Fig. 6, vs P2P)",
    "as_saving_over_10x_fraction": "0.10 (Fig. 6, vs P2P)",
    "as_saving_max": "300 (Fig. 6, vs P2P); 500 in words (sec. 5.2)",
    "top3_client_share": f"{PAPER_TOP3_SHARE:.3f} (RO trace, Fig. 4b)",
}
COST_POINTS = (100, 1_000, 10_000, 100_000)


@dataclass(frozen=True, slots=True)
class Shape:
    """One run's population."""

    ases: int
    clients: int

    def sizes(self) -> tuple[list[int], float]:
        return rank_size(self.ases, self.clients)


def cost_shape(clients: int, ases: int = 1000) -> Shape:
    """The cost curve's population for ``clients``: ``ases`` ASes, fewer when the
    clients are too few for half single-client ASes (10 clients per AS then)."""
    return Shape(min(ases, max(1, clients // 10)), clients)


def _write_csv(path: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write to a temporary name in the same directory, then rename: the file appears
    under its final name only when complete."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".multidomain-", suffix=".csv", dir=d)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return -1.0


def run_shape(shape: Shape, seconds: float, seed: int = 0, progress: bool = False,
              itr: ItrPlacement = ItrPlacement.SEPARATE
              ) -> tuple[SimResult, float, dict[str, float]]:
    """One simulated run; returns (result, Zipf exponent, {cpu_s, wall_s, maxrss_mb,
    cpu_us_per_client_chunk, load_start, load_end}): the CPU of the whole run (setup
    included) and the 1-minute load average when it started and ended."""
    sizes, s = shape.sizes()
    load0 = _load()
    t0, c0 = time.monotonic(), time.process_time()
    with gc_paused():  # the scenario of 100,000 nodes too (run pauses it for the run)
        res = run(scenario(seconds=seconds, seed=seed, sizes=sizes, itr=itr), progress=progress)
    cpu = time.process_time() - c0
    cost = {"cpu_s": cpu, "wall_s": time.monotonic() - t0,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "cpu_us_per_client_chunk": 1e6 * cpu / max(1, res.chunks * sum(sizes)),
            "load_start": load0, "load_end": _load()}
    return res, s, cost


def savings(res: SimResult) -> dict[str, float]:
    """Fig. 6's per-AS comparison, summarised: unicast over CoreCast transit per AS."""
    sv = [a.saving for a in res.per_as]
    n = len(sv)
    total = sum(a.clients for a in res.per_as)
    top3 = sum(sorted((a.clients for a in res.per_as), reverse=True)[:3])
    return {
        "single_client_as_fraction": sum(1 for a in res.per_as if a.clients == 1) / n,
        "as_saving_below_1_fraction": sum(1 for x in sv if x < 1) / n,
        "as_saving_over_10x_fraction": sum(1 for x in sv if x > 10) / n,
        "as_saving_median": statistics.median(sv),
        "as_saving_max": max(sv),
        "top3_client_share": top3 / total,
    }


def summary_rows(res: SimResult, s: float, cost: dict[str, float],
                 seconds: float, itr: ItrPlacement = ItrPlacement.SEPARATE,
                 commit: str | None = None) -> list[tuple[str, Any, Any, Any]]:
    """(quantity, ours, model, paper) rows of ``multidomain.csv``; ``commit``: the code
    the run imported (read it before the run: a long run outlives HEAD)."""
    sm = res.summary()
    rows: list[tuple[str, Any, Any, Any]] = [
        ("ases", sm["ases"], "", "1,000 (issue 18)"),
        ("clients", sm["total_clients"], "", "100,000 (issue 18)"),
        ("zipf_exponent", round(s, 4), "", "fitted: total and Fig. 4a"),
        ("stream_seconds", seconds, "", 60),
        ("itr", itr.value, "", "Fig. 2: separate; section 3.4: source-as-ITR"),
        ("chunks", sm["chunks"], round(seconds * 384_000 / (8 * res.chunk_size)), ""),
        ("transit_bytes", sm["transit_bytes"], sm["model_transit_bytes"], "eq. 3 x chunks"),
        ("local_bytes", sm["local_bytes"], sm["model_local_bytes"], "eq. 5 x chunks"),
        ("received_chunks", sm["received"], sm["chunks"] * sm["total_clients"], ""),
        ("lost", sm["lost"], 0, ""),
    ]
    for k, v in savings(res).items():
        rows.append((k, round(v, 4), "", PAPER.get(k, "")))
    rows += [("datagrams", sm["datagrams"], "", ""),
             ("cpu_s", round(cost["cpu_s"], 2), "", ""),
             ("wall_s", round(cost["wall_s"], 2), "", ""),
             ("cpu_us_per_client_chunk", round(cost["cpu_us_per_client_chunk"], 1), "", ""),
             ("load_1min_start", round(cost["load_start"], 1), "", ""),
             ("load_1min_end", round(cost["load_end"], 1), "", ""),
             ("maxrss_mb", round(cost["maxrss_mb"], 1), "", ""),
             ("commit", _commit() if commit is None else commit, "", "")]
    return rows


@cli_main("corecast experiment multidomain")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="corecast experiment multidomain",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--backend", choices=["sim"], default="sim",
                    help="sim: deliverykit.sim with the real cores (the only backend)")
    ap.add_argument("--ases", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=60.0, help="stream length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--itr", choices=[p.value for p in ItrPlacement],
                    default=ItrPlacement.SEPARATE.value,
                    help="where Algorithm 1 runs: its own node fed over a link (separate, "
                         "Fig. 2) or inside the source (source, section 3.4: the same bytes "
                         "into and inside every AS, a third fewer datagrams)")
    ap.add_argument("--out", default=".", help="directory for the CSV files")
    ap.add_argument("--cost-curve", action="store_true",
                    help="CPU seconds at 100, 1,000, 10,000 and 100,000 clients instead")
    ap.add_argument("--max-clients", type=int, default=max(COST_POINTS),
                    help="with --cost-curve: skip points above this")
    ap.add_argument("--progress", action="store_true",
                    help="progress line on stderr even when it is not a terminal")
    a = ap.parse_args(argv)
    if a.ases < 1 or a.clients < 1 or a.seconds <= 0:
        ap.error("--ases, --clients and --seconds must be positive")
    if not os.path.isdir(a.out):
        ap.error(f"--out {a.out}: not a directory")
    progress = a.progress or sys.stderr.isatty()
    itr = ItrPlacement(a.itr)
    if a.cost_curve:
        cost_rows: list[tuple[Any, ...]] = []
        for n in COST_POINTS:
            if n > a.max_clients:
                continue
            shape = cost_shape(n, a.ases)
            res, s, cost = run_shape(shape, a.seconds, a.seed, progress, itr)
            sm = res.summary()
            ok = (sm["transit_bytes"] == sm["model_transit_bytes"]
                  and sm["local_bytes"] == sm["model_local_bytes"])
            cost_rows.append((shape.ases, n, a.seconds, sm["chunks"], sm["datagrams"],
                         round(cost["cpu_s"], 2), round(cost["wall_s"], 2),
                         round(1e6 * cost["cpu_s"] / max(1, sm["datagrams"]), 2),
                         round(cost["cpu_us_per_client_chunk"], 1), itr.value,
                         round(cost["load_start"], 1), round(cost["load_end"], 1), ok))
            print(f"{shape.ases:>5} ASes {n:>7} clients: {sm['datagrams']:>10} datagrams, "
                  f"{cost['cpu_s']:8.1f} CPU s, eqs. 3/5 {'equal' if ok else 'DIFFER'}",
                  file=sys.stderr)
        _write_csv(os.path.join(a.out, "multidomain-cost.csv"),
                   ("ases", "clients", "seconds", "chunks", "datagrams", "cpu_s", "wall_s",
                    "cpu_us_per_datagram", "cpu_us_per_client_chunk", "itr", "load_start",
                    "load_end", "eqs_3_5_equal"), cost_rows)
        for r in cost_rows:
            print(",".join(map(str, r)))
        return 0 if all(r[-1] for r in cost_rows) else 1
    commit = _commit()
    try:
        res, s, cost = run_shape(Shape(a.ases, a.clients), a.seconds, a.seed, progress, itr)
    except ValueError as e:
        ap.error(str(e))
    rows = summary_rows(res, s, cost, a.seconds, itr, commit)
    _write_csv(os.path.join(a.out, "multidomain-as.csv"),
               ("as", "clients", "transit_bytes", "local_bytes", "unicast_transit_bytes",
                "saving"),
               ((x.name, x.clients, x.transit_bytes, x.local_bytes, x.unicast_transit_bytes,
                 round(x.saving, 4)) for x in res.per_as))
    _write_csv(os.path.join(a.out, "multidomain.csv"), ("quantity", "ours", "model", "paper"),
               rows)
    for q, ours, model, paper in rows:
        print(f"{q:>28}  {ours!s:>16}  {model!s:>16}  {paper}")
    sm = res.summary()
    ok = (sm["transit_bytes"] == sm["model_transit_bytes"]
          and sm["local_bytes"] == sm["model_local_bytes"])
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
