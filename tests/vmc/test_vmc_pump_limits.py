"""The pump's bounds on real sockets, reached through the core (the scenario of
test_vmc_proxy_limits.py::test_client_that_never_reads_is_cut_off, on ``vmc proxy --engine
core``'s pump): a client that never reads is reset after ``client_write_timeout`` and its
session's origin fetch is abandoned, so the origin stops sending."""

from __future__ import annotations

import asyncio
import socket

from vmc.aio.config import ProxyConfig
from vmc.aio.origin import Origin
from vmc.aio.pump import CorePump, machine_config


async def _until(cond, timeout: float = 15.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if cond():
            return True
        await asyncio.sleep(0.02)
    return cond()


async def test_a_client_that_never_reads_is_reset_and_its_origin_fetch_abandoned() -> None:
    origin = await Origin(rate=4_000_000).start()
    cfg = ProxyConfig(upstreams=[origin.authority], client_write_timeout=1.0,
                      write_high_water=16384, window=1 << 20, disk_budget=0)
    pump = await CorePump(machine_config(cfg), upstreams=cfg.upstreams).start()
    size = 40_000_000
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(s, pump.address)
        req = f"GET http://{origin.authority}/stall.bin?size={size} HTTP/1.1\r\nHost: h\r\n\r\n"
        await loop.sock_sendall(s, req.encode())
        assert await _until(lambda: origin.stats.requests >= 1)
        assert await _until(lambda: not pump.clients and not pump.fetches), (
            len(pump.clients), len(pump.fetches))
        assert origin.stats.body_bytes < size
        sent = origin.stats.body_bytes
        await asyncio.sleep(0.3)
        assert origin.stats.body_bytes - sent <= 2 * 16384  # it stopped (a chunk in flight at most)
        core = pump.core
        rec = core.stats.snapshot(10)["recent"][0]  # type: ignore[attr-defined]
        assert "write stalled" in rec["error"]
    finally:
        s.close()
        await pump.close()
        await origin.close()
