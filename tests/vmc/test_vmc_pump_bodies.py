"""A request body and the client's end-to-end fields reach the origin through the pump (real
loopback sockets; a small origin that echoes what it received): what the pump lacked beside
the proxy, now decided in the core."""

from __future__ import annotations

import asyncio

from vmc.aio.pump import CorePump


async def test_a_post_body_and_fields_reach_the_origin_through_the_pump() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        fields = dict(
            (k.strip().lower(), v.strip())
            for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n")[1:] if ln)
        )
        body = await reader.readexactly(int(fields.get(b"content-length", b"0")))
        out = head.split(b" ", 1)[0] + b" " + fields.get(b"x-test", b"-") + b" " + body
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(out), out))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    pump = await CorePump(upstreams=[f"{host}:{port}"]).start()
    try:
        r, w = await asyncio.open_connection(*pump.address)
        body = bytes(range(256)) * 400  # 100 KiB, in pieces on the wire
        w.write(b"POST http://%s:%d/form HTTP/1.1\r\nhost: x\r\nx-test: kept\r\n"
                b"content-length: %d\r\n\r\n" % (host.encode(), port, len(body)))
        for i in range(0, len(body), 30_000):
            w.write(body[i : i + 30_000])
            await w.drain()
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 ")
        length = int([ln.split(b":")[1] for ln in head.split(b"\r\n")
                      if ln.lower().startswith(b"content-length")][0])
        got = await asyncio.wait_for(r.readexactly(length), 10)
        assert got == b"POST kept " + body
        w.close()
    finally:
        await pump.close()
        server.close()
        await server.wait_closed()
