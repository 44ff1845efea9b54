"""The server side of one HTTP/1.1 client connection: llhttp on the data path, h11 for the rest.

Theory of operation. :class:`ServerConnection` offers :class:`HttpSharingCore` the part of
``h11.Connection`` it uses (``receive_data``, ``next_event``, the states, sending a response
head, body bytes, a disk span and the end, ``start_next_cycle``), and makes the same decisions
h11 makes, byte for byte (tests/vmc/test_vmc_parse_agree.py feeds both the same bytes).

The common case is handled here: an HTTP/1.1 request head without a body whose bytes match
h11's grammar (one regular expression over the whole head, the subset of what h11 accepts),
parsed by llhttp (httptools), and answered with a response head that carries one
Content-Length and fields h11 would send unchanged (built as bytes here, not through h11's
event objects and their per-field validation). Everything else -- a body, ``Expect``,
``Upgrade``, ``CONNECT``, HTTP/1.0, a head h11 might read differently (obsolete folds, bare LF,
leading blank lines), a malformed head, a head past the size limit, a response without a length
or with fields h11 would rewrite, an interim response -- is *handed over*: a real
``h11.Connection`` is brought to the same state (the request so far replayed into it, then the
unread bytes) and from then on decides everything for this connection. So refusals and their
status hints are h11's by construction, and h11 stays the readable reference
(``reference=True``: h11 from the first byte).

States are h11's sentinels (``h11.IDLE``, ``SEND_RESPONSE``, ``SEND_BODY``, ``DONE``,
``MUST_CLOSE``, ``CLOSED``, ``ERROR``) moved as h11's tables move them; errors are h11's
``RemoteProtocolError`` (the client's fault) and ``LocalProtocolError`` (ours).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

import h11
import httptools
from h11._util import Sentinel  # the type of h11's states (not re-exported)

#: A request head the fast path takes: HTTP/1.1, field lines by h11's grammar (RFC 9112 sec.
#: 3 and 5; h11/_abnf.py), no obsolete fold, CRLF line ends. A subset of what h11 accepts.
_TOKEN = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
_VALUE = rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?"
_FAST_HEAD = re.compile(
    _TOKEN + rb" [\x21-\x7e]+ HTTP/1\.1\r\n(?:" + _TOKEN + rb":[ \t]*" + _VALUE
    + rb"[ \t]*\r\n)*\r\n"
)
#: Response field lines the fast path writes as they are: lower-case names, h11's values.
_FAST_FIELDS = re.compile(rb"(?:[-!#$%&'*+.^_`|~0-9a-z]+: " + _VALUE + rb"\r\n)*")
_LENGTH = re.compile(rb"[0-9]{1,20}")
#: Request heads that matched ``_FAST_HEAD`` and field blocks that matched ``_FAST_FIELDS``
#: (pure functions of the bytes), at most ``_VALID_MAX`` each, forgotten together past that.
_VALID_HEADS: set[bytes] = set()
_VALID_FIELDS: set[bytes] = set()
_VALID_MAX = 1024

#: Request fields that send a request to h11 (a body, an expectation, a protocol switch).
_HAND_OVER_REQUEST = frozenset({b"content-length", b"transfer-encoding", b"expect", b"upgrade"})
#: Response fields h11 would add, move or rewrite: such a head goes through h11.
_HAND_OVER_RESPONSE = frozenset({b"connection", b"transfer-encoding", b"host"})

IDLE, SEND_RESPONSE, SEND_BODY = h11.IDLE, h11.SEND_RESPONSE, h11.SEND_BODY
DONE, MUST_CLOSE, CLOSED, ERROR = h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR
NEED_DATA, PAUSED = h11.NEED_DATA, h11.PAUSED
_END = h11.EndOfMessage()


@dataclass(frozen=True, slots=True)
class Request:
    """A request head, as h11's ``Request`` names it."""

    method: bytes
    """The method token."""
    target: bytes
    """The request-target as sent."""
    headers: tuple[tuple[bytes, bytes], ...]
    """Fields in order: names lower-cased, values without surrounding whitespace."""
    http_version: bytes
    """``b"1.1"`` or ``b"1.0"``."""


Event = Request | h11.EndOfMessage | h11.Data | h11.ConnectionClosed
Received = Event | type[h11.NEED_DATA] | type[h11.PAUSED]


class _Collect:
    """llhttp's callbacks for one request head."""

    __slots__ = ("url", "headers", "done")

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value.strip(b" \t")))

    def on_headers_complete(self) -> None:
        self.done = True


def _from_h11(ev: object) -> Received:
    if type(ev) is h11.Request:
        return Request(ev.method, ev.target, tuple(ev.headers), ev.http_version)
    return ev  # type: ignore[return-value]  # h11's Data, EndOfMessage, ConnectionClosed, sentinels


class ServerConnection:
    """One client connection's HTTP/1.1 framing (module docstring): llhttp and bytes built
    here for the common case, a real ``h11.Connection`` once anything else shows up."""

    __slots__ = ("max_head", "_h", "_buf", "_closed", "_our", "_their", "_keep_alive",
                 "_method", "_remaining", "_parser", "_got", "_version", "handed_over")

    def __init__(self, max_incomplete_event_size: int = 16384, reference: bool = False) -> None:
        self.max_head = max_incomplete_event_size
        self._h: h11.Connection | None = None
        self._buf = bytearray()
        self._closed = False
        self._our: type[Sentinel] = IDLE
        self._their: type[Sentinel] = IDLE
        self._keep_alive = True
        self._method = b""
        self._remaining = 0
        self._version: bytes | None = None
        self._got = _Collect()
        self._parser: httptools.HttpRequestParser | None = None
        #: Why h11 took over (None: it has not); a figure for tests and profiles.
        self.handed_over: str | None = None
        if reference:
            self._hand_over("reference")

    # ------------------------------------------------------------------ h11's surface
    @property
    def our_state(self) -> type[Sentinel]:
        return self._our if self._h is None else self._h.our_state

    @property
    def their_state(self) -> type[Sentinel]:
        return self._their if self._h is None else self._h.their_state

    @property
    def their_http_version(self) -> bytes | None:
        if self._h is not None:
            return self._h.their_http_version
        return self._version

    @property
    def they_are_waiting_for_100_continue(self) -> bool:
        return self._h is not None and self._h.they_are_waiting_for_100_continue

    def receive_data(self, data: bytes) -> None:
        """Bytes from the client; ``b""``: it closed its side."""
        if self._h is not None:
            self._h.receive_data(data)
        elif data:
            if self._closed:
                raise RuntimeError("received close, then received more data?")
            self._buf += data
        else:
            self._closed = True

    def next_event(self) -> Received:
        """The next request head, its end, ``ConnectionClosed``, ``NEED_DATA`` or ``PAUSED``;
        raises ``h11.RemoteProtocolError`` for what the client got wrong."""
        if self._h is not None:
            return _from_h11(self._h.next_event())
        their = self._their
        if their is IDLE:
            return self._read_head()
        if their is SEND_BODY:  # a bodiless request: its end
            self._their = DONE
            self._fire()
            return _END
        if their is DONE:
            if self._buf:
                return PAUSED
        elif their is MUST_CLOSE:
            if self._buf:
                self._their = ERROR
                self._fire()
                raise h11.RemoteProtocolError("Got data when expecting EOF")
        elif their is ERROR:
            raise h11.RemoteProtocolError("Can't receive data when peer state is ERROR")
        if self._closed:
            self._their = CLOSED
            self._fire()
            return h11.ConnectionClosed()
        return NEED_DATA

    def start_next_cycle(self) -> None:
        if self._h is not None:
            return self._h.start_next_cycle()
        if self._our is not DONE or self._their is not DONE:
            raise h11.LocalProtocolError(f"not in a reusable state ({self._our}, {self._their})")
        self._our = self._their = IDLE
        self._method = b""

    def send_response(
        self, status: int, headers: list[tuple[bytes, bytes]], reason: bytes
    ) -> bytes:
        """A final response head; raises ``h11.LocalProtocolError`` where h11 would."""
        if self._h is None:
            self._may_send_head()
            head = self._fast_response(status, headers, reason)
            if head is not None:
                return head
            self._hand_over("response")
        assert self._h is not None
        return self._h.send(h11.Response(status_code=status, headers=headers, reason=reason))

    def send_interim(
        self, status: int, headers: list[tuple[bytes, bytes]], reason: bytes = b""
    ) -> bytes:
        """A 1xx response head (always through h11: rare)."""
        if self._h is None:
            self._may_send_head()
            self._hand_over("interim")
        assert self._h is not None
        return self._h.send(
            h11.InformationalResponse(status_code=status, headers=headers, reason=reason)
        )

    def send_data(self, data: bytes) -> bytes:
        """Body bytes (framed as the head said)."""
        if self._h is not None:
            return self._h.send(h11.Data(data=data))
        self._body(len(data))
        return data if type(data) is bytes else bytes(data)

    def send_span(self, span: object, count: int) -> list[object]:
        """``count`` body bytes the caller sends itself (``span`` stands for them): the pieces
        to send in order, ``span`` among them (h11's data pass-through)."""
        if self._h is not None:
            # h11's stubs say bytes; it passes the object through (its sendfile recipe)
            ev = h11.Data(data=span)  # type: ignore[arg-type]  # h11 passes the span through
            return list(self._h.send_with_data_passthrough(ev) or [])
        self._body(count)
        return [span]

    def send_end(self) -> bytes:
        """The end of the response."""
        if self._h is not None:
            return self._h.send(_END)
        if self._our is not SEND_BODY:
            self._fail(f"can't end a message in {self._our}")
        if self._remaining:
            self._fail("Too little data for declared Content-Length")
        self._our = DONE
        self._fire()
        return b""

    # ------------------------------------------------------------------ inside
    def _fire(self) -> None:
        """h11's state-triggered transitions (h11/_state.py), until nothing moves."""
        while True:
            before = (self._their, self._our)
            if not self._keep_alive:
                if self._our is DONE:
                    self._our = MUST_CLOSE
                if self._their is DONE:
                    self._their = MUST_CLOSE
            their, our = self._their, self._our
            if their in (CLOSED, ERROR) and our is DONE or their is CLOSED and our is IDLE:
                self._our = MUST_CLOSE
            elif their is DONE and our is ERROR:
                self._their = MUST_CLOSE
            if (self._their, self._our) == before:
                return

    def _fail(self, why: str) -> NoReturn:
        """Our side broke the protocol: ERROR, as h11 puts it."""
        self._our = ERROR
        self._fire()
        raise h11.LocalProtocolError(why)

    def _may_send_head(self) -> None:
        """A head only before the response started (h11 says so in the same words)."""
        if self._our not in (IDLE, SEND_RESPONSE):
            self._fail(f"can't send a response head in state {self._our}")

    def _read_head(self) -> Received:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if not buf:
                if self._closed:
                    self._their = CLOSED
                    self._fire()
                    return h11.ConnectionClosed()
                return NEED_DATA
            if (self._closed or len(buf) > self.max_head or buf[0] < 0x21
                    or b"\n\n" in buf or b"\n\r\n" in buf):
                return self._handed("head")  # h11 decides: a refusal or another reading
            return NEED_DATA
        end += 4
        req = self._parse(bytes(buf[:end])) if end <= self.max_head else None
        if req is None:
            return self._handed("head")
        del buf[:end]
        self._their = SEND_BODY
        self._our = SEND_RESPONSE
        self._method = req.method
        self._version = b"1.1"
        return req

    def _parse(self, head: bytes) -> Request | None:
        """``head`` parsed by llhttp, or None if this request goes to h11."""
        if head not in _VALID_HEADS:  # a client's heads repeat: the grammar checked once
            if _FAST_HEAD.fullmatch(head) is None:
                return None
            if len(_VALID_HEADS) >= _VALID_MAX:
                _VALID_HEADS.clear()
            _VALID_HEADS.add(head)
        got = self._got
        got.url, got.done = b"", False
        got.headers = []
        if self._parser is None:
            self._parser = httptools.HttpRequestParser(got)
        try:
            self._parser.feed_data(head)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._parser = None
            return None
        if not got.done:
            return None
        method = self._parser.get_method()
        names = [k for k, _ in got.headers]
        if (method == b"CONNECT" or names.count(b"host") != 1
                or not _HAND_OVER_REQUEST.isdisjoint(names)):
            return None
        if b"connection" in names:
            tokens = {t.strip().lower() for k, v in got.headers if k == b"connection"
                      for t in v.split(b",")}
            if b"close" in tokens:
                self._keep_alive = False
        return Request(method, got.url, tuple(got.headers), b"1.1")

    def _fast_response(
        self, status: int, headers: list[tuple[bytes, bytes]], reason: bytes
    ) -> bytes | None:
        """The head as h11 would write it, or None where h11 has to write it."""
        if self._our is not SEND_RESPONSE or not 200 <= status < 1000 or b"\r" in reason \
                or b"\n" in reason or b"\x00" in reason:
            return None
        names = [k for k, _ in headers]
        if names.count(b"content-length") != 1 or not _HAND_OVER_RESPONSE.isdisjoint(names):
            return None
        fields = b"".join([b"%s: %s\r\n" % kv for kv in headers])
        if fields not in _VALID_FIELDS:  # a hot object's head repeats: checked once
            if _FAST_FIELDS.fullmatch(fields) is None:
                return None
            if len(_VALID_FIELDS) >= _VALID_MAX:
                _VALID_FIELDS.clear()
            _VALID_FIELDS.add(fields)
        length = headers[names.index(b"content-length")][1]
        if _LENGTH.fullmatch(length) is None:
            return None
        if not self._keep_alive:
            fields += b"Connection: close\r\n"
        bodiless = status in (204, 304) or self._method == b"HEAD"
        self._remaining = 0 if bodiless else int(length)
        self._our = SEND_BODY
        return b"HTTP/1.1 %d %s\r\n%s\r\n" % (status, reason, fields)

    def _body(self, n: int) -> None:
        if self._our is not SEND_BODY:
            self._fail(f"can't send data in {self._our}")
        if n > self._remaining:
            self._fail("Too much data for declared Content-Length")
        self._remaining -= n

    def _handed(self, why: str) -> Received:
        self._hand_over(why)
        assert self._h is not None
        return _from_h11(self._h.next_event())

    def _hand_over(self, why: str) -> None:
        """A real h11 connection in this one's state: the request so far replayed into it (the
        fast path takes only bodiless HTTP/1.1 requests, so its method and keep-alive are all
        that matter), then the bytes not yet read."""
        h = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_head)
        their = self._their
        if their is not IDLE:
            h.receive_data(b"%s / HTTP/1.1\r\nhost: h\r\n%s\r\n" % (
                self._method, b"" if self._keep_alive else b"connection: close\r\n"))
            h.next_event()
            if their is not SEND_BODY:
                h.next_event()
        h.their_http_version = self._version  # it outlives a cycle (h11 keeps it so)
        if self._buf:
            h.receive_data(bytes(self._buf))
        if self._closed:
            h.receive_data(b"")
        if their is CLOSED:
            h.next_event()
        self._buf.clear()
        self._parser = None
        self._h = h
        self.handed_over = why
