"""The core's HTTP/1.1 framing on llhttp (vmc.core.h1.ServerConnection) decides as h11 does
(issue 17): the same bytes in give the same events, states, errors (class and status hint) and
bytes out, for one connection and for the whole sharing core with h11 as its reference
(``HttpSharingCore(reference_parser=True)``): requests with bodies, chunked, pipelined, HTTP/1.0,
``Expect: 100-continue``, malformed heads, heads cut anywhere, answers with and without a length,
short and long bodies."""

from __future__ import annotations

from collections.abc import Hashable

import h11
import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.protocol import StreamClose, StreamWrite
from vmc.core.events import Fetch, Kept, OriginData, OriginEnd, OriginError, OriginHead
from vmc.core.h1 import Request, ServerConnection
from vmc.core.http import FileWrite, HttpSharingCore
from vmc.core.linger import HalfClose
from vmc.core.machine import MachineConfig

#: Requests as clients send them, well-formed and not (one or more per entry: pipelining).
REQUESTS = [
    b"GET /a HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"GET /a HTTP/1.1\r\nhost: o:80\r\nuser-agent: wrk\r\naccept: */*\r\n\r\n",
    b"GET http://o:80/b?x=1 HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"HEAD /a HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nConnection: close\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nConnection: keep-alive, x-hop\r\nx-hop: 1\r\n\r\n",
    b"GET /a HTTP/1.0\r\nHost: o:80\r\n\r\n",
    b"GET /a HTTP/1.0\r\n\r\n",
    b"GET /c HTTP/1.1\r\nHost: o:80\r\nRange: bytes=0-9\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: o:80\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /p HTTP/1.1\r\nHost: o:80\r\nContent-Length: 0\r\n\r\n",
    b"PUT /p HTTP/1.1\r\nHost: o:80\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: o:80\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nExpect: 100-continue\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\n folded\r\n\r\n",
    b"GET /a HTTP/1.1\nHost: o:80\n\n",
    b"\r\nGET /a HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"GET /a HTTP/1.1\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"GET /a HTTP/2.0\r\nHost: o:80\r\n\r\n",
    b"GET /a HTTP/1.x\r\nHost: o:80\r\n\r\n",
    b"G T /a HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"GET /a b HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nBad Name: v\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nx: a\x00b\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nx: \x7f\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: o:80\r\nx:   padded  \r\n\r\n",
    b"BREW /pot HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"CONNECT o:80 HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"GET * HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: o:80\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: o:80\r\nContent-Length: 1, 2\r\n\r\nx",
    b"POST /p HTTP/1.1\r\nHost: o:80\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"GET /" + b"x" * 300 + b" HTTP/1.1\r\nHost: o:80\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00",
    b"garbage\r\n\r\n",
]

#: Response heads the core might send (status, fields, body length sent).
RESPONSES = [
    (200, [(b"content-length", b"5")], 5),
    (200, [(b"content-type", b"text/plain"), (b"content-length", b"3"), (b"via", b"1.1 vmc")], 3),
    (200, [(b"content-length", b"5")], 3),  # short: h11 refuses the end
    (200, [(b"content-length", b"2")], 4),  # long: h11 refuses the data
    (200, [(b"x-a", b"1")], 4),  # no length: chunked or close-delimited
    (204, [(b"content-length", b"0")], 0),
    (304, [(b"content-length", b"10")], 0),
    (206, [(b"content-length", b"10"), (b"content-range", b"bytes 0-9/100")], 10),
    (200, [(b"Content-Length", b"1")], 1),
    (200, [(b"content-length", b"1"), (b"connection", b"close")], 1),
    (200, [(b"content-length", b"1"), (b"host", b"h")], 1),
    (200, [(b"content-length", b"1"), (b"x", b" padded")], 1),
    (200, [(b"content-length", b"1"), (b"x", b"a\r\nb")], 1),
    (200, [(b"content-length", b"x")], 0),
    (200, [(b"content-length", b"1"), (b"transfer-encoding", b"chunked")], 1),
    (408, [(b"content-length", b"0"), (b"connection", b"close")], 0),
]


def _step(c: ServerConnection | h11.Connection, what: str, *args: object) -> object:
    """One call on either connection, its result or its error as comparable values."""
    try:
        if isinstance(c, h11.Connection):
            r: object = _h11_call(c, what, *args)
        else:
            r = getattr(c, what)(*args)
    except h11.ProtocolError as exc:
        return (type(exc).__name__, exc.error_status_hint)
    except RuntimeError as exc:
        return ("RuntimeError", str(exc))
    if isinstance(r, h11.Request):
        r = Request(r.method, r.target, tuple(r.headers), r.http_version)
    if isinstance(r, list):
        r = b"".join(bytes(x) for x in r)  # type: ignore[arg-type]  # the pieces are bytes-like spans
    return r


def _h11_call(c: h11.Connection, what: str, *args: object) -> object:
    if what == "send_response":
        status, headers, reason = args
        return c.send(h11.Response(status_code=status, headers=headers, reason=reason))
    if what == "send_interim":
        return c.send(h11.InformationalResponse(status_code=100, headers=[]))
    if what == "send_data":
        return c.send(h11.Data(data=args[0]))
    if what == "send_span":
        return c.send_with_data_passthrough(h11.Data(data=args[0]))
    if what == "send_end":
        return c.send(h11.EndOfMessage())
    return getattr(c, what)(*args)


def _states(c: ServerConnection | h11.Connection) -> tuple[object, ...]:
    return (c.our_state, c.their_state, c.their_http_version, c.they_are_waiting_for_100_continue)


@st.composite
def conversations(draw: st.DrawFn) -> list[tuple[str, tuple[object, ...]]]:
    """Calls a server makes: bytes in (cut anywhere, sometimes EOF), events read, responses."""
    reqs = draw(st.lists(st.sampled_from(REQUESTS), min_size=1, max_size=4))
    stream = b"".join(reqs)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    calls: list[tuple[str, tuple[object, ...]]] = []
    for piece in pieces:
        calls.append(("receive_data", (piece,)))
        for _ in range(draw(st.integers(0, 3))):
            calls.append(("next_event", ()))
        if draw(st.booleans()):
            status, headers, n = draw(st.sampled_from(RESPONSES))
            if draw(st.integers(0, 9)) == 0:
                calls.append(("send_interim", (100, [], b"")))
            calls.append(("send_response", (status, list(headers), b"OK")))
            if n:
                calls.append(("send_data" if draw(st.booleans()) else "send_span",
                              (b"x" * n,)))
            calls.append(("send_end", ()))
            calls.append(("start_next_cycle", ()))
    if draw(st.booleans()):
        calls.append(("receive_data", (b"",)))
    calls += [("next_event", ())] * 3
    return calls


@settings(max_examples=600, deadline=None)
@given(conversations())
def test_one_connection_decides_as_h11(calls: list[tuple[str, tuple[object, ...]]]) -> None:
    ours, ref = ServerConnection(200), h11.Connection(h11.SERVER, max_incomplete_event_size=200)
    for i, (what, args) in enumerate(calls):
        if not _fits(ref, what, args):
            continue  # the core never makes this call in this state
        if what == "send_span":
            a, b = _step(ours, what, args[0], len(args[0])), _step(ref, what, *args)  # type: ignore[arg-type]  # the generated args hold bytes here
        else:
            a, b = _step(ours, what, *args), _step(ref, what, *args)
        assert a == b, f"call {i} {what}{args!r}: ours {a!r}, h11 {b!r}"
        assert _states(ours) == _states(ref), f"after call {i} {what}{args!r}"
        if isinstance(a, tuple) and a and isinstance(a[0], str):
            return  # an error: the core drops the connection


def _fits(c: h11.Connection, what: str, args: tuple[object, ...]) -> bool:
    """Whether HttpSharingCore makes this call in this state (a response only to a request
    read, or an error answer before one; the body only after the head)."""
    if what in ("send_response", "send_interim"):
        early = what == "send_response" and (b"connection", b"close") in args[1]  # type: ignore[operator]  # the generated args hold header pairs here
        return c.our_state is h11.SEND_RESPONSE or (early and c.our_state is h11.IDLE)
    if what in ("send_data", "send_span", "send_end"):
        return c.our_state is h11.SEND_BODY
    if what == "start_next_cycle":
        return c.our_state is h11.DONE and c.their_state is h11.DONE
    if what == "next_event":  # after an error answer sent early, the core reads no more
        return c.their_state is not h11.ERROR and not (
            c.their_state is h11.IDLE and c.our_state is not h11.IDLE)
    return True


def test_the_plain_request_stays_on_the_fast_path() -> None:
    """What wrk and most clients send is never handed to h11 (else the test above proves
    nothing about the fast path)."""
    c = ServerConnection()
    for _ in range(3):
        c.receive_data(b"GET /a HTTP/1.1\r\nHost: o:80\r\nUser-Agent: x\r\n\r\n")
        ev = c.next_event()
        assert ev == Request(b"GET", b"/a", ((b"host", b"o:80"), (b"user-agent", b"x")), b"1.1")
        assert isinstance(c.next_event(), h11.EndOfMessage)
        head = c.send_response(200, [(b"content-length", b"2")], b"OK")
        assert head == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"
        assert c.send_data(b"hi") == b"hi" and c.send_end() == b""
        c.start_next_cycle()
    assert c.handed_over is None


@pytest.mark.parametrize("raw", [r for r in REQUESTS if b"Content-Length" in r or b"Expect" in r
                                 or b"HTTP/1.0" in r or b"\n\n" in r])
def test_what_the_fast_path_does_not_take_goes_to_h11(raw: bytes) -> None:
    c = ServerConnection()
    c.receive_data(raw)
    try:
        c.next_event()
    except h11.RemoteProtocolError:
        pass
    assert c.handed_over == "head"


# ---------------------------------------------------------------------- the whole core
ORIGIN_HEADS = [
    (200, ((b"content-length", b"6"), (b"etag", b'"e"'), (b"cache-control", b"max-age=60"))),
    (200, ((b"content-type", b"text/plain"),)),  # no length: streamed
    (404, ((b"content-length", b"6"),)),
    (200, ((b"content-length", b"6"), (b"connection", b"close"), (b"x-h", b"1"))),
    (206, ((b"content-length", b"6"), (b"content-range", b"bytes 0-5/6"))),
]


def _run(core: HttpSharingCore, script: list[tuple[int, bytes]], answers: list[int]
         ) -> list[object]:
    """Drive ``core`` with the clients' bytes; answer each fetch by ``answers`` (an index into
    ORIGIN_HEADS, or -1: the origin fails); report every output."""
    trace: list[object] = []
    opened: set[Hashable] = set()
    fetches = 0
    now = 0.0

    def drain() -> None:
        nonlocal fetches
        for _ in range(50):
            out = core.to_send(now)
            if not out:
                return
            for o in out:
                trace.append(o)
                if isinstance(o, StreamWrite):
                    core.writable(o.conn, len(o.data), now)
                elif isinstance(o, FileWrite):
                    core.writable(o.conn, o.count, now)
                elif isinstance(o, Fetch):
                    pick = answers[fetches % len(answers)]
                    fetches += 1
                    if pick < 0:
                        core.origin_received(OriginError(o.fetch, "refused"), now)
                        continue
                    status, head = ORIGIN_HEADS[pick]
                    core.origin_received(OriginHead(o.fetch, status, head), now)
                    core.origin_received(OriginData(o.fetch, b"abcdef"), now)
                    core.origin_received(OriginEnd(o.fetch), now)

    for conn, data in script:
        now += 0.001
        if conn not in opened:
            opened.add(conn)
            core.connection_made(conn, now)
            core.peer_known(conn, "127.0.0.1", now)
        core.data_received(conn, data, now)
        drain()
    now += 100.0  # every deadline passes: timeouts answered alike too
    core.handle_timer(now)
    drain()
    trace.append(sorted((str(k), v) for k, v in core.stats.refused.items()))
    return trace


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[int, bytes]]:
    script: list[tuple[int, bytes]] = []
    for conn in range(draw(st.integers(1, 3))):
        reqs = draw(st.lists(st.sampled_from(REQUESTS), min_size=1, max_size=3))
        stream = b"".join(reqs).replace(b"o:80", b"o")
        cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=3)))
        for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            if b > a:
                script.append((conn, stream[a:b]))
        if draw(st.booleans()):
            script.append((conn, b""))
    draw(st.randoms()).shuffle(script)  # connections interleave; each one's order is kept
    by_conn: dict[int, list[bytes]] = {}
    for conn, data in script:
        by_conn.setdefault(conn, []).append(data)
    ordered = {c: sorted(v, key=lambda d: d == b"") for c, v in by_conn.items()}
    return [(conn, ordered[conn].pop(0)) for conn, _ in script]


def _comparable(trace: list[object]) -> list[object]:
    out: list[object] = []
    for o in trace:
        if isinstance(o, (StreamWrite, StreamClose, HalfClose, Fetch, FileWrite)) or isinstance(
                o, list):
            out.append(o)
        elif isinstance(o, Kept):  # its facts (its disk copy is each core's own object)
            out.append(("kept", o.copy))
        else:
            out.append(repr(o))
    return out


@settings(max_examples=300, deadline=None)
@given(scripts(), st.lists(st.sampled_from([0, 0, 1, 2, 3, 4, -1]), min_size=1, max_size=4))
def test_the_core_answers_alike_on_either_parser(
    script: list[tuple[int, bytes]], answers: list[int]
) -> None:
    def make(reference: bool) -> HttpSharingCore:
        return HttpSharingCore(MachineConfig(), default_authority="o:80", upstreams=["o:80"],
                               status_path="/status", max_header_bytes=200,
                               reference_parser=reference)
    fast = _comparable(_run(make(False), script, answers))
    ref = _comparable(_run(make(True), script, answers))
    assert fast == ref


def test_malformed_bytes_get_one_400_and_a_count() -> None:
    core = HttpSharingCore(MachineConfig(), default_authority="o:80", upstreams=["o:80"])
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET /a HTTP/1.1\r\nHost: o\r\nBad Name: v\r\n\r\n", 0.0)
    out = core.to_send(0.0)
    (w,) = [o for o in out if isinstance(o, StreamWrite)]
    assert w.data.startswith(b"HTTP/1.1 400 ")
    assert [str(k) for k, v in core.stats.refused.items() if v] != []
