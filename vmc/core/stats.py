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
from typing import Any

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
    """How it was served: origin (started a session), joined, joined-vmc, range, passthrough,
    local, error."""
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


#: Upper bounds (seconds) of the time histograms' buckets; one more bucket takes the rest.
TIME_BOUNDS: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
                                  2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


@dataclass
class Histogram:
    """Counts of values by bucket (``x <= bound``), with their count, sum and maximum."""

    bounds: tuple[float, ...] = TIME_BOUNDS
    counts: list[int] = field(default_factory=list)
    count: int = 0
    total: float = 0.0
    max: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def add(self, x: float) -> None:
        i = next((k for k, b in enumerate(self.bounds) if x <= b), len(self.bounds))
        self.counts[i] += 1
        self.count += 1
        self.total += x
        self.max = max(self.max, x)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def to_json(self) -> dict[str, Any]:
        return {"bounds": list(self.bounds), "counts": list(self.counts), "count": self.count,
                "mean": self.mean, "max": self.max}


@dataclass
class Summary:
    """Every request, in counts and histograms: what the bounded detail ring cannot keep."""

    requests: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: int = 0
    detached: int = 0
    client_bytes: int = 0
    ttfb: Histogram = field(default_factory=Histogram)
    completion: Histogram = field(default_factory=Histogram)

    def add(self, r: RequestRecord) -> None:
        self.requests += 1
        self.modes[r.mode] += 1
        self.statuses[r.status] += 1
        self.errors += bool(r.error)
        self.detached += r.detached
        self.client_bytes += r.client_bytes
        if r.ttfb is not None:
            self.ttfb.add(r.ttfb)
        if r.completion is not None:
            self.completion.add(r.completion)

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "modes": dict(sorted(self.modes.items())),
                "statuses": {str(k): n for k, n in sorted(self.statuses.items())},
                "errors": self.errors,
                "detached": self.detached, "client_bytes": self.client_bytes,
                "ttfb": self.ttfb.to_json(), "completion": self.completion.to_json()}


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
    #: Shared streams that broke off and were resumed by Range (attempts, successes, final
    #: failures).
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
    records: deque[RequestRecord] = field(default_factory=deque)
    #: Requests that left ``records`` (folded in as they left): with the ring, every request.
    past: Summary = field(default_factory=Summary)

    def new_request(self, method: str, uri: str, now: float) -> RequestRecord:
        """Start a record for a request parsed at ``now``."""
        self._next_id += 1
        rec = RequestRecord(self._next_id, method, uri, now)
        self.records.append(rec)
        while len(self.records) > self.keep:
            self.past.add(self.records.popleft())
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

    def summary(self) -> Summary:
        """Every request so far: the folded past plus the records still in the ring."""
        out = Summary(self.past.requests, Counter(self.past.modes), Counter(self.past.statuses),
                      self.past.errors, self.past.detached, self.past.client_bytes,
                      Histogram(counts=list(self.past.ttfb.counts), count=self.past.ttfb.count,
                                total=self.past.ttfb.total, max=self.past.ttfb.max),
                      Histogram(counts=list(self.past.completion.counts),
                                count=self.past.completion.count,
                                total=self.past.completion.total, max=self.past.completion.max))
        for r in self.records:
            out.add(r)
        return out

    def snapshot(self, recent: int = 100) -> dict[str, Any]:
        """JSON-ready view for the status endpoint."""
        recs = list(self.records)[-recent:] if recent else []
        summary = self.summary()
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
            "mean_ttfb": summary.ttfb.mean,
            "mean_completion": summary.completion.mean,
            "summary": summary.to_json(),
            "recent": [asdict(r) for r in recs],
        }
