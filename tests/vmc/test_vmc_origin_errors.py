"""The test origin answers every request it can read, bad ones with ``400 Bad Request`` and a
reason, instead of dropping the connection (which a proxy can only report as a misleading
``502 upstream-unreachable``); every status line carries its reason phrase (issue 13 item 17)."""

from __future__ import annotations

import asyncio

import pytest

from vmc.aio.origin import Origin


async def _raw(o: Origin, request: bytes) -> bytes:
    """Send ``request`` as is; everything the origin writes until it closes (bounded)."""
    reader, writer = await asyncio.open_connection(*o.address)
    try:
        writer.write(request)
        await writer.drain()
        data = b""
        while len(data) < 1 << 20:
            chunk = await asyncio.wait_for(reader.read(65536), 10)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and b"connection: close" not in data.lower():
                head, _, body = data.partition(b"\r\n\r\n")
                n = [int(ln.split(b":")[1]) for ln in head.lower().split(b"\r\n")
                     if ln.startswith(b"content-length:")]
                if n and len(body) >= n[0]:
                    break
        return data
    finally:
        writer.close()


def _get(target: str, extra: str = "") -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: o\r\n{extra}\r\n".encode()


@pytest.mark.parametrize("target, why", [
    ("/x?size=-5", b"size"),
    ("/x?size=abc", b"size"),
    ("/x?rate=-1", b"rate"),
    ("/x?rate=nan", b"rate"),
    ("/x?fail_at=-3", b"fail_at"),
    ("/x?head_delay=soon", b"head_delay"),
])
async def test_bad_query_is_400_with_a_reason(target: str, why: bytes) -> None:
    o = await Origin().start()
    try:
        data = await _raw(o, _get(target))
    finally:
        await o.close()
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n"), data[:200]
    assert why in data.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("request_bytes", [
    b"NOT HTTP AT ALL\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: o\r\nBad Header Without Colon\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: o\r\nContent-Length: -1\r\n\r\n",
])
async def test_malformed_request_is_answered_400(request_bytes: bytes) -> None:
    o = await Origin().start()
    try:
        data = await _raw(o, request_bytes)
    finally:
        await o.close()
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n"), data[:200]
    assert data.partition(b"\r\n\r\n")[2]  # says why


@pytest.mark.parametrize("target, extra, line", [
    ("/x?size=10", "", b"HTTP/1.1 200 OK\r\n"),
    ("/x?size=10", "Range: bytes=2-3\r\n", b"HTTP/1.1 206 Partial Content\r\n"),
    ("/x?size=10", "Range: bytes=50-60\r\n", b"HTTP/1.1 416 Range Not Satisfiable\r\n"),
    ("/_origin/stats", "", b"HTTP/1.1 200 OK\r\n"),
])
async def test_status_lines_carry_reason_phrases(target: str, extra: str, line: bytes) -> None:
    o = await Origin().start()
    try:
        data = await _raw(o, _get(target, extra))
        post = await _raw(o, b"POST /x HTTP/1.1\r\nHost: o\r\nContent-Length: 0\r\n\r\n")
    finally:
        await o.close()
    assert data.startswith(line), data[:100]
    assert post.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n"), post[:100]


def test_through_the_proxy_the_client_sees_400_not_502(make_stack) -> None:
    """The proxy relays the origin's answer: the client learns what was wrong with its request."""
    s = make_stack()
    data = s.raw(f"GET {s.url('/x?size=-5')} HTTP/1.1\r\nHost: {s.origin.authority}\r\n"
                 "Connection: close\r\n\r\n".encode())
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n"), data[:200]
    assert b"size" in data.partition(b"\r\n\r\n")[2]
