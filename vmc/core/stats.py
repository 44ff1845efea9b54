"""Proxy statistics: origin bytes vs client bytes, per-request TTFB and completion.

The paper measures "bandwidth saving" (bytes not fetched from the origin) and
latency (sec. 3.3, Table 2). We count body bytes on both sides of the proxy:

- ``origin_bytes``: response body bytes read from origins (all fetches: streams,
  range patches, detached clients, pass-through);
- ``client_bytes``: response body bytes written to clients;
- ``sharing_ratio`` = client_bytes / origin_bytes (1.0 = no sharing; N = N clients per origin copy);
- ``bandwidth_saving`` = 1 - origin_bytes / client_bytes (the paper's "bandwidth saving %").

Times are passed in (``now``, seconds, any monotonic origin); nothing here reads a clock.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import asdict, dataclass, field

from vmc.core.reasons import NotShared, Refused, by_name


@dataclass(slots=True)
class RequestRecord:
    """One client request as the proxy saw it."""

    id: int
    """Sequence number."""
    method: str
    """Request method."""
    uri: str
    """Normalised absolute URI (or the raw target when none could be formed)."""
    started: float
    """``now`` when the request head was parsed."""
    mode: str = "pending"
    """How it was served: origin (started a session), joined, joined-vmc, range, passthrough, local, error."""
    status: int = 0
    """Status code sent."""
    offset: int = 0
    """Stream offset at which a joiner joined (0 for the first)."""
    client_bytes: int = 0
    """Body bytes written to this client."""
    origin_bytes: int = 0
    """Origin body bytes fetched on behalf of this request alone (patches, detached fetch)."""
    ttfb: float | None = None
    """Seconds from request to first body byte written (None if none)."""
    completion: float | None = None
    """Seconds from request to last byte written (None if it did not complete)."""
    detached: bool = False
    """True if the client was detached from the live stream for being slow."""
    error: str = ""
    """Why it failed, when it did."""


@dataclass
class Stats:
    """Counters and a bounded log of recent requests."""

    keep: int = 2000
    origin_bytes: int = 0
    client_bytes: int = 0
    origin_requests: int = 0
    sessions: int = 0
    joins: int = 0
    detached: int = 0
    transparent: int = 0
    #: Shared streams that broke off and were resumed by Range (attempts, successes, final failures).
    stream_retries: int = 0
    stream_resumed: int = 0
    stream_failures: int = 0
    #: Requests the proxy answered with its own error, by reason.
    refused: Counter[Refused] = field(default_factory=Counter)
    #: Requests fetched on their own instead of shared, by reason.
    not_shared: Counter[NotShared] = field(default_factory=Counter)
    peak_buffer_bytes: int = 0
    peak_queue_bytes: int = 0
    _next_id: int = 0
    records: deque = field(default_factory=deque)

    def new_request(self, method: str, uri: str, now: float) -> RequestRecord:
        """Start a record for a request parsed at ``now``."""
        self._next_id += 1
        rec = RequestRecord(self._next_id, method, uri, now)
        self.records.append(rec)
        while len(self.records) > self.keep:
            self.records.popleft()
        return rec

    @staticmethod
    def wrote(rec: RequestRecord, n: int, now: float) -> None:
        """Record ``n`` body bytes written to rec's client at ``now`` (call via :meth:`client`)."""
        if n and rec.ttfb is None:
            rec.ttfb = now - rec.started
        rec.client_bytes += n

    def client(self, rec: RequestRecord, n: int, now: float) -> None:
        """Count ``n`` body bytes sent to a client."""
        self.client_bytes += n
        self.wrote(rec, n, now)

    def origin(self, n: int, rec: RequestRecord | None = None) -> None:
        """Count ``n`` body bytes received from an origin (on behalf of ``rec`` alone, if given)."""
        self.origin_bytes += n
        if rec is not None:
            rec.origin_bytes += n

    @staticmethod
    def done(rec: RequestRecord, now: float) -> None:
        """Mark rec complete at ``now``."""
        rec.completion = now - rec.started

    @property
    def sharing_ratio(self) -> float | None:
        """client bytes per origin byte (None before any origin byte)."""
        return self.client_bytes / self.origin_bytes if self.origin_bytes else None

    @property
    def bandwidth_saving(self) -> float | None:
        """1 - origin/client (None before any client byte)."""
        return 1 - self.origin_bytes / self.client_bytes if self.client_bytes else None

    def snapshot(self, recent: int = 100) -> dict:
        """JSON-ready view for the status endpoint."""
        recs = list(self.records)[-recent:] if recent else []
        done = [r.completion for r in self.records if r.completion is not None]
        ttfbs = [r.ttfb for r in self.records if r.ttfb is not None]
        return {
            "origin_bytes": self.origin_bytes,
            "client_bytes": self.client_bytes,
            "sharing_ratio": self.sharing_ratio,
            "bandwidth_saving": self.bandwidth_saving,
            "origin_requests": self.origin_requests,
            "sessions": self.sessions,
            "joins": self.joins,
            "detached": self.detached,
            "transparent": self.transparent,
            "stream_retries": self.stream_retries,
            "stream_resumed": self.stream_resumed,
            "stream_failures": self.stream_failures,
            "refused": by_name(self.refused),
            "not_shared": by_name(self.not_shared),
            "peak_buffer_bytes": self.peak_buffer_bytes,
            "peak_queue_bytes": self.peak_queue_bytes,
            "requests": self._next_id,
            "mean_ttfb": sum(ttfbs) / len(ttfbs) if ttfbs else None,
            "mean_completion": sum(done) / len(done) if done else None,
            "recent": [asdict(r) for r in recs],
        }
