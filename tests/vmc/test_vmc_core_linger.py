"""The lingering close of the sans-IO HTTP sharing core (vmc/core/linger.py): after an error
answer that ends the connection, the core ends its side (``HalfClose``), reads and discards
what the client still sends, and closes at the client's end, after ``idle`` s without a byte,
``total`` s in all, or past ``max_bytes``; the sockets' form is
tests/vmc/test_vmc_proxy_safety.py::test_a_refused_client_still_sending_reads_its_503."""

from __future__ import annotations

from deliverykit.protocol import StreamClose, StreamWrite
from vmc.core.events import Fetch
from vmc.core.http import HttpSharingCore
from vmc.core.linger import HalfClose, LingerLimits
from vmc.core.slots import SlotLimits

GET = b"GET http://o/x HTTP/1.1\r\nhost: o\r\n\r\n"


def _refused(limits: LingerLimits | None = None) -> tuple[HttpSharingCore, list[object]]:
    """A core whose one slot is busy, and the outputs of a second connection's arrival."""
    core = HttpSharingCore(upstreams=["o:80"], slots=SlotLimits(max_connections=1), linger=limits)
    core.connection_made(1, 0.0)
    core.data_received(1, GET, 0.0)
    core.to_send(0.0)
    core.connection_made(2, 1.0)
    return core, core.to_send(1.0)


def test_the_503_at_connect_ends_our_side_and_keeps_reading() -> None:
    core, out = _refused()
    assert isinstance(out[0], StreamWrite) and out[0].data.startswith(b"HTTP/1.1 503 ")
    assert out[1:] == [HalfClose(2)]
    core.data_received(2, GET, 1.2)  # the request still leaving: read, not answered, not parsed
    assert core.to_send(1.2) == []
    assert core.stats.refused and sum(core.stats.refused.values()) == 1
    core.data_received(2, b"", 1.3)  # the client ends its side: now we close
    assert core.to_send(1.3) == [StreamClose(2)]
    assert 2 not in core.lingering


def test_a_silent_client_is_closed_after_the_idle_linger() -> None:
    core, _ = _refused(LingerLimits(idle=2.0, total=10.0))
    core.data_received(2, b"GET /x", 2.0)
    assert core.get_timer(2.0) == 4.0  # 2 s after its last byte (the slot's deadlines: none)
    core.handle_timer(4.0)
    assert StreamClose(2) in core.to_send(4.0)


def test_a_client_that_keeps_sending_is_closed_at_the_total_or_the_byte_bound() -> None:
    core, _ = _refused(LingerLimits(idle=2.0, total=5.0, max_bytes=10_000))
    for t in (2.0, 3.5, 5.0):
        core.data_received(2, b"x" * 100, t)
    assert core.get_timer(5.0) == 6.0  # 1.0 + total
    core.handle_timer(6.0)
    assert StreamClose(2) in core.to_send(6.0)
    core, _ = _refused(LingerLimits(idle=2.0, total=5.0, max_bytes=1000))
    core.data_received(2, b"x" * 1001, 1.5)
    assert core.to_send(1.5) == [StreamClose(2)]


def test_a_malformed_request_lingers_too_and_nothing_is_fetched() -> None:
    core = HttpSharingCore(upstreams=["o:80"])
    core.connection_made(1, 0.0)
    core.data_received(1, b"NOT HTTP\r\n\r\nmore bytes", 0.0)
    out = core.to_send(0.0)
    assert out[-1] == HalfClose(1) and not [o for o in out if isinstance(o, Fetch)]
    core.data_received(1, b"still more", 0.1)
    assert core.to_send(0.1) == []
    core.connection_lost(1, 0.2)  # the client went away: nothing left to close
    assert 1 not in core.lingering and core.get_timer(0.2) is None
