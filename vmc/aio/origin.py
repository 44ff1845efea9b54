"""A small paced HTTP/1.1 origin (h11) with deterministic bodies, for tests, the demo and replay.

The paper "used the logs to generate random bytes up to the length of each
request" (sec. 3.3). Here a body is a function of its path: byte ``i`` of
``/p?size=N`` is ``pattern(p)[i % 65521]`` (a prime period, so a misplaced
chunk never lines up by luck), so any client can check what it received with
:func:`expected` without storing the object.

Query parameters (all optional, the body depends only on the path and size):

``size=N``       body length (default 1 MiB)
``rate=R``       pace this response at R bytes/s (default: the origin's ``rate``; 0 = unpaced)
``fail_at=N``    abort the connection once N bytes of the representation have been sent
``fail_once=1``  with fail_at: only the first response for this path fails (a transient fault)
``change=1``     once a response for this path has failed, its ETag and Last-Modified change
                 (a new version was published meanwhile: If-Range no longer matches)
``cc=V``         Cache-Control value (e.g. ``no-store``, ``private``)
``vary=F``       Vary value
``etag=V``       entity-tag opaque part (changes the validator, not the body); ``weak=1`` for W/
``nolm=1``       no Last-Modified; ``noetag=1`` no ETag
``chunked=1``    no Content-Length (chunked framing)
``cookie=1``     add Set-Cookie
``head_delay=S`` wait S seconds before sending the response head (a slow origin)
``lmnow=1``      Last-Modified equals Date (a weak date validator, RFC 9110 sec. 8.8.2.2)
``nolm206=1``    a 206 carries no Last-Modified (allowed: RFC 9110 sec. 15.3.7)

Every response carries ``Date`` (RFC 9110 sec. 6.6.1: an origin with a clock sends it).

Range (one range; several are coalesced, else ignored) and If-Range are
supported, so the origin can patch prefixes for the proxy. ``link_rate`` emulates
the origin's access link (the paper's "link approximating the speed of the
university's link"): all responses share it, so duplicated traffic delays
everyone, which is where VMC's latency gain comes from (paper sec. 3.4). ``GET /_origin/stats``
returns JSON counters (requests, body bytes, ranges).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import TypeVar
from urllib.parse import parse_qs

import h11

from deliverykit.deadline import within
from vmc.core import policy, ranges
from vmc.core.errors import RangeError, UnsatisfiableRange

PERIOD = 65521
LAST_MODIFIED = b"Sat, 01 Jan 2000 00:00:00 GMT"
LAST_MODIFIED_2 = b"Sun, 02 Jan 2000 00:00:00 GMT"


@functools.lru_cache(maxsize=256)
def pattern(path: str) -> bytes:
    """The period-65521 block for ``path``, doubled so any slice of <= PERIOD is contiguous."""
    seed = int.from_bytes(hashlib.md5(path.encode("utf-8", "surrogateescape")).digest(), "big")
    block = random.Random(seed).randbytes(PERIOD)
    return block + block


def body_slice(path: str, first: int, end: int) -> bytes:
    """Bytes ``[first, end)`` of the body of ``path``."""
    pat = pattern(path)
    out = bytearray()
    pos = first
    while pos < end:
        o = pos % PERIOD
        n = min(end - pos, PERIOD)
        out += pat[o : o + n]
        pos += n
    return bytes(out)


def expected(path: str, size: int) -> bytes:
    """The whole body of ``path`` with ``size`` bytes."""
    return body_slice(path, 0, size)


@functools.lru_cache(maxsize=64)
def digest(path: str, size: int) -> bytes:
    """``Repr-Digest`` value (RFC 9530) of the whole representation."""
    h = hashlib.sha256()
    step = 1 << 20
    for a in range(0, size, step):
        h.update(body_slice(path, a, min(size, a + step)))
    return b"sha-256=:" + base64.b64encode(h.digest()) + b":"


_RFC9110_PHRASES = {
    413: b"Content Too Large", 416: b"Range Not Satisfiable", 422: b"Unprocessable Content"
}
"""Where RFC 9110 renamed a status and Python 3.11's HTTPStatus still has the old phrase."""


def _reason(status: int) -> bytes:
    """The reason phrase for a status line (RFC 9110 sec. 15): never left empty."""
    if status in _RFC9110_PHRASES:
        return _RFC9110_PHRASES[status]
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b"Unknown"


_T = TypeVar("_T", int, float)


def _number(q: dict[str, str], name: str, kind: type[_T], default: _T) -> _T:
    """Query parameter ``name``: a finite number >= 0, else ValueError naming it."""
    if name not in q:
        return default
    try:
        value = kind(q[name])
    except ValueError:
        raise ValueError(f"{name}={q[name]!r} is not a number") from None
    if not (0 <= value < float("inf")):
        raise ValueError(f"{name}={q[name]!r} must be a finite number, zero or more")
    return value


@dataclass
class OriginStats:
    """What the origin served (body bytes count what left the origin)."""

    requests: int = 0
    range_requests: int = 0
    bad_requests: int = 0
    """Requests answered 400 (malformed, or a query parameter out of range)."""
    body_bytes: int = 0
    per_path: Counter[str] = field(default_factory=Counter)
    """Body bytes by path."""


class Origin:
    """``await Origin(rate=...).start()``; ``.address``; ``await .close()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, rate: float = 0.0,
                 chunk: int = 16384, digest_limit: int = 64 << 20,
                 link_rate: float = 0.0) -> None:
        self.host, self.port, self.rate, self.chunk = host, port, rate, chunk
        #: Aggregate bytes/s of the origin's (emulated) access link, shared by all responses
        #: (0 = none).
        self.link_rate = link_rate
        self._link_free = 0.0
        self.digest_limit = digest_limit
        self.stats = OriginStats()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._failed: set[str] = set()

    async def start(self) -> Origin:
        self._server = await asyncio.start_server(self._on_connect, self.host, self.port)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[:2]

    @property
    def authority(self) -> str:
        h, p = self.address
        return f"[{h}]:{p}" if ":" in h else f"{h}:{p}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    data = await within(reader.read(65536), 60)
                    conn.receive_data(data)
                    continue
                if isinstance(ev, h11.Request):
                    keep = await self._respond(conn, writer, ev)
                    if not keep:
                        break
                    while conn.their_state is not h11.DONE:
                        ev2 = conn.next_event()
                        if ev2 is h11.NEED_DATA:
                            conn.receive_data(await within(reader.read(65536), 60))
                        elif isinstance(ev2, (h11.ConnectionClosed,)):
                            break
                    if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                        conn.start_next_cycle()
                        continue
                break
        except h11.RemoteProtocolError as exc:  # a request we cannot parse: say so, then close
            self.stats.bad_requests += 1
            with contextlib.suppress(h11.ProtocolError, OSError, asyncio.TimeoutError):
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    answer = self._answer(conn, writer, exc.error_status_hint or 400,
                                          f"malformed request: {exc}", close=True)
                    await within(answer, 10)
        except (h11.ProtocolError, OSError, asyncio.TimeoutError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, ev: h11.Event
    ) -> None:
        data = conn.send(ev)
        if data:
            writer.write(data)
            await writer.drain()

    async def _answer(self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int,
                      text: str, headers: list[tuple[bytes, bytes]] | None = None,
                      close: bool = False) -> None:
        """A complete short response: ``status`` with its reason phrase and ``text`` as the body."""
        body = (text + "\n").encode("utf-8", "replace") if text else b""
        hdrs = list(headers or [])
        if body:
            hdrs.append((b"content-type", b"text/plain; charset=utf-8"))
        hdrs.append((b"content-length", str(len(body)).encode()))
        if close:
            hdrs.append((b"connection", b"close"))
        head = h11.Response(status_code=status, headers=hdrs, reason=_reason(status))
        await self._send(conn, writer, head)
        if body:
            await self._send(conn, writer, h11.Data(data=body))
        await self._send(conn, writer, h11.EndOfMessage())

    async def _respond(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request
    ) -> bool:
        target = req.target.decode("ascii", "surrogateescape")
        path, _, query = target.partition("?")
        q = {k: v[-1] for k, v in parse_qs(query).items()}
        headers = [(k.lower(), v) for k, v in req.headers]
        self.stats.requests += 1
        if path == "/_origin/stats":
            body = json.dumps(self.stats.__dict__).encode()
            fields = [(b"content-type", b"application/json"),
                      (b"content-length", str(len(body)).encode())]
            await self._send(conn, writer,
                             h11.Response(status_code=200, reason=_reason(200), headers=fields))
            await self._send(conn, writer, h11.Data(data=body))
            await self._send(conn, writer, h11.EndOfMessage())
            return True
        if req.method not in (b"GET", b"HEAD"):
            method = req.method.decode("ascii", "replace")
            await self._answer(conn, writer, 405,
                               f"the test origin serves GET and HEAD, not {method}",
                               [(b"allow", b"GET, HEAD")])
            return True
        try:
            size = _number(q, "size", int, 1 << 20)
            rate = _number(q, "rate", float, self.rate)
            fail_at: int | None = _number(q, "fail_at", int, -1)
            head_delay = _number(q, "head_delay", float, 0.0)
        except ValueError as exc:
            self.stats.bad_requests += 1
            await self._answer(conn, writer, 400, str(exc))
            return True
        if fail_at == -1 or (q.get("fail_once") and path in self._failed):
            fail_at = None
        if head_delay > 0:
            await asyncio.sleep(min(head_delay, 60.0))
        date = formatdate(usegmt=True).encode()
        named = f"{path}:{size}".encode("utf-8", "surrogateescape")
        etag_core = q.get("etag") or hashlib.md5(named).hexdigest()[:16]
        changed = bool(q.get("change")) and path in self._failed
        if changed:
            etag_core += "-v2"
        etag = (b"W/" if q.get("weak") else b"") + b'"' + etag_core.encode("ascii", "replace")
        etag += b'"'
        lm = date if q.get("lmnow") else LAST_MODIFIED_2 if changed else LAST_MODIFIED
        # Our own Date goes in: a date If-Range is evaluated as RFC 9110 sec. 13.1.5 says (false
        # when Last-Modified is not at least 1 s older than Date, as with ``lmnow``).
        v = policy.Validators(None if q.get("noetag") else etag, None if q.get("nolm") else lm,
                              size, date)
        hdrs: list[tuple[bytes, bytes]] = [
            (b"date", date), (b"content-type", b"application/octet-stream"),
            (b"accept-ranges", b"bytes")]
        if v.etag:
            hdrs.append((b"etag", v.etag))
        lm_at = len(hdrs)
        if v.last_modified:
            hdrs.append((b"last-modified", v.last_modified))
        if "cc" in q:
            hdrs.append((b"cache-control", q["cc"].encode("ascii", "replace")))
        if "vary" in q:
            hdrs.append((b"vary", q["vary"].encode("ascii", "replace")))
        if q.get("cookie"):
            hdrs.append((b"set-cookie", b"session=1"))
        if size <= self.digest_limit:
            hdrs.append((b"repr-digest", digest(path, size)))
        first, end, status = 0, size, 200
        rng = policy.get(headers, b"range")
        if_range = policy.get(headers, b"if-range")
        validated = if_range is None or policy.if_range_matches(if_range, v)
        if rng is not None and req.method == b"GET" and validated:
            try:
                specs = ranges.parse_range(rng)
                spans = ranges.coalesce(ranges.resolve(specs, size)) if specs is not None else []
            except RangeError:
                spans = []
            except UnsatisfiableRange:
                unsatisfied = [(b"content-range", ranges.format_unsatisfied(size).encode()),
                               (b"content-length", b"0")]
                await self._send(conn, writer, h11.Response(
                    status_code=416, reason=_reason(416), headers=hdrs + unsatisfied))
                await self._send(conn, writer, h11.EndOfMessage())
                return True
            if len(spans) == 1:
                first, end, status = spans[0][0], spans[0][1] + 1, 206
                if q.get("nolm206") and v.last_modified:
                    del hdrs[lm_at]
                self.stats.range_requests += 1
                field = ranges.format_content_range(first, end - 1, size).encode()
                hdrs.append((b"content-range", field))
        if not q.get("chunked"):
            hdrs.append((b"content-length", str(end - first).encode()))
        head = h11.Response(status_code=status, headers=hdrs, reason=_reason(status))
        await self._send(conn, writer, head)
        if req.method == b"HEAD":
            await self._send(conn, writer, h11.EndOfMessage())
            return True
        t0 = time.monotonic()
        pos = first
        while pos < end:
            n = min(self.chunk, end - pos)
            if fail_at is not None and pos + n > fail_at:
                n = max(0, fail_at - pos)
                if n:
                    await self._send(conn, writer, h11.Data(data=body_slice(path, pos, pos + n)))
                    self._count(path, n)
                self._failed.add(path)
                writer.transport.abort()
                return False
            if self.link_rate > 0:
                # One shared link: each chunk books n/link_rate seconds of it, first come first
                # served.
                now = time.monotonic()
                self._link_free = max(self._link_free, now) + n / self.link_rate
                if self._link_free - now > 0.001:
                    await asyncio.sleep(self._link_free - now)
            await self._send(conn, writer, h11.Data(data=body_slice(path, pos, pos + n)))
            self._count(path, n)
            pos += n
            if rate > 0:
                delay = t0 + (pos - first) / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
        await self._send(conn, writer, h11.EndOfMessage())
        return True

    def _count(self, path: str, n: int) -> None:
        self.stats.body_bytes += n
        self.stats.per_path[path] += n


async def serve(
    host: str, port: int, rate: float, stop: asyncio.Event | None = None
) -> OriginStats:
    """Run an origin until ``stop`` is set (or the task is cancelled); returns its counters (CLI
    entry)."""
    origin = await Origin(host, port, rate).start()
    print(f"vmc origin on http://{origin.authority}/ (rate {rate or 'unpaced'} B/s)", flush=True)
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await origin.close()
    return origin.stats
