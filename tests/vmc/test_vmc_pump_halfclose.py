"""A client that half-closes after its request (``shutdown(SHUT_WR)``, as ``nc -N`` and the
proxy tests' raw helper do) still gets its answer from the pump: asyncio closes a transport
whose protocol does not take the EOF, which once cut every such answer off
(test_vmc_proxy_robust.py::test_http10_and_pipelined_requests and three more)."""

from __future__ import annotations

import asyncio
import socket

from vmc.aio.config import ProxyConfig
from vmc.aio.origin import Origin, expected
from vmc.aio.proxy import Proxy


def _half_closed_get(addr: tuple[str, int], raw: bytes) -> bytes:
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_a_half_closed_client_gets_its_answer_and_the_close() -> None:
    async def run() -> bytes:
        origin = await Origin().start()
        pump = await Proxy(ProxyConfig(upstreams=[origin.authority],
                                       default_upstream=origin.authority)).start()
        try:
            raw = b"GET /hc?size=500 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
            return await asyncio.to_thread(_half_closed_get, pump.address, raw)
        finally:
            await pump.close()
            await origin.close()

    out = asyncio.run(asyncio.wait_for(run(), 60))
    assert out.startswith(b"HTTP/1.1 200") and out.endswith(expected("/hc", 500))
