"""Multipart answers in the sans-IO sharing core (RFC 9110 sec. 14.6; on sockets
tests/vmc/test_vmc_proxy_sharing.py::test_range_requests_on_inflight_object): a joiner asking
for disjoint ranges gets 206 multipart/byteranges, one part per range with its own
Content-Range, each part's bytes from wherever the span is (window or live stream), and no
Content-Range on the whole; the machine used to serve one span from the first to the last."""

from __future__ import annotations

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch, OriginData, OriginEnd, OriginHead
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig

BODY = bytes(range(256)) * 4  # 1024 bytes
HEAD = ((b"content-length", b"1024"), (b"etag", b'"e"'), (b"content-type", b"text/x"))


def _out(core: HttpSharingCore, conn: int, now: float) -> bytes:
    out = core.to_send(now)
    return b"".join(o.data for o in out if isinstance(o, StreamWrite) and o.conn == conn)


def test_disjoint_ranges_get_one_part_each() -> None:
    core = HttpSharingCore(MachineConfig())
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET http://o/x HTTP/1.1\r\nhost: o\r\n\r\n", 0.0)
    (f,) = [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
    core.origin_received(OriginHead(f.fetch, 200, HEAD), 0.1)
    core.origin_received(OriginData(f.fetch, BODY[:600]), 0.1)  # 900 comes live
    core.to_send(0.1)
    core.connection_made(2, 0.2)
    core.data_received(2, b"GET http://o/x HTTP/1.1\r\nhost: o\r\nrange: bytes=0-1,500-500,"
                          b"900-903\r\n\r\n", 0.2)
    got = _out(core, 2, 0.2)
    core.origin_received(OriginData(f.fetch, BODY[600:]), 0.3)
    core.origin_received(OriginEnd(f.fetch), 0.3)
    got += _out(core, 2, 0.3)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 206 ")
    fields = dict(line.split(b": ", 1) for line in head.lower().split(b"\r\n")[1:])
    assert b"content-range" not in fields
    boundary = fields[b"content-type"].split(b"boundary=", 1)[1]
    assert int(fields[b"content-length"]) == len(body)
    chunks = body.split(b"--" + boundary)
    assert chunks[0] == b"" and chunks[-1] == b"--\r\n" and len(chunks) == 5
    for (a, b), chunk in zip(((0, 1), (500, 500), (900, 903)), chunks[1:-1], strict=True):
        part_head, _, payload = chunk.partition(b"\r\n\r\n")
        assert b"content-range: bytes %d-%d/1024" % (a, b) in part_head.lower()
        assert b"content-type: text/x" in part_head.lower()
        assert payload.removesuffix(b"\r\n") == BODY[a : b + 1]


def _boundary(seed: int) -> bytes:
    core = HttpSharingCore(MachineConfig(seed=seed))
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET http://o/x HTTP/1.1\r\nhost: o\r\n\r\n", 0.0)
    (f,) = [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
    core.origin_received(OriginHead(f.fetch, 200, HEAD), 0.1)
    core.origin_received(OriginData(f.fetch, BODY), 0.1)
    core.to_send(0.1)
    core.connection_made(2, 0.2)
    core.data_received(2, b"GET http://o/x HTTP/1.1\r\nhost: o\r\nrange: bytes=0-1,9-9\r\n\r\n",
                       0.2)
    head = _out(core, 2, 0.2).partition(b"\r\n\r\n")[0].lower()
    return head.split(b"boundary=", 1)[1].split(b"\r\n", 1)[0]


def test_the_boundary_comes_from_the_seed_not_from_the_request() -> None:
    """RFC 2046 5.1.1: the boundary must not occur in the body, so an origin must not be able to
    predict it from the request (it was the reader's id and the bytes received): the same
    request gets another boundary under another seed, and the same one under the same seed
    (the simulator's runs stay reproducible)."""
    assert _boundary(1) == _boundary(1)
    assert _boundary(1) != _boundary(2)
    assert len(_boundary(3)) >= 24


def test_the_proxy_settings_give_each_pump_a_secret_seed() -> None:
    from vmc.aio.config import ProxyConfig
    from vmc.aio.proxy import machine_config

    seeds = {machine_config(ProxyConfig()).seed for _ in range(4)}
    assert len(seeds) == 4
