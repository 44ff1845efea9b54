"""HTTP proxy cases driven by the vector corpus (``tests/vectors/http``,
:mod:`vmc.conformance.vectors`).

``test_range_vector``: every ``ranges`` vector sent through the proxy to our
origin (a complete, cached-or-not object of 10000 bytes): the answer must be
what RFC 9110 sec. 14 allows for it. ``test_smuggling_vector``: every
``smuggling`` vector sent raw to the proxy, whose upstream is a recorder: the
smuggled request must never reach the upstream (RFC 9112 sec. 11.2), nor a
message carrying both Content-Length and Transfer-Encoding (sec. 6.3 item 3);
vectors with a status list must get one of those statuses (the cited
section's requirement) and forward nothing, ``close`` vectors an answer
and then a closed connection (sec. 6.1). One proxy per implementation serves a
whole vector set, so the set stays quick.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from vmc.conformance import vectors as V
from vmc.conformance.harness import (
    RecordingUpstream,
    body_slice,
    describe_body,
    expected,
    fetch,
    free_port,
    multipart_parts,
    origin,
    raw_exchange,
)

PATH = "/vectors/object.bin"
TARGET = f"{PATH}?size={V.LENGTH}"


def _ids(vs: list[dict]) -> list[str]:
    return [v["name"] for v in vs]


RANGE_VECTORS = V.load("ranges")
SMUGGLING_VECTORS = V.load("smuggling")


@pytest.fixture(scope="module")
def proxies() -> Iterator[Callable]:
    """``proxies(impl, upstream_kind) -> (proxy address, upstream)``: one per implementation and
    kind (``origin`` or ``recorder``) for the module, all stopped at its end."""
    started: dict = {}
    with ExitStack() as stack:
        def get(impl, kind: str):
            key = (impl.name, kind)
            if key not in started:
                up: Any = stack.enter_context(origin() if kind == "origin" else RecordingUpstream())
                port = free_port()
                stack.enter_context(impl.start(
                    "proxy", "--listen", f"127.0.0.1:{port}", "--upstream", up.authority,
                    ready_line="READY", ready_timeout=20,
                ))
                started[key] = (("127.0.0.1", port), up)
            return started[key]

        yield get


def _no_corpus(vs: list) -> list:
    skip = pytest.mark.skip(reason="no HTTP vector corpus (tests/vectors/http)")
    return vs or [pytest.param(None, marks=skip)]


@pytest.mark.conformance(protocol="http-proxy",
                         section="RFC 9110 sec. 14.1.2, 14.2, 14.4, 14.6, 15.5.17", role="proxy")
@pytest.mark.parametrize("vector", _no_corpus(RANGE_VECTORS), ids=_ids(RANGE_VECTORS) or None)
def test_range_vector(impl, proxies, vector, record_property):
    """One Range value from the corpus: 206 with exactly the selected bytes (one part, multipart
    parts, or one part covering them all), 416 ``bytes */10000`` for an unsatisfiable one, or
    (sec. 14.2: Range may be ignored) the whole 200; an invalid specifier or another unit never
    gets a 206."""
    addr, _ = proxies(impl, "origin")
    r = fetch(addr, TARGET, [("range", vector["range"])], timeout=20)
    assert r.complete, f"{vector['range']!r}: {r.status} {r.error}"
    want = vector["expect"]
    record_property("answer", str(r.status))
    if r.status == 200:
        assert r.body == expected(PATH, V.LENGTH), (
            f"{vector['range']!r}: a 200 that is not the representation: "
            f"{describe_body(PATH, V.LENGTH, r.body)}")
        return
    if want in ("invalid", "other-unit"):
        assert r.status != 206, f"{vector['range']!r} ({want}, {vector['source']}) answered 206"
        assert r.status in (400, 416), f"{vector['range']!r}: status {r.status}"
        return
    if want == "unsatisfiable":
        assert r.status == 416, f"{vector['range']!r}: status {r.status}, want 416 or 200"
        content_range = r.headers.get("content-range")
        assert content_range == f"bytes */{V.LENGTH}", content_range
        return
    assert r.status == 206, (
        f"{vector['range']!r}: status {r.status} (ranges {want} are satisfiable)"
    )
    if r.headers.get("content-type", "").startswith("multipart/byteranges"):
        parts = [
            (a, b, body) for a, b, complete, body in multipart_parts(r) if complete == V.LENGTH
        ]
        assert len(parts) == len(multipart_parts(r)), "a part whose complete-length is not 10000"
        record_property("answer", f"206 multipart {[(a, b) for a, b, _ in parts]}")
    else:
        a, b = map(int, r.headers["content-range"].split()[1].split("/")[0].split("-"))
        parts = [(a, b, r.body)]
    for a, b, body in parts:
        assert body == body_slice(PATH, a, b + 1), (
            f"{vector['range']!r}: part {a}-{b} has the wrong bytes"
        )
    covered = {i for a, b, _ in parts for i in range(a, b + 1)}
    missing = [(a, b) for a, b in want if not set(range(a, b + 1)) <= covered]
    assert not missing, (
        f"{vector['range']!r}: ranges {missing} not in the 206 (parts {[p[:2] for p in parts]})"
    )


_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")


def _statuses(reply: bytes) -> list[int]:
    """Status codes of the responses in ``reply``, one after the other (Content-Length framing; a
    response without it runs to the end; a 1xx has no body)."""
    out, pos = [], 0
    while pos < len(reply):
        m = _STATUS.match(reply, pos)
        end = reply.find(b"\r\n\r\n", pos)
        if m is None or end < 0:
            break
        status = int(m.group(1))
        out.append(status)
        head = reply[pos:end].lower()
        cl = re.search(rb"\r\ncontent-length:[ \t]*(\d+)", head)
        if cl is None and status >= 200:
            break
        pos = end + 4 + (int(cl.group(1)) if cl else 0)
    return out


@pytest.mark.conformance(protocol="http-proxy",
                         section="RFC 9112 sec. 5.1, 5.2, 6.1, 6.3, 7.1, 11.2", role="proxy")
@pytest.mark.parametrize("vector", _no_corpus(SMUGGLING_VECTORS),
                         ids=_ids(SMUGGLING_VECTORS) or None)
def test_smuggling_vector(impl, proxies, vector, record_property):
    """A request with ambiguous or invalid framing followed by a smuggled request (see the
    module doc)."""
    addr, up = proxies(impl, "recorder")
    before = len(up.snapshot()[0])
    reply, closed = raw_exchange(addr, vector["request"].encode("latin-1"), timeout=4.0)
    statuses = _statuses(reply)
    forwarded = up.snapshot()[0][before:]
    record_property("answer", f"{statuses or 'nothing'}, {'closed' if closed else 'left open'}, "
                              f"{len(forwarded)} forwarded")
    smuggled = [t for t, _, _ in forwarded if t.startswith("/smuggled/")]
    assert not smuggled, (
        f"{vector['name']}: the request after it on the same connection ({smuggled[0]}) reached"
        f" the upstream: the connection went on after this message ({vector['source']})")
    framing = {"content-length", "transfer-encoding"}
    both = [t for t, h, _ in forwarded if framing <= {k.lower() for k, _ in h}]
    assert not both, (
        f"{vector['name']}: forwarded with both Content-Length and Transfer-Encoding"
        " (RFC 9112 sec. 6.3)")
    assert len(statuses) <= 1, (
        f"{vector['name']}: {len(statuses)} responses to one request ({statuses})")
    if vector["expect"] != "close":
        allowed = vector["expect"]
        assert len(statuses) == 1 and statuses[0] in allowed, (
            f"{vector['name']}: answered {statuses or 'nothing'},"
            f" want {' or '.join(map(str, allowed))} ({vector['source']})")
        assert not forwarded, (
            f"{vector['name']}: rejected but forwarded {[t for t, _, _ in forwarded]}")
    else:
        assert statuses, f"{vector['name']}: no answer within 4 s"
        assert closed, (
            f"{vector['name']}: answered {statuses} and left the connection open"
            f" ({vector['source']})")
