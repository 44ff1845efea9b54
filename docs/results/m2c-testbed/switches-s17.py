"""Session 17 (docs/m2c-results.md, "Session 17: against one long TCP stream at 1 Mb/s"):
``ReceiverCC`` class switches on the testbed and in the simulator, and interleaved
off/on testbed runs.

    # any m2c experiment module with switches on (as switches-s16.py, LOSS_EVENTS added)
    python docs/results/m2c-testbed/switches-s17.py LOSS_EVENTS many --receivers 100 \\
        --size 4000000 --seed S --out DIR
    # interleaved on the testbed (root): per repeat TCP_ft, then M2C_ft off and on (the
    # order of the two alternates per repeat); one JSON line per run appended to OUT
    sudo .venv/bin/python docs/results/m2c-testbed/switches-s17.py ab-fig5 LOSS_EVENTS \\
        --bottleneck 1e6 --repeats 3 --out OUT.jsonl [--trace TRACE.jsonl]
    # the heterogeneous pair (4 MiB), off and on alternating, ``--repeats`` each
    sudo .venv/bin/python docs/results/m2c-testbed/switches-s17.py ab-hetero LOSS_EVENTS \\
        --repeats 3 --out OUT.jsonl
    # mean +- 95 % Student-t half-width per arm
    python docs/results/m2c-testbed/switches-s17.py table OUT.jsonl
    # per receiver: loss events, reductions, queue drains, queueing delay, RTT
    python docs/results/m2c-testbed/switches-s17.py trace TRACE.jsonl

The receivers are forked children of this process (``Testbed.spawn``), so a switch set
here holds in them.  ``--trace`` appends each receiver's loss and epoch logs
(``m2c.experiments.roles.CC_TRACE_ENV``).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from typing import Any

from m2c.core.receiver_cc import ReceiverCC

MODULES = {"many": "m2c.experiments.many", "sim": "m2c.sim", "fig5": "m2c.experiments.fig5",
           "hetero": "m2c.experiments.hetero"}
SWITCHES = ("PAIR_ONE", "PAIR_ONE_GUARD", "HOLE_OWN", "LOSS_EVENTS")


def _set(names: list[str], on: bool) -> None:
    for name in names:
        if name not in SWITCHES:
            sys.exit(f"unknown switch {name!r}: one of {', '.join(SWITCHES)}")
        setattr(ReceiverCC, name, on)


def _commit() -> str:
    from deliverykit.provenance import run_metadata

    return str(run_metadata("m2c")["commit"])


def _append(out: str, row: dict[str, Any]) -> None:
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


def ab_fig5(names: list[str], a: argparse.Namespace) -> None:
    from m2c.experiments import fig5

    size = a.size
    timeout = 10 * size * 8 / a.bottleneck + 60
    commit = _commit()
    for rep in range(a.repeats):
        arms: list[tuple[str, bool | None]] = [("TCP_ft", None)]
        arms += [("M2C_ft", rep % 2 == 1), ("M2C_ft", rep % 2 == 0)]
        if a.no_tcp:
            arms = arms[1:]
        for kind, on in arms:
            _set(names, bool(on))
            t0 = time.time()
            rows = fig5.one_run(kind, a.bottleneck, size, 1, "stream", timeout, "m2c")
            for r in rows:
                if not a.keep_trace:
                    r.pop("trace", None)
                arm = "TCP_ft" if on is None else ("on" if on else "off")
                _append(a.out, {"exp": "fig5", "arm": arm, "switches": names, "run": rep,
                                "commit": commit, "started": t0,
                                "load": os.getloadavg()[0], **r})
            print(f"rep {rep} {kind} {'' if on is None else ('on' if on else 'off')}: "
                  f"{[round(r['time'], 2) for r in rows]} s", file=sys.stderr, flush=True)
    _set(names, False)


def ab_hetero(names: list[str], a: argparse.Namespace) -> None:
    from m2c.experiments import hetero

    commit = _commit()
    for rep in range(a.repeats):
        for on in (rep % 2 == 1, rep % 2 == 0):
            _set(names, on)
            t0 = time.time()
            rows = hetero.run(quick=False, controller="m2c")
            for r in rows:
                if not a.keep_trace:
                    r.pop("trace", None)
                _append(a.out, {"exp": "hetero", "arm": "on" if on else "off",
                                "switches": names, "run": rep, "commit": commit,
                                "started": t0, "load": os.getloadavg()[0], **r})
            print(f"rep {rep} {'on' if on else 'off'}: "
                  f"{[r['time/ideal'] for r in rows]}", file=sys.stderr, flush=True)
    _set(names, False)


def table(path: str) -> None:
    from m2c.experiments.stats import mean_ci

    rows = [json.loads(line) for line in open(path) if line.strip()]

    def cell(vals: list[float]) -> str:
        if not vals:
            return ""
        m, h = mean_ci(vals)
        return f"{m:.2f}" if h is None else f"{m:.2f} +- {h:.2f}"

    for exp in sorted({r["exp"] for r in rows}):
        sel = [r for r in rows if r["exp"] == exp]
        if exp == "fig5":
            arms = [x for x in ("TCP_ft", "off", "on") if any(r["arm"] == x for r in sel)]
            mets = ("time", "gput", "tput", "loss", "dup", "sym", "comp", "loss_events")
            key = sorted({r["bottleneck_mbps"] for r in sel})
            for bn in key:
                print(f"\n{bn:g} Mb/s | " + " | ".join(arms))
                for m in mets:
                    vals = [[float(r[m]) for r in sel if r["arm"] == arm
                             and r["bottleneck_mbps"] == bn and r.get(m) is not None]
                            for arm in arms]
                    print(f"{m} | " + " | ".join(f"{cell(v)} (n={len(v)})" for v in vals))
        else:
            for rx in sorted({r["receiver"] for r in sel}):
                print(f"\n{rx} | off | on")
                for m in ("time/ideal", "time_s", "loss_pct", "dup_pct", "sym_pct"):
                    vals = [[float(r[m]) for r in sel if r["arm"] == arm
                             and r["receiver"] == rx and r.get(m) is not None]
                            for arm in ("off", "on")]
                    print(f"{m} | " + " | ".join(
                        f"{cell(v)} [{min(v):.3f}-{max(v):.3f}] (n={len(v)})" if v else ""
                        for v in vals))


def trace_summary(path: str) -> None:
    """One receiver per line of a ``--trace`` file: loss events, reductions, ignored
    events, queue drains, and the epochs' least queueing delay, target and RTT."""
    def pct(xs: list[float]) -> list[float]:
        xs = sorted(xs)
        return [round(xs[int(len(xs) * q)], 3) for q in (0.1, 0.5, 0.9)] if xs else []

    import gzip

    opened = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    with opened as f:
        lines = f.read().splitlines()
    for line in lines:
        d = json.loads(line)
        ep, lo = d["epochs"], d["losses"]
        span = ep[-1][0] - ep[0][0] if len(ep) > 1 else 1.0
        ev = [x[0] for x in lo if x[4]]
        print(f"LOSS_EVENTS={d['switches']['LOSS_EVENTS']} time {d['time']:.1f} s: "
              f"events {d['loss_events']} ({d['loss_events'] / span:.2f}/s), reductions "
              f"{d['reductions']}, ignored {d['ignored_events']}, drains {d['queue_drains']} "
              f"({d['queue_drains'] / span:.2f}/s); lost {sum(x[2] for x in lo)} "
              f"(base {sum(x[2] for x in lo if x[1] == 0)})")
        print(f"  p10/50/90: epoch least qdelay {pct([e[1] for e in ep if e[1] < 1e9])}, "
              f"target {pct([e[3] for e in ep])}, RTT {pct([e[4] for e in ep])}, "
              f"event gaps {pct([b - a for a, b in zip(ev, ev[1:], strict=False)])}")


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "table":
        table(sys.argv[2])
        return
    if len(sys.argv) >= 3 and sys.argv[1] == "trace":
        trace_summary(sys.argv[2])
        return
    if len(sys.argv) >= 3 and sys.argv[1] in ("ab-fig5", "ab-hetero"):
        ap = argparse.ArgumentParser(prog=f"{sys.argv[0]} {sys.argv[1]}")
        ap.add_argument("switches")
        ap.add_argument("--bottleneck", type=float, default=1e6)
        ap.add_argument("--size", type=int, default=4_000_000)
        ap.add_argument("--repeats", type=int, default=3)
        ap.add_argument("--out", required=True)
        ap.add_argument("--trace", help="append the receivers' loss and epoch logs here")
        ap.add_argument("--keep-trace", action="store_true",
                        help="keep each receiver's per-epoch trace in OUT")
        ap.add_argument("--no-tcp", action="store_true", help="M2C_ft off and on only")
        a = ap.parse_args(sys.argv[2:])
        if a.trace:
            from m2c.experiments.roles import CC_TRACE_ENV

            os.environ[CC_TRACE_ENV] = os.path.abspath(a.trace)
        names = a.switches.split(",")
        _set(names, False)
        (ab_fig5 if sys.argv[1] == "ab-fig5" else ab_hetero)(names, a)
        return
    if len(sys.argv) < 3 or sys.argv[2] not in MODULES:
        sys.exit(f"usage: {sys.argv[0]} SWITCH[,SWITCH]|none {{{'|'.join(MODULES)}}} ARGS...")
    names = [] if sys.argv[1] == "none" else sys.argv[1].split(",")
    _set(names, True)
    print("switches on:", ", ".join(names) or "none", file=sys.stderr)
    mod = MODULES[sys.argv[2]]
    sys.argv = [mod] + sys.argv[3:]
    runpy.run_module(mod, run_name="__main__")


if __name__ == "__main__":
    main()
