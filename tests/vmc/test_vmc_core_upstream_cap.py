"""The upstream cap in the sans-IO HTTP sharing core (``vmc proxy --engine core``; the proxy's
tests/vmc/test_vmc_proxy_upstream_cap.py on sockets): at most ``limit`` fetches out, more wait
FIFO, a waiter past ``wait`` s (or past ``max_waiting``) gets 503 + Retry-After counted as
``upstream-busy``, a freed slot passes to the oldest waiter, and a joiner needs no slot. Fed
bytes and a clock, nothing else."""

from __future__ import annotations

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch, OriginData, OriginEnd, OriginError, OriginHead
from vmc.core.fetchgate import FetchGate
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig
from vmc.core.reasons import by_name

HEAD = ((b"content-length", b"10"), (b"etag", b'"e"'))


def _get(core: HttpSharingCore, conn: int, path: str, now: float) -> list[object]:
    core.connection_made(conn, now)
    core.data_received(conn, f"GET http://o{path} HTTP/1.1\r\nhost: o\r\n\r\n".encode(), now)
    return list(core.to_send(now))


def _written(out: list[object], conn: int) -> bytes:
    return b"".join(o.data for o in out if isinstance(o, StreamWrite) and o.conn == conn)


def _fetches(out: list[object]) -> list[Fetch]:
    return [o for o in out if isinstance(o, Fetch)]


def test_past_the_cap_a_fetch_waits_and_goes_when_a_slot_frees() -> None:
    core = HttpSharingCore(MachineConfig(), gate=FetchGate(1, wait=5.0))
    (a,) = _fetches(_get(core, 1, "/a", 0.0))
    assert _fetches(_get(core, 2, "/b", 0.1)) == []  # waits: one fetch out already
    assert core.get_timer(0.1) == 5.1
    core.origin_received(OriginHead(a.fetch, 200, HEAD), 1.0)
    core.origin_received(OriginData(a.fetch, bytes(10)), 1.0)
    core.origin_received(OriginEnd(a.fetch), 1.0)
    (b,) = _fetches(core.to_send(1.0))
    assert b.uri == "http://o/b"
    snap = core.status(0)["upstream_limit"]
    assert snap == {"max": 1, "open": 1, "peak": 1, "queued": 1, "refused": 0, "waiting": 0,
                    "wait": 5.0}


def test_a_waiter_past_its_wait_gets_503_with_retry_after_and_no_fetch() -> None:
    core = HttpSharingCore(MachineConfig(), gate=FetchGate(1, wait=0.3))
    core.retry_after = 7
    _get(core, 1, "/a", 0.0)
    _get(core, 2, "/b", 0.0)
    core.handle_timer(0.2)
    assert _written(core.to_send(0.2), 2) == b""  # not yet
    core.handle_timer(0.3)
    out = core.to_send(0.3)
    reply = _written(out, 2)
    assert reply.startswith(b"HTTP/1.1 503 ") and b"retry-after: 7\r\n" in reply.lower()
    assert _fetches(out) == [] and by_name(core.stats.refused) == {"upstream-busy": 1}
    assert core.status(0)["upstream_limit"]["refused"] == 1


def test_a_full_queue_refuses_at_once() -> None:
    core = HttpSharingCore(MachineConfig(), gate=FetchGate(1, wait=30.0, max_waiting=1))
    _get(core, 1, "/a", 0.0)
    _get(core, 2, "/b", 0.0)  # queued
    assert _written(_get(core, 3, "/c", 0.0), 3).startswith(b"HTTP/1.1 503 ")


def test_a_joiner_needs_no_slot() -> None:
    core = HttpSharingCore(MachineConfig(), gate=FetchGate(1, wait=30.0))
    (a,) = _fetches(_get(core, 1, "/big", 0.0))
    core.origin_received(OriginHead(a.fetch, 200, ((b"content-length", b"1000"),
                                                   (b"etag", b'"e"'))), 0.1)
    core.origin_received(OriginData(a.fetch, bytes(100)), 0.1)
    core.to_send(0.1)
    joiner = _get(core, 2, "/big", 0.2)
    assert _fetches(joiner) == [] and _written(joiner, 2).startswith(b"HTTP/1.1 200 ")
    assert _fetches(_get(core, 3, "/other", 0.3)) == []  # a new object waits for the slot
    assert list(core.gate.waiting) != [] and core.gate.out == {a.fetch}


def test_a_broken_streams_resume_keeps_its_slot() -> None:
    """The resume by Range + If-Range continues the same transfer: the broken fetch's slot is
    the resume's, never the waiter's (the waiter would hold it for a whole other transfer and
    starve the shared stream); a stream that will not resume passes its slot on."""
    cfg = MachineConfig(resume_backoff=0.5, resume_attempts=1)
    core = HttpSharingCore(cfg, gate=FetchGate(1, wait=30.0))
    (a,) = _fetches(_get(core, 1, "/a", 0.0))
    core.origin_received(OriginHead(a.fetch, 200, ((b"content-length", b"1000"),
                                                   (b"etag", b'"e"'))), 0.1)
    core.origin_received(OriginData(a.fetch, bytes(100)), 0.1)
    assert _fetches(_get(core, 2, "/b", 0.2)) == []  # waits for the one slot
    core.origin_received(OriginError(a.fetch, "reset"), 0.3)
    assert _fetches(core.to_send(0.3)) == []  # the resume waits its backoff, holding the slot
    core.handle_timer(0.8)
    (resume,) = _fetches(core.to_send(0.8))
    assert resume.uri == "http://o/a" and resume.first == 100 and resume.if_range == b'"e"'
    assert core.gate.out == {resume.fetch} and len(core.gate.waiting) == 1
    core.origin_received(OriginError(resume.fetch, "reset again"), 0.9)  # no attempt left
    (b,) = _fetches(core.to_send(0.9))
    assert b.uri == "http://o/b" and core.gate.out == {b.fetch}
