"""Requests the sans-IO HTTP core refuses before they reach the sharing machine, as
vmc/aio/downstream.py refuses them, each counted under its name: another HTTP major version
(505), a head over ``max_header_bytes`` whole or still incomplete (431), Transfer-Encoding with
Content-Length (request smuggling, RFC 9112 sec. 6.3 rule 3: 400), two Host fields (400,
malformed); none is forwarded."""

from __future__ import annotations

import pytest

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch
from vmc.core.http import HttpSharingCore
from vmc.core.linger import HalfClose
from vmc.core.reasons import by_name


@pytest.mark.parametrize("raw, status, why", [
    (b"GET http://o/x HTTP/2.0\r\nhost: o\r\n\r\n", 505, "http-version"),
    (b"GET http://o/x HTTP/1.1\r\nhost: o\r\nx-big: " + b"a" * 20_000 + b"\r\n\r\n", 431,
     "header-too-large"),
    (b"POST http://o/x HTTP/1.1\r\nhost: o\r\ntransfer-encoding: chunked\r\n"
     b"content-length: 3\r\n\r\n0\r\n\r\n", 400, "smuggling"),
    # h11 itself refuses two Host fields (as it does under the proxy): counted as malformed
    (b"GET http://o/x HTTP/1.1\r\nhost: o\r\nhost: p\r\n\r\n", 400, "malformed"),
    (b"GET http://o/x HTTP/1.1\r\nhost: o\r\nx-big: " + b"a" * 20_000, 431, "header-too-large"),
])
def test_refused_requests_are_answered_counted_and_not_forwarded(
    raw: bytes, status: int, why: str
) -> None:
    core = HttpSharingCore(upstreams=["o:80"], max_header_bytes=16384)
    core.connection_made(1, 0.0)
    core.data_received(1, raw, 0.0)
    out = core.to_send(0.0)
    data = b"".join(o.data for o in out if isinstance(o, StreamWrite))
    assert data.startswith(b"HTTP/1.1 %d " % status), data[:60]
    assert HalfClose(1) in out and not [o for o in out if isinstance(o, Fetch)]
    assert by_name(core.stats.refused) == {why: 1}
