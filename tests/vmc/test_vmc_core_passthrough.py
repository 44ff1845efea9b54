"""A pass-through answer keeps the origin's Content-Range (the conformance suite's Range
vectors on ``vmc proxy``, vmc/conformance/test_http_vector_cases.py::test_range_vector): the
core relayed a Range request's 206 with a Content-Range of its own making, ``bytes 0-9/0``
for the origin's ``bytes 10-19/10000``, and a 416 with ``bytes */0``."""

from __future__ import annotations

import pytest

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch, OriginData, OriginEnd, OriginHead
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig


def _relayed(status: int, content_range: bytes, body: bytes) -> bytes:
    core = HttpSharingCore(MachineConfig())
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET http://o/x HTTP/1.1\r\nhost: o\r\nrange: bytes=10-19\r\n\r\n", 0.0)
    (f,) = [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
    assert f.ranged is False and (b"range", b"bytes=10-19") in f.headers  # the client's, as is
    core.origin_received(OriginHead(f.fetch, status, ((b"content-range", content_range),
                                                      (b"content-length", b"%d" % len(body)))), 0.1)
    if body:
        core.origin_received(OriginData(f.fetch, body), 0.1)
    core.origin_received(OriginEnd(f.fetch), 0.1)
    return b"".join(o.data for o in core.to_send(0.1) if isinstance(o, StreamWrite))


@pytest.mark.parametrize(("status", "content_range", "body"), [
    (206, b"bytes 10-19/10000", b"0123456789"),
    (416, b"bytes */10000", b""),
])
def test_a_relayed_answer_keeps_the_origins_content_range(status: int, content_range: bytes,
                                                          body: bytes) -> None:
    data = _relayed(status, content_range, body)
    head, _, got = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), head
    ranges = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-range:")]
    assert ranges == [b"content-range: " + content_range], ranges
    assert got == body
