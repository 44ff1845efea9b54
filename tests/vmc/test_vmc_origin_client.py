"""The test origin's HTTP behaviour and the client's checks, over real loopback sockets."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from vmc.aio import upstream as up
from vmc.aio.origin import Origin, digest, expected
from vmc.client import FetchError, _offered_sha256, fetch
from vmc.core import ranges


async def _get(o: Origin, target: str, headers=()) -> tuple[up.UpstreamResponse, bytes]:
    h, p = o.address
    resp = await up.request(h, p, b"GET", target.encode(),
                            [(b"host", o.authority.encode()), *headers])
    try:
        return resp, await resp.read_all()
    finally:
        resp.close()


async def test_origin_ranges_and_validators() -> None:
    o = await Origin().start()
    try:
        body = expected("/a", 100_000)
        r, b = await _get(o, "/a?size=100000")
        assert r.status == 200 and b == body and r.header(b"accept-ranges") == b"bytes"
        etag, lm = r.header(b"etag"), r.header(b"last-modified")
        assert etag.startswith(b'"') and lm
        r, b = await _get(o, "/a?size=100000", [(b"range", b"bytes=70000-70009")])
        assert r.status == 206 and b == body[70000:70010]
        assert (ranges.parse_content_range(r.header(b"content-range"))
                == ranges.ContentRange(70000, 70009, 100000))
        r, b = await _get(o, "/a?size=100000", [(b"range", b"bytes=5-9"), (b"if-range", etag)])
        assert r.status == 206 and b == body[5:10]
        r, b = await _get(o, "/a?size=100000",
                          [(b"range", b"bytes=5-9"), (b"if-range", b'"other"')])
        assert r.status == 200 and b == body  # If-Range false: the whole representation
        r, b = await _get(o, "/a?size=100000", [(b"range", b"bytes=5-9"), (b"if-range", lm)])
        assert r.status == 206
        r, _ = await _get(o, "/a?size=100000", [(b"range", b"bytes=100000-")])
        assert r.status == 416 and r.header(b"content-range") == b"bytes */100000"
        r, b = await _get(o, "/a?size=100000", [(b"range", b"bytes=0-1,5-6")])
        assert r.status == 200 and b == body
        r, b = await _get(o, "/a?size=1000&chunked=1")
        assert r.header(b"transfer-encoding") == b"chunked" and b == body[:1000]
        r, b = await _get(o, "/a?size=1000&weak=1&etag=zz")
        assert r.header(b"etag") == b'W/"zz"'
        assert r.header(b"repr-digest") == digest("/a", 1000)
        want = base64.b64decode(digest("/a", 1000)[9:-1])
        assert want == hashlib.sha256(body[:1000]).digest()
    finally:
        await o.close()


async def test_origin_failure_injection_is_a_short_body() -> None:
    o = await Origin().start()
    try:
        h, p = o.address
        resp = await up.request(h, p, b"GET", b"/f?size=100000&fail_at=30000", [(b"host", b"x")])
        got = b""
        with pytest.raises(up.UpstreamError):
            async for c in resp.chunks():
                got += c
        resp.close()
        assert got == expected("/f", 100000)[:30000]
        with pytest.raises(up.UpstreamError):
            await _get(o, "/g?size=100000&fail_at=30000&fail_once=1")  # the first one fails
        r, b = await _get(o, "/g?size=100000&fail_at=30000&fail_once=1")  # then the fault is gone
        assert r.status == 200 and b == expected("/g", 100000)
    finally:
        await o.close()


async def test_client_direct_and_discard(tmp_path: Path) -> None:
    o = await Origin().start()
    try:
        url = f"http://{o.authority}/c?size=200000"
        r = await fetch(url, out=tmp_path / "c")
        assert r.status == 200 and r.digest_ok is True
        assert (tmp_path / "c").read_bytes() == expected("/c", 200000)
        r = await fetch(url, discard=True)
        assert r.length == 200000 and r.body is None and r.digest_ok is None
        with pytest.raises(FetchError):
            await fetch(f"http://{o.authority}/c?size=200000&fail_at=1000")
        with pytest.raises(FetchError):
            await fetch("https://example.invalid/")
    finally:
        await o.close()


def test_offered_digest_forms() -> None:
    d = hashlib.sha256(b"x").digest()
    b64 = base64.b64encode(d)
    assert _offered_sha256([(b"repr-digest", b"sha-512=:AA==:, sha-256=:" + b64 + b":")]) == d
    assert _offered_sha256([(b"digest", b"SHA-256=" + b64)]) == d
    assert _offered_sha256([(b"repr-digest", b"sha-256=:!!:")]) is None
    assert _offered_sha256([]) is None


@pytest.mark.tool("curl")
def test_post_passes_through_unshared_with_expect_100(make_stack, tmp_path: Path) -> None:
    st = make_stack()
    data = tmp_path / "d"
    data.write_bytes(b"z" * 5000)
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                        "-H", "Expect: 100-continue",
                        "--data-binary", f"@{data}", st.reverse_url("/p?size=10")],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout == "405"  # the origin's answer, relayed
    assert st.status()["not_shared"].get("method") == 1


@given(st.lists(st.tuples(st.sampled_from([b"repr-digest", b"digest", b"x"]),
                          st.binary(max_size=60)), max_size=4))
def test_fuzz_offered_digest(headers) -> None:
    """Any digest header values: a 32-byte-or-other bytes value or None, never an exception."""
    out = _offered_sha256(headers)
    assert out is None or isinstance(out, bytes)
