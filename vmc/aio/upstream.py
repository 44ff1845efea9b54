"""A small HTTP/1.1 client over asyncio streams, framed by h11 (RFC 9112).

Used by the proxy for origin fetches (whole objects and Range patches) and by
:mod:`vmc.client`. Without a :class:`Pool` each request has its own connection
(``Connection: close``); with one, cleanly finished connections are kept
alive and reused. An unfinished fetch is aborted by closing its socket.

A body that ends before its declared length raises :class:`UpstreamError`
(RFC 9112 sec. 6.3 rule 6: the message is incomplete), never a short success.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import h11

READ_SIZE = 65536

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"content-length",
    }
)


class UpstreamError(Exception):
    """Connecting to, or reading from, an upstream failed, or its response was malformed."""


def end_to_end(headers: Sequence[tuple[bytes, bytes]], drop: Sequence[bytes] = ()) -> list[tuple[bytes, bytes]]:
    """Headers minus hop-by-hop fields, those named in Connection, and ``drop`` (RFC 9110 sec. 7.6.1)."""
    named = {
        e.strip().lower() for k, v in headers if k == b"connection" for e in v.split(b",") if e.strip()
    }
    bad = HOP_BY_HOP | named | set(drop)
    return [(k, v) for k, v in headers if k not in bad]


class UpstreamResponse:
    """Head of a response; iterate :meth:`chunks` for the body, then :meth:`close`."""

    def __init__(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        resp: h11.Response,
        timeout: float,
    ) -> None:
        self._conn = conn
        self._reader = reader
        self._writer = writer
        self._timeout = timeout
        self.status: int = resp.status_code
        self.reason: bytes = resp.reason
        self.headers: list[tuple[bytes, bytes]] = [(k.lower(), v) for k, v in resp.headers]
        self.http_version: bytes = resp.http_version
        self.complete = False
        self._pool: Pool | None = None
        self._key: tuple[str, int] = ("", 0)

    def header(self, name: bytes) -> bytes | None:
        """First value of a (lower-case) header."""
        for k, v in self.headers:
            if k == name:
                return v
        return None

    async def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive; UpstreamError if the body is cut short or times out."""
        while True:
            try:
                ev = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise UpstreamError(f"upstream framing error: {exc}") from exc
            if ev is h11.NEED_DATA:
                try:
                    data = await asyncio.wait_for(self._reader.read(READ_SIZE), self._timeout)
                except (OSError, asyncio.TimeoutError) as exc:
                    raise UpstreamError(f"upstream read failed: {exc!r}") from exc
                self._conn.receive_data(data)
                continue
            if isinstance(ev, h11.Data):
                if ev.data:
                    yield bytes(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                self.complete = True
                return
            elif isinstance(ev, h11.ConnectionClosed):
                raise UpstreamError("upstream closed before the end of the body")

    async def read_all(self, limit: int = 1 << 30) -> bytes:
        """The whole body (for small responses)."""
        parts: list[bytes] = []
        n = 0
        async for c in self.chunks():
            n += len(c)
            if n > limit:
                raise UpstreamError("body over limit")
            parts.append(c)
        return b"".join(parts)

    def close(self) -> None:
        """Release the connection: back to the pool when reusable, else closed (aborted if unfinished)."""
        if self._writer.is_closing():
            return
        if (
            self.complete
            and self._pool is not None
            and self._conn.our_state is h11.DONE
            and self._conn.their_state is h11.DONE
        ):
            self._conn.start_next_cycle()
            self._pool.put(self._key, self._reader, self._writer, self._conn)
            self._pool = None
            return
        if self.complete:
            self._writer.close()
        else:
            self._writer.transport.abort()


_Idle = tuple[float, asyncio.StreamReader, asyncio.StreamWriter, h11.Connection]


class Pool:
    """Idle keep-alive connections per upstream (host, port), at most ``per_host`` each.

    Only connections whose previous exchange ended cleanly (both h11 sides DONE)
    are kept; a pooled connection the origin has closed meanwhile is detected on
    use and the request retried once on a fresh connection (GET/HEAD only).
    """

    def __init__(self, per_host: int = 16, idle_timeout: float = 20.0) -> None:
        self.per_host = per_host
        self.idle_timeout = idle_timeout
        self._idle: dict[tuple[str, int], list[_Idle]] = {}
        self.reused = 0
        self.opened = 0

    def get(self, key: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, h11.Connection] | None:
        now = time.monotonic()
        stack = self._idle.get(key, [])
        while stack:
            t, reader, writer, conn = stack.pop()
            if now - t < self.idle_timeout and not writer.is_closing() and not reader.at_eof():
                return reader, writer, conn
            writer.transport.abort()
        return None

    def put(self, key: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
            conn: h11.Connection) -> None:
        stack = self._idle.setdefault(key, [])
        if len(stack) >= self.per_host:
            writer.close()
            return
        stack.append((time.monotonic(), reader, writer, conn))

    def close(self) -> None:
        for stack in self._idle.values():
            for _, _, writer, _ in stack:
                writer.transport.abort()
        self._idle.clear()


async def request(
    host: str,
    port: int,
    method: bytes,
    target: bytes,
    headers: Sequence[tuple[bytes, bytes]],
    body: bytes = b"",
    timeout: float = 30.0,
    pool: Pool | None = None,
) -> UpstreamResponse:
    """Send one request and return once the response head is in. UpstreamError on failure.

    ``headers`` must include Host; Content-Length is set for ``body``. Without a
    ``pool`` the request says ``Connection: close``; with one, a kept-alive
    connection is reused when available.
    """
    key = (host, port)
    if pool is not None:
        pooled = pool.get(key)
        if pooled is not None:
            pool.reused += 1
            try:
                return await _exchange(*pooled, method, target, headers, body, timeout, pool, key)
            except UpstreamError:
                if method not in (b"GET", b"HEAD"):
                    raise
                # A stale keep-alive connection: retry once on a fresh one.
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise UpstreamError(f"cannot connect to {host}:{port}: {exc!r}") from exc
    if pool is not None:
        pool.opened += 1
    return await _exchange(reader, writer, h11.Connection(h11.CLIENT), method, target, headers, body, timeout,
                           pool, key)


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    conn: h11.Connection,
    method: bytes,
    target: bytes,
    headers: Sequence[tuple[bytes, bytes]],
    body: bytes,
    timeout: float,
    pool: Pool | None,
    key: tuple[str, int],
) -> UpstreamResponse:
    hdrs = [(k, v) for k, v in headers if k.lower() not in (b"connection", b"content-length", b"transfer-encoding")]
    if pool is None:
        hdrs.append((b"connection", b"close"))
    if body or method not in (b"GET", b"HEAD"):
        hdrs.append((b"content-length", str(len(body)).encode()))
    try:
        out = conn.send(h11.Request(method=method, target=target, headers=hdrs))
        if body:
            out += conn.send(h11.Data(data=body))
        out += conn.send(h11.EndOfMessage())
        writer.write(out)
        await asyncio.wait_for(writer.drain(), timeout)
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(READ_SIZE), timeout)
                conn.receive_data(data)
                continue
            if isinstance(ev, h11.InformationalResponse):
                continue
            if isinstance(ev, h11.Response):
                resp = UpstreamResponse(conn, reader, writer, ev, timeout)
                resp._pool, resp._key = pool, key
                return resp
            raise UpstreamError(f"unexpected event before response: {type(ev).__name__}")
    except (OSError, asyncio.TimeoutError, h11.ProtocolError) as exc:
        writer.transport.abort()
        raise UpstreamError(f"upstream request failed: {exc!r}") from exc
    except BaseException:
        writer.transport.abort()
        raise
