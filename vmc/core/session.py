"""One shared origin fetch as the sharing decisions see it (sans-IO; :mod:`vmc.core.sharing`).

Its states and their one table of transitions are :mod:`vmc.core.states`; the
state changes only in :meth:`SharedObject.move`. :mod:`vmc.core.machine` uses it as
it is, on sockets and in simulated time alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from vmc.core import policy
from vmc.core.buffer import SessionBuffer
from vmc.core.states import ACTIVE, SessionState, check_transition

PENDING, STREAMING = SessionState.PENDING, SessionState.STREAMING
DONE, FAILED = SessionState.DONE, SessionState.FAILED


class DiskCopy(Protocol):
    """What the decisions need to know of an object's body on disk
    (:class:`vmc.aio.spill.SpillFile`)."""

    @property
    def complete(self) -> bool:
        """The whole body is on disk and readable."""

    def holds(self, first: int) -> bool:
        """Byte ``first`` can be read back."""

    def write(self, offset: int, data: bytes) -> bool:
        """Append ``data`` at ``offset``; False when the copy failed (it is then given up)."""

    def close(self) -> None:
        """Release the copy (idempotent)."""


class SharedObject:
    """One shared origin fetch of one representation: the state the decisions read."""

    def __init__(
        self,
        key: str,
        uri: str,
        upstream: tuple[str, int],
        target: bytes,
        upstream_headers: list[tuple[bytes, bytes]],
        window: int,
    ) -> None:
        self.key = key
        self.uri = uri
        self.upstream = upstream
        self.target = target
        #: Request headers sent upstream (Host first); reused for Range patches.
        self.upstream_headers = upstream_headers
        self.state: SessionState = PENDING
        self.verdict: policy.Verdict | None = None
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.validators = policy.Validators(None, None, None)
        self.length = 0
        self.vary_fields: tuple[bytes, ...] = ()
        self.vary_sig: tuple[bytes | None, ...] = ()
        #: Freshness of the origin's response as it arrived, and when (the driver's clock).
        self.freshness = policy.Freshness(None, 0.0)
        self.received_at = 0.0
        self.buffer = SessionBuffer(window)
        #: The body on disk as it arrives (what left the window is read back from here), or None.
        self.spill: DiskCopy | None = None
        #: Requests reading from this object now.
        self.readers = 0
        self.error = ""
        #: Times the origin stream was resumed by Range after breaking off.
        self.resumes = 0

    @property
    def live(self) -> bool:
        """True while the origin body is still flowing."""
        return self.state == STREAMING

    @property
    def host(self) -> bytes:
        """The Host sent upstream (a joiner must reach the same origin under the same name)."""
        return self.upstream_headers[0][1] if self.upstream_headers else b""

    def fits(self, n: int) -> bool:
        """May ``n`` more body bytes arrive (never past Content-Length)?"""
        return self.buffer.received + n <= self.length

    def move(self, state: SessionState, error: str = "") -> bool:
        """The one place the state changes (:data:`vmc.core.states.TRANSITIONS`); True when the new
        state is final (the driver then closes its subscribers)."""
        self.state = check_transition(self.state, state)
        if error:
            self.error = error
        return state not in ACTIVE

    def take_head(self, status: int, headers: policy.Headers, request_headers: policy.Headers,
                  verdict: policy.Verdict, wall: float, now: float) -> None:
        """The origin's shareable head arrived at ``now`` (``wall``: Unix time, for
        Date/Expires)."""
        self.received_at = now
        self.status = status
        self.validators = policy.validators_of(status, headers)
        self.length = self.validators.length or 0
        self.vary_fields = policy.vary_fields(headers)
        self.vary_sig = policy.vary_signature(self.vary_fields, request_headers)
        self.freshness = policy.freshness(headers, wall)
        self.verdict = verdict
        self.move(STREAMING)


@dataclass(frozen=True)
class FinishedCopy:
    """A finished object as another process of the same proxy needs it to serve the object
    from the same disk file (``vmc proxy --workers``, :mod:`vmc.aio.steer`): everything the
    sharing decisions read of a DONE :class:`SharedObject`, without its buffer or its file."""

    key: str
    uri: str
    upstream: tuple[str, int]
    target: bytes
    upstream_headers: tuple[tuple[bytes, bytes], ...]
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    validators: policy.Validators
    length: int
    vary_fields: tuple[bytes, ...]
    vary_sig: tuple[bytes | None, ...]
    freshness: policy.Freshness
    #: When its head arrived, on the monotonic clock every process of the machine shares.
    received_at: float
    verdict: policy.Verdict | None

    @classmethod
    def of(cls, s: SharedObject) -> FinishedCopy:
        return cls(s.key, s.uri, s.upstream, s.target, tuple(s.upstream_headers), s.status,
                   tuple(s.headers), s.validators, s.length, s.vary_fields, s.vary_sig,
                   s.freshness, s.received_at, s.verdict)

    def session(self, window: int) -> SharedObject:
        """A DONE :class:`SharedObject` with these facts (its ``spill`` is the caller's)."""
        s = SharedObject(self.key, self.uri, self.upstream, self.target,
                         list(self.upstream_headers), window)
        s.status, s.headers, s.validators = self.status, list(self.headers), self.validators
        s.length, s.vary_fields, s.vary_sig = self.length, self.vary_fields, self.vary_sig
        s.freshness, s.received_at, s.verdict = self.freshness, self.received_at, self.verdict
        # every byte came (on disk) and none is held in memory: a finished session's buffer
        s.buffer.received = s.buffer.base = self.length
        s.move(STREAMING)
        s.move(DONE)
        return s
