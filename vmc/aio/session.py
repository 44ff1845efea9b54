"""One shared origin fetch: its buffer, subscribers and the pump task (paper sec. 2, 3.2).

A :class:`Session` exists while one whole-object GET for a URI key is in
flight. The pump reads the origin body, appends it to the bounded
:class:`~vmc.core.buffer.SessionBuffer` and offers each chunk to every
subscriber's bounded :class:`~vmc.core.queue.ClientQueue`; it never waits for a
client, so a slow client cannot stall the others (its queue overflows and it is
detached). When the stream ends, fails, or nobody reads it any more, the
session leaves the registry. Its body is also written to the proxy's disk store
(:mod:`vmc.aio.spill`), if it has one, so what left the window is read back from
there; a finished session whose whole body is on disk is kept by the proxy and
joined, while fresh, like a live one. States and their transitions:
:mod:`vmc.core.states` (changed only by :meth:`Session.move`).

Origin failure mid-stream (issue 6, "Reliability"): when the origin body breaks
off, the pump itself asks the origin for the rest by Range, from the live edge,
with If-Range (the session's strong validator), and carries on feeding the same
buffer and queues: one retry serves every sharer at once, and they never see
the break. The retry is bounded (``attempts``); when the origin's answer shows a
different representation (a full 200 because If-Range failed, or other
validators) or attempts run out, the session fails and every sharer's response
is cut short, a clean error (RFC 9112 sec. 6.3: an incomplete message).

The resume keeps the broken connection's upstream-limiter slot (it is not handed
to a queued request in between, which would starve the resume), and a full cap
(:class:`~vmc.aio.upstream.UpstreamBusy`) is not counted as an attempt.

Cleanup never depends on the pump coroutine having started: :meth:`Session.start`
adds a done-callback that closes the origin response, releases the slot, fails
the session if it is still streaming and drops it from the registry, also when
the task was cancelled before its first step (the last reader left at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from vmc.aio.spill import SpillFile
from vmc.aio.upstream import NO_SLOT, Slot, UpstreamBusy, UpstreamError, UpstreamResponse
from vmc.core.queue import ClientQueue
from vmc.core.session import SharedObject
from vmc.core.sharing import feed
from vmc.core.states import ACTIVE, SessionState
from vmc.core.stats import Stats

PENDING, STREAMING, DONE, FAILED = SessionState.PENDING, SessionState.STREAMING, SessionState.DONE, SessionState.FAILED


class RepresentationChanged(UpstreamError):
    """The origin's answer to a resume is not the rest of the same representation: never retried."""


#: ``refetch(offset, slot)`` -> the origin's response for bytes ``[offset, length)`` of the same
#: representation, on a new connection using the caller's limiter ``slot`` (owned by the response
#: on success; still the caller's when it raises).
Refetch = Callable[[int, Slot], Awaitable[UpstreamResponse]]


class Subscriber:
    """A client taking the live stream from ``queue.next_offset``."""

    __slots__ = ("queue", "wake")

    def __init__(self, offset: int, limit: int) -> None:
        self.queue = ClientQueue(offset, limit)
        self.wake = asyncio.Event()


class Session(SharedObject):
    """In-flight shared fetch of one representation: the sans-IO state (:class:`SharedObject`)
    plus the pump task, the head-arrived event and the subscribers' wake-up events."""

    def __init__(
        self,
        key: str,
        uri: str,
        upstream: tuple[str, int],
        target: bytes,
        upstream_headers: list[tuple[bytes, bytes]],
        window: int,
    ) -> None:
        super().__init__(key, uri, upstream, target, upstream_headers, window)
        self.ready = asyncio.Event()
        #: The body on disk as it arrives (what left the window is read back from here), or None.
        self.spill: SpillFile | None = None
        self.subscribers: set[Subscriber] = set()
        self.pump_task: asyncio.Task | None = None
        #: The limiter slot held between a break and its resume.
        self._slot: Slot = NO_SLOT

    def subscribe(self, offset: int, limit: int) -> Subscriber:
        """Take the live stream from ``offset`` >= the live edge (earlier bytes are skipped)."""
        assert offset >= self.buffer.received and self.live
        sub = Subscriber(offset, limit)
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        """Stop feeding ``sub``."""
        self.subscribers.discard(sub)

    def move(self, state: SessionState, error: str = "") -> bool:
        """The one place the state changes (:meth:`SharedObject.move`); a final state closes every
        subscriber's queue and wakes it."""
        final = super().move(state, error)
        if final:
            for sub in self.subscribers:
                sub.queue.close()
                sub.wake.set()
            self.subscribers.clear()
        return final

    def start(
        self,
        resp: UpstreamResponse,
        stats: Stats,
        on_end: Callable[[Session], None],
        refetch: Refetch | None = None,
        attempts: int = 0,
        backoff: float = 0.0,
    ) -> asyncio.Task:
        """Run :meth:`pump` as a task whose cleanup happens even if it is cancelled before it starts."""
        task = asyncio.create_task(self.pump(resp, stats, refetch, attempts, backoff))
        self.pump_task = task

        def done(t: asyncio.Task) -> None:
            resp.close()  # idempotent
            self._slot.release()
            self._slot = NO_SLOT
            if self.state in ACTIVE:
                self.move(FAILED, "abandoned: no readers left")
            if not t.cancelled():
                t.exception()  # retrieved: the pump handles its own errors
            on_end(self)

        task.add_done_callback(done)
        return task

    async def pump(
        self,
        resp: UpstreamResponse,
        stats: Stats,
        refetch: Refetch | None = None,
        attempts: int = 0,
        backoff: float = 0.0,
    ) -> None:
        """Read the origin body into the buffer and the subscriber queues until it ends.

        If the body breaks off and ``refetch`` is given, resume from the live edge with
        ``refetch(received, slot)`` up to ``attempts`` times (waiting ``backoff * n`` s before the
        n-th), for all subscribers at once. Run it through :meth:`start`, whose done-callback
        drops the session from the registry.
        """
        cur: UpstreamResponse | None = resp
        tries = busy = 0
        try:
            while True:
                try:
                    if cur is None:
                        cur = await refetch(self.buffer.received, self._slot)  # type: ignore[misc]
                        self._slot = NO_SLOT  # the response owns it now
                    await self._drain(cur, stats)
                    if tries:
                        stats.stream_resumed += 1
                    self.move(DONE)
                    return
                except RepresentationChanged as exc:
                    stats.stream_failures += 1
                    self.move(FAILED, f"not resumed: {exc}")
                    return
                except UpstreamBusy as exc:
                    # No slot to resume with (none was held): waiting for one is not an attempt.
                    busy += 1
                    if busy > max(attempts, 1):
                        stats.stream_failures += 1
                        self.move(FAILED, f"{exc} (upstream busy)")
                        return
                    await asyncio.sleep(max(backoff, 0.01) * busy)
                except UpstreamError as exc:
                    if cur is not None:
                        if refetch is not None and tries < attempts:
                            self._slot = cur.detach_slot()  # keep the slot for the resume
                        cur.close()
                        cur = None
                    if refetch is None or tries >= attempts:
                        stats.stream_failures += 1
                        self.move(FAILED, f"{exc} (after {tries} resume attempts)")
                        return
                    tries += 1
                    self.resumes = tries
                    stats.stream_retries += 1
                    if backoff > 0:
                        await asyncio.sleep(backoff * tries)
        except asyncio.CancelledError:
            self.move(FAILED, "abandoned: no readers left")
            raise
        except Exception as exc:  # noqa: BLE001 - never leave subscribers waiting on a dead pump
            self.move(FAILED, f"pump error: {exc!r}")
        finally:
            if cur is not None:
                cur.close()
            self._slot.release()
            self._slot = NO_SLOT

    async def _drain(self, resp: UpstreamResponse, stats: Stats) -> None:
        """Append one origin response's body (whole, or the rest by Range) to the stream."""
        async for chunk in resp.chunks():
            stats.origin(len(chunk))
            if not self.fits(len(chunk)):
                raise RepresentationChanged("origin sent more than Content-Length")
            subs = list(self.subscribers)
            for sub in feed(self, chunk, subs, stats):
                self.subscribers.discard(sub)  # detached: it goes on alone
            for sub in subs:  # the detached too: they must see it
                sub.wake.set()
        if self.buffer.received != self.length:
            raise UpstreamError("origin body shorter than Content-Length")
