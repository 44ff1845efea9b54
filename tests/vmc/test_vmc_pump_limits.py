"""The pump's bounds on real sockets, reached through the core (the scenario of
test_vmc_proxy_limits.py::test_client_that_never_reads_is_cut_off, on ``vmc proxy --engine
core``'s pump): a client that never reads is reset after ``client_write_timeout`` and its
session's origin fetch is abandoned, so the origin stops sending."""

from __future__ import annotations

import asyncio
import socket

from vmc.aio.config import ProxyConfig
from vmc.aio.origin import Origin
from vmc.aio.proxy import machine_config
from vmc.aio.pump import CorePump


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
        rec = core.stats.snapshot(10)["recent"][0]  # type: ignore[attr-defined]  # typed counters
        assert "write stalled" in rec["error"]
    finally:
        s.close()
        await pump.close()
        await origin.close()


async def test_at_the_connection_limit_the_pump_resets_the_slow_loris_for_a_newcomer() -> None:
    from vmc.core.slots import SlotLimits

    origin = await Origin().start()
    pump = await CorePump(upstreams=[origin.authority], slots=SlotLimits(max_connections=1)).start()
    try:
        r1, w1 = await asyncio.open_connection(*pump.address)
        w1.write(b"GET /x HT")  # a head that never completes holds the only slot
        await w1.drain()
        await asyncio.sleep(0.1)
        r2, w2 = await asyncio.open_connection(*pump.address)
        w2.write(f"GET http://{origin.authority}/n.bin?size=1000 HTTP/1.1\r\nhost: h\r\n\r\n"
                 .encode())
        head = await asyncio.wait_for(r2.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 ")
        try:
            gone = await asyncio.wait_for(r1.read(), 10)
        except ConnectionResetError:
            gone = b""
        assert gone == b""  # the slow-loris connection was reset for the newcomer
        w1.close()
        w2.close()
    finally:
        await pump.close()
        await origin.close()
