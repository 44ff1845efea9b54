"""HTTP vectors: Range and Content-Range field values, a multipart/byteranges body, smuggling
attempts.

A vector file (``tests/vectors/http/<set>.vec``) is text: ``#`` comment
lines, then one ``vector {json}`` line per vector. Every vector names its
``source``: an example printed in the RFC (RFC 9110 sec. 14.1.2, 14.4, 14.6,
15.3.7.2) or the requirement it was written from (RFC 9112 sec. 5.1, 6.1,
6.3, 7.1, 11.2). Written by ``python -m vmc.conformance.vectors export DIR``
from the tables below; read back with :func:`parse` / :func:`load`.

Sets:

``ranges``         Range field value for a 10000-byte representation -> ``expect``:
                   ``[[first, last], ...]`` (inclusive, in request order),
                   ``"unsatisfiable"`` (416), ``"invalid"`` (ignore or reject) or
                   ``"other-unit"`` (not bytes: the origin ignores it). Drives our
                   parser and the proxy case ``test_range_vector``.
``content-range``  Content-Range value -> ``[first, last, complete]`` (``null`` for
                   ``*``) or ``"invalid"``. Drives our parser.
``multipart``      a 206 multipart/byteranges response (head and body) and its parts.
``smuggling``      raw request bytes whose framing is ambiguous or invalid, each followed
                   by a request for ``/smuggled/...``, and what a proxy must do: a list
                   of allowed statuses (``[400]`` where the cited section says so;
                   ``[400, 501]`` where two sections allow either), or ``close``
                   (answer, then close the connection). Drives ``test_smuggling_vector``:
                   the smuggled request must never reach the upstream, nor a message with both
                   Content-Length and Transfer-Encoding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from deliverykit.conformance import vectors_dir as shared_vectors_dir

SETS = ("ranges", "content-range", "multipart", "smuggling")
LENGTH = 10000
"""Representation length of the ``ranges`` set (the RFC 9110 sec. 14.1.2 examples use 10000)."""

_EX = "RFC 9110 sec. 14.1.2 (example)"
RANGES: list[dict] = [
    {"name": "first-500", "range": "bytes=0-499", "expect": [[0, 499]], "source": _EX},
    {"name": "second-500", "range": "bytes=500-999", "expect": [[500, 999]], "source": _EX},
    {"name": "final-500-suffix", "range": "bytes=-500", "expect": [[9500, 9999]], "source": _EX},
    {"name": "final-500-open", "range": "bytes=9500-", "expect": [[9500, 9999]], "source": _EX},
    {"name": "first-and-last", "range": "bytes=0-0,-1", "expect": [[0, 0], [9999, 9999]],
     "source": _EX},
    {"name": "adjacent", "range": "bytes=500-600,601-999", "expect": [[500, 600], [601, 999]],
     "source": _EX},
    {"name": "overlapping", "range": "bytes=500-700,601-999", "expect": [[500, 700], [601, 999]],
     "source": _EX},
    {"name": "last-past-end", "range": "bytes=9000-20000", "expect": [[9000, 9999]],
     "source": "RFC 9110 sec. 14.1.2: last-pos >= length means the remainder"},
    {"name": "suffix-longer-than-representation", "range": "bytes=-20000", "expect": [[0, 9999]],
     "source": "RFC 9110 sec. 14.1.2: a longer suffix-length selects the whole representation"},
    {"name": "whole-open", "range": "bytes=0-", "expect": [[0, 9999]],
     "source": "RFC 9110 sec. 14.1.2"},
    {"name": "ows-in-list", "range": "bytes=0-0, -1", "expect": [[0, 0], [9999, 9999]],
     "source": "RFC 9110 sec. 5.6.1 (OWS around list commas), 14.1.1"},
    {"name": "unit-case-insensitive", "range": "Bytes=10-19", "expect": [[10, 19]],
     "source": "RFC 9110 sec. 14.1: range unit names are case-insensitive"},
    {"name": "first-pos-at-length", "range": "bytes=10000-", "expect": "unsatisfiable",
     "source": "RFC 9110 sec. 14.1.1: first-pos < length is needed to be satisfiable; 15.5.17"},
    {"name": "zero-suffix", "range": "bytes=-0", "expect": "unsatisfiable",
     "source": "RFC 9110 sec. 14.1.1: only a non-zero suffix-length is satisfiable"},
    {"name": "last-before-first", "range": "bytes=500-100", "expect": "invalid",
     "source": "RFC 9110 sec. 14.1.1: last-pos < first-pos makes the ranges-specifier invalid"},
    {"name": "not-a-number", "range": "bytes=a-b", "expect": "invalid",
     "source": "RFC 9110 sec. 14.1.1 (ABNF)"},
    {"name": "other-unit", "range": "items=0-1", "expect": "other-unit",
     "source": "RFC 9110 sec. 14.2: an origin MUST ignore a range unit it does not understand"},
]

_CR = "RFC 9110 sec. 14.4"
CONTENT_RANGES: list[dict] = [
    {"name": "first-byte-pos", "value": "bytes 42-1233/1234", "expect": [42, 1233, 1234],
     "source": f"{_CR} (example)"},
    {"name": "unknown-length", "value": "bytes 42-1233/*", "expect": [42, 1233, None],
     "source": f"{_CR} (example)"},
    {"name": "unsatisfied", "value": "bytes */1234", "expect": [None, None, 1234],
     "source": f"{_CR} (example)"},
    {"name": "single-part-206", "value": "bytes 21010-47021/47022", "expect": [21010, 47021, 47022],
     "source": "RFC 9110 sec. 15.3.7.1 (example)"},
    {"name": "last-before-first", "value": "bytes 1233-42/1234", "expect": "invalid",
     "source": f"{_CR}: invalid if last-pos < first-pos"},
    {"name": "length-not-past-last", "value": "bytes 42-1233/1233", "expect": "invalid",
     "source": f"{_CR}: invalid if complete-length <= last-pos"},
    {"name": "star-star", "value": "bytes */*", "expect": "invalid",
     "source": f"{_CR} (ABNF: unsatisfied-range)"},
    {"name": "missing-unit", "value": "42-1233/1234", "expect": "invalid",
     "source": f"{_CR} (ABNF)"},
]

# RFC 9110 sec. 14.6 / 15.3.7.2 example: parts 500-999 and 7000-7999 of 8000 bytes; the RFC
# prints "...the first range..." for the part data, here the data are bytes of the stated length.
_BOUNDARY = "THIS_STRING_SEPARATES"


def _multipart_body() -> str:
    parts = []
    for first, last, fill in ((500, 999, "a"), (7000, 7999, "b")):
        data = fill * (last - first + 1)
        parts.append(f"--{_BOUNDARY}\r\nContent-Type: application/pdf\r\n"
                     f"Content-Range: bytes {first}-{last}/8000\r\n\r\n{data}\r\n")
    return "".join(parts) + f"--{_BOUNDARY}--\r\n"


MULTIPART: list[dict] = [
    {"name": "two-parts",
     "source": "RFC 9110 sec. 14.6, 15.3.7.2 (example; part data filled to length)",
     "content_type": f"multipart/byteranges; boundary={_BOUNDARY}", "body": _multipart_body(),
     "expect": [[500, 999, 8000], [7000, 7999, 8000]]},
]


def _smuggling() -> list[dict]:
    host = "Host: conformance.invalid\r\n"

    def then(name: str) -> str:
        return f"GET /smuggled/{name} HTTP/1.1\r\n{host}\r\n"

    out: list[dict[str, Any]] = []
    body = "0\r\n\r\n" + then("cl-te")
    out.append({"name": "cl-te", "expect": "close",
                "source": "RFC 9112 sec. 6.1 (close after a message with both), 6.3 item 3, 11.2",
                "request": f"POST /sm/cl-te HTTP/1.1\r\n{host}Content-Length: {len(body)}\r\n"
                           f"Transfer-Encoding: chunked\r\n\r\n{body}"})
    inner = then("te-cl")
    size = f"{len(inner):x}"
    out.append({"name": "te-cl", "expect": "close",
                "source": "RFC 9112 sec. 6.1, 6.3 item 3"
                          " (an intermediary MUST remove Content-Length), 11.2",
                "request": f"POST /sm/te-cl HTTP/1.1\r\n{host}Content-Length: {len(size) + 2}\r\n"
                           f"Transfer-Encoding: chunked\r\n\r\n{size}\r\n{inner}\r\n0\r\n\r\n"})
    out.append({"name": "cl-cl-differ", "expect": [400],
                "source": "RFC 9112 sec. 6.3 item 5 (invalid Content-Length: 400 and close);"
                          " RFC 9110 sec. 8.6",
                "request": f"POST /sm/cl-cl HTTP/1.1\r\n{host}"
                           "Content-Length: 6\r\nContent-Length: 60\r\n\r\n"
                           f"abcdef{then('cl-cl-differ')}"})
    out.append({"name": "cl-not-a-number", "expect": [400],
                "source": "RFC 9112 sec. 6.3 item 5 (invalid Content-Length: 400 and close)",
                "request": f"POST /sm/cl-nan HTTP/1.1\r\n{host}Content-Length: 6x\r\n\r\nabcdef"
                           f"{then('cl-not-a-number')}"})
    body = "0\r\n\r\n" + then("ws-before-colon")
    out.append({"name": "ws-before-colon", "expect": [400],
                "source": "RFC 9112 sec. 5.1 (whitespace between field name and colon: MUST 400)",
                "request": f"POST /sm/ws HTTP/1.1\r\n{host}Content-Length: {len(body)}\r\n"
                           f"Transfer-Encoding : chunked\r\n\r\n{body}"})
    body = "0\r\n\r\n" + then("chunked-not-final")
    out.append({"name": "chunked-not-final", "expect": [400, 501],
                "source": "RFC 9112 sec. 6.3 item 4"
                          " (chunked not the final coding of a request: 400 and close);"
                          " 6.1 (SHOULD 501 for a coding the server does not understand)",
                "request": f"POST /sm/nf HTTP/1.1\r\n{host}Content-Length: {len(body)}\r\n"
                           f"Transfer-Encoding: chunked, gzip\r\n\r\n{body}"})
    body = "0\r\n\r\n" + then("te-obs-fold")
    out.append({"name": "te-obs-fold", "expect": "close",
                "source": "RFC 9112 sec. 5.2 (obs-fold: reject or unfold), 6.1",
                "request": f"POST /sm/fold HTTP/1.1\r\n{host}Content-Length: {len(body)}\r\n"
                           f"Transfer-Encoding:\r\n chunked\r\n\r\n{body}"})
    out.append({"name": "bad-chunk-size", "expect": [400],
                "source": "RFC 9112 sec. 7.1 (chunk-size is 1*HEXDIG);"
                          " 2.2 (octets that do not match the"
                          " grammar: a server SHOULD respond 400 and close)",
                "request": f"POST /sm/chunk HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n"
                           f"zz\r\nabc\r\n0\r\n\r\n{then('bad-chunk-size')}"})
    return out


SMUGGLING: list[dict] = _smuggling()
TABLES = {
    "ranges": RANGES,
    "content-range": CONTENT_RANGES,
    "multipart": MULTIPART,
    "smuggling": SMUGGLING,
}
HEADERS = {
    "ranges": f"Range field values for a {LENGTH}-byte representation (RFC 9110 sec. 14.1, 14.2)",
    "content-range": "Content-Range field values (RFC 9110 sec. 14.4)",
    "multipart": "multipart/byteranges responses (RFC 9110 sec. 14.6)",
    "smuggling": "requests with ambiguous or invalid framing, each followed by a smuggled request"
                 " (RFC 9112)",
}


def export(directory: str | Path) -> list[Path]:
    """Write ``<set>.vec`` for every set into ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for name, table in TABLES.items():
        lines = [f"# http {name}: {HEADERS[name]}",
                 "# each vector names its source;"
                 " written by `python -m vmc.conformance.vectors export DIR`"]
        lines += ["vector " + json.dumps(v, sort_keys=True) for v in table]
        p = d / f"{name}.vec"
        p.write_text("\n".join(lines) + "\n")
        out.append(p)
    return out


def parse(text: str) -> dict:
    """{"comments": [...], "vectors": [dict, ...]} from a vector file."""
    v: dict = {"comments": [], "vectors": []}
    for line in text.splitlines():
        if line.startswith("#"):
            v["comments"].append(line[1:].strip())
        elif line.startswith("vector "):
            v["vectors"].append(json.loads(line[len("vector "):]))
        elif line.strip():
            raise ValueError(f"not a vector line: {line[:60]!r}")
    return v


def vectors_dir() -> Path | None:
    """The http vector folder (see deliverykit.conformance.vectors_dir)."""
    return shared_vectors_dir("http")


def load(name: str, directory: Path | None = None) -> list[dict]:
    """The vectors of set ``name`` ([] when there is no corpus, e.g. an installed wheel)."""
    d = directory or vectors_dir()
    p = None if d is None else d / f"{name}.vec"
    return [] if p is None or not p.exists() else parse(p.read_text())["vectors"]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        for p in export(sys.argv[2]):
            print(p)
        sys.exit(0)
    print("usage: python -m vmc.conformance.vectors export DIR", file=sys.stderr)
    sys.exit(2)
