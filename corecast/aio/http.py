"""Minimal JSON-over-HTTP/1.1 server and client on asyncio streams, parsed by h11.

Used by the out-of-band subscription service (paper section 3.3: join, leave,
heartbeat).  One request per connection; bodies are JSON objects, bounded in
size.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import h11

from deliverykit.deadline import within

MAX_BODY = 64 * 1024
#: ``handler(method, path, json_body, peer_host) -> (status, json_body)``; ``peer_host`` is
#: the TCP peer's address (a completed handshake: not spoofable like a UDP source)
Handler = Callable[[str, str, dict, str], Awaitable[tuple[int, dict]]]


class HttpError(Exception):
    """The peer sent something that is not acceptable HTTP/JSON."""


async def _read_message(conn: h11.Connection, reader: asyncio.StreamReader, timeout: float
                        ) -> tuple[h11.Request | h11.Response, bytes]:
    head = None
    body = bytearray()
    while True:
        ev = conn.next_event()
        if ev is h11.NEED_DATA:
            data = await within(reader.read(65536), timeout)
            conn.receive_data(data)
            continue
        if isinstance(ev, (h11.Request, h11.Response)):
            head = ev
        elif isinstance(ev, h11.Data):
            body += ev.data
            if len(body) > MAX_BODY:
                raise HttpError("body too large")
        elif isinstance(ev, h11.EndOfMessage):
            assert head is not None
            return head, bytes(body)
        elif isinstance(ev, h11.ConnectionClosed):
            raise HttpError("connection closed")


def _json_body(raw: bytes) -> dict:
    if not raw:
        return {}
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(f"bad JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise HttpError("JSON body must be an object")
    return obj


async def serve(host: str, port: int, handler: Handler, timeout: float = 5.0) -> asyncio.Server:
    """Start a server calling ``handler(method, path, json, peer_host) -> (status, json)``."""

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16 * 1024)
        try:
            try:
                req, raw = await _read_message(conn, reader, timeout)
                assert isinstance(req, h11.Request)
                peer = writer.get_extra_info("peername")
                status, obj = await handler(req.method.decode(), req.target.decode(),
                                            _json_body(raw), str(peer[0]) if peer else "")
            except (HttpError, h11.RemoteProtocolError) as exc:
                if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                    return
                status, obj = 400, {"error": str(exc)}
            out = json.dumps(obj).encode()
            writer.write(conn.send(h11.Response(status_code=status, headers=[
                ("content-type", "application/json"), ("content-length", str(len(out))),
                ("connection", "close")])))
            writer.write(conn.send(h11.Data(data=out)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, h11.LocalProtocolError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(on_conn, host, port)


async def request(host: str, port: int, method: str, path: str, obj: dict | None = None,
                  timeout: float = 5.0, local_host: str | None = None) -> tuple[int, dict]:
    """One JSON request (from ``local_host`` when given); returns (status, JSON body)."""
    local = (local_host, 0) if local_host else None
    reader, writer = await within(
        asyncio.open_connection(host, port, local_addr=local), timeout)
    try:
        conn = h11.Connection(h11.CLIENT)
        body = json.dumps(obj).encode() if obj is not None else b""
        writer.write(conn.send(h11.Request(method=method, target=path, headers=[
            ("host", f"{host}:{port}"), ("content-type", "application/json"),
            ("content-length", str(len(body))), ("connection", "close")])))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        resp, raw = await _read_message(conn, reader, timeout)
        assert isinstance(resp, h11.Response)
        return resp.status_code, _json_body(raw)
    finally:
        writer.close()
