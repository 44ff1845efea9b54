"""A response head's field block checked against h11's grammar once (issue 17, VMCFAST step 3:
the regular expression over a ~300-byte block cost ~30 k instructions per request, and a hot
object's head repeats): a valid block is remembered, an invalid one never is (it still goes to
h11 every time), and the memory is bounded."""

from __future__ import annotations

import re

import h11
import pytest

from vmc.core import h1
from vmc.core.h1 import ServerConnection


class _Counting:
    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern, self.calls = pattern, 0

    def fullmatch(self, data: bytes) -> re.Match[bytes] | None:
        self.calls += 1
        return self.pattern.fullmatch(data)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counting:
    c = _Counting(h1._FAST_FIELDS)
    monkeypatch.setattr(h1, "_FAST_FIELDS", c)
    monkeypatch.setattr(h1, "_VALID_FIELDS", set())
    return c


def _answer(fields: list[tuple[bytes, bytes]]) -> ServerConnection:
    c = ServerConnection()
    c.receive_data(b"GET /a HTTP/1.1\r\nHost: o\r\n\r\n")
    c.next_event()
    c.next_event()
    try:
        c.send_response(200, fields, b"OK")
    except h11.LocalProtocolError:
        pass  # h11 refuses what its grammar refuses
    return c


def test_a_repeated_head_is_checked_once(counted: _Counting) -> None:
    fields = [(b"etag", b'"e"'), (b"content-length", b"0"), (b"via", b"1.1 vmc")]
    for _ in range(5):
        assert _answer(fields).handed_over is None
    assert counted.calls == 1


def test_an_invalid_head_is_never_remembered(counted: _Counting) -> None:
    fields = [(b"x", b" padded"), (b"content-length", b"0")]
    for _ in range(3):
        assert _answer(fields).handed_over == "response"  # h11 decides, every time
    assert counted.calls == 3 and not h1._VALID_FIELDS


def test_the_memory_is_bounded(counted: _Counting) -> None:
    for i in range(3 * h1._VALID_MAX):
        _answer([(b"x-n", b"%d" % i), (b"content-length", b"0")])
    assert 0 < len(h1._VALID_FIELDS) <= h1._VALID_MAX


class _CountingHead(_Counting):
    pass


def test_a_repeated_request_head_is_checked_once_and_parsed_each_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for request heads (wrk's, a browser's for one URL): the grammar check once, the
    parse by llhttp every time (its fields are the request's)."""
    c = _CountingHead(h1._FAST_HEAD)
    monkeypatch.setattr(h1, "_FAST_HEAD", c)
    monkeypatch.setattr(h1, "_VALID_HEADS", set())
    conn = ServerConnection()
    for i in range(4):
        conn.receive_data(b"GET /a HTTP/1.1\r\nHost: o\r\n\r\n")
        ev = conn.next_event()
        assert isinstance(ev, h1.Request) and ev.headers == ((b"host", b"o"),)
        conn.next_event()
        conn.send_response(200, [(b"content-length", b"1")], b"OK")
        conn.send_data(b"%d" % i)
        conn.send_end()
        conn.start_next_cycle()
    assert c.calls == 1 and conn.handed_over is None
    bad = ServerConnection()
    for _ in range(2):
        bad.receive_data(b"GET /a HTTP/1.1\r\nHost: o\r\nx: \x00\r\n\r\n")
    assert not any(b"\x00" in h for h in h1._VALID_HEADS)
