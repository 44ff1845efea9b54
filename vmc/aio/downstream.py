"""The client side of the proxy: connection slots, request reading with deadlines, error answers.

:class:`Downstream` accepts connections, holds each in a slot of
:class:`~vmc.core.admission.Admission` (at the limit a slow-loris connection is
evicted for the newcomer; 503 at once only when every slot is answering a
request), reads each request head within ``head_timeout`` of its first byte and
its body within ``body_timeout``, refuses what must not be forwarded (HTTP
versions other than 1.x, oversized or smuggling heads, duplicate Host, large
bodies), each with its own ``refused`` counter, and hands every complete request
to :meth:`Downstream._serve_request`, which :class:`vmc.aio.proxy.Proxy` implements.
Every status line written here carries a reason phrase.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable
from http import HTTPStatus
from typing import cast

import h11

from vmc.aio.config import ProxyConfig, original_dst
from vmc.aio.deadline import within
from vmc.core.admission import INCOMPLETE, Admission, Phase
from vmc.core.reasons import Refused
from vmc.core.stats import Stats

CHUNK = 65536


class ClientGone(Exception):
    """The client connection broke while we were writing to it."""


class RequestTimeout(Exception):
    """A request head (or body) did not complete within its total deadline."""

    def __init__(self, why: Refused) -> None:
        super().__init__(why.value)
        self.why = why


def reason(status: int) -> bytes:
    """The standard reason phrase (RFC 9110 sec. 15), or a generic one for an unregistered code."""
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return {1: b"Informational", 2: b"Success", 3: b"Redirection", 4: b"Client Error"}.get(
            status // 100, b"Server Error")


class _FileSpan:
    """``count`` body bytes that leave by sendfile: h11 only needs their length."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count


class Client:
    """One downstream connection: h11 state plus the asyncio streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cfg: ProxyConfig,
                 ident: int = 0) -> None:
        self.id = ident
        self.task: asyncio.Task | None = None
        #: Set when the proxy closed this connection to give its slot to another.
        self.evicted = False
        self.reader = reader
        self.writer = writer
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=cfg.max_header_bytes)
        writer.transport.set_write_buffer_limits(high=cfg.write_high_water)
        self.high = cfg.write_high_water
        self.write_timeout = cfg.client_write_timeout
        self.original_dst = original_dst(writer.get_extra_info("socket")) if cfg.transparent else None
        #: A response head waiting for the body bytes that follow it in the same loop iteration
        #: (one send() instead of two: the top cost of a small response under load, issue 17);
        #: ``_flush_soon`` writes it alone at the end of the iteration if none came.
        self._head = b""
        self._flush_soon: asyncio.Handle | None = None

    async def send(self, event: h11.Event) -> None:
        """Write one event; ClientGone if the connection broke or made no write progress for
        ``client_write_timeout`` s (a client that stops reading must not hold upstream resources).

        A final response head is held until the next event or the end of this loop iteration,
        whichever comes first, so that a head and a body already at hand leave in one write; the
        client never waits for the head longer than one iteration of the loop."""
        if isinstance(event, (h11.Response, h11.InformationalResponse)) and not event.reason:
            event = type(event)(status_code=event.status_code, headers=event.headers,
                                reason=reason(event.status_code))  # never "HTTP/1.1 200 \r\n"
        try:
            data = self.conn.send(event)
            if type(event) is h11.Response and data:
                self._head = data
                self._flush_soon = asyncio.get_running_loop().call_soon(self.flush_head)
                return
            if self._head:
                data = self._head + (data or b"")
                self._unhold()
            if data:
                self.writer.write(data)
                if self.write_timeout > 0 and self.writer.transport.get_write_buffer_size() > self.high:
                    await self._drain_with_progress()
                else:
                    await self.writer.drain()
        except (OSError, RuntimeError) as exc:
            raise ClientGone(repr(exc)) from exc

    async def _drain_with_progress(self) -> None:
        """drain(), giving up when a whole ``write_timeout`` passes with no byte leaving the buffer."""
        transport = self.writer.transport
        task = asyncio.ensure_future(self.writer.drain())
        try:
            while True:
                before = transport.get_write_buffer_size()
                done, _ = await asyncio.wait({task}, timeout=self.write_timeout)
                if done:
                    task.result()
                    return
                if transport.get_write_buffer_size() >= before:
                    raise ClientGone(f"write stalled: no progress for {self.write_timeout:g} s")
        finally:
            if not task.done():
                task.cancel()

    async def sendfile(self, fd: int, offset: int, count: int) -> None:
        """Body bytes ``[offset, offset + count)`` of the file ``fd`` by ``loop.sendfile`` (zero
        copy where the loop and the transport allow it, else its read-and-write fallback); h11
        accounts them against Content-Length. ClientGone if the connection broke, or if the
        span took more than ``client_write_timeout`` s (the caller sends spans of bounded size)."""
        span = _FileSpan(count)
        # h11 passes a data object through untouched and only takes its len() (its "sendfile"
        # recipe); its stubs say bytes, hence the cast.
        pieces = self.conn.send_with_data_passthrough(h11.Data(data=cast(bytes, span)))
        assert pieces == [span], "Content-Length framing only"
        try:
            if self._head:
                head = self._head
                self._unhold()
                self.writer.write(head)
            loop = asyncio.get_running_loop()
            with os.fdopen(os.dup(fd), "rb") as f:
                send = loop.sendfile(self.writer.transport, f, offset, count, fallback=True)
                if self.write_timeout > 0:
                    await within(send, self.write_timeout)
                else:
                    await send
        except TimeoutError as exc:
            raise ClientGone(f"write stalled: {count} bytes not taken in {self.write_timeout:g} s") from exc
        except (OSError, RuntimeError) as exc:
            raise ClientGone(repr(exc)) from exc

    def _unhold(self) -> None:
        self._head = b""
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None

    def flush_head(self) -> None:
        """End of the loop iteration with a head still held: it goes out alone (errors surface
        at the next send, as for any write)."""
        head, self._flush_soon = self._head, None
        self._head = b""
        if head and not self.writer.is_closing():
            try:
                self.writer.write(head)
            except (OSError, RuntimeError):
                pass

    def abort(self) -> None:
        self._unhold()
        if not self.writer.is_closing():
            self.writer.transport.abort()


class Downstream:
    """Client connections of a proxy; subclasses answer requests in :meth:`_serve_request`."""

    def __init__(self, cfg: ProxyConfig, stats: Stats, clock: Callable[[], float]) -> None:
        self.cfg = cfg
        self.stats = stats
        self.clock = clock
        self.connections = 0
        self.admission = Admission(cfg.max_connections)
        self._clients: dict[int, Client] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task] = set()

    async def _serve_request(self, client: Client, req: h11.Request, body: bytes) -> bool:
        """Answer one complete request; False when the connection must close."""
        raise NotImplementedError

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        client = Client(reader, writer, self.cfg, next(self._ids))
        client.task = task
        try:
            decision = self.admission.admit(client.id, self.clock())
            if decision.evict is not None:
                self._evict(decision.evict, decision.evicted_phase)
            if not decision.admitted:
                await self._refuse_over_limit(client)
                return
            self._clients[client.id] = client
            await self._serve_connection(client)
        except (ClientGone, ConnectionError, asyncio.TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self.connections -= 1
            self._tasks.discard(task)
            self._clients.pop(client.id, None)
            self.admission.leave(client.id)
            if client.conn.our_state is h11.ERROR or client.evicted:
                client.abort()
            client.flush_head()  # a head still held goes out before the close, as it always did
            if not writer.is_closing():
                writer.close()

    def _evict(self, ident: int, phase: Phase | None) -> None:
        """Close a connection that holds a slot without a request being answered (slow-loris first)."""
        victim = self._clients.pop(ident, None)
        self.stats.refused[Refused.EVICTED_INCOMPLETE_HEAD if phase in INCOMPLETE else Refused.EVICTED_IDLE] += 1
        if victim is None:
            return
        victim.evicted = True
        victim.abort()
        if victim.task is not None:
            victim.task.cancel()

    async def _refuse_over_limit(self, client: Client) -> None:
        """Every slot is answering a request: 503 at once (no waiting for a head that may never come),
        then a short bounded linger so the client reads it rather than a reset."""
        self.stats.refused[Refused.CONNECTION_LIMIT] += 1
        body = b"503 connection-limit\n"
        client.writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
                            b"content-length: %d\r\nretry-after: %d\r\nconnection: close\r\n\r\n%s"
                            % (len(body), self.cfg.retry_after, body))
        try:
            await within(client.writer.drain(), 1.0)
            if client.writer.can_write_eof():
                client.writer.write_eof()
            loop = asyncio.get_running_loop()
            end = loop.time() + 1.0
            while loop.time() < end:
                data: bytes = await within(client.reader.read(CHUNK), end - loop.time())
                if not data:
                    break
        except (OSError, asyncio.TimeoutError):
            pass

    def _phase(self, client: Client, phase: Phase) -> None:
        self.admission.move(client.id, phase, self.clock())

    async def _next_event(self, client: Client, deadline: float | None = None,
                          why: Refused = Refused.HEAD_TIMEOUT) -> h11.Event:
        """The next h11 event. Waiting for a new request: ``idle_timeout`` for its first byte, then
        ``head_timeout`` in total for the whole head; with ``deadline`` (loop time), that in total."""
        loop = asyncio.get_running_loop()
        head = deadline is None and client.conn.their_state is h11.IDLE
        if head and client.conn.trailing_data[0]:
            deadline = loop.time() + self.cfg.head_timeout  # a pipelined request already started
            self._phase(client, Phase.HEAD)
        while True:
            ev = client.conn.next_event()
            if ev is not h11.NEED_DATA:
                return ev  # type: ignore[return-value]  # PAUSED only comes after a Request we answer first
            wait = self.cfg.idle_timeout if deadline is None else deadline - loop.time()
            if wait <= 0:
                raise RequestTimeout(why)
            try:
                data = await within(client.reader.read(CHUNK), wait)
            except asyncio.TimeoutError:
                if deadline is None:
                    raise  # idle: close quietly
                raise RequestTimeout(why) from None
            if client.evicted:
                # Its slot went to a newcomer; the EOF our abort caused can beat the cancel (3.11's
                # wait_for hands back a finished read): never read it as the peer's malformed head.
                raise ClientGone("evicted")
            if head and deadline is None and data:
                deadline = loop.time() + self.cfg.head_timeout
                self._phase(client, Phase.HEAD)
            client.conn.receive_data(data)

    async def _error(self, client: Client, status: int, why: Refused, close: bool = True,
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
        self.stats.refused[why] += 1
        body = f"{status} {why.value}\n".encode()
        hdrs = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        hdrs += extra or []
        if close:
            hdrs.append((b"connection", b"close"))
        if client.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            await client.send(h11.Response(status_code=status, headers=hdrs))
            await client.send(h11.Data(data=body))
            await client.send(h11.EndOfMessage())

    async def _serve_connection(self, client: Client) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                ev = await self._next_event(client)
            except h11.RemoteProtocolError as exc:
                await self._error(client, exc.error_status_hint or 400, Refused.MALFORMED)
                return
            except RequestTimeout as exc:
                await self._error(client, 408, exc.why)
                return
            if isinstance(ev, h11.ConnectionClosed):
                return
            if not isinstance(ev, h11.Request):
                return
            self._phase(client, Phase.BODY)
            # RFC 9110 sec. 2.5, 6.2; RFC 9112 sec. 2.3: only HTTP/1.x is spoken here (1.2+ as 1.1).
            if not ev.http_version.startswith(b"1."):
                await self._error(client, 505, Refused.HTTP_VERSION)
                return
            # h11 bounds only an *incomplete* head; a whole one read at once is bounded here.
            head_size = len(ev.target) + sum(len(k) + len(v) + 4 for k, v in ev.headers)
            if head_size > self.cfg.max_header_bytes:
                await self._error(client, 431, Refused.HEADER_TOO_LARGE)
                return
            # Request smuggling (RFC 9112 sec. 6.3 rule 3, sec. 11.2): h11 lets
            # Transfer-Encoding win over Content-Length; we refuse the message.
            names = [k.lower() for k, _ in ev.headers]
            if b"transfer-encoding" in names and b"content-length" in names:
                await self._error(client, 400, Refused.SMUGGLING)
                return
            if names.count(b"host") > 1:
                await self._error(client, 400, Refused.DUPLICATE_HOST)
                return
            body = b""
            if client.conn.they_are_waiting_for_100_continue:
                await client.send(h11.InformationalResponse(status_code=100, headers=[]))
            deadline = loop.time() + self.cfg.body_timeout
            try:
                while True:
                    bev = await self._next_event(client, deadline, Refused.BODY_TIMEOUT)
                    if isinstance(bev, h11.Data):
                        body += bev.data
                        if len(body) > self.cfg.max_request_body:
                            await self._error(client, 413, Refused.BODY_TOO_LARGE)
                            return
                    elif isinstance(bev, h11.EndOfMessage):
                        break
                    else:
                        return
            except h11.RemoteProtocolError:
                await self._error(client, 400, Refused.MALFORMED)
                return
            except RequestTimeout as exc:
                await self._error(client, 408, exc.why)
                return
            self._phase(client, Phase.BUSY)
            keep = await self._serve_request(client, ev, body)
            if not keep or client.conn.our_state is not h11.DONE or client.conn.their_state is not h11.DONE:
                return
            try:
                client.conn.start_next_cycle()
            except h11.LocalProtocolError:
                return
            self._phase(client, Phase.KEPT)
