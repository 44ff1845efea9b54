"""What to answer a request that joins a live session (paper sec. 3.2; RFC 9110 sec. 13.1.5,
14, 15.3.7).

Pure decision, no I/O: given the request (method, headers), the
representation's length and validators, and the live edge (bytes received so
far), :func:`plan_join` returns a :class:`Plan`: status, the byte span
``[first, end)`` to send, and the mode recorded in the statistics.

- ``Range`` (GET only; honoured only if ``If-Range`` is absent or matches):
  one satisfiable range after coalescing -> 206 for exactly it; 2..16
  disjoint ranges -> 206 multipart/byteranges (sec. 14.6), one part each, in
  ascending order; unsatisfiable -> 416; invalid syntax, another unit, or more
  ranges -> the Range is ignored (RFC 9110 sec. 14.2 allows it).
- Otherwise a VMC-aware request (``VMC: 1``) whose live edge is strictly inside
  the representation -> 206 from the edge to the end (the paper's "Partial
  Content response ... specifying the range of the supplied bytes").
- Otherwise 200 with everything (the proxy patches the prefix itself).
"""

from __future__ import annotations

from dataclasses import dataclass

from vmc.core import policy, ranges
from vmc.core.errors import RangeError, UnsatisfiableRange

VMC_HEADER = b"vmc"
#: More disjoint ranges than this (after coalescing) and the Range is ignored (sec. 14.2, 17.15).
MAX_PARTS = 16


@dataclass(frozen=True, slots=True)
class Plan:
    """The answer to a joining request."""

    status: int
    """200, 206 or 416."""
    first: int
    """First byte offset to send."""
    end: int
    """Offset after the last byte to send (first == end: no body)."""
    mode: str
    """"range", "joined-vmc" or "joined" (statistics)."""
    parts: tuple[tuple[int, int], ...] = ()
    """For a multipart/byteranges 206: the ``[first, end)`` spans, ascending (else empty)."""


def content_range(plan: Plan, length: int) -> str | None:
    """The Content-Range field value the plan needs, if any (none for multipart: each part has
    one)."""
    if plan.status == 206 and plan.parts:
        return None
    if plan.status == 206:
        return ranges.format_content_range(plan.first, plan.end - 1, length)
    if plan.status == 416:
        return ranges.format_unsatisfied(length)
    return None


def is_vmc_aware(headers: policy.Headers) -> bool:
    """The request says it understands a 206 to a plain GET (header ``VMC: 1``)."""
    v = policy.get(headers, VMC_HEADER)
    return v is not None and v.strip() not in (b"", b"0")


def plan_join(
    method: bytes, headers: policy.Headers, length: int, edge: int, v: policy.Validators
) -> Plan:
    """Decide the answer for a request joining a session of ``length`` bytes whose live edge is
    ``edge``."""
    rng = policy.get(headers, b"range")
    if rng is not None and method == b"GET":
        if_range = policy.get(headers, b"if-range")
        if if_range is None or policy.if_range_matches(if_range, v):
            try:
                specs = ranges.parse_range(rng)
                spans = None
                if specs is not None:
                    spans = ranges.coalesce(ranges.resolve(specs, length))
            except RangeError:
                spans = None
            except UnsatisfiableRange:
                return Plan(416, 0, 0, "range")
            if spans is not None and len(spans) == 1:
                a, b = spans[0]
                return Plan(206, a, b + 1, "range")
            if spans is not None and 1 < len(spans) <= MAX_PARTS:
                parts = tuple((a, b + 1) for a, b in spans)
                return Plan(206, parts[0][0], parts[-1][1], "range", parts)
    if method == b"GET" and is_vmc_aware(headers) and 0 < edge < length:
        return Plan(206, edge, length, "joined-vmc")
    return Plan(200, 0, length, "joined")


def multipart_layout(parts: tuple[tuple[int, int], ...], length: int, content_type: bytes,
                     boundary: bytes) -> tuple[list[tuple[bytes, int, int]], bytes, int]:
    """The framing of a multipart/byteranges body (RFC 9110 sec. 14.6, RFC 2046 sec. 5.1.1).

    Returns ``([(part head, first, end), ...], closing delimiter, total body length)``:
    the body is, for each part, its head then bytes ``[first, end)`` of the
    representation, then the closing delimiter.
    """
    out = []
    total = 0
    for i, (a, e) in enumerate(parts):
        head = (b"" if i == 0 else b"\r\n") + b"--" + boundary + b"\r\n"
        if content_type:
            head += b"Content-Type: " + content_type + b"\r\n"
        field = ranges.format_content_range(a, e - 1, length).encode()
        head += b"Content-Range: " + field + b"\r\n\r\n"
        out.append((head, a, e))
        total += len(head) + (e - a)
    tail = b"\r\n--" + boundary + b"--\r\n"
    return out, tail, total + len(tail)
