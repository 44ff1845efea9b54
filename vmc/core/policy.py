"""When is sharing a stream safe? (RFC 9110 sec. 8.8, 12.5.5, 13; RFC 9111 sec. 5.2;
RFC 9112 sec. 6.3)

The paper's router shares any two requests with the same URI hash. A real
proxy must not hand one user's response to another unless it would be the
same representation for both. We share only when every rule here holds:

Request side (:func:`request_verdict`):
- method GET or HEAD (sec. 9.2.1: safe; no other method has cacheable semantics here);
- no ``Authorization`` or ``Cookie`` (per-user responses, RFC 9111 sec. 3.5);
- no conditional fields other than ``If-Range`` (a 304 is per-request, sec. 13.1);
- no request ``Cache-Control: no-store`` / ``no-cache`` (the client asked for a fresh fetch);
- no request body.

Response side (:func:`response_verdict`):
- status 200 (a 206 from the origin answers one client's range only);
- a known length: ``Content-Length`` and no ``Transfer-Encoding`` (sec. 6.3);
- no ``Cache-Control: no-store`` or ``private`` (RFC 9111 sec. 5.2.2.5, 5.2.2.7),
  no ``Set-Cookie``;
- ``Vary`` not ``*``; the listed request fields must match for a joiner (sec. 12.5.5);
- fresh when it arrives (RFC 9111 sec. 4.2): no ``Cache-Control: no-cache``, and an
  explicit freshness lifetime (``s-maxage``, else ``max-age``, else ``Expires`` minus
  ``Date``; an invalid one counts as already expired, sec. 4.2.1, 5.3) longer than its
  age. A joiner is a reuse without validation, so it is allowed only while the
  response is fresh (:class:`Freshness`) and no older than the joiner's own
  ``max-age`` (sec. 5.2.1.1); its answer carries ``Age`` (sec. 4, 5.1).
  A response with no explicit lifetime is shared while in flight (heuristic freshness, sec. 4.2.2);
- no ``Content-Encoding`` other than identity unless the joiner's
  ``Accept-Encoding`` selected the same (covered by Vary when the origin sets it).

Same representation (:func:`same_representation`): a range fetched from the origin
to patch a prefix must carry the same strong ETag (or, without one, a matching
Last-Modified) and the same complete length, or it is never stitched onto the
stream. A validator is strong only as RFC 9110 sec. 8.8.2.2 and 13.1.5 say: an
ETag without ``W/``; a Last-Modified only when there is no ETag at all and the
response's Date is at least one second later.

Header lists are h11's: ``[(lowercase name bytes, value bytes), ...]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import mktime_tz, parsedate_tz

from vmc.core.errors import RangeError
from vmc.core.ranges import parse_content_range
from vmc.core.reasons import NotShared

Headers = Sequence[tuple[bytes, bytes]]

_CONDITIONALS = (b"if-match", b"if-none-match", b"if-modified-since", b"if-unmodified-since")


#: Hop-by-hop fields (RFC 9110 sec. 7.6.1), and Content-Length (each hop frames its own).
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"content-length",
    }
)


def end_to_end(headers: Headers, drop: Sequence[bytes] = ()) -> list[tuple[bytes, bytes]]:
    """Fields minus hop-by-hop ones, those named in Connection, and ``drop`` (RFC 9110
    sec. 7.6.1)."""
    named = {
        e.strip().lower()
        for k, v in headers
        if k == b"connection"
        for e in v.split(b",")
        if e.strip()
    }
    bad = HOP_BY_HOP | named | set(drop)
    return [(k, v) for k, v in headers if k not in bad]


def get(headers: Headers, name: bytes) -> bytes | None:
    """First value of ``name`` (lower-case), or None."""
    for k, v in headers:
        if k == name:
            return v
    return None


def get_all(headers: Headers, name: bytes) -> list[bytes]:
    """All comma-separated elements of every ``name`` field, stripped and lower-cased."""
    out: list[bytes] = []
    for k, v in headers:
        if k == name:
            out.extend(e.strip().lower() for e in v.split(b",") if e.strip())
    return out


def cache_directives(headers: Headers) -> set[bytes]:
    """Cache-Control directive names (arguments dropped), lower-case (RFC 9111 sec. 5.2)."""
    return {d.split(b"=", 1)[0].strip() for d in get_all(headers, b"cache-control")}


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a request or response may take part in sharing, and why not."""

    ok: bool
    """True when sharing is allowed."""
    reason: NotShared
    """Why not, counted in the statistics (SHAREABLE when ok)."""

    def __bool__(self) -> bool:
        return self.ok


SHAREABLE = Verdict(True, NotShared.SHAREABLE)


def request_verdict(method: bytes, headers: Headers) -> Verdict:
    """May this request join or start a shared session?"""
    if method not in (b"GET", b"HEAD"):
        return Verdict(False, NotShared.METHOD)
    if get(headers, b"authorization") is not None:
        return Verdict(False, NotShared.AUTHORIZATION)
    if get(headers, b"cookie") is not None:
        return Verdict(False, NotShared.COOKIE)
    if any(get(headers, c) is not None for c in _CONDITIONALS):
        return Verdict(False, NotShared.CONDITIONAL)
    cc = cache_directives(headers)
    if b"no-store" in cc or b"no-cache" in cc:
        return Verdict(False, NotShared.REQUEST_NO_STORE)
    if get(headers, b"content-length") not in (None, b"0") or get(headers, b"transfer-encoding"):
        return Verdict(False, NotShared.REQUEST_BODY)
    return SHAREABLE


def directive_values(headers: Headers) -> dict[bytes, bytes | None]:
    """Cache-Control directives with their arguments (lower-case names, quotes stripped); the first
    occurrence of a directive wins (RFC 9111 sec. 4.2.1)."""
    out: dict[bytes, bytes | None] = {}
    for d in get_all(headers, b"cache-control"):
        name, eq, arg = d.partition(b"=")
        out.setdefault(name.strip(), arg.strip().strip(b'"') if eq else None)
    return out


@dataclass(frozen=True, slots=True)
class Freshness:
    """How long a response may be reused without validation (RFC 9111 sec. 4.2), as it arrived."""

    lifetime: float | None
    """Freshness lifetime in seconds (sec. 4.2.1); None when the response gives none (heuristic)."""
    initial_age: float
    """Its age on arrival (sec. 4.2.3: the larger of ``Age`` and the apparent age from ``Date``)."""

    def age(self, resident: float) -> int:
        """The ``Age`` to send after ``resident`` seconds in the proxy (sec. 5.1: whole seconds)."""
        return int(self.initial_age + max(0.0, resident))

    def fresh(self, resident: float) -> bool:
        """Still fresh after ``resident`` seconds in the proxy?"""
        return self.lifetime is None or self.initial_age + max(0.0, resident) < self.lifetime


def freshness(headers: Headers, now: float | None = None) -> Freshness:
    """A response's freshness for a shared cache; ``now`` (Unix seconds) when the head arrived,
    for the apparent age and for ``Expires`` without ``Date``."""
    cc = directive_values(headers)
    lifetime: float | None = None
    for name in (b"s-maxage", b"max-age"):
        if name in cc:
            arg = cc[name]
            lifetime = float(arg) if arg is not None and arg.isdigit() else 0.0  # invalid: stale
            break
    date = http_date(get(headers, b"date"))
    if lifetime is None:
        expires = get(headers, b"expires")
        if expires is not None:
            exp, base = http_date(expires), date if date is not None else now
            lifetime = max(0.0, exp - base) if exp is not None and base is not None else 0.0
    age_field = get(headers, b"age")
    age = float(age_field) if age_field is not None and age_field.strip().isdigit() else 0.0
    if date is not None and now is not None:
        age = max(age, now - date)
    return Freshness(lifetime, age)


def request_max_age(headers: Headers) -> int | None:
    """A request's ``Cache-Control: max-age`` (RFC 9111 sec. 5.2.1.1): the oldest answer, in
    seconds, the client accepts without validation (an invalid value counts as 0); None when
    absent."""
    cc = directive_values(headers)
    if b"max-age" not in cc:
        return None
    arg = cc[b"max-age"]
    return int(arg) if arg is not None and arg.isdigit() else 0


def response_verdict(status: int, headers: Headers, now: float | None = None) -> Verdict:
    """May this origin response be shared with later requests for the same URI?

    ``now`` (Unix seconds) is when its head arrived (for ``Date``/``Expires``; see
    :func:`freshness`).
    """
    if status != 200:
        return Verdict(False, NotShared.STATUS_NOT_200)
    if get(headers, b"transfer-encoding") is not None:
        return Verdict(False, NotShared.UNKNOWN_LENGTH)
    cl = get(headers, b"content-length")
    if cl is None or not cl.isdigit():
        return Verdict(False, NotShared.UNKNOWN_LENGTH)
    cc = cache_directives(headers)
    if b"no-store" in cc:
        return Verdict(False, NotShared.NO_STORE)
    if b"private" in cc:
        return Verdict(False, NotShared.PRIVATE)
    if get(headers, b"set-cookie") is not None:
        return Verdict(False, NotShared.SET_COOKIE)
    if b"*" in get_all(headers, b"vary"):
        return Verdict(False, NotShared.VARY_STAR)
    if b"no-cache" in cc or not freshness(headers, now).fresh(0.0):
        return Verdict(False, NotShared.MUST_REVALIDATE)  # RFC 9111 sec. 4.2.4, 5.2.2.4
    return SHAREABLE


def http_date(value: bytes | None) -> float | None:
    """Seconds since the epoch of an HTTP-date (IMF-fixdate, RFC 850 or asctime; RFC 9110
    sec. 5.6.7)."""
    if not value:
        return None
    try:
        t = parsedate_tz(value.decode("ascii"))
        return float(mktime_tz(t)) if t is not None else None
    except (UnicodeDecodeError, ValueError, OverflowError, TypeError, IndexError):
        return None


@dataclass(frozen=True, slots=True)
class Validators:
    """What identifies one representation: entity tag, Last-Modified, length (RFC 9110 sec. 8.8)."""

    etag: bytes | None
    """ETag field value as sent (with quotes, ``W/`` when weak)."""
    last_modified: bytes | None
    """Last-Modified field value as sent."""
    length: int | None
    """Complete length of the representation."""
    date: bytes | None = None
    """The response's Date field: decides whether Last-Modified is strong (sec. 8.8.2.2)."""

    @property
    def strong_etag(self) -> bytes | None:
        """The ETag when it is strong (range patching needs strong comparison, sec. 8.8.3.2)."""
        return self.etag if self.etag and not self.etag.startswith(b"W/") else None

    @property
    def strong_last_modified(self) -> bytes | None:
        """Last-Modified when it is a strong validator for a client (sec. 8.8.2.2): the response's
        Date is at least one second after it. Otherwise (no Date, or too close) it is weak."""
        lm, date = http_date(self.last_modified), http_date(self.date)
        if lm is None or date is None or date - lm < 1:
            return None
        return self.last_modified

    def if_range(self) -> bytes | None:
        """The If-Range value to send when patching from the origin (sec. 13.1.5), or None.

        With an entity tag, only that tag and only when strong ("MUST NOT generate an If-Range
        header field containing an HTTP-date unless the client has no entity tag"); without
        one, Last-Modified only when it is strong (sec. 8.8.2.2).
        """
        if self.etag is not None:
            return self.strong_etag
        return self.strong_last_modified

    def can_patch_from_origin(self) -> bool:
        """Range patching from the origin is safe only with a strong validator and a length."""
        return self.length is not None and self.if_range() is not None


def validators_of(status: int, headers: Headers) -> Validators:
    """Validators of a 200 or 206 response; the length comes from Content-Range on a 206."""
    length: int | None = None
    if status == 206:
        cr = get(headers, b"content-range")
        if cr is not None:
            try:
                length = parse_content_range(cr).length
            except RangeError:
                length = None
    else:
        cl = get(headers, b"content-length")
        length = int(cl) if cl is not None and cl.isdigit() else None
    etag, last_modified = get(headers, b"etag"), get(headers, b"last-modified")
    return Validators(etag, last_modified, length, get(headers, b"date"))


def same_representation(a: Validators, b: Validators) -> bool:
    """Is ``b`` (the origin's 206 answer to our If-Range) part of the representation ``a``?

    ``a`` must have a strong validator (:meth:`Validators.if_range`) and the complete lengths
    must match. With a strong ETag, ``b`` must carry the same tag (RFC 9110 sec. 15.3.7: a 206
    sends ETag when a 200 would; strong comparison, sec. 8.8.3.2). Last-Modified is compared
    only when both carry it: a 206 answering If-Range SHOULD NOT repeat other representation
    fields (sec. 15.3.7). Without an ETag on ``a``, its strong Last-Modified decides, and ``b``
    must not carry an ETag it did not have.
    """
    if a.length is None or a.length != b.length:
        return False
    cond = a.if_range()
    if cond is None:
        return False
    if a.etag is not None:
        if b.etag != a.etag:
            return False
    elif b.etag is not None:
        return False
    both = a.last_modified is not None and b.last_modified is not None
    if both and a.last_modified != b.last_modified:
        return False
    return True


def vary_fields(headers: Headers) -> tuple[bytes, ...]:
    """Request field names the response varies on (lower-case, sorted)."""
    return tuple(sorted(set(get_all(headers, b"vary"))))


def vary_signature(fields: Sequence[bytes], request_headers: Headers) -> tuple[bytes | None, ...]:
    """Values of the Vary-listed request fields; joiners must produce an equal tuple (sec. 12.5.5).

    Values are compared after joining repeated fields with commas and collapsing
    whitespace, which RFC 9111 sec. 4.1 allows as normalisation.
    """
    out: list[bytes | None] = []
    for f in fields:
        vals = [v for k, v in request_headers if k == f]
        out.append(b",".join(b" ".join(v.split()) for v in vals) if vals else None)
    return tuple(out)


def if_range_matches(if_range: bytes, v: Validators) -> bool:
    """Does a request's If-Range hold for the representation ``v`` (sec. 13.1.5)?

    An entity-tag: strong comparison with ``v``'s ETag. An HTTP-date: false unless it is a strong
    validator (sec. 8.8.2.2: ``v``'s Date at least one second after its Last-Modified), then an
    exact match with Last-Modified.
    """
    if_range = if_range.strip()
    if if_range.startswith(b'"'):
        return v.strong_etag is not None and if_range == v.strong_etag
    if if_range.startswith(b"W/"):
        return False
    return v.strong_last_modified is not None and if_range == v.last_modified
