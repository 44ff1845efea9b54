"""The VMC-aware client and a busy proxy: Retry-After in both forms, and a 503 on a hole-fill Range.

The server here is a real socket server (h11) that answers like a VMC proxy whose upstream cap
is full at the moment the client asks for its missing prefix.
"""

from __future__ import annotations

import asyncio
from email.utils import formatdate

import h11

from vmc.client import _retry_after, fetch

BODY = bytes(range(200)) * 50  # 10,000 bytes
ETAG = b'"r1"'


def test_retry_after_both_forms() -> None:
    """RFC 9110 sec. 10.2.3: Retry-After = HTTP-date / delay-seconds (HTTP-date in any
    sec. 5.6.7 form)."""
    assert _retry_after(b"3") == 3.0 and _retry_after(b" 0 ") == 0.0
    now = 1_000_000_000.0  # Sun, 09 Sep 2001 01:46:40 GMT
    assert _retry_after(formatdate(now + 7, usegmt=True).encode(), now=now) == 7.0
    assert _retry_after(b"Sunday, 09-Sep-01 01:46:45 GMT", now=now) == 5.0
    assert _retry_after(b"Sun Sep  9 01:46:50 2001", now=now) == 10.0
    assert _retry_after(formatdate(now - 60, usegmt=True).encode(), now=now) == 0.0  # past: now
    assert _retry_after(b"soon") is None and _retry_after(None) is None
    assert _retry_after(b"-1") is None


class _BusyOnce:
    """Whole GET -> 206 of the tail (a join at 6000); first Range -> 503 + Retry-After;
    then 206s."""

    def __init__(self, retry_after: bytes) -> None:
        self.retry_after = retry_after
        self.requests: list[bytes | None] = []
        self.busy_sent = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    data = await asyncio.wait_for(reader.read(65536), 10)
                    conn.receive_data(data)
                    if not data:
                        return
                    continue
                if not isinstance(ev, h11.Request):
                    return
                rng = dict((k.lower(), v) for k, v in ev.headers).get(b"range")
                self.requests.append(rng)
                while not isinstance(conn.next_event(), h11.EndOfMessage):
                    pass
                if rng is None:
                    first, last = 6000, len(BODY) - 1
                elif not self.busy_sent:
                    self.busy_sent += 1
                    writer.write(conn.send(h11.Response(
                        status_code=503, reason=b"Service Unavailable",
                        headers=[(b"retry-after", self.retry_after), (b"content-length", b"0")])))
                    writer.write(conn.send(h11.EndOfMessage()))
                    await writer.drain()
                    conn.start_next_cycle()
                    continue
                else:
                    a, b = rng.split(b"=", 1)[1].split(b"-")
                    first, last = int(a), int(b)
                hdrs = [(b"etag", ETAG), (b"content-length", str(last + 1 - first).encode()),
                        (b"content-range", f"bytes {first}-{last}/{len(BODY)}".encode())]
                writer.write(conn.send(h11.Response(status_code=206, reason=b"Partial Content",
                                                    headers=hdrs)))
                writer.write(conn.send(h11.Data(data=BODY[first:last + 1])))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                conn.start_next_cycle()
        except (h11.ProtocolError, OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()


async def _run(retry_after: bytes, busy_retries: int):
    srv = _BusyOnce(retry_after)
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    try:
        return srv, await fetch(f"http://{host}:{port}/o.bin", vmc=True, timeout=10,
                                busy_retries=busy_retries)
    finally:
        server.close()
        await server.wait_closed()


async def test_hole_fill_waits_out_503_and_keeps_the_live_part() -> None:
    """RFC 9110 sec. 15.6.4 (503) with sec. 10.2.3: the hole-fill Range is asked again after
    Retry-After; the part already received is kept (no restart of the whole fetch)."""
    srv, r = await _run(formatdate(usegmt=True).encode(), busy_retries=2)  # an HTTP-date: now
    assert r.body == BODY and r.status == 206
    assert srv.busy_sent == 1
    assert srv.requests == [None, b"bytes=0-5999", b"bytes=0-5999"]  # one whole GET, not two


async def test_hole_fill_503_without_retries_is_busy_error() -> None:
    from vmc.client import BusyError

    try:
        await _run(b"0", busy_retries=0)
    except BusyError as exc:
        assert exc.retry_after == 0.0
    else:
        raise AssertionError("a 503 on the hole fill must not give a result without retries")
