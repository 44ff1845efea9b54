"""The ``vmc`` command line: proxy, origin, get, replay, workload, demo, experiment
(examples in ``vmc --help``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from deliverykit import cliutil
from deliverykit.experiments import dispatch
from vmc.core.errors import VMCError

T = TypeVar("T")

EXPERIMENTS = {
    "tables": "vmc.experiments.tables",
    "testbed": "vmc.experiments.testbed",
    "squidlog": "vmc.experiments.squidlog",
    "simvalidate": "vmc.experiments.simvalidate",
}

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 10**6,
    "mb": 10**6,
    "mib": 1 << 20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 1 << 30,
}


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


def _directory(text: str) -> str:
    """An existing, writable directory, checked while parsing."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    if not os.access(text, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: directory not writable")
    return text


def _network(text: str) -> str:
    cliutil.ip_network(text)
    return text


def proxy_config(a: argparse.Namespace):
    """The ProxyConfig that ``vmc proxy``'s arguments ask for."""
    from vmc.aio.proxy import ProxyConfig

    host, port = a.listen
    cfg = ProxyConfig(
        host=host,
        port=port,
        upstreams=a.upstream or [],
        default_upstream=a.default,
        window=a.window,
        queue_limit=a.queue,
        max_connections=a.max_connections,
        max_header_bytes=a.max_header,
        sharing=not a.no_share,
        transparent=a.transparent,
        steer=a.steer,
        max_upstream=a.max_upstream,
        upstream_queue_wait=a.upstream_queue_wait,
        resume_attempts=a.resume_attempts,
        buffer_budget=a.buffer_budget,
        client_write_timeout=a.client_write_timeout,
        head_timeout=a.head_timeout,
        body_timeout=a.body_timeout,
        upstream_keepalive=not a.no_upstream_keepalive,
        disk_budget=a.disk_budget,
        disk_dir=a.disk_dir,
    )
    if a.status_allow:
        cfg.status_allow = a.status_allow
    return cfg


def _proxy(a: argparse.Namespace) -> int:
    from vmc.aio.proxy import serve

    cfg = proxy_config(a)
    if not cfg.upstreams and not cfg.default_upstream:
        print(
            "vmc proxy: give --upstream and/or --default (it is not an open proxy)", file=sys.stderr
        )
        return 2
    if a.workers > 1:  # N processes on one SO_REUSEPORT address, connections steered by object
        from vmc.aio.workers import serve_workers

        return serve_workers(cfg, a.workers, a.stats_out, a.stats_every,
                             lambda coro: int(_run(coro, a.loop) or 0))
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
        print(
            f"vmc origin {stopper.describe() or 'stopped'}: {st.requests} requests, "
            f"{st.range_requests} "
            f"range requests, {st.bad_requests} bad requests, {st.body_bytes} body bytes",
            file=sys.stderr,
            flush=True,
        )
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
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

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
    outcome = (
        f"; {kept}" if kept else "" if a.quiet and a.output is None else f"; {where} not written"
    )
    if job.cancelled():
        print(f"vmc get: {stopper.describe()}" + outcome, file=sys.stderr)
        return stopper.exit_code()
    try:
        r = job.result()
    except FetchError as exc:
        print(f"vmc get: {exc}" + outcome, file=sys.stderr)
        return 1
    except BrokenPipeError:  # `vmc get URL | head`: the reader left; cli_main ends quietly (141)
        raise
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        print(f"vmc get: {reason} writing {where}" + outcome, file=sys.stderr)
        return 1
    info = {
        "url": r.url,
        "status": r.status,
        "length": r.length,
        "parts": r.parts,
        "digest_ok": r.digest_ok,
        "ttfb_s": round(r.ttfb, 4),
        "elapsed_s": round(r.elapsed, 4),
        "vmc": r.vmc,
    }
    print(json.dumps(info), file=sys.stderr if to_stdout else sys.stdout, flush=True)
    check = {True: "digest verified", False: "digest mismatch", None: "no digest offered"}[
        r.digest_ok
    ]
    print(
        f"vmc get: {r.length} bytes in {r.elapsed:.2f} s ({_rate_text(r.length, r.elapsed)}, "
        f"{check}) "
        f"-> {where}",
        file=sys.stderr,
    )
    return 0


def _workload(a: argparse.Namespace) -> int:
    from deliverykit.outputs import write_when_done
    from vmc.workload.synth import PAPER_TABLE1, SCENARIOS, calculated_saving, generate

    if a.table:
        print(
            "| load | overlap | files/hour | calc. latency saving % | paper files/hour | paper "
            "calc. % |"
        )
        print("|---|---|---|---|---|---|")
        for name, sc in SCENARIOS.items():
            c = calculated_saving(generate(sc, a.n, seed=a.seed))
            p = PAPER_TABLE1[name]
            print(
                f"| {sc.load} | {sc.overlap} | {c.files_per_hour:.2f} | {c.latency_saving:.2f} | "
                f"{p[0]} | {p[1]} |"
            )
        return 0
    entries = generate(SCENARIOS[a.scenario], a.n, seed=a.seed)
    text = "\n".join(e.format() for e in entries) + "\n"
    write_when_done(
        a.output or "-", text
    )  # a file appears only whole; "-", a FIFO or a device: written into
    return 0


def _replay(a: argparse.Namespace) -> int:
    from vmc.experiments.progress import RequestProgress
    from vmc.workload.replay import compare, replay
    from vmc.workload.squid import clean, read_log

    with open(a.log, encoding="utf-8", errors="surrogateescape") as fh:
        entries = clean(read_log(fh))
    if a.limit:
        entries = entries[: a.limit]
    if not entries:
        print("vmc replay: no usable entries", file=sys.stderr)
        return 1
    if a.backend == "sim":
        if a.origin or a.proxy:
            print("vmc replay: --backend sim replays without a network: no --origin/--proxy",
                  file=sys.stderr)
            return 2
        from vmc.sim import compare_log

        row = compare_log(entries, speed=a.speed, link_rate=a.link_rate, window=a.window,
                          seed=a.seed, batch=a.batch, counting=not a.bytes)
        print(json.dumps(row, indent=1))
        print(f"vmc replay (sim): {row['requests']} requests, bandwidth saving "
              f"{row['bandwidth_saving_%']:.1f}%, latency saving "
              f"{row['latency_saving_%']:.1f}% (sum) {row['elapsed_saving_%']:.1f}% (elapsed), "
              f"{row['cpu_s']:.2f} s CPU", file=sys.stderr)
        return 0
    if a.origin:
        with RequestProgress("vmc replay", len(entries)) as progress:
            res = asyncio.run(replay(entries, a.origin, a.proxy, speed=a.speed, vmc=not a.no_vmc,
                                     on_done=progress.done))
        lat = [r.latency for r in res if r.latency is not None]
        print(
            json.dumps(
                {
                    "requests": len(res),
                    "failed": sum(r.latency is None for r in res),
                    "latency_sum_s": sum(lat),
                    "mean_latency_s": sum(lat) / len(lat) if lat else None,
                }
            )
        )
        return 0
    with RequestProgress("vmc replay", 3 * len(entries)) as progress:  # Normal, proxy-only, VMC
        row = asyncio.run(compare(entries, speed=a.speed, link_rate=a.link_rate, window=a.window,
                                  on_done=progress.done))
    print(json.dumps({k: v for k, v in row.items() if not k.endswith("latencies")}, indent=1))
    return 0


def _demo(a: argparse.Namespace) -> int:
    from vmc.demo import run

    for row in run(quick=not a.full):
        print(f"{row['what']:45s} {row['result']}")
    return 0


EXAMPLES = """\
examples:
  vmc origin --listen 127.0.0.1:9000 --rate 5e6
  vmc proxy --listen 127.0.0.1:8080 --upstream 127.0.0.1:9000 --default 127.0.0.1:9000 --window 64MiB
  vmc get 'http://127.0.0.1:9000/f?size=10000000' --proxy 127.0.0.1:8080 -o f.bin
  curl -x http://127.0.0.1:8080 'http://127.0.0.1:9000/f?size=10000000' -o g.bin
  curl http://127.0.0.1:8080/_vmc/status
  vmc workload --scenario high-high -n 500 -o high.log
  vmc workload --table
  vmc replay high.log --speed 2 --link-rate 4e6
  vmc experiment tables --quick --out results --plot
  vmc experiment squidlog --quick --log-out access.log   # a real squid's log, replayed

Ctrl-C exits 130 and SIGTERM 143, after the same clean-up and final counters.
"""  # noqa: E501 (a command line to copy whole)

_SIZE = "SIZE"  # metavar of sizes: 8MiB, 64k, 1e6, 1000


def _sub(sub: argparse._SubParsersAction, name: str, summary: str, description: str = "",
         epilog: str = "") -> argparse.ArgumentParser:
    return sub.add_parser(
        name, help=summary, description=description or summary, epilog=epilog or None
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vmc",
        description="VMC: stream-sharing HTTP proxy (virtual multicasting)",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p = _sub(sub, "proxy", "run the sharing proxy",
             "Run the VMC proxy: concurrent GETs for the same object share one origin stream; late "
             "joiners get the live part as 206 and the prefix by Range (VMC-aware clients) or the "
             "whole object (others). Not an open proxy: give --upstream and/or --default.")
    p.add_argument("--listen", type=cliutil.hostport, default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="address to serve on (default 127.0.0.1:8080)")
    p.add_argument("--upstream", action="append", type=_address, metavar="HOST:PORT",
                   help="allowed upstream host:port (repeatable)")
    p.add_argument("--default", type=_address, metavar="HOST:PORT",
                   help="upstream for origin-form requests (reverse-proxy mode)")
    p.add_argument("--window", type=size, default=8 << 20, metavar=_SIZE,
                   help="per-session buffer window (default 8MiB)")
    p.add_argument("--queue", type=size, default=1 << 20, metavar=_SIZE,
                   help="per-client live queue bound (default 1MiB)")
    p.add_argument("--max-connections", type=cliutil.positive_int, default=512, metavar="N",
                   help="client connections at once (default 512)")
    p.add_argument("--max-header", type=size, default=16384, metavar=_SIZE,
                   help="largest request head accepted (default 16384 bytes)")
    p.add_argument(
        "--max-upstream",
        type=cliutil.nonnegative_int,
        default=0,
        metavar="N",
        help="cap on upstream connections open at once (0 = none); past it requests queue",
    )
    p.add_argument(
        "--upstream-queue-wait",
        type=cliutil.positive_float,
        default=10.0,
        metavar="SECONDS",
        help="seconds a request may wait for an upstream slot before 503 + Retry-After "
             "(default 10)",
    )
    p.add_argument(
        "--resume-attempts",
        type=cliutil.nonnegative_int,
        default=3,
        metavar="N",
        help="Range resumes of a broken shared origin stream before clients get a clean error "
        "(default 3)",
    )
    p.add_argument(
        "--buffer-budget",
        type=size,
        default=256 << 20,
        metavar=_SIZE,
        help="bound on all session buffers together (default 256MiB; 0 = none); past it new "
        "objects are fetched unshared",
    )
    p.add_argument(
        "--client-write-timeout",
        type=cliutil.nonnegative_float,
        default=30.0,
        metavar="SECONDS",
        help="cut off a client that takes no bytes for this many seconds (default 30; 0 = never)",
    )
    p.add_argument(
        "--disk-budget",
        type=size,
        default=1 << 30,
        metavar=_SIZE,
        help="disk for shareable bodies: what left the window (late joiners read it there, not "
        "from the origin) and finished objects reused while fresh (default 1GiB; 0 = none)",
    )
    p.add_argument(
        "--disk-dir",
        type=_directory,
        metavar="DIR",
        help="directory of the disk store's files, which have no name and vanish "
        "on exit or crash (default /var/tmp)",
    )
    p.add_argument("--head-timeout", type=cliutil.positive_float, default=10.0, metavar="SECONDS",
                   help="total time for a request head from its first byte, then 408 (default 10)")
    p.add_argument("--body-timeout", type=cliutil.positive_float, default=60.0, metavar="SECONDS",
                   help="total time for a request body once its head is in, then 408 (default 60)")
    p.add_argument(
        "--no-upstream-keepalive",
        action="store_true",
        help="open a new upstream connection for every request (default: reuse idle ones)",
    )
    p.add_argument(
        "--no-share", action="store_true", help="plain proxy (every request goes upstream)"
    )
    p.add_argument("--loop", choices=["auto", "uvloop", "asyncio"], default="auto",
                   help="event loop (default auto: uvloop when installed)")
    p.add_argument("--stats-out", type=_output, metavar="FILE",
                   help="write the status JSON to this file on exit (and every --stats-every s)")
    p.add_argument(
        "--stats-every",
        type=cliutil.nonnegative_float,
        default=0.0,
        metavar="SECONDS",
        help="with --stats-out: also write it every this many seconds (default 0: only on exit)",
    )
    p.add_argument("--status-allow", action="append", metavar="CIDR", type=_network,
                   help="networks that may read /_vmc/status (default loopback only; repeatable)")
    p.add_argument("--transparent", action="store_true",
                   help="REDIRECTed connections go to their original destination (SO_ORIGINAL_DST)")
    p.add_argument("--workers", type=cliutil.positive_int, default=1, metavar="N",
                   help="N proxy processes sharing the listening address (SO_REUSEPORT); each "
                   "object has one worker, and a connection goes to the worker that owns its "
                   "first request's object, so clients still share one origin copy (default 1)")
    p.add_argument("--no-steer", dest="steer", action="store_false",
                   help="with --workers: serve each connection on the worker the kernel gave "
                   "it (no hand-off; up to N origin copies of an object)")
    p.add_argument("--engine", choices=["core"], default="core",
                   help="core (the only engine: the pump over the sans-IO sharing core that "
                   "the simulator drives; the option stays so command lines naming it still "
                   "work; docs/vmc.md)")
    p.set_defaults(fn=_proxy)

    p = _sub(
        sub,
        "origin",
        "run the paced deterministic test origin",
        "Run the test origin: GET /PATH?size=N answers N deterministic bytes (a function of the "
        "path), with ETag, Last-Modified, Repr-Digest and Range support; GET /_origin/stats "
        "answers its counters as JSON. Bad requests get 400 with the reason.",
        "Query parameters: size=N rate=R fail_at=N fail_once=1 change=1 cc=V vary=F etag=V weak=1 "
        "nolm=1 noetag=1 chunked=1 cookie=1 head_delay=S lmnow=1 nolm206=1 (described in the "
        "vmc.aio.origin module).",
    )
    p.add_argument("--listen", type=cliutil.hostport, default="127.0.0.1:9000", metavar="HOST:PORT",
                   help="address to serve on (default 127.0.0.1:9000)")
    p.add_argument("--rate", type=_rate, default=0.0, metavar="BYTES_PER_S",
                   help="pace each response at this many bytes/s (default 0 = unpaced)")
    p.add_argument("--loop", choices=["auto", "uvloop", "asyncio"], default="auto",
                   help="event loop (default auto: uvloop when installed)")
    p.set_defaults(fn=_origin)

    p = _sub(
        sub,
        "get",
        "VMC-aware GET: accepts 206 from a live stream, fetches the rest",
        "Fetch one URL (through a VMC proxy with --proxy): a 206 from a live stream is kept and "
        "the missing parts are fetched by Range + If-Range; the result is checked (every byte, "
        "the length, the Repr-Digest when offered). With -o FILE the body is written to FILE.part "
        "and renamed to FILE only when verified; after a failure or Ctrl-C, running the same "
        "command again resumes from FILE.part. The result is printed as JSON on stdout (on stderr "
        "when the body goes to stdout); progress goes to stderr.",
    )
    p.add_argument("url", help="http:// URL to fetch")
    p.add_argument("--proxy", type=_address, metavar="HOST:PORT", help="host:port of a VMC proxy")
    p.add_argument("-o", "--output", type=_output, metavar="FILE",
                   help="write the body here; - for stdout (default: stdout)")
    p.add_argument("--no-vmc", action="store_true", help="behave as an unmodified client")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="do not write the body to stdout (still verified)",
    )
    p.add_argument("--timeout", type=cliutil.positive_float, default=60.0, metavar="SECONDS",
                   help="give up when a connection or a read waits this long (default 60)")
    p.add_argument(
        "--busy-retries",
        type=cliutil.nonnegative_int,
        default=1,
        metavar="N",
        help="retry a 503 after its Retry-After (the proxy's upstream cap is full) up to N times "
        "(default 1)",
    )
    p.set_defaults(fn=_get)

    p = _sub(
        sub,
        "replay",
        "replay a Squid native access.log (Normal vs VMC unless --origin)",
        "Replay a Squid native access.log: by default on loopback twice, straight to an emulated "
        "origin (Normal) and through the proxy (VMC), printing a Table 2 row as JSON; with "
        "--origin against a running origin (and --proxy), printing request counts and latency "
        "as JSON.",
    )
    p.add_argument("log", type=cliutil.existing_file, help="Squid native access.log")
    p.add_argument("--origin", type=_address, metavar="HOST:PORT",
                   help="existing origin host:port serving /o/<hash>?size=N (our origin)")
    p.add_argument(
        "--proxy",
        type=_address,
        metavar="HOST:PORT",
        help="existing proxy host:port (with --origin)",
    )
    p.add_argument("--no-vmc", action="store_true", help="with --origin: clients are not VMC-aware")
    p.add_argument("--speed", type=cliutil.positive_float, default=1.0,
                   help="time compression factor (default 1)")
    p.add_argument("--link-rate", type=cliutil.positive_float, default=4e6, metavar="BYTES_PER_S",
                   help="emulated origin link, bytes/s (default 4e6)")
    p.add_argument("--window", type=size, default=8 << 20, metavar=_SIZE,
                   help="the proxy's per-session buffer window (default 8MiB)")
    p.add_argument("--limit", type=cliutil.nonnegative_int, default=0, metavar="N",
                   help="replay only the first N entries (default 0: all)")
    p.add_argument("--backend", choices=["loopback", "sim"], default="loopback",
                   help="loopback: real proxy and origin on sockets (default); sim: the same "
                        "sharing core in simulated time, flows sharing the origin link "
                        "(docs/vmc-sim.md)")
    p.add_argument("--seed", type=int, default=0,
                   help="with --backend sim: the run's seed (default 0)")
    p.add_argument("--batch", type=cliutil.nonnegative_int, default=0, metavar="N",
                   help="with --backend sim: N requests per run, as the paper's 5,000-file runs "
                        "(default 0: one run)")
    p.add_argument("--bytes", action="store_true",
                   help="with --backend sim: carry and check real body bytes (default: counting "
                        "mode, lengths only, the same decisions; docs/vmc-sim.md)")
    p.set_defaults(fn=_replay)

    p = _sub(
        sub,
        "workload",
        "write a synthetic Squid log for a paper scenario, or print Table 1",
        "Write a synthetic Squid native access.log for one of the paper's load/overlap scenarios, "
        "or (--table) print Table 1: the calculated saving for every scenario.",
    )
    p.add_argument(
        "--scenario",
        default="high-high",
        choices=["low-low", "high-high", "high-low", "low-high", "high-vhigh", "low-none"],
        help="load-overlap scenario of the paper (default high-high)",
    )
    p.add_argument(
        "-n", type=cliutil.positive_int, default=1000, help="requests to generate (default 1000)"
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument(
        "-o", "--output", type=_output, metavar="FILE", help="write the log here (default: stdout)"
    )
    p.add_argument(
        "--table", action="store_true", help="print Table 1 (calculated savings) for all scenarios"
    )
    p.set_defaults(fn=_workload)

    p = _sub(
        sub,
        "demo",
        "origin + proxy + staggered clients on loopback",
        "Start an origin and a proxy on loopback, send staggered clients (VMC-aware and plain) for "
        "one object and print what each got and how many origin bytes sharing saved.",
    )
    p.add_argument(
        "--full", action="store_true", help="16 MiB and 10 clients (default 4 MiB and 6)"
    )
    p.set_defaults(fn=_demo)

    sub.add_parser(
        "experiment",
        help=f"run a paper experiment: {' | '.join(EXPERIMENTS)} "
        "(each has --quick; vmc experiment for the list)",
        description="vmc experiment NAME [--quick] [options]; vmc experiment for the list",
    )
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
