"""Byte ranges: the Range and Content-Range fields (RFC 9110 sec. 14).

h11 frames messages but does not interpret Range, so this is our own small
parser. It follows sec. 14.1.1 / 14.1.2 literally:

- ``Range: bytes=first-[last]`` (int-range) and ``bytes=-N`` (suffix-range);
  several comma-separated specs; optional whitespace around commas (``1#``);
- an int-range with last < first is invalid, so the whole field is invalid;
- numerals may be arbitrarily long (Python ints, no overflow, sec. 14.1.2);
- a spec is satisfiable when first < length, or a suffix with N > 0;
  ``last`` >= length is clipped to length-1.

:func:`parse_range` raises :class:`RangeError` for an invalid field; a unit other
than ``bytes`` gives ``None`` (a proxy MAY ignore it, sec. 14.2).
:func:`resolve` turns specs into inclusive ``(first, last)`` pairs or raises
:class:`UnsatisfiableRange` (-> 416 with ``Content-Range: bytes */length``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vmc.core.errors import RangeError, UnsatisfiableRange

_DIGITS = re.compile(r"[0-9]+")
_TCHAR = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_OWS = " \t"
#: More specs than this is a denial-of-service smell (sec. 17.15): treated as invalid.
MAX_SPECS = 100


@dataclass(frozen=True, slots=True)
class ByteRangeSpec:
    """One range-spec of a ``bytes`` Range field (RFC 9110 sec. 14.1.2)."""

    first: int | None
    """first-pos, or None for a suffix-range."""
    last: int | None
    """last-pos (inclusive), or None when open-ended; for a suffix-range, None."""
    suffix: int | None = None
    """suffix-length of a suffix-range, else None."""

    def resolve(self, length: int) -> tuple[int, int] | None:
        """Inclusive (first, last) within ``length`` bytes, or None when unsatisfiable."""
        if self.suffix is not None:
            if self.suffix == 0 or length == 0:
                return None
            return max(0, length - self.suffix), length - 1
        assert self.first is not None
        if self.first >= length:
            return None
        last = length - 1 if self.last is None else min(self.last, length - 1)
        return self.first, last


def parse_range(value: str | bytes) -> list[ByteRangeSpec] | None:
    """Parse a Range field value. None if the unit is not ``bytes``; RangeError if invalid."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError as exc:
            raise RangeError("non-ASCII Range") from exc
    value = value.strip(_OWS)
    unit, eq, rest = value.partition("=")
    if not eq or not _TCHAR.match(unit):
        raise RangeError(f"not a ranges-specifier: {value[:40]!r}")
    if unit.lower() != "bytes":
        return None
    specs: list[ByteRangeSpec] = []
    for raw in rest.split(","):
        item = raw.strip(_OWS)
        if not item:
            continue  # 1#element allows empty list elements (RFC 9110 sec. 5.6.1)
        if len(specs) >= MAX_SPECS:
            raise RangeError("too many range specs")
        first_s, dash, last_s = item.partition("-")
        if not dash:
            raise RangeError(f"range-spec without '-': {item[:40]!r}")
        if first_s == "":
            if not _DIGITS.fullmatch(last_s):
                raise RangeError(f"bad suffix-range {item[:40]!r}")
            specs.append(ByteRangeSpec(None, None, int(last_s)))
            continue
        if not _DIGITS.fullmatch(first_s) or (last_s and not _DIGITS.fullmatch(last_s)):
            raise RangeError(f"bad int-range {item[:40]!r}")
        first = int(first_s)
        last = int(last_s) if last_s else None
        if last is not None and last < first:
            raise RangeError(f"last-pos < first-pos in {item[:40]!r}")
        specs.append(ByteRangeSpec(first, last))
    if not specs:
        raise RangeError("empty range-set")
    return specs


def resolve(specs: list[ByteRangeSpec], length: int) -> list[tuple[int, int]]:
    """Satisfiable specs as inclusive pairs, in request order; UnsatisfiableRange if none."""
    out = [r for r in (s.resolve(length) for s in specs) if r is not None]
    if not out:
        raise UnsatisfiableRange(length)
    return out


def coalesce(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, with overlapping or adjacent ranges merged (RFC 9110 sec. 14.2 allows it)."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def format_range(first: int, last: int | None = None) -> str:
    """A one-spec Range field value: ``bytes=first-last`` (``bytes=first-`` when open)."""
    return f"bytes={first}-" if last is None else f"bytes={first}-{last}"


def format_content_range(first: int, last: int, length: int | None) -> str:
    """``bytes first-last/length`` (``/*`` when unknown), RFC 9110 sec. 14.4."""
    return f"bytes {first}-{last}/{'*' if length is None else length}"


def format_unsatisfied(length: int) -> str:
    """``bytes */length`` for a 416 response (RFC 9110 sec. 14.4)."""
    return f"bytes */{length}"


@dataclass(frozen=True, slots=True)
class ContentRange:
    """A parsed ``Content-Range`` of a 206 or 416 response (RFC 9110 sec. 14.4)."""

    first: int | None
    """first-pos, None for an unsatisfied-range (``*/length``)."""
    last: int | None
    """last-pos (inclusive), None for an unsatisfied-range."""
    length: int | None
    """complete-length, None when ``*``."""


_CR = re.compile(r"^bytes[ ]+(?:(\d+)-(\d+)|\*)/(\d+|\*)$", re.IGNORECASE)


def parse_content_range(value: str | bytes) -> ContentRange:
    """Parse a bytes Content-Range; RangeError if invalid (including last < first,
    length <= last)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError as exc:
            raise RangeError("non-ASCII Content-Range") from exc
    m = _CR.match(value.strip(_OWS))
    if m is None:
        raise RangeError(f"bad Content-Range {value[:60]!r}")
    length = None if m.group(3) == "*" else int(m.group(3))
    if m.group(1) is None:
        if length is None:
            raise RangeError("'*/*' is not a Content-Range")
        return ContentRange(None, None, length)
    first, last = int(m.group(1)), int(m.group(2))
    if last < first or (length is not None and length <= last):
        raise RangeError(f"inconsistent Content-Range {value[:60]!r}")
    return ContentRange(first, last, length)
