"""HTTP/1.1 request heads parsed by llhttp (httptools), with h11's acceptance rules (issue 17).

The proxy's request path was framed by h11 alone; under wrk at 1 KiB objects h11's per-event
work (header validation by regular expressions, its state machine) is the largest library cost
after the socket writes. This module is the C-parser side of the pair: ``parse_head`` reads one
request head with llhttp and then applies the checks h11 applies (RFC 9112 grammar of names and
values, Content-Length and Transfer-Encoding rules, Host), so that both parsers make the same
decisions: method, target, headers, body framing, and the same refusals. h11 stays the readable
reference (``h11_head``); tests/vmc/test_vmc_http_parsers_agree.py checks they agree on
generated well-formed and malformed heads.

The proxy's data path uses vmc.core.h1.ServerConnection (llhttp for the common request, h11 for
the rest, tests/vmc/test_vmc_parse_agree.py); this module stays the head-level pair.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import h11
import httptools

#: RFC 9110 sec. 5.1 / 5.5 (the same expressions h11 uses)
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_VALUE = re.compile(rb"(?:[\x21-\x7e\x80-\xff](?:[ \t\x21-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?")
_TARGET = re.compile(rb"[\x21-\x7e\x80-\xff]+")  # h11's request-target: no controls, no space
_DIGITS = re.compile(rb"[0-9]+")


class Framing(enum.Enum):
    """How the body after the head is delimited (RFC 9112 sec. 6.3)."""

    NONE = "none"
    LENGTH = "content-length"
    CHUNKED = "chunked"


@dataclass(frozen=True)
class RequestHead:
    method: bytes
    target: bytes
    version: bytes
    headers: tuple[tuple[bytes, bytes], ...]  # names lower-cased, values as sent (trimmed)
    framing: Framing
    length: int = 0  # with Framing.LENGTH


class Malformed(Exception):
    """The head is refused (the proxy answers 400 and closes)."""


class _Collect:
    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.done = True


def _framing(headers: list[tuple[bytes, bytes]]) -> tuple[Framing, int]:
    te = [v for k, v in headers if k == b"transfer-encoding"]
    cl = [v for k, v in headers if k == b"content-length"]
    if te:
        if cl:
            raise Malformed("both Transfer-Encoding and Content-Length")
        codings = [c.strip().lower() for v in te for c in v.split(b",") if c.strip()]
        if codings != [b"chunked"]:
            raise Malformed("unsupported Transfer-Encoding")
        return Framing.CHUNKED, 0
    if cl:
        values = {c.strip() for v in cl for c in v.split(b",")}
        if len(values) != 1:
            raise Malformed("conflicting Content-Length")
        (value,) = values
        if not _DIGITS.fullmatch(value):
            raise Malformed("bad Content-Length")
        n = int(value)
        return (Framing.LENGTH, n) if n else (Framing.NONE, 0)
    return Framing.NONE, 0


def parse_head(data: bytes) -> RequestHead:
    """One complete request head (up to and including the blank line) -> RequestHead, or
    Malformed. Bytes after the head are not looked at.

    llhttp is the fast path; whatever it or the checks after it refuse is decided by h11 (a
    method llhttp does not know, say, is a token h11 accepts), so refusals are h11's by
    construction and only the common, well-formed case pays nothing for h11."""
    try:
        return _fast_head(data)
    except Malformed:
        return h11_head(data)


def _fast_head(data: bytes) -> RequestHead:
    end = data.find(b"\r\n\r\n")
    if end < 0:
        raise Malformed("incomplete head")
    head = data[: end + 4]
    line_end = head.find(b"\r\n")
    parts = head[:line_end].split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1]):
        raise Malformed("bad request line")
    if not re.fullmatch(rb"HTTP/1\.[01]", parts[2]):
        raise Malformed("unsupported HTTP version")
    got = _Collect()
    parser = httptools.HttpRequestParser(got)
    try:
        parser.feed_data(head)
    except httptools.HttpParserUpgrade:
        pass  # the head was read whole; an Upgrade request is the caller's to refuse
    except httptools.HttpParserError as exc:
        raise Malformed(f"llhttp: {exc}") from None
    if not got.done:
        raise Malformed("incomplete head")
    headers: list[tuple[bytes, bytes]] = []
    for name, value in got.headers:
        if not _TOKEN.fullmatch(name):
            raise Malformed("bad header name")
        value = value.strip(b" \t")
        if not _VALUE.fullmatch(value):
            raise Malformed("bad header value")
        headers.append((name.lower(), value))
    version = parser.get_http_version().encode()
    hosts = sum(1 for k, _ in headers if k == b"host")
    if hosts > 1 or (version == b"1.1" and hosts == 0):  # RFC 9112 3.2, as h11 at any version
        raise Malformed("a request has at most one Host, and HTTP/1.1 exactly one")
    framing, length = _framing(headers)
    return RequestHead(parser.get_method(), parts[1], version, tuple(headers), framing, length)


def h11_head(data: bytes) -> RequestHead:
    """The same decisions made by h11 (the readable reference)."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    try:
        ev = conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise Malformed(f"h11: {exc}") from None
    if not isinstance(ev, h11.Request):
        raise Malformed("incomplete head")
    headers = tuple((bytes(k), bytes(v)) for k, v in ev.headers.raw_items())
    headers = tuple((k.lower(), v) for k, v in headers)
    framing, length = _framing(list(headers))
    return RequestHead(bytes(ev.method), bytes(ev.target), bytes(ev.http_version), headers,
                       framing, length)
