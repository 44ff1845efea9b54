"""1xx forwarding in the sans-IO HTTP sharing core (RFC 9110 sec. 15.2: a proxy MUST forward
1xx responses; tests/vmc/test_vmc_proxy_safety.py::test_interim_responses_are_forwarded on
sockets): an origin's 103 or 102 before its final head reaches the client the fetch is for,
hop-by-hop fields dropped, never an HTTP/1.0 client, and never after the final head."""

from __future__ import annotations

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch, OriginData, OriginEnd, OriginHead, OriginInterim
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig

HINT = ((b"link", b"</style.css>; rel=preload"), (b"connection", b"x-hop"), (b"x-hop", b"1"))


def _exchange(version: bytes, method: bytes = b"GET") -> bytes:
    core = HttpSharingCore(MachineConfig())
    core.connection_made(1, 0.0)
    head = b"%s http://o/hints HTTP/%s\r\nhost: o\r\ncontent-length: 0\r\n\r\n"
    core.data_received(1, head % (method, version), 0.0)
    (f,) = [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
    core.origin_received(OriginInterim(f.fetch, 103, HINT), 0.1)
    core.origin_received(OriginHead(f.fetch, 200, ((b"content-length", b"5"),)), 0.2)
    core.origin_received(OriginInterim(f.fetch, 103, HINT), 0.2)  # too late: dropped
    core.origin_received(OriginData(f.fetch, b"final"), 0.3)
    core.origin_received(OriginEnd(f.fetch), 0.3)
    return b"".join(o.data for o in core.to_send(0.3) if isinstance(o, StreamWrite))


def test_an_early_hint_reaches_the_client_before_its_answer() -> None:
    out = _exchange(b"1.1")
    assert out.startswith(b"HTTP/1.1 103 Early Hints\r\n"), out[:80]
    hint, _, rest = out.partition(b"\r\n\r\n")
    assert b"link: </style.css>; rel=preload" in hint.lower()
    assert b"x-hop" not in hint.lower()
    assert rest.startswith(b"HTTP/1.1 200 ") and rest.endswith(b"final")
    assert out.count(b" 103 ") == 1


def test_a_pass_through_forwards_it_too() -> None:
    out = _exchange(b"1.1", b"POST")
    assert out.startswith(b"HTTP/1.1 103 ")


def test_no_interim_response_to_an_http10_client() -> None:
    out = _exchange(b"1.0")
    assert out.startswith(b"HTTP/1.1 200 "), out[:60]
