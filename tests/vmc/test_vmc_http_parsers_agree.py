"""llhttp (httptools, vmc.aio.parse.parse_head) and h11 make the same decisions on a request
head: method, target, version, headers, body framing, and the same refusals (issue 17)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st

from vmc.aio.parse import Framing, Malformed, RequestHead, h11_head, parse_head

TOKEN = st.text(alphabet="abcXYZ019-!#$%&'*+.^_`|~", min_size=1, max_size=8).map(str.encode)
BAD_NAME = st.sampled_from([b"", b"a b", b"x:y", b"a\x00", b"(x)", b"\xc3\xa9", b"a\tb"])
VALUE = st.text(alphabet="abc 019/;=,\t\"", max_size=12).map(str.encode)
BAD_VALUE = st.sampled_from([b"a\x00b", b"a\rb", b"x\x7fy", b"a\x01"])
NAME = st.one_of(TOKEN, st.sampled_from([b"Host", b"Content-Length", b"Transfer-Encoding",
                                         b"Connection", b"Range"]))


@st.composite
def heads(draw: st.DrawFn) -> bytes:
    method = draw(st.one_of(st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT"]), TOKEN,
                            st.sampled_from([b"G T", b"", b"GE\x00T"])))
    target = draw(st.one_of(st.sampled_from([b"/", b"/a?b=c", b"http://h:1/x", b"*"]),
                            st.sampled_from([b"/a b", b"/\x01", b""])))
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.1", b"HTTP/2.0",
                                    b"HTTP/1.x", b"http/1.1"]))
    headers: list[tuple[bytes, bytes]] = []
    for _ in range(draw(st.integers(0, 2))):
        headers.append((b"Host", draw(st.sampled_from([b"h", b"h:80", b"", b"a b"]))))
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.one_of(NAME, NAME, BAD_NAME))
        value = draw(st.one_of(VALUE, VALUE, BAD_VALUE,
                               st.sampled_from([b"chunked", b"gzip, chunked", b"12", b"0",
                                                b"-1", b"1, 1", b"1, 2", b" 7 ", b"0x10"])))
        headers.append((name, value))
    draw(st.randoms()).shuffle(headers)
    lines = [method + b" " + target + b" " + version]
    lines += [k + b": " + v for k, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _decide(parse, data: bytes) -> RequestHead | str:
    try:
        return parse(data)
    except Malformed:
        return "refused"


@settings(max_examples=400, deadline=None)
@given(heads())
# found by this test in session 13: two Host fields in an HTTP/1.0 head, which h11 refuses
# at any version (RFC 9112 3.2) and the fast path accepted
@example(b"GET / HTTP/1.0\r\nHost: h\r\nHost: h\r\n\r\n")
def test_parsers_agree(data: bytes) -> None:
    ours, ref = _decide(parse_head, data), _decide(h11_head, data)
    assert ours == ref, f"{data!r}: llhttp {ours!r}, h11 {ref!r}"


@pytest.mark.parametrize("data, framing", [
    (b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n", Framing.NONE),
    (b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", Framing.LENGTH),
    (b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", Framing.CHUNKED),
])
def test_framing_examples(data: bytes, framing: Framing) -> None:
    assert parse_head(data).framing is framing == h11_head(data).framing


@pytest.mark.parametrize("data", [
    b"GET /x HTTP/1.1\r\n\r\n",  # no Host
    b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
])
def test_both_refuse(data: bytes) -> None:
    assert _decide(parse_head, data) == "refused" == _decide(h11_head, data)


def test_obs_fold_unfolded_alike() -> None:
    """An obsolete line fold (RFC 9112 sec. 5.2): both accept it and join with one space."""
    data = b"GET /x HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n"
    assert parse_head(data) == h11_head(data)
    assert parse_head(data).headers == ((b"host", b"h folded"),)


def test_unknown_method_is_h11s_decision() -> None:
    """llhttp knows a fixed method list; a token it does not know is still a method (h11)."""
    data = b"FROB /x HTTP/1.1\r\nHost: h\r\n\r\n"
    assert parse_head(data).method == b"FROB" == h11_head(data).method
