"""Why a request was refused or not shared: the keys of the proxy's typed counters.

Each member's value is the name shown in ``/_vmc/status`` (``refused`` and
``not_shared``) and in a refusal's one-line body; docs/security/vmc-proxy.md
lists them. Both are ``str`` enums, so a member equals its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


class Refused(str, Enum):
    """A request answered with an error by the proxy itself (4xx/5xx), or a connection dropped."""

    MALFORMED = "malformed"
    HEAD_TIMEOUT = "head-timeout"
    BODY_TIMEOUT = "body-timeout"
    HTTP_VERSION = "http-version"
    HEADER_TOO_LARGE = "header-too-large"
    SMUGGLING = "smuggling"
    DUPLICATE_HOST = "duplicate-host"
    BODY_TOO_LARGE = "body-too-large"
    CONNECTION_LIMIT = "connection-limit"
    EVICTED_INCOMPLETE_HEAD = "evicted-incomplete-head"
    EVICTED_IDLE = "evicted-idle"
    STATUS_NOT_ALLOWED = "status-not-allowed"
    BAD_TARGET = "bad-target"
    UPSTREAM_NOT_ALLOWED = "upstream-not-allowed"
    UPSTREAM_BUSY = "upstream-busy"
    UPSTREAM_ERROR = "upstream-error"
    UPSTREAM_UNREACHABLE = "upstream-unreachable"
    UPSTREAM_CLOSED = "upstream-closed"
    UPSTREAM_TIMEOUT = "upstream-timeout"
    UPSTREAM_BAD_RESPONSE = "upstream-bad-response"


class NotShared(str, Enum):
    """Why a request was fetched on its own instead of starting or joining a shared stream."""

    SHAREABLE = "shareable"
    """Not a refusal: the verdict of a request or response that may be shared."""
    # requests (RFC 9111 sec. 3, 5.2.1)
    METHOD = "method"
    AUTHORIZATION = "authorization"
    COOKIE = "cookie"
    CONDITIONAL = "conditional"
    REQUEST_NO_STORE = "request-no-store"
    REQUEST_BODY = "request-body"
    # responses (RFC 9111 sec. 3, 5.2.2)
    STATUS_NOT_200 = "status-not-200"
    UNKNOWN_LENGTH = "unknown-length"
    NO_STORE = "no-store"
    PRIVATE = "private"
    SET_COOKIE = "set-cookie"
    VARY_STAR = "vary-star"
    MUST_REVALIDATE = "must-revalidate"
    # the proxy's own reasons
    SHARING_OFF = "sharing-off"
    BUFFER_BUDGET = "buffer-budget"
    PREFIX_UNPATCHABLE = "prefix-unpatchable"
    VARY_MISMATCH = "vary-mismatch"
    STALE = "stale"
    REQUEST_MAX_AGE = "request-max-age"


def by_name(counts: Mapping[Any, int]) -> dict[str, int]:
    """A typed counter as JSON-ready ``{name: count}``."""
    return {getattr(k, "value", k): n for k, n in counts.items()}
