"""HTTP proxy safety cases: a proxy in front of an origin that misbehaves on purpose (issue 13
items 5-8, 17).

The origin is :class:`~vmc.conformance.harness.CraftedOrigin`, a socket server
that sends exactly the bytes a case gives it (extra bytes past Content-Length,
1xx responses, stale-at-once cache headers, garbage, nothing). Clients are the
harness's strict h11 client and raw sockets. Where RFC 9110/9111/9112 leave a
choice, the case records what the proxy did as a property (a finding) instead
of failing it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from vmc.conformance.harness import (
    CLOSE,
    CraftedOrigin,
    Handler,
    fetch,
    free_port,
    response,
    start_fetch,
)


@dataclass
class CraftedRig:
    origin: CraftedOrigin
    proxy: tuple[str, int]


@contextmanager
def crafted_rig(impl, handler: Handler) -> Iterator[CraftedRig]:
    """The implementation's proxy role in front of a crafted origin."""
    with CraftedOrigin(handler) as o:
        port = free_port()
        with impl.start("proxy", "--listen", f"127.0.0.1:{port}", "--upstream", o.authority,
                        ready_line="READY", ready_timeout=20):
            yield CraftedRig(o, ("127.0.0.1", port))


def paced(body: bytes, headers: list[tuple[str, str]], pieces: int = 20, pause: float = 0.1):
    """A 200 whose body arrives in ``pieces`` parts ``pause`` s apart (long enough for a joiner)."""
    yield response(200, headers, length=len(body))
    step = len(body) // pieces
    for i in range(pieces):
        yield body[i * step: len(body) if i == pieces - 1 else (i + 1) * step]
        yield pause


BODY = bytes(range(256)) * 400  # 102,400 bytes


# ----------------------------------------------------------- item 5: one client, another's response

INJECTED = response(200, [("cache-control", "no-store")], b"INJECTED")


def _desync(target: str, hdrs: dict):
    path = target.split("?")[0]
    if path == "/desync/a":
        yield response(200, [("cache-control", "no-store")], b"AAAAA") + INJECTED
    else:
        yield response(200, [("cache-control", "no-store")], f"for {path}".encode())


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9112 sec. 6.3, 9.3; RFC 9110 sec. 7.6",
                         role="proxy")
def test_bytes_past_content_length_never_reach_another_client(impl, record_property):
    """The origin sends more than its Content-Length on a kept-alive connection. The extra bytes
    are no response to anything: the next clients, asking for other URLs, get their own
    responses (or a 5xx), never the injected one."""
    with crafted_rig(impl, _desync) as rig:
        first = fetch(rig.proxy, "/desync/a", timeout=15)
        assert first.status == 200 and first.body == b"AAAAA", (first.status, first.body[:40])
        for path in ("/desync/b", "/desync/c"):
            r = fetch(rig.proxy, path, timeout=15)
            assert r.body != b"INJECTED", (
                f"{path}: answered with the bytes past /desync/a's Content-Length")
            assert r.status is not None and (r.status >= 500 or r.body == f"for {path}".encode()), (
                f"{path}: {r.status} {r.body[:60]!r}")
        record_property("origin_gets_of_b", str(rig.origin.count("/desync/b")))


def _garbage(target: str, hdrs: dict):
    yield b"SPDY/3 999 what\r\n\r\n"
    yield CLOSE


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9112 sec. 4; RFC 9110 sec. 15.6.3",
                         role="proxy")
def test_garbage_status_line_is_a_clean_error(impl, record_property):
    """An origin answering with something that is not an HTTP/1.1 status line: the client gets a
    complete 5xx (502), not a 200 and not the garbage."""
    with crafted_rig(impl, _garbage) as rig:
        r = fetch(rig.proxy, "/garbage", timeout=30)
        assert r.status is not None and 500 <= r.status < 600, f"status {r.status} {r.error}"
        assert b"SPDY" not in r.body
        record_property("garbage_answer", f"{r.status} {r.reason.decode('latin-1')}")


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 15.6.3 (finding)",
                         role="proxy")
def test_origin_closing_without_a_response(impl, record_property):
    """The origin accepts and closes without a byte: a 5xx; which one, and what it says, is a
    finding."""
    with crafted_rig(impl, lambda t, h: iter([CLOSE])) as rig:
        r = fetch(rig.proxy, "/silent", timeout=30)
        assert r.status is not None and 500 <= r.status < 600, f"status {r.status} {r.error}"
        record_property("silent_origin", f"{r.status} {r.body[:40].decode('latin-1').strip()}")


# ------------------------------------------------------------ item 6: RFC 9111 shareability

STALE_AT_ONCE = [
    ("no-cache", [("cache-control", "no-cache")]),
    ("max-age=0", [("cache-control", "max-age=0")]),
    ("max-age=0-must-revalidate", [("cache-control", "max-age=0, must-revalidate")]),
    ("s-maxage=0", [("cache-control", "s-maxage=0, max-age=60")]),
    ("expires-past", [("date", "Thu, 01 Jan 2026 00:00:10 GMT"),
                      ("expires", "Thu, 01 Jan 2026 00:00:00 GMT")]),
]


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 4.2.4, 5.2.2.4, 5.3",
                         role="proxy")
@pytest.mark.parametrize("name,fields", STALE_AT_ONCE, ids=[n for n, _ in STALE_AT_ONCE])
def test_response_that_must_be_revalidated_is_not_shared(impl, name, fields):
    """A response stale on arrival (or ``no-cache``) may not satisfy another request without
    validation: a second client arriving while it streams makes its own origin request."""
    with crafted_rig(impl, lambda t, h: paced(BODY, fields)) as rig:
        th, a, first_byte = start_fetch(rig.proxy, "/stale", timeout=30)
        assert first_byte.wait(15), f"first client: {a.status} {a.error}"
        b = fetch(rig.proxy, "/stale", timeout=30)
        th.join(30)
        assert a.body == BODY and b.body == BODY, (a.status, b.status, a.error, b.error)
        n = rig.origin.count("/stale")
        assert n >= 2, (
            f"{name}: one origin request served two clients"
            " (a response that must be revalidated)")


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 4, 5.1", role="proxy")
def test_shared_answer_carries_age(impl, record_property):
    """A fresh response (``max-age=60``, ``Age: 7``) shared with a client arriving ~1 s later: that
    answer is a reuse without validation, so it MUST carry ``Age`` of at least 8. A proxy that does
    not share it (a second origin request) passes; the property says which."""
    fields = [("cache-control", "max-age=60"), ("age", "7")]
    with crafted_rig(impl, lambda t, h: paced(BODY, fields, pieces=25, pause=0.1)) as rig:
        th, a, first_byte = start_fetch(rig.proxy, "/aged", timeout=30)
        assert first_byte.wait(15), f"first client: {a.status} {a.error}"
        time.sleep(1.1)
        b = fetch(rig.proxy, "/aged", timeout=30)
        th.join(30)
        assert a.body == BODY and b.body == BODY, (a.status, b.status, a.error, b.error)
        if rig.origin.count("/aged") >= 2:
            record_property("age", "not shared")
            return
        record_property("age", b.headers.get("age", "none"))
        assert "age" in b.headers, "a shared answer without Age"
        assert b.headers["age"].isdigit() and int(b.headers["age"]) >= 8, f"Age {b.headers['age']}"


# ------------------------------------------------------------ item 7: 1xx forwarding

def _hints(target: str, hdrs: dict):
    yield b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    yield 0.1
    yield response(200, [("cache-control", "no-store")], b"final")


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 15.2; RFC 8297",
                         role="proxy")
def test_interim_103_is_forwarded(impl):
    """``103 Early Hints`` before the final response: "A proxy MUST forward 1xx responses unless the
    proxy itself requested the generation of the 1xx response" (RFC 9110 sec. 15.2)."""
    with crafted_rig(impl, _hints) as rig:
        r = fetch(rig.proxy, "/hints", timeout=15)
        assert r.status == 200 and r.body == b"final", (r.status, r.error)
        assert [s for s, _ in r.interim] == [103], f"1xx seen by the client: {r.interim}"
        assert r.interim[0][1].get("link") == "</style.css>; rel=preload"


# ------------------------------------------------------------ item 8: slow-loris

LORIS = 600  # more than our default max_connections (512)


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9112 sec. 9.5, 11 (availability)",
                         role="proxy")
def test_slow_loris_does_not_shut_out_new_clients(impl, record_property):
    """600 connections that each send part of a request head and then one header line every second:
    while they trickle, new clients are still served (each of 5 gets its 200)."""
    served_reply = response(200, [("cache-control", "no-store")], b"served")
    with crafted_rig(impl, lambda t, h: iter([served_reply])) as rig:
        socks: list[socket.socket] = []
        stop = threading.Event()

        def trickle() -> None:
            for i in range(60):
                if stop.wait(1.0):
                    return
                for s in list(socks):
                    try:
                        s.sendall(b"X-%d: y\r\n" % i)
                    except OSError:
                        socks.remove(s)

        th = threading.Thread(target=trickle, daemon=True)
        try:
            for _ in range(LORIS):
                try:
                    s = socket.create_connection(rig.proxy, timeout=5)
                    s.sendall(b"GET /loris HTTP/1.1\r\nHost: x\r\n")
                except OSError:
                    break
                socks.append(s)
            th.start()
            time.sleep(1.5)
            got = [fetch(rig.proxy, f"/new{i}", timeout=20) for i in range(5)]
        finally:
            stop.set()
            if th.is_alive():
                th.join(5)
            for s in socks:
                s.close()
        record_property("loris_connections_open", str(len(socks)))
        served = sum(1 for r in got if r.status == 200 and r.body == b"served")
        record_property("served_during_flood", f"{served}/5")
        assert served == 5, (
            f"{served} of 5 new clients served during the flood:"
            f" {[(r.status, r.error) for r in got]}")


# ------------------------------------------------------------ item 17: version, reason phrase

@pytest.mark.conformance(protocol="http-proxy",
                         section="RFC 9110 sec. 6.2, 15.6.6; RFC 9112 sec. 2.3", role="proxy")
def test_unsupported_major_version_is_refused(impl, record_property):
    """``GET / HTTP/9.9``: a major version the proxy does not speak. 505 (or 400), and nothing is
    forwarded to the origin."""
    with crafted_rig(impl, lambda t, h: iter([response(200, [], b"origin says hi")])) as rig:
        with socket.create_connection(rig.proxy, timeout=10) as s:
            s.sendall(b"GET /v99 HTTP/9.9\r\nHost: x\r\n\r\n")
            out = b""
            try:
                while b"\r\n" not in out and len(out) < 4096:
                    more = s.recv(4096)
                    if not more:
                        break
                    out += more
            except (TimeoutError, ConnectionResetError):
                pass
        line = out.split(b"\r\n", 1)[0]
        record_property("http_9_9", line.decode("latin-1") or "closed")
        assert rig.origin.count("/v99") == 0, "an HTTP/9.9 request was forwarded to the origin"
        parts = line.split(b" ", 2)
        assert not line or (len(parts) >= 2 and parts[1] in (b"505", b"400")), (
            f"status line {line!r}")


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9112 sec. 4 (finding)", role="proxy")
def test_status_line_reason_phrase(impl, record_property):
    """The origin sends ``HTTP/1.1 200 \\r\\n`` (an empty reason, which RFC 9112 allows): the status
    line the proxy writes must still be well formed; whether it carries a phrase is a finding."""
    empty_reason = b"HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\nok"
    with crafted_rig(impl, lambda t, h: iter([empty_reason])) as rig:
        r = fetch(rig.proxy, "/empty-reason", timeout=15)
        assert r.status == 200 and r.body == b"ok", (r.status, r.error)
        record_property("reason_phrase", r.reason.decode("latin-1") or "empty")
