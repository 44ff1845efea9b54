"""The sharing decisions and their state, sans-IO (issue 19 item 2; paper sec. 2, 3.2).

Which stream a request joins, what it is answered, where each of its bytes comes
from (the in-memory window, the disk store, the origin by Range, or the live
stream), when a slow sharer is detached, and when a fetch is refused sharing:
all of it is decided here, on plain state, with the time passed in.
:mod:`vmc.core.machine` asks these very objects and functions (typed inputs in,
typed actions out), and both drivers run that machine: ``vmc proxy``
(:mod:`vmc.aio.proxy`, sockets through :mod:`vmc.aio.pump`) and :mod:`vmc.sim`
(simulated time).

Nothing here reads a clock, touches a socket or a file: the disk copy is seen
through :class:`DiskCopy` (``holds``, ``complete``, ``close``).

Theory of operation. :class:`Sharing` keeps the registry: ``sessions`` (live:
PENDING or STREAMING, one per key), ``finished`` (DONE and whole on disk, reused
while fresh) and ``buffered`` (sessions whose window is charged against the
global buffer budget). :meth:`Sharing.admit` answers a request with an
:class:`Admission`: START a session, JOIN one (with the :class:`~vmc.core.plan.Plan`
of its answer), or PASSTHROUGH (unshared, with the reason counted). A request
that finds a PENDING session asks :meth:`Sharing.pending` first and waits for
the head (bounded by ``join_wait``: the driver's timer). While serving bytes
``[pos, end)`` the driver asks :func:`next_step` before every step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, TypeVar

from vmc.core import policy, ranges
from vmc.core.errors import RangeError
from vmc.core.plan import Plan, plan_join
from vmc.core.queue import ClientQueue
from vmc.core.reasons import NotShared
from vmc.core.session import DONE, PENDING, STREAMING, DiskCopy, SharedObject
from vmc.core.stats import Stats

__all__ = ["Admission", "Admit", "DiskCopy", "SharedObject", "Sharing", "Step",
           "answer_continues", "feed", "may_resume", "next_step"]


class Step(Enum):
    """Where the next bytes of a response come from (:func:`next_step`)."""

    WINDOW = "window"
    """The session's in-memory window holds ``pos``."""
    DISK = "disk"
    """``pos`` left the window; the disk copy holds it."""
    PATCH_AND_FOLLOW = "patch+follow"
    """Gone from both: take the live stream from the edge now (bounded queue) while
    ``[pos, edge)`` comes from the origin by Range, then drain the queue."""
    PATCH = "patch"
    """Gone from both, and no live stream to take (or already detached): the origin by Range."""
    LIVE = "live"
    """``pos`` is the live edge: follow the stream (detached when the queue overflows)."""
    FAILED = "failed"
    """The stream failed before ``pos`` and will not come back: a clean error."""


def next_step(s: SharedObject, pos: int, end: int, patch_budget: int, detached: bool) -> Step:
    """Where byte ``pos`` of a response ending at ``end`` comes from now."""
    buf = s.buffer
    if pos < buf.received:
        if buf.holds(pos):
            return Step.WINDOW
        if s.spill is not None and s.spill.holds(pos):
            return Step.DISK
        if s.live and patch_budget > 0 and buf.received < end and not detached:
            return Step.PATCH_AND_FOLLOW
        return Step.PATCH
    if s.state == STREAMING:
        return Step.LIVE
    return Step.FAILED


class Subscriber(Protocol):
    """Whoever takes the live stream through a bounded queue (the proxy's wake-up holder, the
    machine's reader)."""

    @property
    def queue(self) -> ClientQueue | None:
        """Its live queue."""


S = TypeVar("S", bound=Subscriber)


def feed(s: SharedObject, data: bytes, subscribers: Iterable[S], stats: Stats) -> list[S]:
    """The next origin bytes of ``s``'s stream: into the window, the disk copy (given up when a
    write fails: joiners then fall back to the origin by Range) and every subscriber's queue.
    Returns the subscribers whose queue overflowed: detached, to go on alone (they are counted;
    the driver stops feeding them). Check :meth:`SharedObject.fits` first."""
    off = s.buffer.received
    s.buffer.append(data)
    if s.spill is not None and not s.spill.write(off, data):
        s.spill = None
    stats.peak_buffer_bytes = max(stats.peak_buffer_bytes, s.buffer.memory)
    detached = []
    for sub in subscribers:
        q = sub.queue
        if q is None:
            continue
        if not q.push(off, data):
            detached.append(sub)
            stats.detached += 1
        else:
            stats.peak_queue_bytes = max(stats.peak_queue_bytes, q.queued)
    return detached


def may_resume(s: SharedObject, tries: int, attempts: int, retry_by_range: bool) -> bool:
    """After ``tries`` resumes, may the broken stream be asked again from its live edge (Range +
    If-Range: needs a strong validator)?"""
    return retry_by_range and s.validators.can_patch_from_origin() and tries < attempts


def answer_continues(s: SharedObject, status: int, headers: policy.Headers, first: int,
                     to_end: bool) -> bool:
    """Is the origin's answer to a Range request from ``first`` exactly bytes of ``s``'s
    representation (206, Content-Range from ``first``, to its end when ``to_end``: a resume), so
    it may be stitched onto the stream (RFC 9110 sec. 13.1.5, 14.4, 15.3.7)?"""
    if status != 206:
        return False
    try:
        cr = ranges.parse_content_range(policy.get(headers, b"content-range") or b"")
    except RangeError:
        return False
    if cr.first != first or (to_end and (cr.last != s.length - 1 or cr.length != s.length)):
        return False
    return policy.same_representation(s.validators, policy.validators_of(status, headers))


class Admit(Enum):
    """What a request gets (:meth:`Sharing.admit`)."""

    START = "start"
    """First for its key: fetch from the origin, others may join."""
    JOIN = "join"
    """Join the live (or finished, on disk) session: answered by ``plan``."""
    PASSTHROUGH = "passthrough"
    """Unshared: the request goes to the origin as it is (``reason`` counted)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer of :meth:`Sharing.admit`."""

    kind: Admit
    """Start, join or pass through."""
    reason: NotShared = NotShared.SHAREABLE
    """Why not shared (PASSTHROUGH only)."""
    session: SharedObject | None = None
    """The session joined (JOIN only)."""
    plan: Plan | None = None
    """The joiner's answer: status, span, mode (JOIN only)."""


class Sharing:
    """The registry of shared fetches and the decisions on it (one per proxy)."""

    def __init__(self, stats: Stats, window: int, buffer_budget: int, sharing: bool = True,
                 disk: bool = False) -> None:
        self.stats = stats
        self.window = window
        self.buffer_budget = buffer_budget
        self.sharing = sharing
        #: A disk store exists: finished objects whole on disk are kept for reuse.
        self.disk = disk
        self.sessions: dict[str, SharedObject] = {}
        #: Finished sessions whose whole body is on disk, by key (served while fresh).
        self.finished: dict[str, SharedObject] = {}
        #: Sessions whose buffer is (or may still be) held: charged against ``buffer_budget``.
        self.buffered: set[SharedObject] = set()

    # ------------------------------------------------------------------ buffer budget
    @staticmethod
    def charge(s: SharedObject) -> int:
        """What a session can hold: its window, or its length when smaller; bytes held while its
        length is unknown (issue 13 item 9: never a whole window for a response not yet seen)."""
        if s.state == PENDING:
            return s.buffer.memory
        return min(s.buffer.window, s.length)

    @property
    def committed(self) -> int:
        """Bytes the buffered sessions may hold at most (see :meth:`charge`)."""
        return sum(self.charge(s) for s in self.buffered)

    def budget_allows(self, extra: int) -> bool:
        return self.buffer_budget <= 0 or self.committed + extra <= self.buffer_budget

    # ------------------------------------------------------------------ admission
    def lookup(self, key: str) -> SharedObject | None:
        """The live session for ``key``, else the finished one, else None."""
        return self.sessions.get(key) or self.finished.get(key)

    def pending(self, key: str) -> SharedObject | None:
        """The session for ``key`` when its origin head is still awaited (the driver waits for it,
        at most ``join_wait``, before :meth:`admit`)."""
        s = self.lookup(key)
        return s if s is not None and s.state == PENDING else None

    def admit(self, method: bytes, headers: policy.Headers, key: str, upstream: tuple[str, int],
              host: bytes, now: float) -> Admission:
        """Start, join or pass through one request for ``key`` (headers lower-cased, as h11's)."""
        verdict = policy.request_verdict(method, headers)
        if not self.sharing:
            verdict = policy.Verdict(False, NotShared.SHARING_OFF)
        if not verdict:
            return self._unshared(verdict.reason)
        s = self.lookup(key)
        if s is not None and self.joinable(s, headers, upstream, host, now):
            p = plan_join(method, headers, s.length, s.buffer.received, s.validators)
            on_disk = s.spill is not None and s.spill.holds(p.first)
            if (p.first < s.buffer.base and p.end > p.first and not on_disk
                    and not s.validators.can_patch_from_origin()):
                # The bytes this answer starts with have left the window and, without a strong
                # validator, cannot be patched from the origin safely: fetch on its own instead.
                return self._unshared(NotShared.PREFIX_UNPATCHABLE)
            return Admission(Admit.JOIN, session=s, plan=p)
        if method == b"HEAD" or policy.get(headers, b"range") is not None:
            # nothing to share: not counted
            return Admission(Admit.PASSTHROUGH, NotShared.SHAREABLE)
        if not self.budget_allows(1):
            # The live sessions already hold the whole global budget: fetch unshared (no buffer).
            return self._unshared(NotShared.BUFFER_BUDGET)
        return Admission(Admit.START)

    def _unshared(self, reason: NotShared) -> Admission:
        self.stats.not_shared[reason] += 1
        return Admission(Admit.PASSTHROUGH, reason)

    def joinable(self, s: SharedObject, headers: policy.Headers, upstream: tuple[str, int],
                 host: bytes, now: float) -> bool:
        """May a request (``headers``, for ``upstream`` under ``host``) be served from ``s`` at
        ``now``?"""
        if s.state == DONE:  # a finished object, whole on disk
            if self.finished.get(s.key) is not s or s.spill is None or not s.spill.complete:
                return False
        elif self.sessions.get(s.key) is not s or s.state != STREAMING:
            return False
        if s.upstream != upstream or s.host != host:
            return False  # same URI via another origin address (transparent mode): never mixed
        if policy.vary_signature(s.vary_fields, headers) != s.vary_sig:
            self.stats.not_shared[NotShared.VARY_MISMATCH] += 1
            return False
        resident = now - s.received_at
        if not s.freshness.fresh(resident):
            # RFC 9111 sec. 4.2: no reuse without validation
            self.stats.not_shared[NotShared.STALE] += 1
            return False
        limit = policy.request_max_age(headers)
        if limit is not None and s.freshness.age(resident) > limit:
            self.stats.not_shared[NotShared.REQUEST_MAX_AGE] += 1  # RFC 9111 sec. 5.2.1.1
            return False
        return True

    def head_verdict(
        self, status: int, headers: Sequence[tuple[bytes, bytes]], wall: float
    ) -> policy.Verdict:
        """May the origin's response to a START be shared (policy, then the buffer budget)?"""
        verdict = policy.response_verdict(status, headers, wall)
        if verdict:
            length = policy.validators_of(status, headers).length or 0
            if not self.budget_allows(min(self.window, length)):
                # The live sessions already hold the global budget: relay this one unshared.
                verdict = policy.Verdict(False, NotShared.BUFFER_BUDGET)
        return verdict

    # ------------------------------------------------------------------ life cycle
    def open(self, s: SharedObject) -> None:
        """A START's session enters the registry (PENDING)."""
        self.sessions[s.key] = s

    def streaming(self, s: SharedObject) -> None:
        """Its shareable head arrived: its window is charged from now on."""
        self.buffered.add(s)
        self.stats.sessions += 1

    def drop(self, s: SharedObject) -> bool:
        """The origin fetch ended (or never ran): ``s`` leaves the live registry. True when it is
        kept as finished (whole on disk), which the driver tells its disk store."""
        if self.sessions.get(s.key) is s:
            del self.sessions[s.key]
        kept = False
        if s.state == DONE and s.spill is not None and s.spill.complete and self.disk:
            self.keep(s)
            kept = True
        if s.readers <= 0:
            s.buffer.clear()
            self.buffered.discard(s)
            if self.finished.get(s.key) is not s and s.spill is not None:
                s.spill.close()
        return kept

    def keep(self, s: SharedObject) -> None:
        """``s`` (DONE, whole on disk) is the finished object of its key from now on, kept for
        later requests while fresh; an older one of that key is forgotten."""
        old = self.finished.get(s.key)
        if old is not None and old is not s:
            self.forget(old)
        self.finished[s.key] = s

    def forget(self, s: SharedObject) -> None:
        """A finished object leaves the store (evicted or replaced); its copy closes once unread."""
        if self.finished.get(s.key) is s:
            del self.finished[s.key]
        if s.readers <= 0 and s.spill is not None:
            s.spill.close()

    def release(self, s: SharedObject) -> bool:
        """One reader is done with ``s``; True when the origin fetch has no reader left and must be
        abandoned (the driver cancels it; its end calls :meth:`drop`)."""
        s.readers -= 1
        if s.readers <= 0 and s.state != STREAMING:
            s.buffer.clear()
            self.buffered.discard(s)
            kept = self.finished.get(s.key) is s or self.sessions.get(s.key) is s
            if s.spill is not None and not kept:
                # neither kept as finished nor awaiting the fetch's end (drop decides)
                s.spill.close()
        return s.readers <= 0 and s.state == STREAMING
