"""``vmc proxy --workers N``: N proxy processes sharing one listening address (issue 17).

Each worker is a whole proxy (``serve``) with its own socket bound with SO_REUSEPORT to the
same address; the kernel spreads connections over them by their 4-tuple. The sharing state
(sessions, window, disk store) stays in the worker that holds it, and each object has one
worker: a connection whose first request is for another worker's object goes there with the
bytes read from it (:mod:`vmc.aio.steer`), so a late client joins the stream in flight and an
object costs one origin copy, as with one process. ``ProxyConfig.steer = False``
(``--no-steer``) serves each connection where it landed (up to N origin copies of an object).
The default stays 1 worker.

The parent binds first (so that port 0 becomes one concrete port for all), forks the workers,
prints one "vmc proxy on" line, and on SIGINT/SIGTERM passes the signal on, waits for the
workers, prints their final counters summed into one JSON line and exits 130/143 (1 when a
worker ended by itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from deliverykit.cliutil import stop_signals_held
from vmc.aio import steer
from vmc.aio.config import ProxyConfig
from vmc.aio.steer import Steering

Run = Callable[[Coroutine[Any, Any, int]], int]
#: One worker's whole proxy: ``server(cfg, stats_out, stats_every)`` (``vmc.aio.proxy.serve``
#: by default); it prints one "vmc proxy on" line,
#: then its final counters as one JSON line when stopped.
Server = Callable[[ProxyConfig, str | None, float, Steering | None], Coroutine[Any, Any, int]]


def merge(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' final counters as one object: the integer counters summed at the top level
    (requests, bytes, sessions, joins, ...), the byte ratios recomputed from the sums, ``pid``
    the list of worker pids, and every worker's own snapshot under ``workers`` (means,
    percentiles and nested figures do not add up)."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for s in snaps for k in s):
        vals = [s.get(key) for s in snaps]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            out[key] = sum(vals)
    cb, ob = out.get("client_bytes", 0), out.get("origin_bytes", 0)
    out["sharing_ratio"] = cb / ob if ob else None
    out["bandwidth_saving"] = 1 - ob / cb if cb else None
    out["pid"] = [s.get("pid") for s in snaps]
    out["workers"] = snaps
    return out


def _hold(cfg: ProxyConfig) -> socket.socket:
    """A bound (not listening) SO_REUSEPORT socket: fixes the port and keeps it ours."""
    fam = socket.AF_INET6 if ":" in cfg.host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((cfg.host, cfg.port))
    return s


def serve_workers(cfg: ProxyConfig, n: int, stats_out: str | None, stats_every: float,
                  run: Run, server: Server | None = None) -> int:
    """Run ``n`` proxies (``server``, by default :func:`vmc.aio.proxy.serve`) on one
    address until SIGINT or SIGTERM, each with its end of the steering sockets (when
    ``cfg.steer``); returns the exit code."""
    if server is None:
        from vmc.aio.proxy import serve as server
    assert server is not None
    hold = _hold(cfg)
    wcfg = dataclasses.replace(cfg, port=hold.getsockname()[1], reuse_port=True)
    sys.stdout.flush()
    sys.stderr.flush()
    made = steer.pairs(n) if cfg.steer and n > 1 else []
    kids: list[tuple[int, Any]] = []
    try:
        for i in range(n):
            r, w = os.pipe()
            # a Ctrl-C during the forks reaches this process once the worker is in ``kids``,
            # so the ``finally`` below stops every worker started
            with stop_signals_held():
                pid = os.fork()
                if pid == 0:  # a worker: its stdout goes to the parent
                    code = 1
                    try:
                        hold.close()
                        os.close(r)
                        os.dup2(w, 1)
                        os.close(w)
                        sys.stdout = os.fdopen(1, "w", buffering=1)
                        out = f"{stats_out}.w{i}" if stats_out else None
                        code = run(server(wcfg, out, stats_every,
                                          steer.for_worker(i, made) if made else None))
                    finally:
                        sys.stdout.flush()
                        os._exit(code)
                os.close(w)
                kids.append((pid, os.fdopen(r)))
        for pair in made:  # the workers hold them now
            for end in pair:
                end.close()
        firsts = [f.readline() for _, f in kids]
        if not all(line.startswith("vmc proxy on") for line in firsts):
            print("vmc proxy: a worker did not start", file=sys.stderr, flush=True)
            _stop(kids, signal.SIGTERM)
            return 1
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        print(f"vmc proxy on http://{host}:{wcfg.port}/ ({n} workers, pids "
              f"{' '.join(str(p) for p, _ in kids)}); {firsts[0].split(';', 1)[-1].strip()}",
              flush=True)
        code = asyncio.run(_supervise([p for p, _ in kids]))
        _stop(kids, signal.SIGINT if code == 130 else signal.SIGTERM)
        finals = []
        for _, f in kids:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
            if lines:
                finals.append(json.loads(lines[-1]))
        if finals:
            print(json.dumps(merge(finals), default=str), flush=True)
        return code
    finally:
        _stop(kids, signal.SIGTERM)
        for _, f in kids:
            f.close()
        hold.close()


async def _supervise(pids: list[int]) -> int:
    """Wait for SIGINT/SIGTERM (130/143) or a worker that ended by itself (1)."""
    from deliverykit.cliutil import Stopper

    stopper = Stopper().install()
    try:
        while not await stopper.wait(0.2):
            for pid in pids:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    pids.remove(pid)
                    print(f"vmc proxy: worker {pid} ended by itself "
                          f"(status {os.waitstatus_to_exitcode(status)}); stopping the others",
                          file=sys.stderr, flush=True)
                    return 1
        return stopper.exit_code()
    finally:
        stopper.remove()


def _stop(kids: list[tuple[int, Any]], sig: signal.Signals, wait: float = 15.0) -> None:
    """Signal the workers still running and reap them (SIGKILL after ``wait`` s)."""
    live = []
    for pid, _ in kids:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, sig)
                live.append(pid)
        except ChildProcessError:
            pass
    deadline = time.monotonic() + wait
    for pid in live:
        while True:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            if time.monotonic() >= deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.05)
