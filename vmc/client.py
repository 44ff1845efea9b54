"""A VMC-aware HTTP GET (paper sec. 3.2, 5: "clients ... need to be aware that they
should respond to a portion of a data-object ... by requesting the rest").

:func:`fetch` sends ``GET`` with ``VMC: 1``. A ``200`` is stored as it comes.
A ``206`` to a request that had no Range (the proxy joined us to a live
stream at offset N) is stored at its Content-Range offset while, in parallel,
the missing parts are requested with ``Range`` + ``If-Range`` (the first
answer's strong ETag or Last-Modified), repeating until no hole is left (a
server may send fewer bytes than asked, RFC 9110 sec. 15.3.7). The result is
checked: every byte present, the length equal to the complete length, and the
``Repr-Digest: sha-256`` (RFC 9530) when the server offered one.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from vmc.aio import upstream as up
from vmc.core import policy, ranges
from vmc.core.errors import RangeError, VMCError
from vmc.core.key import format_authority, split_authority

VMC_REQUEST = (b"vmc", b"1")


class FetchError(VMCError):
    """The object could not be fetched completely and consistently."""


class BusyError(FetchError):
    """503 Service Unavailable; ``retry_after`` seconds from its Retry-After (RFC 9110 sec. 10.2.3), if any."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__(f"status 503 (Retry-After: {retry_after})")
        self.retry_after = retry_after


def _retry_after(value: bytes | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (RFC 9110 sec. 10.2.3): delay-seconds, or an
    HTTP-date (sec. 5.6.7, any of its three forms) counted from ``now`` (default: the wall
    clock), never negative; None when absent or unparseable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    when = policy.http_date(value)
    if when is None:
        return None
    return max(0.0, when - (time.time() if now is None else now))


@dataclass
class FetchResult:
    """Outcome of :func:`fetch`."""

    url: str
    status: int
    """Status of the first answer (200, or 206 when joined to a live stream)."""
    length: int
    """Complete length of the representation."""
    parts: list[tuple[int, int, int]] = field(default_factory=list)
    """(first, end, status) of every answer used, in the order they were requested."""
    digest_ok: bool | None = None
    """True/False when a Repr-Digest was offered, else None."""
    ttfb: float = 0.0
    """Seconds to the first body byte."""
    elapsed: float = 0.0
    """Seconds to the last byte."""
    body: bytes | None = None
    """The body when no output path was given."""
    vmc: str = ""
    """The proxy's VMC response header, if any."""


def _target(url: str, via_proxy: bool) -> tuple[str, int, bytes, bytes]:
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise FetchError(f"only http:// URLs: {url}")
    host, port = split_authority(parts.netloc)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = format_authority(host, port).encode()
    target = f"http://{authority.decode()}{path}".encode() if via_proxy else path.encode()
    return host, port, target, authority


class _Sink:
    """Where body bytes go: a file (sparse writes at offsets) or a bytearray."""

    def __init__(self, length: int, out: Path | None, discard: bool = False) -> None:
        self.length = length
        self.out = out
        self.discard = discard
        self.have: list[tuple[int, int]] = []  # coalesced inclusive spans received
        if discard:
            self.mem, self.fh = None, None
        elif out is None:
            self.mem: bytearray | None = bytearray(length)
            self.fh = None
        else:
            self.mem = None
            self.fh = open(out, "w+b")
            self.fh.truncate(length)

    def write(self, off: int, data: bytes) -> None:
        if off + len(data) > self.length:
            raise FetchError("server sent bytes past the complete length")
        if self.mem is not None:
            self.mem[off : off + len(data)] = data
        elif self.fh is not None:
            self.fh.seek(off)
            self.fh.write(data)
        if data:
            self.have = ranges.coalesce(self.have + [(off, off + len(data) - 1)])

    def holes(self) -> list[tuple[int, int]]:
        out, pos = [], 0
        for a, b in self.have:
            if a > pos:
                out.append((pos, a))
            pos = max(pos, b + 1)
        if pos < self.length:
            out.append((pos, self.length))
        return out

    def sha256(self) -> bytes | None:
        if self.discard:
            return None
        if self.mem is not None:
            return hashlib.sha256(self.mem).digest()
        assert self.fh is not None
        h = hashlib.sha256()
        self.fh.seek(0)
        while chunk := self.fh.read(1 << 20):
            h.update(chunk)
        return h.digest()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def _offered_sha256(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """SHA-256 of the whole representation if offered: ``Repr-Digest: sha-256=:b64:`` (RFC 9530)
    or the obsolete ``Digest: SHA-256=b64`` (RFC 3230)."""
    for k, v in headers:
        for item in v.split(b","):
            name, _, val = item.strip().partition(b"=")
            try:
                if k == b"repr-digest" and name.lower() == b"sha-256" and val[:1] == val[-1:] == b":":
                    return base64.b64decode(val[1:-1], validate=True)
                if k == b"digest" and name.lower() == b"sha-256":
                    return base64.b64decode(val, validate=True)
            except ValueError:
                return None
    return None


async def _drain(resp: up.UpstreamResponse, sink: _Sink, first: int, end: int, on_byte=None) -> int:
    pos = first
    async for chunk in resp.chunks():
        if on_byte is not None:
            on_byte()
            on_byte = None
        if pos + len(chunk) > end:
            raise FetchError("answer longer than announced")
        sink.write(pos, chunk)
        pos += len(chunk)
    if pos != end:
        raise FetchError(f"answer ended at {pos}, expected {end}")
    return pos


async def fetch(
    url: str,
    proxy: str | None = None,
    out: str | Path | None = None,
    vmc: bool = True,
    timeout: float = 60.0,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    discard: bool = False,
    busy_retries: int = 0,
    max_retry_after: float = 30.0,
) -> FetchResult:
    """GET ``url`` (through ``proxy`` "host:port" if given), patching a partial answer.

    Raises :class:`FetchError` on any inconsistency; never returns a short body.
    ``discard=True`` keeps no bytes (load generation): coverage and length are
    still checked, the digest is not. A ``503`` with ``Retry-After`` (the proxy's
    upstream cap is full) is retried after that delay up to ``busy_retries``
    times, if the delay is at most ``max_retry_after`` s; else :class:`BusyError`.
    """
    for attempt in range(busy_retries + 1):
        try:
            return await _fetch_once(url, proxy, out, vmc, timeout, extra_headers, discard,
                                     busy_retries, max_retry_after)
        except BusyError as exc:
            wait = exc.retry_after
            if attempt >= busy_retries or wait is None or wait > max_retry_after:
                raise
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")


async def _fetch_once(
    url: str,
    proxy: str | None,
    out: str | Path | None,
    vmc: bool,
    timeout: float,
    extra_headers: list[tuple[bytes, bytes]] | None,
    discard: bool,
    busy_retries: int = 0,
    max_retry_after: float = 30.0,
) -> FetchResult:
    t0 = time.monotonic()
    via = proxy is not None
    host, port, target, authority = _target(url, via)
    conn_host, conn_port = split_authority(proxy) if proxy else (host, port)
    headers = [(b"host", authority)] + list(extra_headers or [])
    if vmc:
        headers.append(VMC_REQUEST)
    try:
        resp = await up.request(conn_host, conn_port, b"GET", target, headers, timeout=timeout)
    except up.UpstreamError as exc:
        raise FetchError(str(exc)) from exc
    result = FetchResult(url, resp.status, 0, vmc=(resp.header(b"vmc") or b"").decode("latin-1"))
    first_byte: list[float] = []

    def mark() -> None:
        first_byte.append(time.monotonic())

    sink: _Sink | None = None
    try:
        if resp.status == 200:
            cl = resp.header(b"content-length")
            if cl is None or not cl.isdigit():
                body = await resp.read_all()
                length = len(body)
                sink = _Sink(length, Path(out) if out else None, discard)
                sink.write(0, body)
                mark()
            else:
                length = int(cl)
                sink = _Sink(length, Path(out) if out else None, discard)
                await _drain(resp, sink, 0, length, mark)
            result.parts.append((0, length, 200))
        elif resp.status == 206:
            try:
                cr = ranges.parse_content_range(resp.header(b"content-range") or b"")
            except RangeError as exc:
                raise FetchError(f"206 with a bad Content-Range: {exc}") from exc
            if cr.first is None or cr.length is None or cr.last is None:
                raise FetchError("206 without a complete length")
            length = cr.length
            v = policy.validators_of(206, resp.headers)
            sink = _Sink(length, Path(out) if out else None, discard)
            live = asyncio.create_task(_drain(resp, sink, cr.first, cr.last + 1, mark))
            try:
                await _fill_holes(sink, conn_host, conn_port, target, authority, v, result, timeout,
                                  exclude=(cr.first, cr.last + 1), extra=extra_headers,
                                  busy_retries=busy_retries, max_retry_after=max_retry_after)
                await live
            finally:
                live.cancel()
            result.parts.insert(0, (cr.first, cr.last + 1, 206))
            if sink.holes():
                await _fill_holes(sink, conn_host, conn_port, target, authority, v, result, timeout,
                                  extra=extra_headers, busy_retries=busy_retries,
                                  max_retry_after=max_retry_after)
        elif resp.status == 503:
            raise BusyError(_retry_after(resp.header(b"retry-after")))
        else:
            raise FetchError(f"status {resp.status}")
        assert sink is not None
        if sink.holes():
            raise FetchError(f"missing bytes {sink.holes()[:3]}")
        result.length = length
        want = _offered_sha256(resp.headers)
        if want is not None:
            mine = sink.sha256()
            if mine is not None:
                result.digest_ok = want == mine
            if result.digest_ok is False:
                raise FetchError("digest mismatch")
        if out is None and sink.mem is not None:
            result.body = bytes(sink.mem)
    except up.UpstreamError as exc:
        raise FetchError(str(exc)) from exc
    finally:
        resp.close()
        if sink is not None:
            sink.close()
    result.ttfb = (first_byte[0] - t0) if first_byte else time.monotonic() - t0
    result.elapsed = time.monotonic() - t0
    return result


async def _fill_holes(
    sink: _Sink, host: str, port: int, target: bytes, authority: bytes, v: policy.Validators,
    result: FetchResult, timeout: float, exclude: tuple[int, int] | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    busy_retries: int = 0,
    max_retry_after: float = 30.0,
) -> None:
    """Request every hole (outside ``exclude``, the part still arriving) by Range until none is left.

    A ``503`` with an acceptable Retry-After is waited out and the same Range asked again (up to
    ``busy_retries`` times in all), keeping what has arrived. Without a strong validator no
    If-Range is sent (RFC 9110 sec. 13.1.5), but the answer's ETag and Last-Modified must still
    equal the first answer's where both carry them.
    """
    cond = v.if_range()
    busy_left = busy_retries
    for _ in range(64):
        holes = sink.holes()
        if exclude is not None:
            a0, b0 = exclude
            holes = [(a, min(b, a0)) if a < a0 else (max(a, b0), b) for a, b in holes if not (a0 <= a and b <= b0)]
            holes = [(a, b) for a, b in holes if a < b]
        if not holes:
            return
        a, b = holes[0]
        hdrs = [(b"host", authority), (b"range", ranges.format_range(a, b - 1).encode())] + list(extra or [])
        if cond:
            hdrs.append((b"if-range", cond))
        resp = await up.request(host, port, b"GET", target, hdrs, timeout=timeout)
        try:
            if resp.status == 503:
                wait = _retry_after(resp.header(b"retry-after"))
                if busy_left <= 0 or wait is None or wait > max_retry_after:
                    raise BusyError(wait)
                busy_left -= 1
                resp.close()
                await asyncio.sleep(wait)
                continue
            if resp.status != 206:
                raise FetchError(f"range request answered {resp.status}: "
                                 "representation changed or ranges unsupported")
            cr = ranges.parse_content_range(resp.header(b"content-range") or b"")
            got = policy.validators_of(206, resp.headers)
            if cond:
                same = policy.same_representation(v, got)
            else:
                same = (v.etag is None or got.etag == v.etag) and (
                    v.last_modified is None or got.last_modified in (None, v.last_modified))
            if cr.first is None or cr.last is None or cr.length != sink.length or not same:
                raise FetchError("range answer is for another representation")
            await _drain(resp, sink, cr.first, cr.last + 1)
            result.parts.append((cr.first, cr.last + 1, 206))
        except RangeError as exc:
            raise FetchError(f"bad Content-Range: {exc}") from exc
        finally:
            resp.close()
    raise FetchError("too many range requests")


def fetch_sync(url: str, **kw) -> FetchResult:
    """Blocking wrapper of :func:`fetch`."""
    return asyncio.run(fetch(url, **kw))
