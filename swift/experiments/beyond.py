"""Beyond the paper (issue 14 item 4): churn, heterogeneous access, availability under churn.

What the Libswift paper's reviewers asked for, one scenario each; every
scenario is data (:class:`deliverykit.sim.Scenario`: stays drawn into the
nodes by :func:`deliverykit.sim.draw_stays`, link classes assigned by
:func:`deliverykit.sim.assign_classes`), run by our real peers in the
simulator, and by the namespace testbed where it can hold it:

- ``churn``: Poisson arrivals (1 peer/s), a 2 Mb/s seeder (slower than the
  demand); every leecher stays a drawn time
  after completing (``--stay``, default exponential with mean 30 s, seeded per
  leecher), against the same arrivals with no stay (the paper's peers left at
  once): completion, and how much of the upload the seeder still does.
  Both backends (the testbed's leechers sleep their stay before leaving).
- ``hetero``: a flash crowd over a stated mix of access links (``MIX``:
  40 % ADSL 1/8 Mb/s, 40 % cable 4/30 Mb/s, 20 % fibre 20/100 Mb/s up/down),
  per class: completion, upload per download.  Both backends (tbf on both
  ends of each veth).
- ``availability``: churn as above, and the seeder leaves at ``--seeder-leaves``
  s; newcomers are introduced to ``--tracker`` present peers (a tracker; with
  0, the paper's PEX through the seeder, a newcomer after the seeder left finds
  nobody though the content is there); every ``--every`` s, how many present
  peers hold each chunk (the availability tree seen from outside): the rarest
  chunk's holders, chunks held by nobody, seeds present; leechers that could
  not complete.
  Simulator only (the testbed cannot read every peer's binmap at one instant).

    python -m swift.experiments.beyond churn [--leechers 24] [--size-kib 256] [--stay exp:30]
    python -m swift.experiments.beyond hetero [--leechers 20] [--backend netns]
    python -m swift.experiments.beyond availability [--seeder-leaves 20] [--every 1]

Output (``--out``, default ``swift-results``): ``beyond-<name>.csv`` (per
leecher; for ``availability`` also ``beyond-availability-samples.csv``, one
row per sample), ``beyond-<name>.json`` (parameters, scenario, summary,
provenance), ``beyond-<name>.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from typing import Any

from deliverykit import cliutil
from deliverykit.sim import Distribution, LinkClass, Scenario, assign_classes, draw_stays
from swift.experiments import swarm
from swift.experiments.flashcrowd import configs
from swift.experiments.swarm import TESTBED_DELAY, Backend
from swift.sim import LEECHER, SEEDER, AvailabilitySample, LeecherResult, uplink

__all__ = ["MIX", "availability_scenario", "churn_scenario", "hetero_scenario", "main"]

#: the heterogeneous mix: (class, share, up bit/s, down bit/s)
MIX = (("adsl", 0.4, 1e6, 8e6), ("cable", 0.4, 4e6, 30e6), ("fibre", 0.2, 20e6, 100e6))
#: start-up bytes (the first 8 KiB in order), as the Figs. 7-11 sweep
STARTUP_BYTES = 8 * 1024
DEFAULT_STAY = "exp:30"
#: churn and availability: the seeder's uplink
CHURN_SEEDER_BPS = 2e6
#: availability: present peers a tracker introduces to each newcomer
TRACKER = 4


def churn_scenario(leechers: int, size: int, stay: Distribution | None, seed: int = 1,
                   seeder_leaves: float | None = None, every: float = 0.0,
                   limit: float = 600.0, tracker: int = 0,
                   seeder_bps: float = CHURN_SEEDER_BPS) -> Scenario:
    """Poisson arrivals at 1/s (the paper's steady state), 4 Mb/s leecher uplinks,
    the seeder at ``seeder_bps`` (default 2 Mb/s: slower than the demand, so what
    finished leechers upload matters; at 20 Mb/s a 1/s arrival of a few hundred
    KiB finds the previous leecher gone);
    each leecher stays a time drawn from ``stay`` after completing (None: leaves at
    once); the seeder leaves at ``seeder_leaves`` (None: stays); availability
    sampled every ``every`` s (0: not); ``tracker``: present peers a tracker
    introduces to each newcomer (0: the seeder only, the paper's PEX set-up)."""
    sc = swarm.crowd_scenario(leechers, size, "poisson", 4e6, STARTUP_BYTES, seed, limit,
                              seeder_bps=seeder_bps)
    if stay is not None:
        sc = draw_stays(sc, stay, LEECHER)
        sc = sc.replace(name=f"churn-{leechers}x{size}-stay-{stay}")
    if seeder_leaves is not None:
        sc = sc.replace(nodes=tuple(dataclasses.replace(n, depart=seeder_leaves)
                                    if n.role == SEEDER else n for n in sc.nodes))
    if every > 0:
        sc = sc.replace(params={**sc.params, "availability_every": every})
    if tracker > 0:
        sc = sc.replace(params={**sc.params, "tracker": tracker})
    return sc


def hetero_scenario(leechers: int, size: int, seed: int = 1,
                    mix: tuple[tuple[str, float, float, float], ...] = MIX,
                    seeder_bps: float = 20e6) -> Scenario:
    """A flash crowd whose leechers' access links follow ``mix`` (class, share, up,
    down bit/s; queues as tbf's, 1 ms each way), interleaved in proportion."""
    sc = swarm.crowd_scenario(leechers, size, "flash", 4e6, STARTUP_BYTES, seed,
                              seeder_bps=seeder_bps)
    classes = tuple(LinkClass(name, share, uplink(up, TESTBED_DELAY), uplink(down, TESTBED_DELAY))
                    for name, share, up, down in mix)
    return assign_classes(sc, classes, LEECHER).replace(name=f"hetero-{leechers}x{size}")


def availability_scenario(leechers: int, size: int, stay: Distribution, seed: int = 1,
                          seeder_leaves: float = 20.0, every: float = 1.0,
                          limit: float | None = None, tracker: int = TRACKER) -> Scenario:
    """Churn (:func:`churn_scenario`) with the seeder leaving at ``seeder_leaves``,
    sampled every ``every`` s, newcomers introduced to ``tracker`` present peers
    (without, they know only the seeder, and after it left nobody); the run ends
    ``limit`` s in (default: the last arrival + 60 s: leechers stranded by a lost
    chunk wait that long)."""
    sc = churn_scenario(leechers, size, stay, seed, seeder_leaves, every, tracker=tracker)
    last = max(n.arrive for n in sc.nodes)
    return sc.replace(duration=limit or last + 60.0,
                      name=f"availability-{leechers}x{size}-seeder-{seeder_leaves:g}s")


# -- what each run reports ----------------------------------------------------------------


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 3) if xs else None


def _leecher_rows(sc: Scenario, ls: tuple[LeecherResult, ...], **extra: Any) -> list[dict]:
    spec = {n.name: n for n in sc.nodes}
    return [{**extra, "leecher": x.name, "group": spec[x.name].group,
             "arrive_s": round(x.arrive, 3), "stay_s": spec[x.name].stay,
             "completion_s": x.completion_s, "startup_s": x.startup_s, "left_s": x.left,
             "verified": x.verified, "sent_chunks": x.sent_chunks,
             "got_chunks": x.stats.get("verified", 0)}
            for x in ls]


def _summary(sc: Scenario, ls: tuple[LeecherResult, ...]) -> dict[str, Any]:
    chunks = math.ceil(int(sc.params["size"]) / 1024)
    comps = [x.completion_s for x in ls if x.completion_s is not None]
    return {"leechers": len(ls), "completed": len(comps),
            "verified": sum(x.verified for x in ls),
            "mean_completion_s": _mean(comps),
            "max_completion_s": round(max(comps), 3) if comps else None,
            "mean_startup_s": _mean([x.startup_s for x in ls if x.startup_s is not None]),
            # chunks uploaded by leechers per chunk the leechers needed: the rest came
            # from the seeder (duplicates aside)
            "leecher_upload_share": round(sum(x.sent_chunks for x in ls) / (chunks * len(ls)), 3)
            if ls else None}


def run_churn(leechers: int, size: int, stay: Distribution, seed: int,
              backend: Backend) -> dict[str, Any]:
    """The churn scenario and its no-stay twin (same arrivals and seeds)."""
    out: dict[str, Any] = {"rows": [], "summary": {}, "scenarios": {}}
    for label, dist in (("no stay", None), (f"stay {stay}", stay)):
        sc = churn_scenario(leechers, size, dist, seed)
        r = swarm.run(sc, backend, *configs(STARTUP_BYTES), prefix="swch")
        out["rows"] += _leecher_rows(sc, r.leechers, case=label)
        stays = [n.stay for n in sc.nodes if n.role == LEECHER and n.stay is not None]
        out["summary"][label] = {**_summary(sc, r.leechers),
                                 "mean_stay_s": _mean(stays) if stays else 0.0,
                                 "wall_s": round(r.wall_s, 1),
                                 "cpu_s": round(r.stats.cpu_s, 1) if r.stats else None}
        out["scenarios"][label] = sc.to_dict()
    return out


def run_hetero(leechers: int, size: int, seed: int, backend: Backend) -> dict[str, Any]:
    sc = hetero_scenario(leechers, size, seed)
    r = swarm.run(sc, backend, *configs(STARTUP_BYTES), prefix="swhe")
    rows = _leecher_rows(sc, r.leechers)
    per_class = {}
    for name, share, up, down in MIX:
        mine = tuple(x for x in r.leechers if r.group(x.name) == name)
        got = sum(x.stats.get("verified", 0) for x in mine)
        per_class[name] = {"share": share, "up_mbps": up / 1e6, "down_mbps": down / 1e6,
                           "leechers": len(mine),
                           "mean_completion_s": _mean([x.completion_s for x in mine
                                                       if x.completion_s is not None]),
                           "upload_per_download": round(sum(x.sent_chunks for x in mine) / got, 3)
                           if got else None}
    return {"rows": rows, "scenarios": {"hetero": sc.to_dict()},
            "summary": {"all": {**_summary(sc, r.leechers), "wall_s": round(r.wall_s, 1),
                                "cpu_s": round(r.stats.cpu_s, 1) if r.stats else None},
                        **per_class}}


def availability_rows(samples: tuple[AvailabilitySample, ...]) -> list[dict[str, Any]]:
    return [{"t": round(s.t, 3), "present": s.present, "seeds": s.seeds, "rarest": s.rarest,
             "mean_holders": round(statistics.fmean(s.holders), 3) if s.holders else 0,
             "lost_chunks": s.lost} for s in samples]


def run_availability(leechers: int, size: int, stay: Distribution, seed: int,
                     seeder_leaves: float, every: float, tracker: int) -> dict[str, Any]:
    from swift import sim
    sc = availability_scenario(leechers, size, stay, seed, seeder_leaves, every,
                               tracker=tracker)
    res = sim.run(sc, seeder_config=configs(STARTUP_BYTES)[0],
                  leecher_config=configs(STARTUP_BYTES)[1])
    samples = res.availability
    after = [s for s in samples if s.t >= seeder_leaves]
    lost_at = next((s.t for s in after if s.lost), None)
    summary = {**_summary(sc, res.leechers), "seeder_leaves_s": seeder_leaves,
               "samples": len(samples),
               "min_rarest_after_seeder": min((s.rarest for s in after), default=None),
               "first_chunk_lost_s": lost_at,
               "max_lost_chunks": max((s.lost for s in samples), default=0),
               "stranded": sum(1 for x in res.leechers if x.completion_s is None),
               "cpu_s": round(res.run.cpu_s, 1), "virtual_s": round(res.run.virtual_s, 1)}
    return {"rows": _leecher_rows(sc, res.leechers), "samples": samples,
            "summary": {"availability": summary}, "scenarios": {"availability": sc.to_dict()}}


# -- output ---------------------------------------------------------------------------------


def _plot(path: str, name: str, res: dict[str, Any], title: str) -> None:
    from swift.experiments.output import pyplot
    plt = pyplot()
    if name == "availability":
        samples: tuple[AvailabilitySample, ...] = res["samples"]
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
        ts = [s.t for s in samples]
        if samples:
            grid = [list(col) for col in zip(*(s.holders for s in samples))]
            im = ax1.imshow(grid, aspect="auto", origin="lower", interpolation="nearest",
                            extent=(ts[0], ts[-1] + (ts[1] - ts[0] if len(ts) > 1 else 1),
                                    0, len(grid)), cmap="viridis")
            fig.colorbar(im, ax=ax1, label="peers holding it")
        ax1.set_ylabel("chunk")
        ax2.plot(ts, [s.rarest for s in samples], label="rarest chunk's holders")
        ax2.plot(ts, [s.seeds for s in samples], label="seeds present")
        ax2.plot(ts, [s.present for s in samples], label="peers present", alpha=0.6)
        ax2.plot(ts, [s.lost for s in samples], label="chunks held by nobody")
        ax2.axvline(res["summary"]["availability"]["seeder_leaves_s"], color="k", ls=":",
                    label="seeder leaves")
        ax2.set_xlabel("virtual time (s)")
        ax2.legend(fontsize=7)
        ax2.grid(alpha=0.3)
    else:
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        key = "case" if name == "churn" else "group"
        for lab in dict.fromkeys(r[key] for r in res["rows"]):
            v = sorted(r["completion_s"] for r in res["rows"]
                       if r[key] == lab and r["completion_s"] is not None)
            if v:
                ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post", label=lab)
        ax.set_xlabel("completion time (s)")
        ax.set_ylabel("fraction of leechers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    tmp = path + ".tmp"
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)


def _write(out: str, name: str, res: dict[str, Any], params: dict[str, Any],
           started: float, load0: tuple[float, ...], title: str) -> list[str]:
    from swift.experiments import output as O
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, f"beyond-{name}")
    files = []
    for path, rows in ((f"{base}.csv", res["rows"]),
                       *(((f"{base}-samples.csv", availability_rows(res["samples"])),)
                         if "samples" in res else ())):
        O.write_csv(path + ".tmp", rows)
        os.replace(path + ".tmp", path)
        files.append(path)
    meta = O.metadata(f"swift.experiments.beyond {name}", params, load0, started)
    meta["summary"] = res["summary"]
    meta["scenarios"] = res["scenarios"]
    O.write_json(f"{base}.json.tmp", meta)
    os.replace(f"{base}.json.tmp", f"{base}.json")
    _plot(f"{base}.png", name, res, title)
    return [*files, f"{base}.json", f"{base}.png"]


@cliutil.cli_main("python -m swift.experiments.beyond")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m swift.experiments.beyond",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=["churn", "hetero", "availability"])
    ap.add_argument("--leechers", type=cliutil.positive_int, metavar="N",
                    help="leechers (default: churn 24, hetero 20, availability 40)")
    ap.add_argument("--size-kib", type=cliutil.positive_int, default=256, metavar="KIB",
                    help="content size (default: %(default)s)")
    ap.add_argument("--stay", default=DEFAULT_STAY, metavar="DIST",
                    help="time a finished leecher stays: fixed:S, exp:MEAN, uniform:LO,HI, "
                         "pareto:MIN,SHAPE (default: %(default)s)")
    ap.add_argument("--seeder-leaves", type=cliutil.positive_float, default=20.0, metavar="S",
                    help="availability: when the seeder leaves (default: %(default)s)")
    ap.add_argument("--every", type=cliutil.positive_float, default=1.0, metavar="S",
                    help="availability: seconds between samples (default: %(default)s)")
    ap.add_argument("--tracker", type=int, default=TRACKER, metavar="K",
                    help="availability: present peers a tracker introduces to each newcomer; "
                         "0: the seeder only, as the paper (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="run seed (arrivals, stays, peers)")
    ap.add_argument("--backend", choices=[b.value for b in Backend], default="sim",
                    help="sim (default) or netns (churn, hetero; root)")
    ap.add_argument("--out", default="swift-results", metavar="DIR",
                    help="directory for the CSV, JSON and PNG files (default: %(default)s)")
    a = ap.parse_args(argv)
    try:
        stay = Distribution.parse(a.stay)
    except ValueError as e:
        ap.error(f"--stay: {e}")
    backend = Backend(a.backend)
    if a.scenario == "availability" and backend is not Backend.SIM:
        ap.error("availability samples every peer's chunks at one instant: --backend sim only")
    started, load0 = time.time(), os.getloadavg()
    size = a.size_kib * 1024
    n = a.leechers or {"churn": 24, "hetero": 20, "availability": 40}[a.scenario]
    params = {"scenario": a.scenario, "leechers": n, "size_bytes": size, "seed": a.seed,
              "backend": backend.value, "startup_bytes": STARTUP_BYTES}
    if a.scenario == "churn":
        res = run_churn(n, size, stay, a.seed, backend)
        params["stay"] = str(stay)
        title = f"churn: {n} leechers, Poisson 1/s, {a.size_kib} KiB, stay {stay}"
    elif a.scenario == "hetero":
        res = run_hetero(n, size, a.seed, backend)
        params["mix"] = [list(m) for m in MIX]
        title = (f"heterogeneous access: {n} leechers (flash), {a.size_kib} KiB, "
                 + ", ".join(f"{c} {s:.0%} {u / 1e6:g}/{d / 1e6:g} Mb/s" for c, s, u, d in MIX))
    else:
        res = run_availability(n, size, stay, a.seed, a.seeder_leaves, a.every, a.tracker)
        params.update(stay=str(stay), seeder_leaves_s=a.seeder_leaves, every_s=a.every,
                      tracker=a.tracker)
        title = (f"availability: {n} leechers, Poisson 1/s, {a.size_kib} KiB, stay {stay}, "
                 f"seeder leaves at {a.seeder_leaves:g} s")
    files = _write(a.out, a.scenario, res, params, started, load0, title)
    print(json.dumps(res["summary"], indent=2))
    print(f"files: {', '.join(files)}", file=sys.stderr)
    return 0 if all(r["verified"] or r["completion_s"] is None for r in res["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
