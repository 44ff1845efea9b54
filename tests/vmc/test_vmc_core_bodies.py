"""Request fields and bodies through the sans-IO HTTP sharing core, as the proxy forwards them
(what the pump lacked: it sent only Host and answered 501 to any request body): a pass-through
keeps the client's method, end-to-end fields and body; a body past ``max_request_body`` gets 413;
a shared fetch and its Range patches carry the first request's end-to-end fields, never its
hop-by-hop ones, Range, If-Range or the VMC header."""

from __future__ import annotations

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch, OriginData, OriginHead
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig
from vmc.core.reasons import by_name


def _send(core: HttpSharingCore, raw: bytes, conn: int = 1) -> list[object]:
    core.connection_made(conn, 0.0)
    core.data_received(conn, raw, 0.0)
    return list(core.to_send(0.0))


def test_a_post_body_and_its_fields_go_to_the_origin() -> None:
    core = HttpSharingCore(upstreams=["o:80"])
    out = _send(core, b"POST http://o/form HTTP/1.1\r\nhost: o\r\ncontent-type: text/plain\r\n"
                      b"connection: keep-alive, x-hop\r\nx-hop: 1\r\ncontent-length: 3\r\n\r\nabc")
    (f,) = [o for o in out if isinstance(o, Fetch)]
    assert f.method == b"POST" and f.body == b"abc"
    names = [k for k, _ in f.headers]
    assert (b"content-type", b"text/plain") in f.headers
    assert not {b"host", b"connection", b"x-hop", b"content-length"} & set(names)


def test_a_body_that_arrives_in_pieces_is_whole_before_the_fetch() -> None:
    core = HttpSharingCore(upstreams=["o:80"])
    out = _send(core, b"PUT http://o/x HTTP/1.1\r\nhost: o\r\ncontent-length: 6\r\n\r\nab")
    assert not [o for o in out if isinstance(o, Fetch)]
    core.data_received(1, b"cdef", 0.1)
    (f,) = [o for o in core.to_send(0.1) if isinstance(o, Fetch)]
    assert f.body == b"abcdef"


def test_a_body_over_the_limit_gets_413_and_no_fetch() -> None:
    core = HttpSharingCore(MachineConfig(), upstreams=["o:80"], max_request_body=4)
    out = _send(core, b"POST http://o/x HTTP/1.1\r\nhost: o\r\ncontent-length: 5\r\n\r\nabcde")
    data = b"".join(o.data for o in out if isinstance(o, StreamWrite))
    assert data.startswith(b"HTTP/1.1 413 ") and not [o for o in out if isinstance(o, Fetch)]
    assert by_name(core.stats.refused) == {"body-too-large": 1}


def test_a_shared_fetch_and_its_patch_carry_the_first_requests_end_to_end_fields() -> None:
    core = HttpSharingCore(MachineConfig(window=1000, disk_budget=0, patch_budget=0))
    get = (b"GET http://o/obj HTTP/1.1\r\nhost: o\r\naccept-encoding: identity\r\n"
           b"if-range: \"x\"\r\nvmc: 1\r\nte: trailers\r\n\r\n")
    (f,) = [o for o in _send(core, get) if isinstance(o, Fetch)]
    assert (b"accept-encoding", b"identity") in f.headers
    assert not {b"range", b"if-range", b"vmc", b"te", b"host"} & {k for k, _ in f.headers}
    head = ((b"content-length", b"100000"), (b"etag", b'"e"'))
    core.origin_received(OriginHead(f.fetch, 200, head), 0.1)
    core.origin_received(OriginData(f.fetch, bytes(5000)), 0.2)  # past the 1000-byte window
    core.to_send(0.2)
    (p,) = [o for o in _send(core, b"GET http://o/obj HTTP/1.1\r\nhost: o\r\n\r\n", conn=2)
            if isinstance(o, Fetch)]
    assert p.ranged and p.headers == f.headers
