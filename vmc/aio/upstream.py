"""A small HTTP/1.1 client over asyncio streams, framed by h11 (RFC 9112).

Used by the proxy for origin fetches (whole objects and Range patches) and by
:mod:`vmc.client`. Without a :class:`Pool` each request has its own connection
(``Connection: close``); with one, cleanly finished connections are kept
alive and reused. An unfinished fetch is aborted by closing its socket.

A body that ends before its declared length raises :class:`UpstreamError`
(RFC 9112 sec. 6.3 rule 6: the message is incomplete), never a short success.

A connection goes back to the pool only when its response ended exactly where its
framing said, with no byte buffered behind it (issue 13 item 5: bytes past a
Content-Length would otherwise be read as the next request's response, on behalf
of another client); one that receives anything while idle is dropped on reuse.
Failures say what happened (:class:`UpstreamUnreachable`, :class:`UpstreamClosed`,
:class:`UpstreamBadResponse`, :class:`UpstreamTimeout`). A request is retried on a
fresh connection only when a reused one was closed before a single byte of the
response arrived (the usual keep-alive race), and only for GET and HEAD; never
after a timeout or a malformed answer.

1xx responses before the final one are handed to ``on_interim`` as they arrive
(RFC 9110 sec. 15.2: a proxy forwards them), at most ``MAX_INTERIM`` of them.

The upstream cap is the core's (:class:`vmc.core.fetchgate.FetchGate`): the pump opens
a fetch only when the core lets it, and evicts idle pooled connections
(:meth:`Pool.evict_idle`) to stay within it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import h11

from deliverykit.deadline import within
from vmc.core.policy import HOP_BY_HOP, end_to_end  # noqa: F401 - re-exported (up.end_to_end)

READ_SIZE = 65536
#: 1xx responses accepted before the final one (an origin streaming 1xx forever is cut off).
MAX_INTERIM = 32



class UpstreamError(Exception):
    """Connecting to, or reading from, an upstream failed, or its response was malformed."""


class UpstreamUnreachable(UpstreamError):
    """The connection to the upstream could not be opened."""


class UpstreamClosed(UpstreamError):
    """The upstream closed (or reset) the connection before sending a single byte of a response."""


class UpstreamBadResponse(UpstreamError):
    """The upstream's bytes are not an HTTP/1.1 response (or the head was cut off)."""


class UpstreamTimeout(UpstreamError):
    """The upstream sent nothing for ``timeout`` seconds while we waited for its response."""


#: Called with each 1xx response (not 100 or 101) before the final one.
OnInterim = Callable[[h11.InformationalResponse], Awaitable[None]]


def _buffered(reader: asyncio.StreamReader, conn: h11.Connection) -> int:
    """Bytes received on a connection and not consumed by a response: h11's leftovers plus the
    stream reader's (asyncio keeps no public accessor for the latter; ``_buffer`` is a
    bytearray)."""
    return len(conn.trailing_data[0]) + len(getattr(reader, "_buffer", b""))


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
        self._closed = False

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
                    data = await within(self._reader.read(READ_SIZE), self._timeout)
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
        """Release the connection: back to the pool when reusable, else closed (aborted if
        unfinished).

        Idempotent: a second call does nothing (the connection may be pooled and in use again).
        """
        if self._closed:
            return
        self._closed = True
        if self._writer.is_closing():
            return
        done = self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE
        clean = self.complete and done and not _buffered(self._reader, self._conn)
        if self.complete and not clean and self._pool is not None:
            self._pool.dirty += 1
        if clean and self._pool is not None:
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
        #: Connections not reused because bytes were left over past a response or arrived while
        #: idle.
        self.dirty = 0

    def get(
        self, key: tuple[str, int]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, h11.Connection] | None:
        now = time.monotonic()
        stack = self._idle.get(key, [])
        while stack:
            t, reader, writer, conn = stack.pop()
            if _buffered(reader, conn):
                # the upstream sent something nobody asked for: never read it as a response
                self.dirty += 1
            elif now - t < self.idle_timeout and not writer.is_closing() and not reader.at_eof():
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

    @property
    def idle(self) -> int:
        """Idle connections held, every upstream together."""
        return sum(len(stack) for stack in self._idle.values())

    def evict_idle(self) -> bool:
        """Close the oldest idle connection (any upstream); False if none."""
        oldest: list[_Idle] | None = None
        for stack in self._idle.values():
            if stack and (oldest is None or stack[0][0] < oldest[0][0]):
                oldest = stack
        if oldest is None:
            return False
        _, _, writer, _ = oldest.pop(0)
        writer.transport.abort()
        return True

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
    on_interim: OnInterim | None = None,
) -> UpstreamResponse:
    """Send one request and return once the response head is in. UpstreamError on failure.

    ``headers`` must include Host; Content-Length is set for ``body``. Without a
    ``pool`` the request says ``Connection: close``; with one, a kept-alive
    connection is reused when available. ``on_interim`` gets each 1xx response.
    """
    key = (host, port)
    if pool is not None:
        pooled = pool.get(key)
        if pooled is not None:
            pool.reused += 1
            try:
                return await _exchange(*pooled, method, target, headers, body, timeout, pool, key,
                                       on_interim=on_interim)
            except UpstreamClosed:
                if method not in (b"GET", b"HEAD"):
                    raise
                # Closed before one byte of a response (the keep-alive race): retry once, fresh.
    try:
        reader, writer = await within(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise UpstreamUnreachable(f"cannot connect to {host}:{port}: {exc!r}") from exc
    if pool is not None:
        pool.opened += 1
    return await _exchange(reader, writer, h11.Connection(h11.CLIENT), method, target, headers,
                           body, timeout, pool, key, on_interim=on_interim)


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
    on_interim: OnInterim | None = None,
) -> UpstreamResponse:
    ours = (b"connection", b"content-length", b"transfer-encoding")
    hdrs = [(k, v) for k, v in headers if k.lower() not in ours]
    if pool is None:
        hdrs.append((b"connection", b"close"))
    if body or method not in (b"GET", b"HEAD"):
        hdrs.append((b"content-length", str(len(body)).encode()))
    received = 0
    try:
        out = conn.send(h11.Request(method=method, target=target, headers=hdrs))
        if body:
            out += conn.send(h11.Data(data=body))
        out += conn.send(h11.EndOfMessage())
        writer.write(out)
        await within(writer.drain(), timeout)
        interim = 0
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                data = await within(reader.read(READ_SIZE), timeout)
                if not data and not received:
                    raise UpstreamClosed("upstream closed the connection without a response")
                received += len(data)
                conn.receive_data(data)
                continue
            if isinstance(ev, h11.InformationalResponse):
                # RFC 9110 sec. 15.2: any number may precede the final response; we cap it
                interim += 1
                if interim > MAX_INTERIM:
                    raise UpstreamBadResponse(f"more than {MAX_INTERIM} 1xx responses")
                if on_interim is not None and ev.status_code not in (100, 101):
                    await on_interim(ev)
                continue
            if isinstance(ev, h11.Response):
                resp = UpstreamResponse(conn, reader, writer, ev, timeout)
                resp._pool, resp._key = pool, key
                return resp
            raise UpstreamBadResponse(f"unexpected event before response: {type(ev).__name__}")
    except BaseException as exc:
        writer.transport.abort()
        if isinstance(exc, asyncio.TimeoutError):
            raise UpstreamTimeout(f"no response from the upstream within {timeout:g} s") from exc
        if isinstance(exc, OSError):
            cls = UpstreamBadResponse if received else UpstreamClosed
            raise cls(f"upstream connection failed: {exc!r}") from exc
        if isinstance(exc, h11.ProtocolError):
            raise UpstreamBadResponse(f"malformed upstream response: {exc}") from exc
        raise
