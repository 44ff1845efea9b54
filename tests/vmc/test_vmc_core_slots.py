"""Connection slots and request deadlines in the sans-IO HTTP sharing core (what
vmc/aio/downstream.py does on sockets): at the limit a slow-loris connection is evicted for a
newcomer, a newcomer gets 503 when every slot is answering a request, a head that does not
complete in ``head_timeout`` gets 408, an idle connection is closed quietly; all off by default."""

from __future__ import annotations

from deliverykit.protocol import StreamClose, StreamWrite
from vmc.core.events import Fetch
from vmc.core.http import HttpSharingCore
from vmc.core.linger import HalfClose
from vmc.core.reasons import by_name
from vmc.core.slots import SlotLimits

GET = b"GET http://o/x HTTP/1.1\r\nhost: o\r\n\r\n"


def _writes(out: list[object], conn: int) -> bytes:
    return b"".join(o.data for o in out if isinstance(o, StreamWrite) and o.conn == conn)


def test_at_the_limit_the_slow_loris_is_evicted_for_the_newcomer() -> None:
    core = HttpSharingCore(upstreams=["o:80"], slots=SlotLimits(max_connections=2))
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET /x HT", 0.1)  # a head that never completes
    core.connection_made(2, 0.2)
    core.data_received(2, GET, 0.2)  # busy: being answered
    core.to_send(0.2)
    core.connection_made(3, 0.3)
    out = core.to_send(0.3)
    assert StreamClose(1, abort=True) in out
    assert by_name(core.stats.refused) == {"evicted-incomplete-head": 1}
    core.data_received(3, GET.replace(b"/x", b"/y"), 0.4)  # the newcomer is served
    assert [o for o in core.to_send(0.4) if isinstance(o, Fetch)]


def test_when_every_slot_is_answering_a_newcomer_gets_503() -> None:
    core = HttpSharingCore(upstreams=["o:80"], slots=SlotLimits(max_connections=1))
    core.connection_made(1, 0.0)
    core.data_received(1, GET, 0.0)
    core.to_send(0.0)
    core.connection_made(2, 0.1)
    out = core.to_send(0.1)
    assert _writes(out, 2).startswith(b"HTTP/1.1 503 ") and HalfClose(2) in out
    assert by_name(core.stats.refused) == {"connection-limit": 1}


def test_a_head_that_does_not_complete_gets_408() -> None:
    core = HttpSharingCore(upstreams=["o:80"], slots=SlotLimits(head_timeout=2.0))
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET /x HTTP/1.1\r\nhost: o\r\n", 1.0)
    assert core.get_timer(1.0) == 3.0
    core.handle_timer(3.0)
    out = core.to_send(3.0)
    assert _writes(out, 1).startswith(b"HTTP/1.1 408 ") and HalfClose(1) in out
    assert by_name(core.stats.refused) == {"head-timeout": 1}


def test_an_idle_connection_is_closed_quietly_and_a_kept_one_too() -> None:
    core = HttpSharingCore(upstreams=["o:80"], slots=SlotLimits(idle_timeout=5.0))
    core.connection_made(1, 0.0)
    assert core.get_timer(0.0) == 5.0
    core.handle_timer(5.0)
    out = core.to_send(5.0)
    assert out == [StreamClose(1)]
    assert by_name(core.stats.refused) == {}


def test_off_by_default() -> None:
    core = HttpSharingCore(upstreams=["o:80"])
    for conn in range(1, 1000):
        core.connection_made(conn, 0.0)
    core.data_received(1, b"GET /x HT", 0.0)
    assert core.get_timer(0.0) is None and core.to_send(0.0) == []
