"""VMC proxy vs what users pick instead, on one file with staggered clients (issue 6, bench/).

N clients fetch one object, client i starting at ``i * stagger`` s, from an
origin paced per connection (our origin, a subprocess). Arms, same run:

- no proxy (every client straight to the origin);
- our proxy, unmodified clients (curl): the proxy patches each prefix;
- our proxy, VMC-aware clients (vmc.client): 206 from the live edge + prefix by Range;
- nginx with proxy_cache_lock (late joiners wait for the whole object);
- Varnish and Squid (collapsed_forwarding) when installed;
- our proxy with smaller windows: origin bytes as a function of the window.

Per arm: origin MB, mean and p95 completion, mean time to first byte, and the
proxy process's peak RSS (sampled from /proc every 20 ms). Quick mode shrinks
the object and the client count; its figures prove the bench runs, nothing more.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness import Figure, Reference, interleaved, measured, referenced
from vmc.aio.origin import body_slice, expected
from vmc.caches import CacheError, Squid, Varnish
from vmc.client import fetch
from vmc.nginx import Nginx, vm_rss, write_object

PY = [sys.executable, "-m", "vmc"]


class _Proc:
    """A server subprocess that prints its http://host:port/ on the first line."""

    def __init__(self, argv: list[str], wait_port: int | None = None) -> None:
        self.p = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        if wait_port is None:
            assert self.p.stdout is not None
            line = self.p.stdout.readline()
            m = re.search(r"http://([0-9.]+:\d+)/", line)
            if not m:
                self.stop()
                raise RuntimeError(f"{argv[:4]} did not start: {line!r}")
            self.authority = m.group(1)
        else:
            self.authority = f"127.0.0.1:{wait_port}"
            deadline = time.monotonic() + 15
            while True:
                try:
                    socket.create_connection(("127.0.0.1", wait_port), timeout=0.2).close()
                    break
                except OSError:
                    if self.p.poll() is not None or time.monotonic() >= deadline:
                        self.stop()
                        raise RuntimeError(f"{argv[:4]} did not open port {wait_port} "
                                           f"(exit status {self.p.poll()})") from None
                    time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.p.pid

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)
        if self.p.stdout:
            self.p.stdout.close()


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (varnishd's manager forks the cache process that holds the
    objects)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


class _RssSampler:
    """Peak resident memory of a process and its descendants, sampled every 20 ms."""

    def __init__(self, pid: int | None) -> None:
        self.pids = _family(pid) if pid else []
        self.peak, self.base = 0, self._now()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _now(self) -> int:
        return sum(vm_rss(p) for p in self.pids)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._now())

    def __enter__(self) -> _RssSampler:
        if self.pids:
            self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.pids:
            self._t.join(2)


def _origin_stats(origin: str) -> dict:
    with urllib.request.urlopen(f"http://{origin}/_origin/stats", timeout=10) as r:
        return json.loads(r.read())


async def _curl(url: str, proxy: str | None, delay: float) -> tuple[float, float, bool, int]:
    await asyncio.sleep(delay)
    argv = [
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{time_starttransfer} %{time_total} %{size_download}",
    ]
    if proxy:
        argv += ["-x", f"http://{proxy}"]
    p = await asyncio.create_subprocess_exec(*argv, url, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.DEVNULL)
    out, _ = await p.communicate()
    f = out.decode().split()
    if p.returncode != 0 or len(f) != 3:
        return 0.0, 0.0, False, 0
    return float(f[0]), float(f[1]), True, int(f[2])


async def _ours(url: str, proxy: str, delay: float) -> tuple[float, float, bool, int]:
    await asyncio.sleep(delay)
    try:
        r = await fetch(url, proxy=proxy, vmc=True, timeout=300, discard=True)
        return r.ttfb, r.elapsed, True, r.length
    except Exception:  # noqa: BLE001 - a failed client is reported as not ok
        return 0.0, 0.0, False, 0


def _diff_span(a: bytes, b: bytes, step: int = 65536) -> tuple[int, int]:
    """First and last index where ``a`` and ``b`` differ (same length assumed; compared by
    blocks)."""
    n = min(len(a), len(b))
    first = next((i for i in range(0, n, step) if a[i:i + step] != b[i:i + step]), n)
    first = next((i for i in range(first, min(n, first + step)) if a[i] != b[i]), first)
    last = next(
        (i for i in range((n - 1) // step * step, -1, -step) if a[i : i + step] != b[i : i + step]),
        0,
    )
    last = next((i for i in range(min(n, last + step) - 1, last - 1, -1) if a[i] != b[i]), last)
    return first, last


async def _range_probe(url: str, proxy: str | None, delay: float, path: str, size: int) -> str:
    """A Range request on the object while it is in flight, with its body checked.

    "206 ok" when exactly bytes 1000-1999 came; a 200 is checked against the whole object
    (Squid 5.7 sends a 200 of the whole length whose first ~3 KB are the object's bytes
    from 1000 on: a corrupt body presented as complete).
    """
    await asyncio.sleep(delay)
    with tempfile.NamedTemporaryFile(prefix="vmc-range-") as out:
        argv = [
            "curl",
            "-sS",
            "-o",
            out.name,
            "-r",
            "1000-1999",
            "-w",
            "%{http_code} %{size_download}",
        ]
        if proxy:
            argv += ["-x", f"http://{proxy}"]
        p = await asyncio.create_subprocess_exec(*argv, url, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.DEVNULL)
        res, _ = await p.communicate()
        got = Path(out.name).read_bytes()
    f = res.decode().split()
    if len(f) != 2:
        return "failed"
    code = f[0]
    name = path.split("?", 1)[0]
    if code == "206":
        return "206 ok" if got == body_slice(name, 1000, 2000) else f"206, wrong bytes ({len(got)})"
    if code == "200":
        if got == expected(name, size):
            return "200, whole object (correct)"
        whole = expected(name, size)
        span = _diff_span(got, whole)
        shifted = got[:64] == whole[1000:1064]
        return (f"200, {len(got)} bytes, WRONG body: bytes {span[0]}-{span[1]} differ"
                + (" (it starts with the object's byte 1000)" if shifted else ""))
    return f"{code} {len(got)} bytes"


def _clients(
    url: str, proxy: str | None, n: int, stagger: float, aware: bool, path: str, size: int
):
    """Run the staggered clients; returns (per-client results, in-flight Range probe outcome)."""
    async def main():
        probe = (asyncio.create_task(_range_probe(url, proxy, 2.5 * stagger, path, size))
                 if shutil.which("curl") else None)
        if aware:
            assert proxy is not None
            res = await asyncio.gather(*(_ours(url, proxy, i * stagger) for i in range(n)))
        else:
            res = await asyncio.gather(*(_curl(url, proxy, i * stagger) for i in range(n)))
        return res, (await probe if probe else "no curl")

    return asyncio.run(main())


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))] if s else 0.0


def _row(subject: str, origin: str, size: int, runner, pid: int | None, n: int) -> dict:
    before = _origin_stats(origin)
    with _RssSampler(pid) as rss:
        res, probe = runner()
    time.sleep(0.2)
    after = _origin_stats(origin)
    ob = after["body_bytes"] - before["body_bytes"]
    ranged = after["range_requests"] - before["range_requests"]
    ok = [r for r in res if r[2] and r[3] == size]
    done = [r[1] for r in ok]
    return {
        "subject": subject,
        "origin MB": round(ob / 1e6, 2),
        "copies": round(ob / size, 2),
        "origin GETs (Range)": f"{after['requests'] - before['requests'] - 1 - ranged} ({ranged})",
        "clients ok": f"{len(ok)}/{n}",
        "mean completion s": round(sum(done) / len(done), 3) if done else None,
        "p95 completion s": round(_p95(done), 3) if done else None,
        "mean TTFB ms": round(1000 * sum(r[0] for r in ok) / len(ok), 1) if ok else None,
        "proxy peak RSS MB": round(rss.peak / 1e6, 1) if pid else None,
        "proxy RSS growth MB": round(max(0, rss.peak - rss.base) / 1e6, 1) if pid else None,
        "in-flight Range": probe,
    }


ISSUE_SOURCE = ("the VMC issue's figures for 20 clients x 50 MiB, client i at 0.5 s * i, "
                "origin paced per connection")
REFERENCES = {
    "origin MB": ("varnish", Reference(52.4, "MB", ISSUE_SOURCE + ": Varnish and Squid 52.4 MB "
                                       "from the origin")),
    "mean completion s": ("varnish", Reference(5.26, "s", ISSUE_SOURCE + ": Varnish and Squid "
                                                "mean completion 5.26 s")),
    "mean TTFB ms": ("nginx proxy_cache_lock", Reference(5200.0, "ms", ISSUE_SOURCE + ": nginx "
                                                         "proxy_cache_lock first byte ~5.2 s")),
}
#: the measured fields compared between our proxy and each anchor
FIELDS = (("origin MB", "origin bytes"), ("mean completion s", "mean completion"),
          ("p95 completion s", "p95 completion"), ("mean TTFB ms", "TTFB"),
          ("proxy RSS growth MB", "RSS growth"))


def _arm_proxy(origin: str, window: int, aware: bool, n: int, stagger: float, size: int,
               path: str, disk: bool = True) -> dict:
    """A fresh proxy for one repeat of one arm (a warm one would serve from its window).
    ``disk=False`` turns the on-disk store off, so late joiners past the window cost Range
    fetches from the origin: the window sweep measures what the window alone does."""
    px = _Proc(PY + ["proxy", "--listen", "127.0.0.1:0", "--upstream", origin, "--window",
                     str(window)] + ([] if disk else ["--disk-budget", "0"]))
    try:
        url = f"http://{origin}{path}"
        return _row("", origin, size, lambda: _clients(url, px.authority, n, stagger, aware, path,
                                                        size), px.pid, n)
    finally:
        px.stop()


def _arm_direct(origin: str, n: int, stagger: float, size: int, path: str) -> dict:
    url = f"http://{origin}{path}"
    return _row(
        "", origin, size, lambda: _clients(url, None, n, stagger, False, path, size), None, n
    )


def _arm_nginx(origin: str, n: int, stagger: float, size: int, path: str) -> dict:
    with Nginx.cache_lock_proxy(origin) as ng:
        assert ng.proc is not None
        url = f"http://{ng.authority}{path}"
        return _row("", origin, size, lambda: _clients(url, None, n, stagger, False, path, size),
                    ng.proc.pid, n)


def _arm_cache(make: Callable[[], Any], origin: str, n: int, stagger: float, size: int,
               path: str) -> dict:
    cache = make()
    cache.start()
    try:
        url = f"http://{cache.authority}{path}"
        return _row("", origin, size, lambda: _clients(url, None, n, stagger, False, path, size),
                    cache.pid, n)
    finally:
        cache.stop()


def _merge(subject: str, runs: list[dict]) -> dict:
    """One row from the repeats: numbers as figures (median or range), words as they came."""
    row: dict = {"subject": subject}
    for k in runs[0]:
        if k == "subject":
            continue
        vals = [r[k] for r in runs]
        if all(isinstance(v, (int, float)) for v in vals):
            row[k] = Figure.of(vals)
        else:
            row[k] = " / ".join(dict.fromkeys(str(v) for v in vals))
    return row


def cache_usable(name: str, make: Callable[[], Varnish | Squid], notes: list[str]) -> bool:
    """Installed and able to start? (once, before the timed repeats; a missing cache is a note,
    one that is installed but broken fails under CI)"""
    try:
        cache = make()
        cache.start()
        cache.stop()
        return True
    except FileNotFoundError as exc:
        notes.append(f"{name}: arm skipped ({exc})")
    except CacheError as exc:
        if os.environ.get("CI") == "true":
            raise  # installed but broken: CI must see it, not a quietly skipped arm
        notes.append(f"{name}: did not start, arm skipped: {str(exc)[:300]}")
    return False


# ------------------------------------------------------------------ request rate under wrk

class _VarnishPass(Varnish):
    """Varnish keeping nothing (``default_ttl=0 default_grace=0``): every request goes to the
    origin, as with VMC when no stream is in flight (issue 17's like-for-like anchor)."""

    def argv(self) -> list[str]:
        a = super().argv()
        a[a.index("default_ttl=120")] = "default_ttl=0"
        return a + ["-p", "default_grace=0"]


_WRK_RATE = re.compile(r"Requests/sec:\s+([0-9.]+)")
_WRK_P99 = re.compile(r"^\s*99%\s+([0-9.]+)(us|ms|s)\s*$", re.M)
_WRK_ERR = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)|Socket errors: (.*)")


_WRK_TOTAL = re.compile(r"(\d+) requests in ")


def _who(nw: int) -> str:
    """An arm's proxy: 1 process, N workers (each connection steered to the worker that owns
    its object), -N: N workers serving connections where they land (``--no-steer``), or (0)
    one process on asyncio's loop (sendfile)."""
    if nw < 0:
        return f"vmc --workers {-nw} --no-steer"
    return {0: "vmc --loop asyncio", 1: "vmc"}.get(nw, f"vmc --workers {nw}")


def _wrk(url: str, conns: int, seconds: float, origin_log: Callable[[], int],
         threads: int = 2, size: int = 0) -> dict:
    """One wrk run: req/s, p99 latency in ms, body throughput in MB/s (req/s x ``size``),
    origin requests per client request (from the origin's access log, ``origin_log`` = its
    line count), errors, and the 1-min load at its start."""
    load = os.getloadavg()[0]
    before = origin_log()
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds:g}s",
                          "--latency", url], capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    time.sleep(0.3)  # the origin's last log lines
    rate, p99, total = _WRK_RATE.search(out), _WRK_P99.search(out), _WRK_TOTAL.search(out)
    if not rate or not p99 or not total:
        raise RuntimeError(f"wrk output not understood: {out[-400:]!r}")
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[p99.group(2)]
    errs = "; ".join(m.group(0) for m in _WRK_ERR.finditer(out))
    sent = max(1, int(total.group(1)))
    return {"req/s": float(rate.group(1)), "p99 ms": float(p99.group(1)) * scale,
            "MB/s": round(float(rate.group(1)) * size / 1e6, 1),
            "origin GETs / request": round((origin_log() - before) / sent, 3),
            "errors": errs or "none", "load": round(load, 2)}


def run_rate(quick: bool) -> dict:
    """Request rate and p99 under wrk (issue 17): our proxy vs Varnish keeping nothing, both in
    front of one nginx origin serving static files, 1 KiB, 100 KiB and 10 MiB objects (the
    last also as throughput, MB/s), 50 connections, interleaved repeats. At 10 MiB a proxy on
    asyncio's loop is measured too: there bodies on the disk store leave by loop.sendfile (on
    uvloop, the CLI's default, the pump calls os.sendfile itself). Each arm's wrk run states the
    1-minute load at its start."""
    conns, seconds = 50, (2.0 if quick else 8.0)
    repeats = 2 if quick else 3
    sizes = {"1 KiB": 1024, "100 KiB": 100 * 1024, "10 MiB": 10 << 20}
    big = "10 MiB"
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="vmc-rate-") as d, Nginx.origin(Path(d)) as ng:
        for size in sizes.values():
            write_object(Path(d), f"obj-{size}.bin", size)
        o = ng.authority

        def origin_log() -> int:
            return len(ng.access_log())

        workers = os.cpu_count() or 1
        pxs: dict[int, _Proc] = {}
        varnish = _VarnishPass(o)
        try:
            # one process, one per core (SO_REUSEPORT; steered: one worker per object, which
            # offers it finished to the others) and one per core unsteered (each worker keeps
            # its own copy of the object, up to one origin copy per worker)
            for nw in sorted({1, workers}) + ([-workers] if workers > 1 else []):
                pxs[nw] = _Proc(PY + ["proxy", "--listen", "127.0.0.1:0", "--upstream", o,
                                      "--default", o, "--workers", str(abs(nw))]
                                + (["--no-steer"] if nw < 0 else []))
            # the sendfile path (asyncio's loop; key 0 is not a worker count)
            pxs[0] = _Proc(PY + ["proxy", "--listen", "127.0.0.1:0", "--upstream", o,
                                 "--default", o, "--loop", "asyncio"])
            varnish.start()
            arms: dict[str, Callable[[], dict]] = {}
            for label, size in sizes.items():
                path = f"/obj-{size}.bin"
                for nw, px in pxs.items():
                    if nw == 0 and label != big:
                        continue
                    name = f"{_who(nw)} {label}"
                    arms[name] = partial(_wrk, f"http://{px.authority}{path}", conns, seconds,
                                         origin_log, size=size)
                arms[f"varnish ttl=0 {label}"] = partial(
                    _wrk, f"http://{varnish.authority}{path}", conns, seconds, origin_log,
                    size=size)
            # every arm up, and every object in, before timing (with steered workers, a
            # connection whose first request finds its object not yet whole on disk stays on
            # the object's owner for the whole keep-alive run)
            for size in sizes.values():
                for url in [f"http://{px.authority}/obj-{size}.bin" for px in pxs.values()] + [
                        f"http://{varnish.authority}/obj-{size}.bin"]:
                    with urllib.request.urlopen(url, timeout=60) as r:
                        r.read()
            time.sleep(0.5)  # the owners' offers of the finished objects reach the others
            samples = interleaved(arms, repeats)
        finally:
            for px in pxs.values():
                px.stop()
            varnish.stop()
    rows = [_merge(name, runs) for name, runs in samples.items()]
    comps = []
    for label in sizes:
        anchor = samples[f"varnish ttl=0 {label}"]
        for nw in pxs:
            who = _who(nw)
            if f"{who} {label}" not in samples:
                continue
            ours = samples[f"{who} {label}"]
            if label == big:
                comps.append(measured(f"{who}/varnish(ttl=0) MB/s, {label}",
                                      [r["MB/s"] for r in ours], [r["MB/s"] for r in anchor],
                                      anchor=f"varnish ttl=0 {label}", unit="MB/s",
                                      target=">= 0.9"))
            comps.append(measured(f"{who}/varnish(ttl=0) req/s, {label}",
                                  [r["req/s"] for r in ours], [r["req/s"] for r in anchor],
                                  anchor=f"varnish ttl=0 {label}", unit="req/s", target=">= 0.5"))
            comps.append(measured(f"{who}/varnish(ttl=0) p99, {label}",
                                  [r["p99 ms"] for r in ours], [r["p99 ms"] for r in anchor],
                                  anchor=f"varnish ttl=0 {label}", unit="ms", target="<= 1.0"))
    notes.append(f"wrk -t2 -c{conns} -d{seconds:g}s --latency, one object per size, nginx origin "
                 f"(static files) on loopback, proxy and Varnish (default_ttl=0 default_grace=0) "
                 f"in front of it; every arm {repeats} times interleaved; 'load' is the 1-minute "
                 f"load average when that wrk run started (2 cores shared with other work). "
                 "'origin GETs / request' counts the origin's access-log lines: our proxy "
                 "reuses a finished stream (0 origin GETs once the object is in) while "
                 "Varnish with ttl=0 fetches every request, so the vmc rows are not the "
                 "issue's like-for-like premise. With --workers each object has one worker: "
                 "a connection for an object not yet whole on disk is handed to it, and a "
                 "finished object is offered to every worker, which then serves it where the "
                 "connection landed (one origin copy); --no-steer serves every connection "
                 "where it landed at up to one origin copy per worker.")
    return {"title": "VMC proxy request rate under wrk vs Varnish keeping nothing",
            "rows": rows, "comparisons": comps, "ratios": {}, "targets": {},
            "repeats": repeats, "notes": notes}


def run(quick: bool) -> dict:
    n = 6 if quick else 20
    size = (4 << 20) if quick else (50 << 20)
    stagger = 0.1 if quick else 0.5
    repeats = 2 if quick else 3
    rate = 5e6
    notes: list[str] = []
    have_curl = shutil.which("curl") is not None
    origin = _Proc(PY + ["origin", "--listen", "127.0.0.1:0", "--rate", str(rate)])
    paths = iter(f"/bench-{i}.bin?size={size}" for i in range(10_000))
    window = size + (1 << 20)
    try:
        o = origin.authority
        arms: dict[str, Callable[[str], dict]] = {}
        if have_curl:
            arms["no proxy"] = partial(_arm_direct, o, n, stagger, size)
            arms["vmc, curl clients"] = partial(_arm_proxy, o, window, False, n, stagger, size)
        arms["vmc, VMC-aware clients"] = partial(_arm_proxy, o, window, True, n, stagger, size)
        if shutil.which("nginx") and have_curl:
            arms["nginx proxy_cache_lock"] = partial(_arm_nginx, o, n, stagger, size)
        for name, make in (("varnish", partial(Varnish.accelerator, o)),
                           ("squid collapsed_forwarding", partial(Squid.accelerator, o))):
            if not cache_usable(name, make, notes):
                continue
            if have_curl:
                arms[name] = partial(_arm_cache, make, o, n, stagger, size)
        # Origin bytes as a function of the window, with the disk store off (with it, the origin
        # sends one copy whatever the window). Unmodified clients whose prefix left the window
        # cost a Range fetch that chases the live edge; VMC-aware ones only their prefix.
        for frac in ((0, 0.25) if quick else (0, 0.125, 0.5)):
            w = int(size * frac)
            if have_curl:
                arms[f"vmc, curl clients, window {frac:g}x object, no disk"] = partial(
                    _arm_proxy, o, w, False, n, stagger, size, disk=False)
            arms[f"vmc, VMC-aware clients, window {frac:g}x object, no disk"] = partial(
                _arm_proxy, o, w, True, n, stagger, size, disk=False)

        def fresh(arm: Callable[[str], dict]) -> Callable[[], dict]:
            def go() -> dict:  # a new object each time: no cache can serve a repeat warm
                path = next(paths)
                urllib.request.urlopen(urllib.request.Request(  # Repr-Digest computed up front
                    f"http://{o}{path}", method="HEAD"), timeout=60).close()
                return arm(path)
            return go

        samples = interleaved({name: fresh(arm) for name, arm in arms.items()}, repeats)
    finally:
        origin.stop()
    rows = [_merge(name, runs) for name, runs in samples.items()]
    by = {r["subject"]: r for r in rows}
    ratios: dict[str, Figure] = {}
    comps = []
    ours = samples.get("vmc, curl clients")
    if ours and all(r["mean completion s"] for r in ours):
        ratios["vmc origin bytes / one copy"] = Figure.of(r["copies"] for r in ours)
        if all(r["proxy RSS growth MB"] is not None for r in ours):
            ratios["vmc RSS growth / window"] = Figure.of(
                r["proxy RSS growth MB"] / (window / 1e6) for r in ours)
        # Ours (curl clients) against each anchor, measured in this same run.
        targets = {("varnish", "origin MB"): "<= 1 when the window holds the object",
                   ("varnish", "mean completion s"): "<= about 1 (no worse than Varnish)",
                   ("nginx proxy_cache_lock", "mean TTFB ms"): "<< 1 (first byte within a few ms)"}
        for anchor in ("varnish", "squid collapsed_forwarding", "nginx proxy_cache_lock",
                       "no proxy"):
            a = samples.get(anchor)
            if not a or not all(r["mean completion s"] for r in a):
                continue
            for key, what in FIELDS:
                o_v, a_v = [r[key] for r in ours], [r[key] for r in a]
                if all(v is not None for v in o_v) and all(a_v):
                    comps.append(measured(f"vmc/{anchor} {what}", o_v, a_v, anchor=anchor,
                                          unit=key.rsplit(" ", 1)[-1],
                                          target=targets.get((anchor, key), "")))
        if not quick:  # the issue's figures are for the full configuration only
            for key, (anchor, ref) in REFERENCES.items():
                o_v = [r[key] for r in ours]
                if all(v for v in o_v):
                    comps.append(referenced(f"vmc {key} / {anchor} (issue)", o_v, ref,
                                            anchor=f"{anchor} (issue)"))
    for r in rows:
        if r["subject"] in (
            "no proxy",
            "vmc, curl clients",
            "varnish",
            "squid collapsed_forwarding",
            "nginx proxy_cache_lock",
        ):
            notes.append(
                f"Range bytes=1000-1999 while the object is in flight, {r['subject']}: "
                f"{r['in-flight Range']}"
            )
    notes += [
        f"{n} clients, one {size / 2**20:.0f} MiB object, client i starts at {stagger} * i s, "
        f"origin paced {rate / 1e6:g} MB/s per connection (our origin, subprocess); loopback, "
        "2 shared cores; "
        f"every arm {repeats} times interleaved, each time a fresh proxy/cache and a new object.",
        (
            "--quick: the issue's reference figures (20 clients x 50 MiB at 0.5 s) are for the "
            "full configuration and are not compared here"
            if quick
            else "Issue's reference figures (not measured here) are the 'reference' rows: no proxy "
            "1,049 MB from the origin; Varnish and Squid 52.4 MB, TTFB ~2 ms, mean completion "
            "5.26 s; nginx lock 52.4 MB, first byte ~5.2 s on average."
        ),
        "Peak RSS includes the interpreter; 'RSS growth' is peak minus the RSS when the arm "
        "started (nginx/varnish/squid: their own process, caches included).",
    ]
    assert by  # every arm produced a row
    if shutil.which("wrk") and shutil.which("nginx") and shutil.which("varnishd"):
        wrk_arm = run_rate(quick)  # issue 17: request rate vs Varnish keeping nothing
        rows += wrk_arm["rows"]  # their own columns (req/s, p99 ms, ...), empty elsewhere
        comps += wrk_arm["comparisons"]
        notes += wrk_arm["notes"]
    else:
        notes.append("wrk arm (request rate vs Varnish ttl=0) skipped: needs wrk, nginx and "
                     "varnishd (scripts/install-tools.sh)")
    return {
        "title": ("VMC: late joiners on one in-flight object "
                  "(origin bytes, completion, TTFB, memory)"),
        "rows": rows,
        "comparisons": comps,
        "ratios": ratios,
        "targets": {
            "vmc origin bytes / one copy": (
                "<= Varnish's (about 1.0 when the window holds the object)"),
            "vmc RSS growth / window": "<= about 1 (memory bounded by the window)",
        },
        "repeats": repeats,
        "notes": notes,
    }


if __name__ == "__main__":  # python -m bench.bench_vmc rate [--quick]: the wrk arm alone
    from bench.harness import markdown

    if sys.argv[1:2] != ["rate"]:
        sys.exit("usage: python -m bench.bench_vmc rate [--quick]")
    print(markdown({"name": "vmc rate", **run_rate(quick="--quick" in sys.argv)}))
