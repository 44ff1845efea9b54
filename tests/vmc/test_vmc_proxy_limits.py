"""The proxy releases and bounds what it holds: a client reset before the origin's head
leaks nothing, a sharer waiting on a stalled stream gives up, a resumed fetch keeps its
upstream slot, a client that never reads is cut off, the global buffer budget passes new
sessions through, and interim (1xx) responses are bounded.

Real sockets, a real origin on loopback and real curl where a client is needed; no mocks.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import pytest
from test_vmc_proxy_sharing import curl, finish, wait_live  # noqa: E402  (same directory)
from vmc_support import connections, sessions, upstream_open, upstream_waiting

from vmc.aio.origin import expected
from vmc.client import fetch


def _until(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _rst(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP RST, not a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# ---------------------------------------------------------------- 1. cancel before the pump ran
def test_client_reset_before_origin_head_leaks_nothing(make_stack) -> None:
    """RFC 9112 sec. 9.6: a client may close at any time; the proxy must then release what it holds.

    The only client resets while the origin is still slow to send its head. The session,
    its upstream connection and its limiter slot must all go, and a new request for the
    same URI must start afresh rather than join a dead session and hang.
    """
    st = make_stack(rate=1_000_000, max_upstream=2)
    size = 300_000
    path = f"/slowhead.bin?size={size}&head_delay=0.6"
    s = socket.create_connection(st.proxy.address)
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: h\r\n\r\n")
    assert _until(lambda: len(sessions(st.proxy)) == 1, 5)
    _rst(s)
    assert _until(lambda: st.origin.stats.requests >= 1, 5)
    assert _until(lambda: not sessions(st.proxy) and upstream_open(st.proxy) == 0, 10), (
        sessions(st.proxy), upstream_open(st.proxy))
    r = asyncio.run(fetch(st.url(path), proxy=st.proxy_addr, timeout=15))
    assert r.status == 200 and r.body == expected("/slowhead.bin", size)
    assert _until(lambda: not sessions(st.proxy), 5)

@pytest.mark.tool("curl")
def test_sharer_waiting_on_a_stalled_stream_gives_up(make_stack, tmp_path: Path) -> None:
    """RFC 9112 sec. 6.3 rule 6 / 9.5: a sharer waiting for live bytes is bounded
    (``stall_timeout``): it gets a clean error (connection closed short) instead of waiting
    forever."""
    # 16 KiB, then ~8 s of silence
    st = make_stack(rate=2000, stall_timeout=0.5, upstream_timeout=20)
    size = 100_000
    a = curl(st, f"/stall2.bin?size={size}", tmp_path / "a")
    rc, code, n = finish(a)
    assert rc in (18, 56) and code == 200 and 0 < n < size
    assert (tmp_path / "a").read_bytes() == expected("/stall2.bin", size)[:n]
    recs = [r for r in st.status()["recent"] if "/stall2.bin" in r["uri"]]
    assert "stalled" in recs[0]["error"]
    assert _until(lambda: not sessions(st.proxy), 5)

# ---------------------------------------------------------------- 2. resume keeps its slot
@pytest.mark.tool("curl")
def test_resume_keeps_its_upstream_slot(make_stack, tmp_path: Path) -> None:
    """RFC 9110 sec. 14.2 / 13.1.5: the resume by Range + If-Range continues the same fetch.

    With a cap of one upstream connection and another request queued for it, the broken
    stream's slot must not pass to the waiter: the resume would queue behind a long
    transfer and the shared stream would fail although the origin is fine.
    """
    # The fault comes ~1.1 s after the second request is started (room for a slow curl start);
    # after it, the first stream needs ~0.25 s more, well inside the second one's 2.5 s queue wait.
    st = make_stack(rate=400_000, max_upstream=1, upstream_queue_wait=2.5, resume_attempts=1,
                    resume_backoff=0.01)
    size, fail = 600_000, 500_000
    a = curl(st, f"/inv.bin?size={size}&fail_at={fail}&fail_once=1", tmp_path / "a")
    wait_live(st, "/inv.bin", 50_000)
    # 3 s at 200 kB/s: longer than the queue wait, so a handed-over slot starves the resume
    other = 600_000
    b = curl(st, f"/other.bin?size={other}&rate=200000", tmp_path / "b")
    assert _until(lambda: upstream_waiting(st.proxy) == 1, 5)
    edge = max((x.buffer.received for x in sessions(st.proxy)), default=fail)
    assert edge < fail, "the fault came before the second request queued: test not meaningful"
    assert finish(a) == (0, 200, size)
    assert (tmp_path / "a").read_bytes() == expected("/inv.bin", size)
    assert finish(b) == (0, 200, other)
    assert (tmp_path / "b").read_bytes() == expected("/other.bin", other)
    assert st.origin.stats.range_requests == 1
    snap = st.status()
    assert (snap["stream_retries"], snap["stream_resumed"], snap["stream_failures"]) == (1, 1, 0)
    assert _until(lambda: upstream_open(st.proxy) <= 1 and not sessions(st.proxy), 5)

# ---------------------------------------------------------------- 6. a client that never reads
@pytest.mark.parametrize("query", ["cc=no-store", "x=1"], ids=["passthrough", "shared"])
def test_client_that_never_reads_is_cut_off(make_stack, query: str) -> None:
    """RFC 9112 sec. 9.5 (timeouts): a client that stops reading must not hold an upstream
    connection (or a session) forever: after ``client_write_timeout`` s without write progress the
    proxy aborts it and releases the slot."""
    # no pool: an open slot is a busy connection
    st = make_stack(rate=4_000_000, max_upstream=2, client_write_timeout=1.0,
                    write_high_water=16384, window=1 << 20, upstream_keepalive=False)
    size = 40_000_000
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(st.proxy.address)
    try:
        s.sendall(f"GET /stall.bin?size={size}&{query} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        assert _until(lambda: st.origin.stats.requests >= 1, 5)
        assert _until(lambda: connections(st.proxy) == 0 and upstream_open(st.proxy) == 0
                      and not sessions(st.proxy), 15), \
            (connections(st.proxy), upstream_open(st.proxy))
        assert st.origin.stats.body_bytes < size
        recs = [r for r in st.status()["recent"] if "/stall.bin" in r["uri"]]
        assert recs and "stalled" in recs[0]["error"]
    finally:
        s.close()

# ---------------------------------------------------------------- 7. global buffer budget
@pytest.mark.tool("curl")
def test_global_buffer_budget_passes_new_sessions_through(make_stack, tmp_path: Path) -> None:
    """Issue 6 "limits": the windows of all live sessions share one budget; past it a new URI is
    fetched unshared (RFC 9110 sec. 7.6: a proxy may always forward without sharing)."""
    st = make_stack(rate=1_000_000, window=300_000, buffer_budget=400_000)
    size = 600_000
    a = curl(st, f"/b1.bin?size={size}", tmp_path / "a")
    wait_live(st, "/b1.bin", 50_000)
    b = curl(st, f"/b2.bin?size={size}", tmp_path / "b")
    assert finish(a) == (0, 200, size) and finish(b) == (0, 200, size)
    assert (tmp_path / "a").read_bytes() == expected("/b1.bin", size)
    assert (tmp_path / "b").read_bytes() == expected("/b2.bin", size)
    snap = st.status()
    assert snap["not_shared"].get("buffer-budget") == 1
    assert snap["buffer_budget"] == 400_000
    assert _until(lambda: not sessions(st.proxy), 5)
    # With the budget free again, a new URI is shared as usual.
    c = curl(st, f"/b3.bin?size={size}", tmp_path / "c")
    wait_live(st, "/b3.bin", 50_000)
    assert finish(c) == (0, 200, size)
    assert st.status()["not_shared"].get("buffer-budget") == 1

# ---------------------------------------------------------------- minor: unbounded 1xx
@pytest.mark.parametrize("interim, ok", [(3, True), (40, False)])
async def test_interim_responses_are_bounded(interim: int, ok: bool) -> None:
    """RFC 9110 sec. 15.2: a server may send 1xx responses before the final one; an origin that
    never stops sending them is cut off (UpstreamError) instead of being read forever."""
    from vmc.aio import upstream as up

    async def origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 102 Processing\r\n\r\n" * interim)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(0.5)
        writer.close()

    server = await asyncio.start_server(origin, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    try:
        if ok:
            resp = await up.request(host, port, b"GET", b"/", [(b"host", b"h")], timeout=5)
            assert resp.status == 200 and await resp.read_all() == b"ok"
            resp.close()
        else:
            with pytest.raises(up.UpstreamError, match="1xx"):
                await up.request(host, port, b"GET", b"/", [(b"host", b"h")], timeout=5)
    finally:
        server.close()
        await server.wait_closed()
