"""``vmc`` command line: proxy, origin, get, replay, workload, demo, experiment.

Examples::

    vmc origin --listen 127.0.0.1:9000 --rate 5e6
    vmc proxy --listen 127.0.0.1:8080 --upstream 127.0.0.1:9000 --default 127.0.0.1:9000 --window 64MiB
    vmc get http://127.0.0.1:9000/f?size=10000000 --proxy 127.0.0.1:8080 -o f.bin
    curl -x http://127.0.0.1:8080 http://127.0.0.1:9000/f?size=10000000 -o g.bin
    curl http://127.0.0.1:8080/_vmc/status
    vmc workload --scenario high-high -n 500 -o high.log
    vmc workload --table
    vmc replay high.log --speed 2 --link-rate 4e6
    vmc experiment tables --quick --out results --plot
    vmc experiment squidlog --quick --log-out access.log   # a real squid's log, replayed
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from deliverykit import cliutil
from deliverykit.experiments import dispatch
from vmc.core.errors import VMCError

T = TypeVar("T")

EXPERIMENTS = {
    "tables": "vmc.experiments.tables",
    "testbed": "vmc.experiments.testbed",
    "squidlog": "vmc.experiments.squidlog",
}

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6, "mib": 1 << 20,
          "g": 10**9, "gb": 10**9, "gib": 1 << 30}


def size(text: str) -> int:
    """Parse "8MiB", "64k", "1e6", "1000" into bytes."""
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _address(text: str) -> str:
    """``HOST:PORT`` checked while parsing, kept as written for the proxy's allow-list."""
    cliutil.hostport(text)
    return text


def _network(text: str) -> str:
    cliutil.ip_network(text)
    return text


def _proxy(a: argparse.Namespace) -> int:
    from vmc.aio.proxy import ProxyConfig, serve

    host, port = a.listen
    cfg = ProxyConfig(host=host, port=port, upstreams=a.upstream or [], default_upstream=a.default,
                      window=a.window, queue_limit=a.queue, max_connections=a.max_connections,
                      max_header_bytes=a.max_header, sharing=not a.no_share, transparent=a.transparent,
                      max_upstream=a.max_upstream, upstream_queue_wait=a.upstream_queue_wait,
                      resume_attempts=a.resume_attempts, buffer_budget=a.buffer_budget,
                      client_write_timeout=a.client_write_timeout)
    if a.status_allow:
        cfg.status_allow = a.status_allow
    if not cfg.upstreams and not cfg.default_upstream:
        print("vmc proxy: give --upstream and/or --default (it is not an open proxy)", file=sys.stderr)
        return 2
    # serve() waits on a cliutil.Stopper: 130 after Ctrl-C, 143 after SIGTERM, counters either way
    return int(_run(serve(cfg, a.stats_out, a.stats_every), a.loop) or 0)


def _run(coro: Coroutine[Any, Any, T], loop: str = "auto") -> T:
    """asyncio.run, on uvloop when installed (``loop="auto"``) or asked for."""
    if loop in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if loop == "uvloop":
                raise
        else:
            return uvloop.run(coro)
    return asyncio.run(coro)


def _origin(a: argparse.Namespace) -> int:
    from vmc.aio.origin import serve

    host, port = a.listen

    async def run() -> int:
        stopper = cliutil.Stopper()
        with stopper.installed():  # before the address is printed: a signal from then on is ours
            st = await serve(host, port, a.rate, stop=stopper.event)
        print(f"vmc origin {stopper.describe() or 'stopped'}: {st.requests} requests, {st.range_requests} "
              f"range requests, {st.bad_requests} bad requests, {st.body_bytes} body bytes",
              file=sys.stderr, flush=True)
        return stopper.exit_code()

    return _run(run(), a.loop)


def _get(a: argparse.Namespace) -> int:
    return asyncio.run(_get_async(a))


def _rate_text(n: float, seconds: float) -> str:
    rate = n / seconds if seconds > 0 else 0.0
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.1f} {unit}"
    return f"{rate:.0f} B/s"


async def _get_async(a: argparse.Namespace) -> int:
    """``vmc get``: the body goes to -o FILE (FILE.part until verified), to stdout, or (-q) nowhere
    after verification; progress on stderr (a bar on a terminal), a summary line at the end; the
    result JSON on stdout, or on stderr when the body is on stdout. Ctrl-C / SIGTERM keep a
    resumable FILE.part and exit 130 / 143."""
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    from vmc.client import Download, FetchError

    out = a.output if a.output is not None else (os.devnull if a.quiet else "-")
    to_stdout = out == "-"
    where = "stdout" if to_stdout else out
    with Progress(TextColumn("vmc get"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=Console(file=sys.stderr),
                  disable=not sys.stderr.isatty(), transient=True) as bar:
        task_id = bar.add_task("get", total=None)

        def progress(got: int, total: int) -> None:
            bar.update(task_id, completed=got, total=total)

        dl = Download(a.url, proxy=a.proxy, out=out, vmc=not a.no_vmc, timeout=a.timeout,
                      busy_retries=a.busy_retries, on_progress=progress)
        stopper = cliutil.Stopper()
        with stopper.installed():
            job = asyncio.ensure_future(dl.run())
            stop = asyncio.ensure_future(stopper.event.wait())
            try:
                await asyncio.wait({job, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
            if not job.done():
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError, FetchError, OSError):
                    await job
    kept = dl.kept_message()
    if job.cancelled():
        print(f"vmc get: {stopper.describe()}; " + (kept or f"{where} not written"), file=sys.stderr)
        return stopper.exit_code()
    try:
        r = job.result()
    except FetchError as exc:
        print(f"vmc get: {exc}; " + (kept or f"{where} not written"), file=sys.stderr)
        return 1
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        print(f"vmc get: {reason} writing {where}; " + (kept or f"{where} not written"), file=sys.stderr)
        return 1
    info = {"url": r.url, "status": r.status, "length": r.length, "parts": r.parts, "digest_ok": r.digest_ok,
            "ttfb_s": round(r.ttfb, 4), "elapsed_s": round(r.elapsed, 4), "vmc": r.vmc}
    print(json.dumps(info), file=sys.stderr if to_stdout else sys.stdout, flush=True)
    check = {True: "digest verified", False: "digest mismatch", None: "no digest offered"}[r.digest_ok]
    print(f"vmc get: {r.length} bytes in {r.elapsed:.2f} s ({_rate_text(r.length, r.elapsed)}, {check}) "
          f"-> {where}", file=sys.stderr)
    return 0


def _workload(a: argparse.Namespace) -> int:
    from vmc.workload.files import write_atomic
    from vmc.workload.synth import PAPER_TABLE1, SCENARIOS, calculated_saving, generate

    if a.table:
        print("| load | overlap | files/hour | calc. latency saving % | paper files/hour | paper calc. % |")
        print("|---|---|---|---|---|---|")
        for name, sc in SCENARIOS.items():
            c = calculated_saving(generate(sc, a.n, seed=a.seed))
            p = PAPER_TABLE1[name]
            print(f"| {sc.load} | {sc.overlap} | {c.files_per_hour:.2f} | {c.latency_saving:.2f} | {p[0]} | {p[1]} |")
        return 0
    entries = generate(SCENARIOS[a.scenario], a.n, seed=a.seed)
    text = "\n".join(e.format() for e in entries) + "\n"
    write_atomic(a.output or "-", text)  # a file appears only whole; "-", a FIFO or a device: written into
    return 0


def _replay(a: argparse.Namespace) -> int:
    from vmc.workload.replay import compare, replay
    from vmc.workload.squid import clean, read_log

    with open(a.log, encoding="utf-8", errors="surrogateescape") as fh:
        entries = clean(read_log(fh))
    if a.limit:
        entries = entries[: a.limit]
    if not entries:
        print("vmc replay: no usable entries", file=sys.stderr)
        return 1
    if a.origin:
        res = asyncio.run(replay(entries, a.origin, a.proxy, speed=a.speed, vmc=not a.no_vmc))
        lat = [r.latency for r in res if r.latency is not None]
        print(json.dumps({"requests": len(res), "failed": sum(r.latency is None for r in res),
                          "latency_sum_s": sum(lat), "mean_latency_s": sum(lat) / len(lat) if lat else None}))
        return 0
    row = asyncio.run(compare(entries, speed=a.speed, link_rate=a.link_rate, window=a.window))
    print(json.dumps({k: v for k, v in row.items() if not k.endswith("latencies")}, indent=1))
    return 0


def _demo(a: argparse.Namespace) -> int:
    from vmc.demo import run

    for row in run(quick=not a.full):
        print(f"{row['what']:45s} {row['result']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vmc", description="VMC: stream-sharing HTTP proxy (virtual multicasting)",
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("proxy", help="run the sharing proxy")
    p.add_argument("--listen", type=cliutil.hostport, default="127.0.0.1:8080", help="address to serve on")
    p.add_argument("--upstream", action="append", type=_address,
                   help="allowed upstream host:port (repeatable)")
    p.add_argument("--default", type=_address,
                   help="upstream for origin-form requests (reverse-proxy mode)")
    p.add_argument("--window", type=size, default=8 << 20, help="per-session buffer window (default 8MiB)")
    p.add_argument("--queue", type=size, default=1 << 20, help="per-client live queue bound (default 1MiB)")
    p.add_argument("--max-connections", type=cliutil.positive_int, default=512,
                   help="client connections at once")
    p.add_argument("--max-header", type=size, default=16384)
    p.add_argument("--max-upstream", type=cliutil.nonnegative_int, default=0,
                   help="cap on upstream connections open at once (0 = none); past it requests queue")
    p.add_argument("--upstream-queue-wait", type=cliutil.positive_float, default=10.0,
                   help="seconds a request may wait for an upstream slot before 503 + Retry-After")
    p.add_argument("--resume-attempts", type=cliutil.nonnegative_int, default=3,
                   help="Range resumes of a broken shared origin stream before clients get a clean error")
    p.add_argument("--buffer-budget", type=size, default=256 << 20,
                   help="bound on all session buffers together (default 256MiB; 0 = none); past it new "
                        "objects are fetched unshared")
    p.add_argument("--client-write-timeout", type=cliutil.nonnegative_float, default=30.0,
                   help="cut off a client that takes no bytes for this many seconds (0 = never)")
    p.add_argument("--no-share", action="store_true", help="plain proxy (every request goes upstream)")
    p.add_argument("--loop", choices=["auto", "uvloop", "asyncio"], default="auto", help="event loop")
    p.add_argument("--stats-out", type=_output,
                   help="write the status JSON to this file on exit (and every --stats-every s)")
    p.add_argument("--stats-every", type=float, default=0.0)
    p.add_argument("--status-allow", action="append", metavar="CIDR", type=_network,
                   help="networks that may read /_vmc/status (default loopback only; repeatable)")
    p.add_argument("--transparent", action="store_true",
                   help="REDIRECTed connections go to their original destination (SO_ORIGINAL_DST)")
    p.set_defaults(fn=_proxy)

    p = sub.add_parser("origin", help="run the paced deterministic test origin")
    p.add_argument("--listen", type=cliutil.hostport, default="127.0.0.1:9000", help="address to serve on")
    p.add_argument("--rate", type=_rate, default=0.0, help="bytes/s per response (0 = unpaced)")
    p.add_argument("--loop", choices=["auto", "uvloop", "asyncio"], default="auto", help="event loop")
    p.set_defaults(fn=_origin)

    p = sub.add_parser("get", help="VMC-aware GET: accepts 206 from a live stream, fetches the rest")
    p.add_argument("url")
    p.add_argument("--proxy", type=_address, help="host:port of a VMC proxy")
    p.add_argument("-o", "--output", type=_output, help="write the body here (default: stdout)")
    p.add_argument("--no-vmc", action="store_true", help="behave as an unmodified client")
    p.add_argument("-q", "--quiet", action="store_true", help="do not write the body to stdout")
    p.add_argument("--timeout", type=cliutil.positive_float, default=60.0)
    p.add_argument("--busy-retries", type=cliutil.nonnegative_int, default=1,
                   help="retry a 503 after its Retry-After (the proxy's upstream cap is full) up to N times")
    p.set_defaults(fn=_get)

    p = sub.add_parser("replay", help="replay a Squid native access.log (Normal vs VMC unless --origin)")
    p.add_argument("log", type=cliutil.existing_file)
    p.add_argument("--origin", type=_address,
                   help="existing origin host:port serving /o/<hash>?size=N (our origin)")
    p.add_argument("--proxy", type=_address, help="existing proxy host:port (with --origin)")
    p.add_argument("--no-vmc", action="store_true")
    p.add_argument("--speed", type=cliutil.positive_float, default=1.0, help="time compression factor")
    p.add_argument("--link-rate", type=cliutil.positive_float, default=4e6,
                   help="emulated origin link, bytes/s")
    p.add_argument("--window", type=size, default=8 << 20)
    p.add_argument("--limit", type=cliutil.nonnegative_int, default=0,
                   help="replay only the first N entries")
    p.set_defaults(fn=_replay)

    p = sub.add_parser("workload", help="write a synthetic Squid log for a paper scenario, or print Table 1")
    p.add_argument("--scenario", default="high-high", choices=["low-low", "high-high", "high-low", "low-high",
                                                                 "high-vhigh", "low-none"])
    p.add_argument("-n", type=cliutil.positive_int, default=1000, help="requests to generate")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-o", "--output", type=_output, help="write the log here (default: stdout)")
    p.add_argument("--table", action="store_true", help="print Table 1 (calculated savings) for all scenarios")
    p.set_defaults(fn=_workload)

    p = sub.add_parser("demo", help="origin + proxy + staggered clients on loopback")
    p.add_argument("--full", action="store_true")
    p.set_defaults(fn=_demo)

    sub.add_parser("experiment", help=f"run a paper experiment: {' | '.join(EXPERIMENTS)} "
                                      "(each has --quick; vmc experiment for the list)")
    return ap


def _rate(text: str) -> float:
    """Bytes/s; 0 means unpaced."""
    return cliutil.nonnegative_float(text)


def _output(text: str) -> str:
    return str(cliutil.output_path(text))


@cliutil.cli_main("vmc", expected=(VMCError,))
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["experiment"]:
        return dispatch("vmc", EXPERIMENTS, argv[1:])
    a = build_parser().parse_args(argv)
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
