"""Replay a Squid log through the proxy (or straight to the origin) and measure (paper sec. 3.3, 4).

Each cleaned entry is re-issued at its logged start time (divided by ``speed``)
for :meth:`LogEntry.object_path` on our origin, which generates a body of the
logged size. Per request we record time to first byte and completion; per run,
origin bytes (what crossed the emulated origin link) and the summed latency.

:func:`compare` runs the paper's two arms on identical fresh origins:
"Normal" (clients straight to the origin) and "VMC" (through the proxy), plus
the proxy with sharing off, and
returns a Table 2 row: Mbyte transferred both ways, bandwidth and latency
saving, plus the calculated saving of Table 1 for the same log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from vmc.aio.origin import Origin
from vmc.aio.proxy import Proxy, ProxyConfig
from vmc.client import FetchError, fetch
from vmc.workload.squid import LogEntry
from vmc.workload.synth import calculated_saving


@dataclass
class Replayed:
    """One re-issued request."""

    index: int
    start: float
    """Seconds after the replay began when it was issued."""
    bytes: int
    ttfb: float | None
    latency: float | None
    """Seconds to the last byte (None if it failed)."""
    error: str = ""


async def replay(
    entries: list[LogEntry],
    origin: str,
    proxy: str | None = None,
    speed: float = 1.0,
    vmc: bool = True,
    concurrency: int = 256,
    timeout: float = 120.0,
    on_done: Callable[[], None] | None = None,
) -> list[Replayed]:
    """Issue every entry at its (scaled) time; returns per-request results in log order.
    ``on_done()`` is called as each request ends (progress)."""
    if not entries:
        return []
    t_first = entries[0].start
    sem = asyncio.Semaphore(concurrency)
    t0 = time.monotonic()

    async def one(i: int, e: LogEntry) -> Replayed:
        try:
            return await attempt(i, e)
        finally:
            if on_done is not None:
                on_done()

    async def attempt(i: int, e: LogEntry) -> Replayed:
        delay = (e.start - t_first) / speed - (time.monotonic() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        async with sem:
            started = time.monotonic() - t0
            try:
                r = await fetch(f"http://{origin}{e.object_path()}", proxy=proxy, vmc=vmc,
                                timeout=timeout, discard=True)
                return Replayed(i, started, e.bytes, r.ttfb, r.elapsed)
            except FetchError as exc:
                return Replayed(i, started, e.bytes, None, None, str(exc))

    return list(await asyncio.gather(*(one(i, e) for i, e in enumerate(entries))))


async def _arm(entries: list[LogEntry], through_proxy: bool, speed: float, link_rate: float,
               window: int, conn_rate: float, sharing: bool = True,
               on_done: Callable[[], None] | None = None) -> dict:
    origin = await Origin(rate=conn_rate, link_rate=link_rate, digest_limit=0).start()
    proxy = None
    try:
        if through_proxy:
            # The paper's VMC router: in-flight sharing with a buffer, no disk store (which would
            # also serve finished objects, i.e. act as a cache, and change Table 2's comparison).
            cfg = ProxyConfig(upstreams=[origin.authority], window=window, sharing=sharing,
                              disk_budget=0)
            proxy = await Proxy(cfg).start()
        px = f"{proxy.address[0]}:{proxy.address[1]}" if proxy else None
        t0 = time.monotonic()
        res = await replay(entries, origin.authority, px, speed=speed, on_done=on_done)
        wall = time.monotonic() - t0
    finally:
        if proxy is not None:
            await proxy.close()
        await origin.close()
    lat = [r.latency for r in res if r.latency is not None]
    return {
        "origin_bytes": origin.stats.body_bytes,
        "client_bytes": sum(r.bytes for r in res if r.latency is not None),
        "latency_sum": sum(lat),
        "latencies": [r.latency for r in res],
        "failed": sum(1 for r in res if r.latency is None),
        "wall": wall,
    }


async def compare(entries: list[LogEntry], speed: float = 1.0, link_rate: float = 2_000_000.0,
                  window: int = 8 << 20, conn_rate: float = 0.0,
                  on_done: Callable[[], None] | None = None) -> dict:
    """Normal vs VMC on the same log: one Table 2 row (and Table 1's calculated saving).

    A third arm runs the proxy with sharing off, so the proxy's own cost or gain
    can be told apart from sharing's ("latency_saving_vs_proxy_%"). ``on_done()`` is called
    as each of the 3 x ``len(entries)`` requests ends.
    """
    normal = await _arm(entries, False, speed, link_rate, window, conn_rate, on_done=on_done)
    proxy_only = await _arm(entries, True, speed, link_rate, window, conn_rate, sharing=False,
                            on_done=on_done)
    vmc = await _arm(entries, True, speed, link_rate, window, conn_rate, on_done=on_done)
    calc = calculated_saving(entries, window)
    bw = (100.0 * (1 - vmc["origin_bytes"] / normal["origin_bytes"])
          if normal["origin_bytes"] else 0.0)
    lat = 100.0 * (1 - vmc["latency_sum"] / normal["latency_sum"]) if normal["latency_sum"] else 0.0
    return {
        "requests": len(entries),
        "normal_MB": normal["origin_bytes"] / 1e6,
        "vmc_MB": vmc["origin_bytes"] / 1e6,
        "bandwidth_saving_%": bw,
        "latency_saving_%": lat,
        "latency_saving_vs_proxy_%": 100.0 * (1 - vmc["latency_sum"] / proxy_only["latency_sum"])
        if proxy_only["latency_sum"] else 0.0,
        "calculated_latency_saving_%": calc.latency_saving,
        "calculated_bandwidth_saving_%": calc.bandwidth_saving,
        "overlaps": calc.overlaps,
        "failed": normal["failed"] + vmc["failed"] + proxy_only["failed"],
        "normal_latencies": normal["latencies"],
        "vmc_latencies": vmc["latencies"],
        "proxy_latencies": proxy_only["latencies"],
        "wall_s": normal["wall"] + vmc["wall"] + proxy_only["wall"],
    }
