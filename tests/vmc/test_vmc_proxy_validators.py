"""Validators and conditional requests through the proxy: If-Range's rules (RFC 9110
sec. 13.1.5: a date is a strong validator only under the 1-second rule), weak ETags never
patch a prefix, Last-Modified alone may, a 206 is the same representation only when its
validators match, resumes and prefix patches take a 206 without Last-Modified, and
HTTP-date / Retry-After parsing never raises.

Real sockets, a real origin on loopback and real curl where a client is needed; no mocks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as hst
from test_vmc_proxy_sharing import curl, finish, wait_live  # noqa: E402  (same directory)
from vmc_support import sessions

from vmc.aio.origin import expected
from vmc.client import _retry_after
from vmc.core import policy

LM = b"Sat, 01 Jan 2000 00:00:00 GMT"


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
                  hst.from_regex(rb"\A(Sun|Mon), [0-9]{1,2} [A-Za-z]{3} [0-9]{2,4} [0-9:]{5,8} "
                                 rb"(GMT|UTC|[+-][0-9]{4})\Z")))
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
@pytest.mark.parametrize("query", ["weak=1", "noetag=1&lmnow=1"],
                         ids=["weak-etag+lm", "lm-equals-date"])
def test_weak_validators_prefix_out_of_window_passes_through(make_stack, tmp_path: Path,
                                                            query: str) -> None:
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
    lm = sessions(st.proxy)[0].validators.last_modified
    assert lm
    out = st.raw(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: h\r\nRange: bytes=100-199\r\n"
                 b"If-Range: " + lm + b"\r\nConnection: close\r\n\r\n", timeout=10)
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
    assert not policy.same_representation(
        full, policy.Validators(b'"x"', b"Sun, 02 Jan 2000 00:00:00 GMT", 10))
    assert not policy.same_representation(full, policy.Validators(b'"y"', None, 10))
    assert not policy.same_representation(full, policy.Validators(None, LM, 10))
    assert not policy.same_representation(full, policy.Validators(b'"x"', None, 11))
    lm_only = policy.Validators(None, LM, 10, date)
    assert policy.same_representation(lm_only, policy.Validators(None, LM, 10))
    assert not policy.same_representation(
        lm_only, policy.Validators(None, b"Sun, 02 Jan 2000 00:00:00 GMT", 10))
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
    """RFC 9110 sec. 15.3.7: the same for a late joiner's prefix patched from the origin by
    Range."""
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
