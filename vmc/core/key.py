"""Request keys: MD5 of the normalised absolute URI (paper sec. 3.2, RFC 9110 sec. 4.2.3).

The paper's router indexes requests "using the MD-5 hash of the universal
resource indicator", as a proxy cache does. We normalise first so that
equivalent spellings share a session (RFC 9110 sec. 4.2.3, RFC 3986 sec. 6.2.2):

- scheme and host lower-cased; the default port (80 for http, 443 for https) dropped;
- an empty path becomes "/";
- percent-encodings upper-cased, and those of unreserved characters decoded;
- the fragment removed (never sent, RFC 9110 sec. 4.2.5); the query kept verbatim.

The host is part of the key, so the same path on two origins never shares.
"""

from __future__ import annotations

import hashlib
import re

from vmc.core.errors import URIError

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_AUTHORITY = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\[\]@/?#]+))(?::(?P<port>\d{0,5}))?$"
)


def _pct_normalise(s: str) -> str:
    def fix(m: re.Match[str]) -> str:
        b = int(m.group(1), 16)
        return chr(b) if b in _UNRESERVED else "%" + m.group(1).upper()

    return _PCT.sub(fix, s)


def split_authority(authority: str, scheme: str = "http") -> tuple[str, int]:
    """Split ``host[:port]`` (IPv6 in brackets) into a lower-cased host and a port."""
    m = _AUTHORITY.match(authority.strip())
    if m is None:
        raise URIError(f"bad authority {authority!r}")
    host = (m.group("v6") or m.group("host") or "").lower()
    if not host:
        raise URIError(f"empty host in {authority!r}")
    port_s = m.group("port")
    port = int(port_s) if port_s else _DEFAULT_PORTS.get(scheme, 80)
    if not 0 < port < 65536:
        raise URIError(f"bad port in {authority!r}")
    return host, port


def format_authority(host: str, port: int, scheme: str = "http") -> str:
    """``host[:port]`` with the default port left out and IPv6 literals bracketed."""
    h = f"[{host}]" if ":" in host else host
    return h if _DEFAULT_PORTS.get(scheme) == port else f"{h}:{port}"


def normalise_uri(target: str, host: str | None = None, scheme: str = "http") -> str:
    """The normalised absolute URI of a request.

    ``target`` is the request-target: absolute-form (``http://h/p``) or
    origin-form (``/p?q``) with ``host`` the Host field value (RFC 9112 sec. 3.2).
    Raises :class:`URIError` when no absolute URI can be formed.
    """
    target = target.split("#", 1)[0]
    low = target[:8].lower()
    if low.startswith("http://") or low.startswith("https://"):
        scheme, rest = target.split("://", 1)
        scheme = scheme.lower()
        slash = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        authority, path = rest[:slash], rest[slash:]
        if "@" in authority:
            raise URIError("userinfo is not allowed in an http(s) URI (RFC 9110 sec. 4.2.4)")
    elif target.startswith("/"):
        if not host:
            raise URIError("origin-form target without a Host")
        authority, path = host, target
    else:
        raise URIError(f"unsupported request-target {target[:60]!r}")
    h, port = split_authority(authority, scheme)
    if not path.startswith("/"):
        path = "/" + path
    if "?" in path:
        p, q = path.split("?", 1)
        path = _pct_normalise(p) + "?" + q
    else:
        path = _pct_normalise(path)
    return f"{scheme}://{format_authority(h, port, scheme)}{path}"


def request_key(target: str, host: str | None = None, scheme: str = "http") -> str:
    """Hex MD5 of :func:`normalise_uri` (paper sec. 3.2)."""
    uri = normalise_uri(target, host, scheme)
    return hashlib.md5(uri.encode("utf-8", "surrogateescape")).hexdigest()
