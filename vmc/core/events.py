"""The sharing machine's typed inputs, actions and events (:mod:`vmc.core.machine`).

Frozen, slotted dataclasses, one docstring line per field (house style: swift/core/events.py).
Inputs carry what happened (a client's request, the origin's head, body, end or
failure, a client taking its bytes or leaving); actions what the driver must do
(fetch from the origin, answer, send, finish, abort); events what was decided
(admitted how, patched, detached, finished).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vmc.core.reasons import Refused

if TYPE_CHECKING:
    from vmc.core.session import FinishedCopy

__all__ = [
    "Abort",
    "Action",
    "Admitted",
    "CancelFetch",
    "ClientGone",
    "Detached",
    "Drained",
    "Event",
    "Fetch",
    "Finish",
    "Finished",
    "Input",
    "Kept",
    "Interim",
    "OriginData",
    "OriginEnd",
    "OriginError",
    "OriginHead",
    "OriginInterim",
    "Patched",
    "Request",
    "Respond",
    "Send",
    "SendSpan",
]

# ---------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Request:
    """A client asks for ``uri`` (absolute, normalised by the driver)."""

    client: Hashable
    """The client (one request at a time per client)."""
    method: bytes
    """GET or HEAD shares; anything else passes through."""
    uri: str
    """Absolute URI; its MD5 is the session key."""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    """Request fields, lower-case names (h11's)."""
    body: bytes = b""
    """The request's body, whole (a pass-through sends it on; sharing needs none)."""
    origin: tuple[str, int] | None = None
    """Where its origin is (transparent mode: the connection's original destination, the URI
    keeping the client's Host); None: the URI's authority."""


@dataclass(frozen=True, slots=True)
class OriginHead:
    """The origin's response head for fetch ``fetch``."""

    fetch: int
    """Which :class:`Fetch`."""
    status: int
    """Status code."""
    headers: tuple[tuple[bytes, bytes], ...]
    """Response fields, lower-case names."""


@dataclass(frozen=True, slots=True)
class OriginInterim:
    """A 1xx response (not 100 or 101) before fetch ``fetch``'s final head (RFC 9110 sec. 15.2)."""

    fetch: int
    """Which :class:`Fetch`."""
    status: int
    """102, 103, ..."""
    headers: tuple[tuple[bytes, bytes], ...]
    """Its fields, names lower-case."""


@dataclass(frozen=True, slots=True)
class OriginData:
    """Body bytes of fetch ``fetch`` arrived (in order)."""

    fetch: int
    """Which :class:`Fetch`."""
    data: bytes
    """The bytes."""


@dataclass(frozen=True, slots=True)
class OriginEnd:
    """Fetch ``fetch``'s body ended normally."""

    fetch: int
    """Which :class:`Fetch`."""


@dataclass(frozen=True, slots=True)
class OriginError:
    """Fetch ``fetch`` failed (unreachable, broke off)."""

    fetch: int
    """Which :class:`Fetch`."""
    why: str
    """What went wrong."""
    busy: bool = False
    """Never sent: the upstream cap's queue wait ran out (the reader gets 503 + Retry-After)."""
    refusal: Refused = Refused.UPSTREAM_ERROR
    """What went wrong, as the answer's body and the counter name it (unreachable, closed...)."""
    status: int = 502
    """The answer to a reader that got no head yet (504 for a timeout)."""


@dataclass(frozen=True, slots=True)
class Drained:
    """``n`` bytes sent to ``client`` have left the proxy (its transport took them)."""

    client: Hashable
    """The client."""
    n: int
    """Bytes taken."""


@dataclass(frozen=True, slots=True)
class ClientGone:
    """``client``'s connection closed."""

    client: Hashable
    """The client."""


Input = (
    Request
    | OriginHead
    | OriginInterim
    | OriginData
    | OriginEnd
    | OriginError
    | Drained
    | ClientGone
)

# ---------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Fetch:
    """Open an origin request: GET ``uri``, bytes ``[first, end)`` by Range when ``ranged``."""

    fetch: int
    """Its id in later inputs."""
    uri: str
    """What to fetch."""
    method: bytes = b"GET"
    """Method (a pass-through keeps the client's)."""
    first: int = 0
    """First byte (a Range + If-Range request when ``ranged``)."""
    end: int | None = None
    """Byte after the last (None: to the end)."""
    if_range: bytes | None = None
    """The session's strong validator for If-Range."""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    """End-to-end request fields to send (the driver adds Host, Via, Range and If-Range)."""
    body: bytes = b""
    """Request body (a pass-through's)."""
    origin: tuple[str, int] | None = None
    """The address to connect to when it is not the URI's authority (transparent mode)."""

    @property
    def ranged(self) -> bool:
        return self.first > 0 or self.end is not None


@dataclass(frozen=True, slots=True)
class CancelFetch:
    """Close fetch ``fetch``'s origin connection; no more inputs for it."""

    fetch: int
    """Which."""


@dataclass(frozen=True, slots=True)
class Respond:
    """Send ``client`` a response head."""

    client: Hashable
    """The client."""
    status: int
    """Status code."""
    length: int | None
    """Content-Length (None: the origin's framing, pass-through)."""
    first: int = 0
    """First byte of the representation sent (Content-Range for a 206)."""
    total: int = 0
    """Representation length (Content-Range)."""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    """The origin's fields (framing and hop-by-hop ones are the driver's to drop), with ``age``
    for an answer reused from a session."""
    content_range: bytes | None = None
    """The origin's Content-Range, relayed as it is (a pass-through's 206 or 416); None: the
    driver makes it from ``first``, ``length`` and ``total``."""


@dataclass(frozen=True, slots=True)
class Interim:
    """Forward a 1xx response to ``client`` before its final answer (its first fetch's)."""

    client: Hashable
    """To whom."""
    status: int
    """The origin's 1xx status."""
    headers: tuple[tuple[bytes, bytes], ...]
    """The origin's fields (the driver keeps the end-to-end ones)."""


@dataclass(frozen=True, slots=True)
class Send:
    """Body bytes for ``client``."""

    client: Hashable
    """The client."""
    data: bytes
    """The bytes."""


@dataclass(frozen=True, slots=True)
class Finish:
    """``client``'s response is complete (the connection may be kept)."""

    client: Hashable
    """The client."""


@dataclass(frozen=True, slots=True)
class Abort:
    """Close ``client``'s connection before its response is complete (RFC 9112 sec. 6.3)."""

    client: Hashable
    """The client."""
    why: str
    """Why."""


@dataclass(frozen=True, slots=True)
class SendSpan:
    """Body bytes for ``client`` straight from a disk copy (the driver's zero-copy path:
    sendfile); only with ``MachineConfig.sendfile_min`` set."""

    client: Hashable
    """The client."""
    copy: object
    """The disk copy (its store's object: the pump's ``SpillFile``, with ``fd`` and ``read``)."""
    first: int
    """Offset of the first byte in the body (and in the copy)."""
    count: int
    """How many bytes (all on the copy already)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A finished object is kept whole on disk for later requests: a driver with several
    processes may offer it to the others (``vmc proxy --workers``: :mod:`vmc.aio.steer`);
    others ignore it."""

    copy: FinishedCopy
    """Its facts."""
    disk: object
    """Its disk copy (the proxy's ``SpillFile``)."""


Action = Fetch | CancelFetch | Respond | Interim | Send | SendSpan | Finish | Abort | Kept

# ---------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request was answered; ``mode``: origin (it started it), joined, joined-vmc, passthrough."""

    client: Hashable
    """The client."""
    key: str
    """Session key."""
    mode: str
    """How it is served (the status log's ``mode``)."""
    offset: int
    """The live edge when it joined (0 for the first)."""


@dataclass(frozen=True, slots=True)
class Patched:
    """Bytes ``[first, end)`` of ``client``'s answer are fetched from the origin by Range."""

    client: Hashable
    """The client."""
    key: str
    """Session key."""
    first: int
    """First byte asked."""
    end: int
    """Byte after the last asked."""


@dataclass(frozen=True, slots=True)
class Detached:
    """``client`` fell ``queue_limit`` behind the live stream at ``offset``: it goes on alone."""

    client: Hashable
    """The client."""
    key: str
    """Session key."""
    offset: int
    """Where the live stream left it."""


@dataclass(frozen=True, slots=True)
class Finished:
    """``client``'s answer ended: complete, or cut short (``error``)."""

    client: Hashable
    """The client."""
    key: str
    """Session key."""
    sent: int
    """Body bytes sent."""
    error: str = ""
    """Why it was cut short ("" when complete)."""


Event = Admitted | Patched | Detached | Finished
