"""A real Squid writes the access.log; that log is replayed through our proxy.

The paper replayed Wits Squid logs (sec. 3.3). We have none, and our synthetic
logs are written by our own formatter, so a parser that only reads our own
output would prove little. This experiment closes the loop with the real
producer:

1. a workload is generated (:mod:`vmc.workload.synth`, one of the paper's scenarios);
2. its requests are issued, at their (time-compressed) times, through a real
   ``squid`` forward proxy (``logformat squid``, caching off so every request
   is a ``TCP_MISS`` that reaches the origin) to our deterministic origin;
   The origin's access link is emulated at the load of the scenario (as in the replay).
3. Squid's own native ``access.log`` is read back strictly (every line must
   parse) and cleaned as the paper did;
4. that log is replayed Normal vs proxy-only vs VMC (:func:`vmc.workload.replay.compare`), or
   with ``--backend sim`` Normal vs VMC in simulated time (:func:`vmc.sim.compare_log`: the same
   sharing core, counting mode, the paper's 5,000-file batches), which carries a log of the
   paper's size (25,000-420,000 requests) in minutes of CPU. ``--log FILE`` replays an existing
   Squid access.log (a real one) instead of producing one. ``--figures --out DIR``: the paper's
   (a)/(b) curves of that replay, one row per request of the log (every request, not the 2,000 the
   proxy's status log keeps in detail), as ``vmc experiment tables --backend sim --figures``.

Squid logs the bytes it sent to the client *including the response head*
(about 300-400 bytes here), so the replayed objects are that much larger than
the generated ones; that is a property of the format, kept as logged.

Run: ``python -m vmc.experiments.squidlog --quick [--scenario high-vhigh] [--log-out FILE]``;
``vmc experiment squidlog --backend sim [-n 25000 | --log FILE] [--figures --out DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from enum import Enum
from pathlib import Path
from typing import Any

from deliverykit import cliutil
from deliverykit.outputs import write_when_done
from deliverykit.provenance import run_metadata
from vmc.aio.origin import Origin
from vmc.caches import Squid
from vmc.sim import compare_log
from vmc.workload.replay import compare, replay
from vmc.workload.squid import LogEntry, LogError, clean, read_log
from vmc.workload.synth import SCENARIOS, generate


async def produce(entries: list[LogEntry], speed: float, link_rate: float = 0.0,
                  settle: float = 20.0) -> tuple[list[str], dict[str, Any]]:
    """Issue ``entries`` through a real Squid to our origin; Squid's access.log lines and a
    summary.

    ``link_rate`` (bytes/s) emulates the origin's shared access link, as in the replay, so the
    elapsed times Squid logs (and hence the overlaps in its log) reflect a loaded link.
    """
    origin = await Origin(link_rate=link_rate, digest_limit=0).start()
    squid = Squid.forward(origin.authority)
    try:
        await asyncio.to_thread(squid.start)
        probe_lines = len(squid.access_log())  # the readiness probe's own line
        res = await replay(entries, origin.authority, squid.authority, speed=speed, vmc=False)
        # Squid writes a line as each transaction ends: wait (bounded) for all of them.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settle
        while len(squid.access_log()) < probe_lines + len(entries) and loop.time() < deadline:
            await asyncio.sleep(0.1)
        lines = squid.access_log()
    finally:
        await asyncio.to_thread(squid.stop)
        await origin.close()
    return lines, {
        "issued": len(entries),
        "failed_through_squid": sum(1 for r in res if r.latency is None),
        "origin_requests": origin.stats.requests,
        "origin_bytes": origin.stats.body_bytes,
    }


class Backend(Enum):
    """Where step 4 replays the log."""

    LOOPBACK = "loopback"
    """Our proxy and origin on loopback, in real time (Normal, proxy-only, VMC)."""
    SIM = "sim"
    """The same sharing core in simulated time (:mod:`vmc.sim`; Normal, VMC)."""


def replay_sim(entries: list[LogEntry], link_rate: float, seed: int = 1,
               batch: int = 5000, curves: bool = False) -> dict[str, Any]:
    """Step 4 in simulated time: Normal vs VMC over ``entries`` at their logged times, the origin's
    link shared at ``link_rate`` bytes/s, counting mode, ``batch`` requests a run; ``failed``:
    requests without their whole body (a batch cut by its event bound counts all its missing).
    ``curves``: also every request's latency and origin bytes in both arms (the figures)."""
    row = compare_log(entries, link_rate=link_rate, seed=seed, batch=batch, counting=True,
                      latencies=curves)
    row["failed"] = row["requests"] - row["right_bodies"]
    return row


def run(quick: bool = True, scenario: str = "high-vhigh", n: int | None = None, seed: int = 1,
        log_out: str | Path | None = None, backend: Backend = Backend.LOOPBACK,
        log_in: Path | None = None, batch: int = 5000,
        figures: Path | None = None) -> dict[str, Any]:
    """Generate, produce a real Squid log (or read ``log_in``), read it back, replay it through our
    proxy (``backend``); ``figures`` (``Backend.SIM``): the directory for the (a)/(b) curves (CSV
    and PNG, :func:`vmc.experiments.simtables.figures`)."""
    sc = SCENARIOS[scenario]
    made: dict[str, Any] = {}
    generated: list[LogEntry] | None = None
    if log_in is None:
        n = n or (40 if quick else 300)
        target = 3.0 if quick else 30.0  # seconds the generated workload is compressed into
        generated = generate(sc, n, seed=seed)
        span = max(generated[-1].start - generated[0].start, 1e-3)
        speed = span / target
        link = sum(e.bytes for e in generated) / target / sc.utilisation
        lines, made = asyncio.run(produce(generated, speed, link))
        if log_out:
            write_when_done(log_out, "\n".join(lines) + "\n")
    else:
        lines = log_in.read_text(errors="replace").splitlines()
    # every line Squid wrote must parse (a log read from a file: malformed lines are an error too)
    parsed = list(read_log(lines, strict=True))
    entries = clean(parsed)
    span2 = max(entries[-1].start - entries[0].start, 1e-3) if entries else 1.0
    offered = sum(e.bytes for e in entries) / span2
    row: dict[str, Any] = {}
    drawn: list[Path] = []
    if entries and backend is Backend.SIM:
        row = replay_sim(entries, offered / sc.utilisation, seed, batch, curves=figures is not None)
        if figures is not None:
            from vmc.experiments.simtables import figures as draw

            drawn = draw([dict(row, scenario=scenario)], figures)
    elif entries:
        row = asyncio.run(compare(entries, speed=1.0, link_rate=offered / sc.utilisation))
    out = {
        "scenario": scenario,
        "backend": backend.value,
        "log": str(log_in) if log_in else "produced by squid",
        "generated": len(generated) if generated is not None else None,
        **made,
        "squid_log_lines": len(lines),
        "parsed": len(parsed),
        "cleaned": len(entries),
        "result_codes": dict(Counter(f"{e.code}/{e.status}" for e in parsed)),
        "replay": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                   if not isinstance(v, list)},  # the per-request curves went to ``figures``
    }
    if figures is not None:
        out["figures"] = [str(p) for p in drawn]
    if generated is not None:
        asked = Counter(e.object_path() for e in generated)
        logged = Counter("/" + e.url.split("/", 3)[-1] for e in entries)
        out["urls_as_issued"] = logged == asked
        out["head_bytes_per_entry"] = (
            (sum(e.bytes for e in entries) - sum(g.bytes for g in generated)) / len(entries)
            if len(entries) == len(generated) else None)
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vmc experiment squidlog", description=__doc__.split("\n\n")[0],
        epilog="Prints the result as one JSON document on stdout (needs squid, unless --log).")
    ap.add_argument("--quick", action="store_true",
                    help="40 requests in ~3 s (default 300 in ~30 s)")
    ap.add_argument("--scenario", default="high-vhigh", choices=sorted(SCENARIOS),
                    help="load-overlap scenario of the paper (default high-vhigh)")
    ap.add_argument("-n", type=cliutil.nonnegative_int, default=0,
                    help="number of requests (0: by --quick)")
    ap.add_argument("--seed", type=int, default=1,
                    help="seed of the synthetic workload (default 1)")
    ap.add_argument("--log-out", type=cliutil.output_path, metavar="FILE",
                    help="also write Squid's access.log here (then: vmc replay FILE)")
    ap.add_argument("--backend", choices=[b.value for b in Backend], default="loopback",
                    help="replay the log on loopback (default: our proxy and origin, real time) or "
                    "in simulated time (sim: the paper's sizes, 5,000-file batches)")
    ap.add_argument("--log", type=Path, metavar="FILE", default=None,
                    help="replay this Squid access.log instead of producing one (no squid needed)")
    ap.add_argument("--batch", type=cliutil.nonnegative_int, default=5000,
                    help="--backend sim: requests per run (the paper's 5,000; 0: one run)")
    ap.add_argument("--figures", action="store_true",
                    help="--backend sim, with --out: the (a)/(b) curves of the replay, every "
                    "request of the log (vmc_sim_<scenario>.csv and .png)")
    ap.add_argument("--out", type=Path, metavar="DIR", default=None,
                    help="also write the JSON document (squidlog.json), metadata.json and, with "
                    "--figures, the curves into this directory")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.log is not None and a.log_out is not None:
        ap.error("--log replays an existing log: --log-out has nothing to write")
    if a.log is not None and not a.log.is_file():
        ap.error(f"--log {a.log}: no such file")
    if a.figures and a.out is None:
        ap.error("--figures needs --out DIR (where the curves go)")
    if a.figures and a.backend != Backend.SIM.value:
        ap.error("--figures: with --backend sim (the loopback replay draws no (a) curve)")
    if a.out is not None and a.out.exists() and not a.out.is_dir():
        ap.error(f"--out {a.out}: not a directory")
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
    try:
        res = run(a.quick, a.scenario, a.n or None, a.seed, a.log_out, Backend(a.backend),
                  a.log, a.batch, a.out if a.figures else None)
    except LogError as e:  # a malformed log line (strict parse): one line, no traceback
        ap.error(f"--log {a.log}: {e}" if a.log else str(e))
    doc = json.dumps(res, indent=1)
    print(doc)
    if a.out is not None:
        write_when_done(a.out / "squidlog.json", doc + "\n")
        params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
        meta = run_metadata("vmc", **params)
        write_when_done(a.out / "metadata.json", json.dumps(meta, indent=1) + "\n")
    complete = res["generated"] is None or res["cleaned"] == res["generated"]
    ok = complete and res["cleaned"] > 0 and res["replay"].get("failed", 1) == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
