"""The sharing machine's records and settings (split out of :mod:`vmc.core.machine`, which
re-exports them): what an origin fetch is for (:class:`Kind`), one fetch in progress
(:class:`Flight`), one client's request while it is answered (:class:`Reader`), and the
settings the decisions use (:class:`MachineConfig`)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import Enum

from vmc.core.events import Request
from vmc.core.queue import ClientQueue
from vmc.core.session import SharedObject
from vmc.core.stats import RequestRecord


class Kind(Enum):
    """What an origin fetch is for."""

    STREAM = "stream"
    """A session's shared body (or its resume from the live edge)."""
    PATCH = "patch"
    """One client's missing bytes, by Range."""
    PASS = "pass"
    """One client's unshared request."""


@dataclass(slots=True)
class Flight:
    """One origin fetch in progress."""

    id: int
    kind: Kind
    client: Hashable | None = None
    session: SharedObject | None = None
    end: int = 0
    rejoin: bool = False
    first: int = 0


@dataclass(slots=True)
class Reader:
    """One client's request while it is answered."""

    client: Hashable
    req: Request
    key: str
    rec: RequestRecord
    session: SharedObject | None = None
    pos: int = 0
    end: int = 0
    inflight: int = 0
    queue: ClientQueue | None = None
    patch: Flight | None = None
    parked_until: float | None = None
    #: Since when it has waited on the live stream with nothing to send (``stall_timeout``).
    waiting_since: float | None = None
    #: Since when a full send window (or its last bytes) lies untaken (``client_write_timeout``).
    blocked_since: float | None = None
    responded: bool = False
    #: Counted in ``session.readers``.
    counted: bool = False
    #: A multipart/byteranges answer: the parts still to send (head, first, end), the tail.
    parts: list[tuple[bytes, int, int]] | None = None
    tail: bytes = b""


@dataclass
class MachineConfig:
    """The settings the decisions use (names, defaults: :class:`vmc.aio.config.ProxyConfig`)."""

    window: int = 8 << 20
    queue_limit: int = 1 << 20
    buffer_budget: int = 256 << 20
    patch_budget: int = 4 << 20
    disk_budget: int = 1 << 30
    join_wait: float = 10.0
    resume_attempts: int = 3
    retry_by_range: bool = True
    sharing: bool = True
    #: Bytes in flight to one client before the machine waits for :class:`Drained`.
    send_window: int = 256 << 10
    #: A sharer that gets no live byte for this long is aborted (0 = never; the proxy's 120 s).
    stall_timeout: float = 0.0
    #: A client that takes no byte of a full send window for this long is aborted (0 = never).
    client_write_timeout: float = 0.0
    #: The n-th resume of a broken stream waits ``resume_backoff * n`` s (0: asked at once).
    resume_backoff: float = 0.0
    #: Unix time at ``now == 0`` (for the origin's Date and Expires).
    epoch: float = 0.0
    #: Seeds the multipart boundaries (RFC 2046 5.1.1: a boundary must not occur in the
    #: body, so it may not be predictable from the request): the pump passes a secret random
    #: seed, the simulator a fixed one, since a core reads no random source of its own.
    seed: int = 0
    #: Disk spans of at least this many bytes leave as :class:`SendSpan` (at most
    #: ``sendfile_span`` each; the pump sends them by sendfile) instead of bytes read here;
    #: 0: never (the simulator's).
    sendfile_min: int = 0
    sendfile_span: int = 4 << 20
