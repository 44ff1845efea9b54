"""Sans-IO core of VMC: keys, Range parsing, sharing policy, buffer window, client queues."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from vmc.core import policy, ranges
from vmc.core.buffer import SessionBuffer
from vmc.core.errors import BufferGone, RangeError, UnsatisfiableRange, URIError, VMCError
from vmc.core.key import normalise_uri, request_key
from vmc.core.queue import ClientQueue
from vmc.core.stats import Stats

# ---------------------------------------------------------------- keys (paper sec. 3.2)


def test_key_is_md5_of_normalised_uri() -> None:
    uri = normalise_uri("/a/b?x=1", "Example.COM:80")
    assert uri == "http://example.com/a/b?x=1"
    assert request_key("/a/b?x=1", "Example.COM:80") == hashlib.md5(uri.encode()).hexdigest()


@pytest.mark.parametrize(
    "a, b",
    [
        (("HTTP://EXAMPLE.com/x", None), ("/x", "example.com")),
        (("http://h:80/x", None), ("/x", "h")),
        (("http://h/%7euser", None), ("http://h/~user", None)),
        (("http://h/a%2fb", None), ("http://h/a%2Fb", None)),
        (("http://h", None), ("http://h/", None)),
        (("http://h/x#frag", None), ("http://h/x", None)),
    ],
)
def test_equivalent_spellings_share_a_key(a, b) -> None:
    assert request_key(*a) == request_key(*b)


@pytest.mark.parametrize(
    "a, b",
    [
        (("/x", "h1"), ("/x", "h2")),  # the host is part of the key
        (("/x", "h:8080"), ("/x", "h")),
        (("/x?a=1", "h"), ("/x?a=2", "h")),
        (("/X", "h"), ("/x", "h")),  # paths are case-sensitive
    ],
)
def test_different_resources_differ(a, b) -> None:
    assert request_key(*a) != request_key(*b)


@pytest.mark.parametrize(
    "target, host", [("/x", None), ("x", "h"), ("http://u@h/", None), ("/x", "h:99999"), ("/", "")]
)
def test_bad_targets(target, host) -> None:
    with pytest.raises(URIError):
        normalise_uri(target, host)


@given(st.text(max_size=60), st.one_of(st.none(), st.text(max_size=30)))
def test_fuzz_normalise_uri(target: str, host: str | None) -> None:
    try:
        out = normalise_uri(target, host)
    except URIError:
        return
    assert out.startswith(("http://", "https://"))
    assert normalise_uri(out) == out  # idempotent


# ---------------------------------------------------------------- ranges (RFC 9110 sec. 14)


@pytest.mark.parametrize(
    "value, length, want",
    [
        ("bytes=0-499", 10000, [(0, 499)]),
        ("bytes=500-999", 10000, [(500, 999)]),
        ("bytes=-500", 10000, [(9500, 9999)]),
        ("bytes=9500-", 10000, [(9500, 9999)]),
        ("bytes=0-0,-1", 10000, [(0, 0), (9999, 9999)]),
        ("bytes= 0-999, 4500-5499, -1000", 10000, [(0, 999), (4500, 5499), (9000, 9999)]),
        ("bytes=0-99999999999999999999999999", 10, [(0, 9)]),  # last >= length is clipped
        ("bytes=-20", 10, [(0, 9)]),  # suffix longer than the representation
        ("BYTES=1-2", 10, [(1, 2)]),  # unit is case-insensitive
        ("bytes=5-7,20-30", 10, [(5, 7)]),  # unsatisfiable spec skipped, others kept
    ],
)
def test_rfc9110_examples(value, length, want) -> None:
    assert ranges.resolve(ranges.parse_range(value), length) == want


@pytest.mark.parametrize(
    "value",
    [
        "bytes=5-4",
        "bytes=",
        "bytes=a-b",
        "bytes=1",
        "bytes=--1",
        "bytes 0-1",
        "=0-1",
        "bytes=1-2-3",
    ],
)
def test_invalid_range(value) -> None:
    with pytest.raises(RangeError):
        ranges.parse_range(value)


def test_other_unit_is_ignored() -> None:
    assert ranges.parse_range("items=0-5") is None


@pytest.mark.parametrize(
    "value, length", [("bytes=10-", 10), ("bytes=-0", 10), ("bytes=0-5", 0), ("bytes=99-", 10)]
)
def test_unsatisfiable(value, length) -> None:
    with pytest.raises(UnsatisfiableRange) as ei:
        ranges.resolve(ranges.parse_range(value), length)
    assert ei.value.length == length
    assert ranges.format_unsatisfied(length) == f"bytes */{length}"


def test_coalesce() -> None:
    assert ranges.coalesce([(500, 600), (601, 999)]) == [(500, 999)]
    assert ranges.coalesce([(500, 700), (601, 999), (0, 1)]) == [(0, 1), (500, 999)]


@pytest.mark.parametrize(
    "value, want",
    [
        ("bytes 42-1233/1234", ranges.ContentRange(42, 1233, 1234)),
        ("bytes 42-1233/*", ranges.ContentRange(42, 1233, None)),
        ("bytes */1234", ranges.ContentRange(None, None, 1234)),
    ],
)
def test_content_range(value, want) -> None:
    assert ranges.parse_content_range(value) == want


@pytest.mark.parametrize(
    "value", ["bytes 5-4/10", "bytes 0-10/10", "bytes */*", "bytes 1-2", "items 1-2/3", ""]
)
def test_invalid_content_range(value) -> None:
    with pytest.raises(RangeError):
        ranges.parse_content_range(value)


@given(st.binary(max_size=80))
def test_fuzz_range_parsers(data: bytes) -> None:
    """Arbitrary bytes: a value or RangeError, never another exception."""
    for fn in (ranges.parse_range, ranges.parse_content_range):
        try:
            fn(data)
        except RangeError:
            pass
    try:
        specs = ranges.parse_range(data)
    except RangeError:
        return
    if specs:
        for length in (0, 1, 1000):
            try:
                for a, b in ranges.resolve(specs, length):
                    assert 0 <= a <= b < length
            except UnsatisfiableRange:
                pass


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 2 * 10**6))
def test_range_roundtrip(a: int, n: int, length: int) -> None:
    spec = ranges.parse_range(ranges.format_range(a, a + n))
    try:
        [(f, last)] = ranges.resolve(spec, length)
    except UnsatisfiableRange:
        assert a >= length
        return
    assert (f, last) == (a, min(a + n, length - 1))
    cr = ranges.parse_content_range(ranges.format_content_range(f, last, length))
    assert (cr.first, cr.last, cr.length) == (f, last, length)


# ---------------------------------------------------------------- sharing policy


H = policy.Headers


def test_request_policy() -> None:
    assert policy.request_verdict(b"GET", [(b"host", b"h")])
    assert policy.request_verdict(b"HEAD", [])
    assert policy.request_verdict(b"GET", [(b"range", b"bytes=0-1"), (b"if-range", b'"x"')])
    for method, hdrs, why in [
        (b"POST", [], "method"),
        (b"PUT", [], "method"),
        (b"GET", [(b"authorization", b"Basic x")], "authorization"),
        (b"GET", [(b"cookie", b"a=b")], "cookie"),
        (b"GET", [(b"if-none-match", b'"x"')], "conditional"),
        (b"GET", [(b"cache-control", b"no-store")], "request-no-store"),
        (b"GET", [(b"content-length", b"5")], "request-body"),
    ]:
        v = policy.request_verdict(method, hdrs)
        assert not v and v.reason == why


def test_response_policy() -> None:
    ok = [(b"content-length", b"10"), (b"etag", b'"a"')]
    assert policy.response_verdict(200, ok)
    for status, hdrs, why in [
        (206, ok, "status-not-200"),
        (200, [(b"transfer-encoding", b"chunked")], "unknown-length"),
        (200, [], "unknown-length"),
        (200, ok + [(b"cache-control", b"no-store")], "no-store"),
        (200, ok + [(b"cache-control", b"max-age=5, private")], "private"),
        (200, ok + [(b"cache-control", b'private="x"')], "private"),
        (200, ok + [(b"vary", b"Accept, *")], "vary-star"),
        (200, ok + [(b"set-cookie", b"a=b")], "set-cookie"),
    ]:
        v = policy.response_verdict(status, hdrs)
        assert not v and v.reason == why


def test_validators_and_same_representation() -> None:
    a = policy.validators_of(
        200, [(b"content-length", b"10"), (b"etag", b'"e1"'), (b"last-modified", b"T")]
    )
    b = policy.validators_of(
        206, [(b"content-range", b"bytes 0-4/10"), (b"etag", b'"e1"'), (b"last-modified", b"T")]
    )
    assert a == b and policy.same_representation(a, b)
    assert a.if_range() == b'"e1"'
    assert not policy.same_representation(a, policy.Validators(b'"e2"', b"T", 10))
    assert not policy.same_representation(a, policy.Validators(b'"e1"', b"T", 11))
    # A 206 need not repeat Last-Modified (RFC 9110 sec. 15.3.7); a different one still differs.
    assert policy.same_representation(a, policy.Validators(b'"e1"', None, 10))
    assert not policy.same_representation(a, policy.Validators(b'"e1"', b"T2", 10))
    weak = policy.Validators(b'W/"e1"', None, 10)
    assert not weak.can_patch_from_origin() and not policy.same_representation(weak, weak)
    lm, date = b"Sat, 01 Jan 2000 00:00:00 GMT", b"Sat, 01 Jan 2000 00:00:01 GMT"
    # strong: Date >= Last-Modified + 1 s (sec. 8.8.2.2)
    lm_only = policy.Validators(None, lm, 10, date)
    assert lm_only.can_patch_from_origin() and lm_only.if_range() == lm
    assert not policy.Validators(None, lm, 10).can_patch_from_origin()  # no Date: weak
    assert not policy.Validators(None, None, 10).can_patch_from_origin()


def test_if_range() -> None:
    """RFC 9110 sec. 13.1.5: strong ETag comparison; a date only if strong
    (sec. 8.8.2.2), then exact."""
    lm, lm2 = b"Sat, 01 Jan 2000 00:00:00 GMT", b"Sun, 02 Jan 2000 00:00:00 GMT"
    v = policy.Validators(b'"e1"', lm, 10, b"Sat, 01 Jan 2000 00:00:01 GMT")
    assert policy.if_range_matches(b'"e1"', v)
    assert not policy.if_range_matches(b'"e2"', v)
    assert not policy.if_range_matches(b'W/"e1"', v)
    assert policy.if_range_matches(lm, v)
    assert not policy.if_range_matches(lm2, v)
    # Last-Modified equal to Date (or no Date): the date is weak, the condition is false.
    assert not policy.if_range_matches(lm, policy.Validators(b'"e1"', lm, 10, lm))
    assert not policy.if_range_matches(lm, policy.Validators(b'"e1"', lm, 10))


def test_vary_signature() -> None:
    fields = policy.vary_fields([(b"vary", b"Accept-Language, accept-encoding")])
    assert fields == (b"accept-encoding", b"accept-language")
    r1 = [(b"accept-language", b"en"), (b"accept-encoding", b"gzip")]
    r2 = [(b"accept-encoding", b"gzip"), (b"accept-language", b"en")]
    r3 = [(b"accept-language", b"fr"), (b"accept-encoding", b"gzip")]
    assert policy.vary_signature(fields, r1) == policy.vary_signature(fields, r2)
    assert policy.vary_signature(fields, r1) != policy.vary_signature(fields, r3)
    assert policy.vary_signature(fields, []) != policy.vary_signature(fields, r1)


# ---------------------------------------------------------------- buffer window


def test_buffer_window_slides() -> None:
    b = SessionBuffer(10)
    b.append(b"0123456789")
    assert (b.base, b.received) == (0, 10) and b.read(0, 10) == b"0123456789"
    b.append(b"abcde")
    assert (b.base, b.received, b.held) == (5, 15, 10)
    assert b.read(5, 15) == b"56789abcde"
    assert not b.holds(4) and b.holds(5) and not b.holds(15)
    with pytest.raises(BufferGone):
        b.read(0, 3)


def test_zero_window_holds_nothing() -> None:
    b = SessionBuffer(0)
    b.append(b"abc")
    assert b.received == 3 and b.held == 0 and b.memory == 0 and not b.holds(2)


@settings(max_examples=200)
@given(st.integers(0, 300), st.lists(st.binary(min_size=0, max_size=100), max_size=30), st.data())
def test_buffer_is_bounded_and_exact(window: int, chunks: list[bytes], data) -> None:
    """Memory stays within window + one chunk; every held span reads back the stream exactly."""
    b = SessionBuffer(window)
    stream = b""
    for c in chunks:
        b.append(c)
        stream += c
        assert b.received == len(stream)
        assert b.held <= window
        assert b.memory <= window + max((len(x) for x in chunks), default=0)
        assert b.base == max(0, len(stream) - window)
    if b.held:
        a = data.draw(st.integers(b.base, b.received - 1))
        e = data.draw(st.integers(a + 1, b.received))
        assert b.read(a, e) == stream[a:e]


# ---------------------------------------------------------------- client queues


def test_queue_detaches_when_full() -> None:
    q = ClientQueue(100, limit=10)
    assert q.push(100, b"abcdef")
    assert q.push(106, b"ghij")
    assert not q.push(110, b"k") and q.detached
    assert q.end_offset == 110  # the owner resumes here on its own
    assert q.pop() == b"abcdef" and q.next_offset == 106
    assert not q.push(110, b"k")  # stays detached


def test_queue_accepts_one_oversized_chunk_when_empty_and_trims_overlap() -> None:
    q = ClientQueue(0, limit=4)
    assert q.push(0, b"0123456789")
    assert q.pop() == b"0123456789"
    assert q.push(5, b"56789ab")  # overlaps what was taken: trimmed
    assert q.pop() == b"ab"
    with pytest.raises(ValueError):
        q.push(100, b"x")


@given(
    st.integers(1, 50),
    st.lists(st.tuples(st.binary(min_size=1, max_size=20), st.booleans()), max_size=40),
)
def test_queue_delivers_the_stream_in_order(limit: int, ops) -> None:
    q = ClientQueue(0, limit)
    stream, got, off, biggest = b"", b"", 0, 0
    for chunk, take in ops:
        accepted = q.push(off, chunk)
        stream += chunk
        off += len(chunk)
        biggest = max(biggest, len(chunk))
        assert q.queued <= max(limit, biggest)
        if not accepted:
            break
        if take:
            while (c := q.pop()) is not None:
                got += c
    while (c := q.pop()) is not None:
        got += c
    assert got == stream[: len(got)]
    assert q.next_offset == len(got)


# ---------------------------------------------------------------- statistics


def test_stats_ratio_and_times() -> None:
    s = Stats()
    r = s.new_request("GET", "http://h/x", now=10.0)
    s.origin(100)
    s.client(r, 60, now=10.5)
    s.client(r, 40, now=11.0)
    r2 = s.new_request("GET", "http://h/x", now=10.2)
    s.client(r2, 100, now=10.3)
    s.done(r, 11.0)
    assert r.ttfb == 0.5 and r.completion == 1.0 and r.client_bytes == 100
    assert s.sharing_ratio == 2.0 and s.bandwidth_saving == 0.5
    snap = s.snapshot()
    assert snap["origin_bytes"] == 100 and snap["client_bytes"] == 200 and len(snap["recent"]) == 2


def test_errors_share_a_base() -> None:
    for e in (RangeError, UnsatisfiableRange, URIError, BufferGone):
        assert issubclass(e, VMCError)


# ---------------------------------------------------------------- join plans


from vmc.core.plan import Plan, content_range, multipart_layout, plan_join  # noqa: E402

V = policy.Validators(b'"e"', b"T", 1000)


@pytest.mark.parametrize(
    "method, headers, edge, want",
    [
        (b"GET", [], 400, Plan(200, 0, 1000, "joined")),
        (b"GET", [(b"vmc", b"1")], 400, Plan(206, 400, 1000, "joined-vmc")),
        (b"GET", [(b"vmc", b"0")], 400, Plan(200, 0, 1000, "joined")),
        (b"GET", [(b"vmc", b"1")], 0, Plan(200, 0, 1000, "joined")),  # nothing missed yet
        (b"HEAD", [(b"vmc", b"1")], 400, Plan(200, 0, 1000, "joined")),
        (b"GET", [(b"range", b"bytes=10-19")], 400, Plan(206, 10, 20, "range")),
        (
            b"GET",
            [(b"range", b"bytes=900-")],
            400,
            Plan(206, 900, 1000, "range"),
        ),  # past the edge: waits
        (b"GET", [(b"range", b"bytes=-10"), (b"vmc", b"1")], 400, Plan(206, 990, 1000, "range")),
        (b"GET", [(b"range", b"bytes=1000-")], 400, Plan(416, 0, 0, "range")),
        (b"GET", [(b"range", b"bytes=0-1,5-6")], 400, Plan(206, 0, 7, "range", ((0, 2), (5, 7)))),
        (
            b"GET",
            [(b"range", b"bytes=" + b",".join(b"%d-%d" % (i, i) for i in range(0, 40, 2)))],
            400,
            Plan(200, 0, 1000, "joined"),
        ),  # 20 disjoint ranges: ignored
        (b"GET", [(b"range", b"bytes=9-1")], 400, Plan(200, 0, 1000, "joined")),  # invalid: ignored
        (b"GET", [(b"range", b"items=0-1")], 400, Plan(200, 0, 1000, "joined")),
        (b"GET", [(b"range", b"bytes=0-9"), (b"if-range", b'"e"')], 400, Plan(206, 0, 10, "range")),
        (
            b"GET",
            [(b"range", b"bytes=0-9"), (b"if-range", b'"x"')],
            400,
            Plan(200, 0, 1000, "joined"),
        ),
        (b"HEAD", [(b"range", b"bytes=0-9")], 400, Plan(200, 0, 1000, "joined")),
    ],
)
def test_plan_join(method, headers, edge, want) -> None:
    assert plan_join(method, headers, 1000, edge, V) == want


def test_plan_content_range() -> None:
    assert content_range(Plan(206, 10, 20, "range"), 1000) == "bytes 10-19/1000"
    assert content_range(Plan(416, 0, 0, "range"), 1000) == "bytes */1000"
    assert content_range(Plan(200, 0, 1000, "joined"), 1000) is None


@given(st.binary(max_size=40), st.booleans(), st.integers(0, 2000), st.integers(0, 2000))
def test_plan_is_always_within_the_representation(
    rng: bytes, aware: bool, length: int, edge: int
) -> None:
    edge = min(edge, length)
    hdrs = [(b"range", rng)] + ([(b"vmc", b"1")] if aware else [])
    p = plan_join(b"GET", hdrs, length, edge, policy.Validators(b'"e"', None, length))
    assert p.status in (200, 206, 416)
    assert 0 <= p.first <= p.end <= length
    if p.status == 200:
        assert (p.first, p.end) == (0, length)
    if p.status == 206 and p.parts:
        assert content_range(p, length) is None and 1 < len(p.parts)
        assert all(a < e for a, e in p.parts) and all(
            e1 < a2 for (_, e1), (a2, _) in zip(p.parts, p.parts[1:])
        )
        assert (p.first, p.end) == (p.parts[0][0], p.parts[-1][1])
    elif p.status == 206:
        assert p.first < p.end
        cr = ranges.parse_content_range(content_range(p, length))
        assert (cr.first, cr.last + 1, cr.length) == (p.first, p.end, length)


def test_multipart_layout_frames_the_parts() -> None:
    data = bytes(range(256)) * 4
    parts, tail, total = multipart_layout(
        ((0, 3), (10, 12), (1000, 1024)), len(data), b"application/x", b"XYZ"
    )
    body = b"".join(h + data[a:e] for h, a, e in parts) + tail
    assert len(body) == total and body.endswith(b"\r\n--XYZ--\r\n")
    chunks = body.split(b"--XYZ")
    assert chunks[0] == b"" and chunks[-1] == b"--\r\n"
    for (a, e), chunk in zip(((0, 3), (10, 12), (1000, 1024)), chunks[1:-1]):
        head, _, payload = chunk.partition(b"\r\n\r\n")
        assert f"Content-Range: bytes {a}-{e - 1}/{len(data)}".encode() in head
        assert payload.removesuffix(b"\r\n") == data[a:e]
