"""Local HTTP endpoint: a media player plays while PPSPP downloads.

``GET /`` (with optional ``Range: bytes=a-b``, RFC 9110 section 14) returns the
content as it is verified: each response waits for the next chunk, moving the
peer's playback position there so the VoD picker fetches it first (paper
III-C); opening the endpoint attaches it as an in-order reader, so the
linear picker takes every block in plain order (no twist).  Built on h11;
one request per connection.  Other methods get 405 with ``Allow: GET, HEAD``
(RFC 9110 15.5.6); closing the endpoint ends the responses still waiting
for chunks.
"""

from __future__ import annotations

import asyncio
import http
import re

import h11

from deliverykit.deadline import within
from swift.aio.node import SwiftNode
from swift.core.merkle import MerkleTree


class HttpStream:
    """Serve a downloading :class:`SwiftNode` over HTTP/1.1 on ``host:port``."""

    def __init__(self, node: SwiftNode, host: str = "127.0.0.1", port: int = 0,
                 content_type: str = "application/octet-stream") -> None:
        self.node = node
        self.host = host
        self.port = port
        self.content_type = content_type
        self.server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.Task] = set()

    async def __aenter__(self) -> HttpStream:
        # a player reads in order from the start: the linear picker keeps
        # position order from now on (no twist; docs/ledbat.md)
        self.node.peer.download.picker.attach_reader()
        self.server = await asyncio.start_server(self._client, self.host, self.port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        if self.server is not None:
            self.server.close()
            for t in list(self._clients):  # players still waiting for chunks
                t.cancel()
            if self._clients:
                await asyncio.gather(*self._clients, return_exceptions=True)
            await self.server.wait_closed()
            self.server = None

    @staticmethod
    def _response(status: int, headers: list) -> h11.Response:
        return h11.Response(status_code=status, headers=headers,
                            reason=http.HTTPStatus(status).phrase.encode())

    async def _wait_size(self) -> int:
        tree = self.node.peer.content.tree
        if not isinstance(tree, MerkleTree):  # a live stream has no size: no byte ranges
            raise TypeError("HTTP byte ranges need static content, not a live stream")
        while tree.size is None:
            n = tree.n_chunks
            if n is not None:  # size known once the last chunk is verified: fetch it first
                if self.node.peer.content.have.has(n - 1):
                    break
            await asyncio.sleep(0.05)
        return tree.size or 0

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # the endpoint closed (download over) while this response waited
        finally:
            self._clients.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            req = None
            while req is None:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    data = await reader.read(65536)
                    conn.receive_data(data)
                    if not data:
                        return
                elif isinstance(ev, h11.Request):
                    req = ev
            if req.method not in (b"GET", b"HEAD"):
                writer.write(conn.send(self._response(405, [
                    ("allow", "GET, HEAD"), ("content-length", "0")])))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                return
            size = await within(self._wait_size(), 60)
            lo, hi = 0, size - 1
            status = 200
            for k, v in req.headers:
                if k == b"range":
                    m = re.fullmatch(rb"bytes=(\d*)-(\d*)", v.strip())
                    if m:
                        if m.group(1):
                            lo = int(m.group(1))
                            hi = int(m.group(2)) if m.group(2) else size - 1
                        elif m.group(2):
                            lo = max(0, size - int(m.group(2)))
                        hi = min(hi, size - 1)
                        status = 206
            if lo > hi:
                writer.write(conn.send(self._response(416, [
                    ("content-range", f"bytes */{size}"), ("content-length", "0")])))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                return
            headers = [("content-type", self.content_type), ("accept-ranges", "bytes"),
                       ("content-length", str(hi - lo + 1))]
            if status == 206:
                headers.append(("content-range", f"bytes {lo}-{hi}/{size}"))
            writer.write(conn.send(self._response(status, headers)))
            if req.method == b"HEAD":
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                return
            content = self.node.peer.content
            cs = content.chunk_size
            pos = lo
            while pos <= hi:
                c = pos // cs
                self.node.peer.set_playpos(c)
                while not content.have.has(c):
                    await asyncio.sleep(0.02)
                chunk = content.chunk_bytes(c)
                a = pos - c * cs
                b = min(len(chunk), hi - c * cs + 1)
                writer.write(conn.send(h11.Data(data=chunk[a:b])))
                pos = c * cs + b
                await writer.drain()
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
        except (ConnectionError, asyncio.TimeoutError, h11.ProtocolError):
            pass
