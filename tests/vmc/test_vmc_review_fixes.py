"""Regression tests for the session-2 review of the VMC proxy (issue 6), one per finding.

Each test failed before its fix. Real sockets, a real origin on loopback and real
curl where a client is needed; no mocks.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from vmc.aio.origin import expected
from vmc.client import _retry_after, fetch
from vmc.core import policy

from test_vmc_proxy_sharing import curl, finish, wait_live  # noqa: E402  (same directory)

LM = b"Sat, 01 Jan 2000 00:00:00 GMT"


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
    assert _until(lambda: len(st.proxy.sessions) == 1, 5)
    _rst(s)
    assert _until(lambda: st.origin.stats.requests >= 1, 5)
    assert _until(lambda: not st.proxy.sessions and st.proxy.limiter.open == 0, 10), (
        st.proxy.sessions, st.proxy.limiter.open)
    r = asyncio.run(fetch(st.url(path), proxy=st.proxy_addr, timeout=15))
    assert r.status == 200 and r.body == expected("/slowhead.bin", size)
    assert _until(lambda: not st.proxy.sessions, 5)


@pytest.mark.tool("curl")
def test_sharer_waiting_on_a_stalled_stream_gives_up(make_stack, tmp_path: Path) -> None:
    """RFC 9112 sec. 6.3 rule 6 / 9.5: a sharer waiting for live bytes is bounded (``stall_timeout``):
    it gets a clean error (connection closed short) instead of waiting forever."""
    st = make_stack(rate=2000, stall_timeout=0.5, upstream_timeout=20)  # 16 KiB, then ~8 s of silence
    size = 100_000
    a = curl(st, f"/stall2.bin?size={size}", tmp_path / "a")
    rc, code, n = finish(a)
    assert rc in (18, 56) and code == 200 and 0 < n < size
    assert (tmp_path / "a").read_bytes() == expected("/stall2.bin", size)[:n]
    recs = [r for r in st.status()["recent"] if "/stall2.bin" in r["uri"]]
    assert "stalled" in recs[0]["error"]
    assert _until(lambda: not st.proxy.sessions, 5)


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
    other = 600_000  # 3 s at 200 kB/s: longer than the queue wait, so a handed-over slot starves the resume
    b = curl(st, f"/other.bin?size={other}&rate=200000", tmp_path / "b")
    assert _until(lambda: st.proxy.limiter.waiting == 1, 5)
    edge = max((x.buffer.received for x in list(st.proxy.sessions.values())), default=fail)
    assert edge < fail, "the fault came before the second request queued: test not meaningful"
    assert finish(a) == (0, 200, size)
    assert (tmp_path / "a").read_bytes() == expected("/inv.bin", size)
    assert finish(b) == (0, 200, other)
    assert (tmp_path / "b").read_bytes() == expected("/other.bin", other)
    assert st.origin.stats.range_requests == 1
    snap = st.status()
    assert (snap["stream_retries"], snap["stream_resumed"], snap["stream_failures"]) == (1, 1, 0)
    assert _until(lambda: st.proxy.limiter.open <= 1 and not st.proxy.sessions, 5)


# ---------------------------------------------------------------- 3, 4. which validators are strong
def test_if_range_rules() -> None:
    """RFC 9110 sec. 13.1.5: no HTTP-date in If-Range when there is an entity tag, and a date only
    when strong; sec. 8.8.2.2: Last-Modified is strong only if Date is at least 1 s later."""
    date = b"Sat, 01 Jan 2000 00:00:01 GMT"
    weak_etag_lm = policy.Validators(b'W/"x"', LM, 10, date)
    assert weak_etag_lm.if_range() is None and not weak_etag_lm.can_patch_from_origin()
    strong = policy.Validators(b'"x"', LM, 10, date)
    assert strong.if_range() == b'"x"' and strong.can_patch_from_origin()
    lm_strong = policy.Validators(None, LM, 10, date)
    assert lm_strong.if_range() == LM and lm_strong.can_patch_from_origin()
    lm_same_second = policy.Validators(None, LM, 10, LM)
    assert lm_same_second.if_range() is None and not lm_same_second.can_patch_from_origin()
    assert policy.Validators(None, LM, 10).if_range() is None  # no Date: implicitly weak
    assert policy.Validators(None, LM, 10, b"not a date").if_range() is None
    # Date in the RFC 850 and asctime forms (sec. 5.6.7) is understood too.
    assert policy.Validators(None, LM, 10, b"Saturday, 01-Jan-00 00:00:05 GMT").if_range() == LM
    assert policy.Validators(None, LM, 10, b"Sat Jan  1 00:00:05 2000").if_range() == LM
    v = policy.validators_of(200, [(b"etag", b'"x"'), (b"date", date), (b"content-length", b"10")])
    assert v.date == date


@settings(max_examples=300, deadline=None)
@given(hst.one_of(hst.binary(max_size=60),
                  hst.from_regex(rb"\A(Sun|Mon), [0-9]{1,2} [A-Za-z]{3} [0-9]{2,4} [0-9:]{5,8} (GMT|UTC|[+-][0-9]{4})\Z")))
def test_http_date_and_retry_after_never_raise(value: bytes) -> None:
    """Any field value: an HTTP-date parses to a number or None (RFC 9110 sec. 5.6.7), never an
    exception; so do the validators built on it and Retry-After."""
    t = policy.http_date(value)
    assert t is None or isinstance(t, float)
    v = policy.Validators(None, LM, 10, value)
    assert v.if_range() in (None, LM)
    r = _retry_after(value, now=0.0)
    assert r is None or r >= 0


@pytest.mark.tool("curl")
@pytest.mark.parametrize("query", ["weak=1", "noetag=1&lmnow=1"], ids=["weak-etag+lm", "lm-equals-date"])
def test_weak_validators_prefix_out_of_window_passes_through(make_stack, tmp_path: Path, query: str) -> None:
    """RFC 9110 sec. 13.1.5 and 8.8.2.2: a weak ETag (even with Last-Modified), or a Last-Modified
    not 1 s older than Date, cannot guard a Range patch: a late joiner whose prefix left the window
    is served on its own (never a 200 head followed by a failed patch)."""
    st = make_stack(rate=1_000_000, window=100_000, disk_budget=0)  # no disk: the origin-Range path
    size = 600_000
    path = f"/wk.bin?size={size}&{query}"
    a = curl(st, path, tmp_path / "a")
    wait_live(st, "/wk.bin", 250_000)
    b = curl(st, path, tmp_path / "b")
    body = expected("/wk.bin", size)
    for p, out in ((a, "a"), (b, "b")):
        assert finish(p) == (0, 200, size)
        assert (tmp_path / out).read_bytes() == body
    snap = st.status()
    assert snap["not_shared"].get("prefix-unpatchable") == 1
    assert st.origin.stats.range_requests == 0


@pytest.mark.tool("curl")
def test_last_modified_alone_still_patches_when_strong(make_stack, tmp_path: Path) -> None:
    """RFC 9110 sec. 8.8.2.2: no ETag, Last-Modified well before Date: a strong validator, so a late
    joiner's lost prefix comes from the origin by Range + If-Range (date)."""
    st = make_stack(rate=1_000_000, window=100_000, disk_budget=0)
    size = 600_000
    path = f"/lm.bin?size={size}&noetag=1"
    a = curl(st, path, tmp_path / "a")
    wait_live(st, "/lm.bin", 250_000)
    b = curl(st, path, tmp_path / "b")
    body = expected("/lm.bin", size)
    for p, out in ((a, "a"), (b, "b")):
        assert finish(p) == (0, 200, size)
        assert (tmp_path / out).read_bytes() == body
    assert st.origin.stats.range_requests >= 1
    assert "prefix-unpatchable" not in st.status()["not_shared"]


@pytest.mark.tool("curl")
@pytest.mark.parametrize("query, status", [("noetag=1", 206), ("noetag=1&lmnow=1", 200)],
                         ids=["strong-date", "weak-date"])
def test_client_if_range_date_evaluated_as_strong_only(make_stack, tmp_path: Path, query: str,
                                                       status: int) -> None:
    """RFC 9110 sec. 13.1.5: a received If-Range date that is not a strong validator (sec. 8.8.2.2)
    makes the condition false: the Range is ignored and the whole representation is sent (200)."""
    st = make_stack(rate=1_000_000)
    size = 400_000
    path = f"/ir.bin?size={size}&{query}"
    a = curl(st, path, tmp_path / "a")
    wait_live(st, "/ir.bin", 50_000)
    lm = next(iter(st.proxy.sessions.values())).validators.last_modified
    assert lm
    out = st.raw(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: h\r\nRange: bytes=100-199\r\nIf-Range: "
                 + lm + b"\r\nConnection: close\r\n\r\n", timeout=10)
    head, _, got = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), head[:60]
    body = expected("/ir.bin", size)
    assert got == (body[100:200] if status == 206 else body)
    assert finish(a) == (0, 200, size)


# ---------------------------------------------------------------- 5. 206 without Last-Modified
def test_same_representation_on_a_206() -> None:
    """RFC 9110 sec. 15.3.7: a 206 answering If-Range need not repeat Last-Modified; the strong
    ETag and the complete length decide, Last-Modified only when both carry it."""
    date = b"Sat, 01 Jan 2000 00:00:09 GMT"
    full = policy.Validators(b'"x"', LM, 10, date)
    assert policy.same_representation(full, policy.Validators(b'"x"', None, 10))
    assert policy.same_representation(full, policy.Validators(b'"x"', LM, 10))
    assert not policy.same_representation(full, policy.Validators(b'"x"', b"Sun, 02 Jan 2000 00:00:00 GMT", 10))
    assert not policy.same_representation(full, policy.Validators(b'"y"', None, 10))
    assert not policy.same_representation(full, policy.Validators(None, LM, 10))
    assert not policy.same_representation(full, policy.Validators(b'"x"', None, 11))
    lm_only = policy.Validators(None, LM, 10, date)
    assert policy.same_representation(lm_only, policy.Validators(None, LM, 10))
    assert not policy.same_representation(lm_only, policy.Validators(None, b"Sun, 02 Jan 2000 00:00:00 GMT", 10))
    assert not policy.same_representation(policy.Validators(b'W/"x"', LM, 10, date),
                                          policy.Validators(b'W/"x"', LM, 10))


@pytest.mark.tool("curl")
def test_resume_accepts_206_without_last_modified(make_stack, tmp_path: Path) -> None:
    """RFC 9110 sec. 15.3.7: the origin's resume 206 omits Last-Modified but carries the same
    strong ETag and length: it is the rest of the same representation and is stitched on."""
    st = make_stack(rate=1_000_000)
    size, fail = 600_000, 250_000
    path = f"/n.bin?size={size}&fail_at={fail}&fail_once=1&nolm206=1"
    a = curl(st, path, tmp_path / "a")
    assert finish(a) == (0, 200, size)
    assert (tmp_path / "a").read_bytes() == expected("/n.bin", size)
    snap = st.status()
    assert (snap["stream_retries"], snap["stream_resumed"], snap["stream_failures"]) == (1, 1, 0)


@pytest.mark.tool("curl")
def test_prefix_patch_accepts_206_without_last_modified(make_stack, tmp_path: Path) -> None:
    """RFC 9110 sec. 15.3.7: the same for a late joiner's prefix patched from the origin by Range."""
    st = make_stack(rate=1_000_000, window=100_000, disk_budget=0)
    size = 600_000
    path = f"/np.bin?size={size}&nolm206=1"
    a = curl(st, path, tmp_path / "a")
    wait_live(st, "/np.bin", 250_000)
    b = curl(st, path, tmp_path / "b")
    body = expected("/np.bin", size)
    for p, out in ((a, "a"), (b, "b")):
        assert finish(p) == (0, 200, size)
        assert (tmp_path / out).read_bytes() == body
    assert st.origin.stats.range_requests >= 1


# ---------------------------------------------------------------- 6. a client that never reads
@pytest.mark.parametrize("query", ["cc=no-store", "x=1"], ids=["passthrough", "shared"])
def test_client_that_never_reads_is_cut_off(make_stack, query: str) -> None:
    """RFC 9112 sec. 9.5 (timeouts): a client that stops reading must not hold an upstream
    connection (or a session) forever: after ``client_write_timeout`` s without write progress the
    proxy aborts it and releases the slot."""
    st = make_stack(rate=4_000_000, max_upstream=2, client_write_timeout=1.0, write_high_water=16384,
                    window=1 << 20, upstream_keepalive=False)  # no pool: an open slot is a busy connection
    size = 40_000_000
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(st.proxy.address)
    try:
        s.sendall(f"GET /stall.bin?size={size}&{query} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        assert _until(lambda: st.origin.stats.requests >= 1, 5)
        assert _until(lambda: st.proxy.connections == 0 and st.proxy.limiter.open == 0
                      and not st.proxy.sessions, 15), (st.proxy.connections, st.proxy.limiter.open)
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
    assert _until(lambda: not st.proxy.sessions, 5)
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
