"""HTTP proxy conformance cases: an external proxy in front of our origin.

Each case starts our origin (a subprocess, deterministic paced bodies) and the
implementation's ``proxy`` role in front of it (see :mod:`vmc.conformance`),
then talks to the proxy with real clients: curl where a real client's view
matters, and a strict h11 client that tells complete messages from cut ones.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from deliverykit.testing import require_tool
from vmc.conformance.harness import (
    Origin,
    body_slice,
    describe_body,
    expected,
    fetch,
    free_port,
    multipart_parts,
    origin,
    start_fetch,
)

SIZE = 1_000_000
RATE = 800_000  # bytes/s: the first response stays in flight for ~1.2 s


@dataclass
class Rig:
    origin: Origin
    proxy: tuple[str, int]

    def url(self, target: str) -> str:
        return f"http://{self.proxy[0]}:{self.proxy[1]}{target}"


@pytest.fixture
def rig(impl) -> Iterator[Rig]:
    with origin() as o:
        port = free_port()
        with impl.start("proxy", "--listen", f"127.0.0.1:{port}", "--upstream", o.authority,
                        ready_line="READY", ready_timeout=20):
            yield Rig(o, ("127.0.0.1", port))


def curl(
    url: str, out: Path, *args: str, timeout: float = 30
) -> tuple[int, int | None, dict[str, str]]:
    """(curl exit status, final status code, response header fields) for a GET to ``url``."""
    require_tool("curl")
    cp = subprocess.run(["curl", "-s", "--noproxy", "*", "-D", "-", "-o", str(out),
                         "--max-time", str(timeout), *args, url],
                        capture_output=True, timeout=timeout + 10)
    status: int | None = None
    headers: dict[str, str] = {}
    for line in cp.stdout.decode("latin-1").splitlines():
        if line.startswith("HTTP/"):
            parts = line.split()
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
            headers = {}
        elif ":" in line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return cp.returncode, status, headers


def _wait_in_flight(ev, res, what: str) -> None:
    assert ev.wait(15), f"{what}: no body byte within 15 s (status {res.status}, {res.error})"


def _full_requests(st: dict) -> int:
    return st["requests"] - st["range_requests"]


# ------------------------------------------------------------------------------- basics

def _two_concurrent(rig, path, target, first, second, label=""):
    """Fetch ``target`` as two clients with different headers, the second while the first
    is in flight; both bodies must be exact. Returns how many full origin requests it took."""
    (name_a, hdrs_a), (name_b, hdrs_b) = first, second
    before = rig.origin.stats()
    th1, a, ev = start_fetch(rig.proxy, target, hdrs_a, timeout=60)
    _wait_in_flight(ev, a, name_a)
    th2, b, _ = start_fetch(rig.proxy, target, hdrs_b, timeout=60)
    th1.join(60)
    th2.join(60)
    for who, r in ((name_a, a), (name_b, b)):
        assert r.complete and r.status == 200 and r.body == expected(path, SIZE), (
            f"{label}{who}: {r.status} {r.error}")
    return _full_requests(rig.origin.stats()) - _full_requests(before)


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 7.6, 8.6", role="proxy")
@pytest.mark.tool("curl")
def test_forwards_a_complete_response(impl, rig, tmp_path):
    """A plain GET through the proxy: 200, Content-Length and the origin's exact body (curl)."""
    target = "/basic/object.bin?size=300000"
    rc, status, hdrs = curl(rig.url(target), tmp_path / "b")
    assert rc == 0, f"curl exit {rc}"
    assert status == 200
    body = (tmp_path / "b").read_bytes()
    assert body == expected("/basic/object.bin", 300000)
    if "content-length" in hdrs:
        assert int(hdrs["content-length"]) == 300000


# ------------------------------------------------------------------------------- ranges

RANGES = [("1000-1999", 1000, 1999), ("0-0", 0, 0), ("-100", SIZE - 100, SIZE - 1),
          ("700000-700099", 700000, 700099), (f"{SIZE - 5000}-", SIZE - 5000, SIZE - 1),
          (f"990000-{SIZE + 500}", 990000, SIZE - 1)]


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 14.2, 14.4, 15.3.7",
                         role="proxy")
@pytest.mark.tool("curl")
def test_range_on_an_in_flight_object(impl, rig, tmp_path, record_property):
    """Range requests while the object is still streaming to a first client.

    A 206 must carry ``Content-Range: bytes first-last/complete`` matching
    exactly the bytes sent (sec. 14.4, 15.3.7), whether the proxy serves them
    from the live stream, its buffer or the origin. Ignoring Range and sending
    the whole 200 is allowed (sec. 14.2) and noted as a property.
    """
    path = "/range/live.bin"
    target = f"{path}?size={SIZE}&rate={RATE}"
    th, first, ev = start_fetch(rig.proxy, target, timeout=60)
    _wait_in_flight(ev, first, "first client")
    ignored, problems = [], []
    for i, (spec, a, b) in enumerate(RANGES):
        out = tmp_path / f"r{i}"
        rc, status, hdrs = curl(rig.url(target), out, "-H", f"Range: bytes={spec}")
        body = out.read_bytes() if out.exists() else b""
        problem = _range_problem(path, spec, a, b, rc, status, hdrs, body)
        if problem:
            problems.append(problem)
        elif status == 200:
            ignored.append(spec)
    th.join(60)
    record_property("ranges_ignored", ",".join(ignored) or "none")
    if problems:
        record_property("range_problems", " | ".join(problems))
    assert not problems, "\n".join(problems)
    assert first.complete and first.status == 200 and first.body == expected(path, SIZE)


def _range_problem(path: str, spec: str, a: int, b: int, rc: int, status: int | None, hdrs: dict,
                   body: bytes) -> str | None:
    """What is wrong with one answer to ``Range: bytes=spec`` (None when it is right)."""
    if rc != 0:
        return f"bytes={spec}: curl exit {rc} (status {status})"
    if status == 200:
        if body != expected(path, SIZE):
            return (f"bytes={spec}: a 200 that is not the complete representation (sec. 15.3.1): "
                    f"{describe_body(path, SIZE, body)}")
        return None
    if status != 206:
        return f"bytes={spec}: status {status}"
    if hdrs.get("content-range") != f"bytes {a}-{b}/{SIZE}":
        return (f"bytes={spec}: Content-Range {hdrs.get('content-range')!r},"
                f" want 'bytes {a}-{b}/{SIZE}'")
    if "content-length" in hdrs and int(hdrs["content-length"]) != b - a + 1:
        return f"bytes={spec}: Content-Length {hdrs['content-length']}, want {b - a + 1}"
    if body != body_slice(path, a, b + 1):
        return f"bytes={spec}: 206 with the wrong bytes: {describe_body(path, SIZE, body)}"
    return None


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 14.2, 15.5.17", role="proxy")
def test_unsatisfiable_range_on_an_in_flight_object(impl, rig, record_property):
    """A range wholly past the end: 416 with ``Content-Range: bytes */length``, or the whole 200."""
    path = "/range/unsat.bin"
    target = f"{path}?size={SIZE}&rate={RATE}"
    th, first, ev = start_fetch(rig.proxy, target, timeout=60)
    _wait_in_flight(ev, first, "first client")
    r = fetch(rig.proxy, target, [("range", f"bytes={SIZE + 10}-{SIZE + 20}")], timeout=30)
    assert r.complete, r.error
    if r.status == 200:
        record_property("unsatisfiable_range", "ignored (200)")
        assert r.body == expected(path, SIZE)
    else:
        assert r.status == 416, f"status {r.status}"
        assert r.headers.get("content-range") == f"bytes */{SIZE}"
        record_property("unsatisfiable_range", "416")
    th.join(60)
    assert first.complete and first.body == expected(path, SIZE)


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 14.2, 14.6, 15.3.7",
                         role="proxy")
def test_multiple_ranges_on_an_in_flight_object(impl, rig, record_property):
    """``bytes=0-9,5000-5099`` while the object streams: a 206 multipart/byteranges whose parts are
    exact, a single 206 covering both, or the whole 200 (sec. 14.2 lets a server ignore Range)."""
    path = "/range/multi.bin"
    target = f"{path}?size={SIZE}&rate={RATE}"
    th, first, ev = start_fetch(rig.proxy, target, timeout=60)
    _wait_in_flight(ev, first, "first client")
    r = fetch(rig.proxy, target, [("range", "bytes=0-9,5000-5099")], timeout=30)
    assert r.complete, r.error
    if r.status == 200:
        assert r.body == expected(path, SIZE), \
            f"a 200 that is not the representation: {describe_body(path, SIZE, r.body)}"
        record_property("multiple_ranges", "ignored (200)")
    else:
        record_property("multiple_ranges", f"status {r.status}")
        assert r.status != 416, (
            "416 for two valid, disjoint, ascending ranges: 416 is for ranges that are"
            " all unsatisfiable or excessive (sec. 15.5.17); a server that will not do"
            " multipart may ignore Range and send 200 (sec. 14.2)")
        assert r.status == 206, f"status {r.status}"
        if r.headers.get("content-type", "").startswith("multipart/byteranges"):
            parts = multipart_parts(r)
            assert [(a, b) for a, b, _, _ in parts] == [(0, 9), (5000, 5099)], parts
            for a, b, complete, body in parts:
                assert complete == SIZE and body == body_slice(path, a, b + 1)
            record_property("multiple_ranges", "multipart/byteranges")
        else:
            a, b = map(int, r.headers["content-range"].split()[1].split("/")[0].split("-"))
            assert a <= 0 and b >= 5099, f"a single range {a}-{b} that does not cover both asked"
            assert r.body == body_slice(path, a, b + 1)
            record_property("multiple_ranges", f"coalesced to {a}-{b}")
    th.join(60)
    assert first.complete and first.body == expected(path, SIZE)


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9110 sec. 13.1.5, 14.2", role="proxy")
def test_if_range_on_an_in_flight_object(impl, rig, record_property):
    """If-Range with the object's current ETag may give 206 (or the whole 200); with another
    entity-tag the Range MUST be ignored: the whole representation, 200."""
    path = "/range/ifrange.bin"
    target = f"{path}?size={SIZE}&rate={RATE}"
    th, first, ev = start_fetch(rig.proxy, target, timeout=60)
    _wait_in_flight(ev, first, "first client")
    etag = first.headers.get("etag")
    assert etag and not etag.startswith("W/"), f"origin sent ETag {etag!r}"
    r = fetch(rig.proxy, target, [("range", "bytes=100-199"), ("if-range", etag)], timeout=30)
    assert r.complete and r.status in (200, 206), f"{r.status} {r.error}"
    record_property("if_range_match", str(r.status))
    if r.status == 206:
        assert r.headers.get("content-range") == f"bytes 100-199/{SIZE}"
        assert r.body == body_slice(path, 100, 200), (
            f"206 with the wrong bytes: {describe_body(path, SIZE, r.body)}")
    else:
        assert r.body == expected(path, SIZE), (
            "If-Range matched: a 200 that is not the complete representation: "
            f"{describe_body(path, SIZE, r.body)}")
    mismatch = [("range", "bytes=100-199"), ("if-range", '"not-the-etag"')]
    r = fetch(rig.proxy, target, mismatch, timeout=30)
    assert r.complete and r.status == 200, (
        f"If-Range mismatch gave {r.status}: the Range must be ignored")
    assert r.body == expected(path, SIZE), (
        "If-Range mismatch: a 200 that is not the complete representation: "
        f"{describe_body(path, SIZE, r.body)}")
    th.join(60)
    assert first.complete and first.body == expected(path, SIZE)


# ---------------------------------------------------------------------- truncated responses

def _check_not_presented_complete(r, path: str, who: str) -> str:
    """A response cut by the origin's death must not look complete; returns how it ended."""
    if r.status is None:
        return "no response"
    if r.complete:
        if r.status == 200:
            assert r.body == expected(path, SIZE), (
                f"{who}: a 200 whose framing says complete but carries {len(r.body)} of {SIZE}"
                " bytes (truncated response presented as complete)")
            return "completed (recovered)"
        assert r.status >= 500 or r.status == 206, f"{who}: status {r.status}"
        if r.status == 206:
            a, b = map(int, r.headers["content-range"].split()[1].split("/")[0].split("-"))
            assert r.body == body_slice(path, a, b + 1), f"{who}: 206 with wrong bytes"
        return f"status {r.status}"
    cl = r.content_length
    assert cl is None or len(r.body) < cl
    # what did arrive must still be the right bytes
    assert r.body == body_slice(path, 0, len(r.body)) or r.status == 206, (
        f"{who}: wrong bytes before the cut")
    return f"cut at {len(r.body)} bytes (status {r.status})"


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9112 sec. 6.3; RFC 9110 sec. 8.6",
                         role="proxy")
def test_origin_death_is_never_a_complete_200(impl, rig, record_property):
    """The origin aborts mid-body; every client (first and joiner) sees an incomplete message.

    Content-Length not satisfied before close (or a chunked body without its
    last chunk, or a 5xx): never a 200 whose framing says complete with fewer
    bytes.
    """
    path = "/die/object.bin"
    target = f"{path}?size={SIZE}&rate={RATE}&fail_at={SIZE * 6 // 10}"
    th1, a, ev = start_fetch(rig.proxy, target, timeout=60)
    _wait_in_flight(ev, a, "first client")
    th2, b, _ = start_fetch(rig.proxy, target, timeout=60)
    th1.join(60)
    th2.join(60)
    ends = [_check_not_presented_complete(a, path, "first client"),
            _check_not_presented_complete(b, path, "joiner")]
    record_property("ends", "; ".join(ends))


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9112 sec. 6.3; RFC 9110 sec. 8.6",
                         role="proxy")
@pytest.mark.tool("curl")
def test_origin_death_seen_by_curl(impl, rig, tmp_path):
    """curl must report a failed transfer (e.g. exit 18 partial file), never exit 0 with a
    short file."""
    path = "/die/curl.bin"
    target = f"{path}?size={SIZE}&rate={RATE}&fail_at={SIZE // 2}"
    rc, status, _ = curl(rig.url(target), tmp_path / "c")
    body = (tmp_path / "c").read_bytes() if (tmp_path / "c").exists() else b""
    if rc == 0 and status == 200:
        assert body == expected(path, SIZE), f"curl exit 0 with {len(body)} of {SIZE} bytes"
    else:
        assert rc != 0 or (status or 0) >= 500, f"curl exit {rc}, status {status}"


# ----------------------------------------------------------------------- no sharing across users

CREDS = [("authorization", "Basic YWxpY2U6c2VjcmV0"), ("authorization", "Basic Ym9iOmh1bnRlcjI=")]


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 3.5", role="proxy")
def test_authorization_requests_each_reach_the_origin(impl, rig):
    """Two users with Authorization and one without, concurrently: three full origin requests.

    A shared cache must not satisfy a request with a response to a request
    that carried Authorization (nor the other way round) unless the response
    explicitly allows it; our origin's response does not.
    """
    path = "/auth/object.bin"
    target = f"{path}?size={SIZE}&rate={RATE}"
    before = rig.origin.stats()
    th1, a, ev = start_fetch(rig.proxy, target, [CREDS[0]], timeout=60)
    _wait_in_flight(ev, a, "alice")
    th2, b, _ = start_fetch(rig.proxy, target, [CREDS[1]], timeout=60)
    th3, c, _ = start_fetch(rig.proxy, target, [], timeout=60)
    for th in (th1, th2, th3):
        th.join(60)
    for who, r in (("alice", a), ("bob", b), ("anonymous", c)):
        assert r.complete and r.status == 200 and r.body == expected(path, SIZE), (
            f"{who}: {r.status} {r.error}")
    after = rig.origin.stats()
    full = _full_requests(after) - _full_requests(before)
    assert full >= 3, (
        f"only {full} full origin request(s) for 3 requests with different credentials")


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 5.2.2.5, 5.2.2.7",
                         role="proxy")
@pytest.mark.parametrize("cc", ["private", "no-store"])
def test_private_and_no_store_responses_are_not_shared(impl, rig, cc):
    """Responses marked private / no-store (with Set-Cookie) are never given to another request.

    Two clients with different cookies ask for the same URL concurrently: each
    must reach the origin.
    """
    path = f"/cookie/{cc}.bin"
    target = f"{path}?size={SIZE}&rate={RATE}&cc={cc}&cookie=1"
    full = _two_concurrent(rig, path, target, ("alice", [("cookie", "user=alice")]),
                           ("bob", [("cookie", "user=bob")]))
    assert full >= 2, f"{full} full origin request(s): a Cache-Control: {cc} response was shared"


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 4.1", role="proxy")
def test_vary_mismatch_is_not_shared(impl, rig):
    """``Vary: Accept-Language``: a client asking in French is not given the stream fetched for
    English; both requests reach the origin."""
    path = "/vary/object.bin"
    target = f"{path}?size={SIZE}&rate={RATE}&vary=Accept-Language"
    full = _two_concurrent(rig, path, target, ("en", [("accept-language", "en")]),
                           ("fr", [("accept-language", "fr")]))
    assert full >= 2, "a response that varies on Accept-Language was shared across languages"


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 3, 3.5 (finding)",
                         role="proxy")
def test_cookie_sharing_finding(impl, rig, record_property):
    """Two users with different Cookie headers, concurrently, on a response without
    Cache-Control, then on one that sets a cookie: both bodies must be exact; whether the proxy
    shared is a finding (RFC 9111 does not forbid storing either; sharing them is a privacy
    risk)."""
    found = {}
    for name, q in (("cookie_request", ""), ("set_cookie_response", "&cookie=1")):
        path = f"/cookie-finding/{name}.bin"
        target = f"{path}?size={SIZE}&rate={RATE}{q}"
        full = _two_concurrent(rig, path, target, ("alice", [("cookie", "user=alice")]),
                               ("bob", [("cookie", "user=bob")]), label=f"{name} ")
        found[name] = "not shared" if full >= 2 else "shared"
        record_property(name, found[name])
    print(f"finding: cookies {found}")


# ----------------------------------------------------------------------------- findings

def _classify(first, late, full: int, ranges: int) -> str:
    if full >= 2:
        return "refetches (a second full request to the origin)"
    # answered only in the last quarter of the first transfer: it waited for it to end
    if late.t_head is not None and None not in (first.t_head, first.t_done) and (
            first.t_done - late.t_head < 0.25 * (first.t_done - first.t_head)):
        return "waits (one origin request; the joiner is answered after the first response ends)"
    extra = f"; prefix by {ranges} origin range request(s)" if ranges else ""
    return f"shares the in-flight response (one origin request{extra})"


@pytest.mark.conformance(protocol="http-proxy", section="RFC 9111 sec. 4 (finding)", role="proxy")
def test_late_joiner_semantics_finding(impl, rig, record_property):
    """A second plain client joins at ~40% of a streaming response: a finding, not a verdict.

    Both must get the exact complete body (that part is pass/fail); whether the
    proxy waits, shares or refetches is recorded as the ``late_joiner`` property.
    """
    path = "/late/object.bin"
    target = f"{path}?size={SIZE}&rate={RATE}"
    before = rig.origin.stats()
    th1, a, ev = start_fetch(rig.proxy, target, timeout=60)
    _wait_in_flight(ev, a, "first client")
    deadline = time.monotonic() + 15
    while a.received < SIZE * 4 // 10 and time.monotonic() < deadline and th1.is_alive():
        time.sleep(0.02)
    th2, b, _ = start_fetch(rig.proxy, target, timeout=60)
    th1.join(60)
    th2.join(60)
    for who, r in (("first", a), ("late", b)):
        assert r.complete and r.status == 200 and r.body == expected(path, SIZE), (
            f"{who}: {r.status} {r.error}")
    after = rig.origin.stats()
    finding = _classify(a, b, _full_requests(after) - _full_requests(before),
                        after["range_requests"] - before["range_requests"])
    record_property("late_joiner", finding)
    print(f"finding: late joiner {finding}")
