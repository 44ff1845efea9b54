"""The sharing proxy as a sans-IO machine: typed inputs with the time in, typed actions out.

:class:`SharingMachine` runs the decisions of :mod:`vmc.core.sharing` (the same
:class:`~vmc.core.sharing.Sharing` registry, :meth:`~vmc.core.sharing.Sharing.admit`
and :func:`~vmc.core.sharing.next_step`) as an event-driven state machine, so a
driver that owns no coroutines per request runs them: ``vmc proxy``
(:mod:`vmc.aio.proxy`, behind :class:`vmc.core.http.HttpSharingCore`) and the
simulator (:mod:`vmc.sim`). Its shape is the one core protocol's
(:mod:`deliverykit.protocol`), with typed stream inputs instead of datagrams::

    machine.input_received(Request(...), now)      # every input, with the time
    for action in machine.actions_to_send(now): ...  # Fetch, Respond, Send, Finish, Abort, ...
    machine.get_timer(now) / machine.handle_timer(now)  # join_wait of requests parked on a head
    while (ev := machine.next_event()) is not None: ...  # Admitted, Patched, Detached, Finished

Why not ``DatagramCore`` itself: HTTP runs over byte streams whose opening,
closing and back-pressure (how much a client has taken) matter to the
decisions (a slow client is detached when its queue overflows); datagrams carry
none of that. The inputs below name them; an h11 layer that turns connection
bytes into :class:`Request` and :class:`Respond`/:class:`Send` back into bytes
sits outside (docs/vmc-sim.md, "One core protocol").

Flow control: the machine keeps at most ``send_window`` bytes in flight to a
client (sent, not yet reported by :class:`Drained`); the live stream is offered
to a client's bounded :class:`~vmc.core.queue.ClientQueue` and never waits for
it: a client that falls ``queue_limit`` behind is detached and continues on its
own (window, disk, origin by Range), as in the proxy.

Here too since the proxy moved onto the core (docs/vmc.md, "The proxy engine"): the
stall and client-write timeouts, the resume backoff, 1xx (``OriginInterim`` in, ``Interim`` out) and
multipart answers. The upstream cap is :mod:`vmc.core.fetchgate` in the HTTP core;
header rewriting is the driver's (it builds the head).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Hashable
from typing import Any

from vmc.core import policy
from vmc.core.events import (
    Abort,
    Action,
    Admitted,
    CancelFetch,
    ClientGone,
    Detached,
    Drained,
    Event,
    Fetch,
    Finish,
    Finished,
    Input,
    Interim,
    Kept,
    OriginData,
    OriginEnd,
    OriginError,
    OriginHead,
    OriginInterim,
    Patched,
    Request,
    Respond,
    Send,
    SendSpan,
)
from vmc.core.key import request_key, split_authority
from vmc.core.machine_state import Flight, Kind, MachineConfig, Reader
from vmc.core.memdisk import DiskStore, Evictable, MemoryCopy, MemoryDisk, Readable
from vmc.core.plan import VMC_HEADER, multipart_layout
from vmc.core.queue import ClientQueue
from vmc.core.reasons import Refused
from vmc.core.session import DONE, FAILED, STREAMING, DiskCopy, FinishedCopy, SharedObject
from vmc.core.sharing import Admit, Sharing, Step, answer_continues, feed, may_resume, next_step
from vmc.core.states import SessionState
from vmc.core.stats import Stats

CHUNK = 64 << 10
#: URIs whose key and origin the machine remembers (:meth:`SharingMachine._facts`).
_FACTS = 4096
Spans = tuple[tuple[int, int], ...]
Fields = tuple[tuple[bytes, bytes], ...]
#: Request fields never sent on (the driver sets Host; Range/If-Range are the machine's own).
#: The VMC answer field's word per plan mode (the proxy's).
_HOW = {"range": b"range", "joined-vmc": b"joined", "joined": b"patched"}
_NOT_FORWARDED = (b"host", VMC_HEADER, b"expect")
_NOT_FORWARDED_SHARED = (b"host", b"range", b"if-range", VMC_HEADER, b"expect")

# ---------------------------------------------------------------------- state: machine_state.py


class SharingMachine:
    """The sharing proxy's decisions, driven by typed inputs (module docstring)."""

    def __init__(
        self,
        cfg: MachineConfig | None = None,
        stats: Stats | None = None,
        disk: DiskStore | None = None,
    ) -> None:
        """``disk``: where bodies go (default: a :class:`MemoryDisk` of ``cfg.disk_budget`` bytes;
        none when the budget is 0 or sharing is off)."""
        self.cfg = cfg or MachineConfig()
        self.stats = stats or Stats()
        self.disk: DiskStore | None = None
        if self.cfg.disk_budget > 0 and self.cfg.sharing:
            self.disk = disk if disk is not None else MemoryDisk(self.cfg.disk_budget)
        self.sharing = Sharing(
            self.stats,
            self.cfg.window,
            self.cfg.buffer_budget,
            self.cfg.sharing,
            self.disk is not None,
        )
        self.readers: dict[Hashable, Reader] = {}
        self.flights: dict[int, Flight] = {}
        self.subs: dict[SharedObject, dict[Hashable, Reader]] = {}
        self.resumes: dict[SharedObject, int] = {}
        #: Sessions waiting for their resume's backoff, and when it is asked.
        self.resume_at: dict[SharedObject, float] = {}
        self._next_fetch = 0
        self._uri_facts: dict[str, tuple[str, tuple[str, int], bytes]] = {}
        self._boundaries = random.Random(self.cfg.seed)
        self._actions: list[Action] = []
        self._events: deque[Event] = deque()

    # ------------------------------------------------------------------ the five methods
    def input_received(self, inp: Input, now: float) -> None:
        """Process one input at ``now``."""
        if isinstance(inp, Request):
            self._request(inp, now)
        elif isinstance(inp, Drained):
            r = self.readers.get(inp.client)
            if r is not None:
                r.inflight = max(0, r.inflight - inp.n)
                if inp.n > 0:
                    r.blocked_since = None
                self._advance(r, now)
        elif isinstance(inp, ClientGone):
            r = self.readers.get(inp.client)
            if r is not None:
                self._end(r, now, "client gone", abort=False)
        elif isinstance(inp, OriginInterim):  # to the reader the fetch is for, before its head
            f = self.flights.get(inp.fetch)
            r = self.readers.get(f.client) if f is not None and f.client is not None else None
            if r is not None and not r.responded:
                self._actions.append(Interim(r.client, inp.status, inp.headers))
        else:
            f = self.flights.get(inp.fetch)
            if f is not None:
                self._origin(f, inp, now)

    def actions_to_send(self, now: float) -> list[Action]:
        """Actions due at ``now`` (call after every input and timer)."""
        out, self._actions = self._actions, []
        return out

    def get_timer(self, now: float) -> float | None:
        """The earliest deadline: the join_wait of a request parked on a PENDING head, a sharer's
        ``stall_timeout``, a client's ``client_write_timeout``; or None."""
        deadlines = [d for r in self.readers.values() if (d := self._deadline(r)) is not None]
        deadlines += self.resume_at.values()
        return min(deadlines) if deadlines else None

    def _deadline(self, r: Reader) -> float | None:
        ds = [] if r.parked_until is None else [r.parked_until]
        if r.waiting_since is not None and self.cfg.stall_timeout > 0:
            ds.append(r.waiting_since + self.cfg.stall_timeout)
        if r.blocked_since is not None and self.cfg.client_write_timeout > 0:
            ds.append(r.blocked_since + self.cfg.client_write_timeout)
        return min(ds) if ds else None

    def handle_timer(self, now: float) -> None:
        """Parked requests whose wait ran out are admitted as things stand; a sharer starved of
        the live stream, or a client that took nothing, past its timeout is aborted."""
        cfg = self.cfg
        for s, at in list(self.resume_at.items()):
            if at <= now:
                del self.resume_at[s]
                if s.state == STREAMING:
                    self._resume(s)
        for r in list(self.readers.values()):
            if self.readers.get(r.client) is not r:
                continue  # ended by an earlier one's abort
            if r.parked_until is not None and r.parked_until <= now:
                r.parked_until = None
                self._admit(r, now)
            elif self._expired(r.blocked_since, cfg.client_write_timeout, now):
                wt = cfg.client_write_timeout
                self._end(r, now, f"client gone: write stalled: no progress for {wt:g} s", True)
            elif self._expired(r.waiting_since, cfg.stall_timeout, now):
                length = r.session.length if r.session is not None else 0
                st = cfg.stall_timeout
                why = f"live stream stalled: no data for {st:g} s at {r.pos}/{length}"
                self._end(r, now, why, abort=True)

    @staticmethod
    def _expired(since: float | None, timeout: float, now: float) -> bool:
        return since is not None and timeout > 0 and since + timeout <= now

    def next_event(self) -> Event | None:
        """The oldest pending event, or None."""
        return self._events.popleft() if self._events else None

    # ------------------------------------------------------------------ requests
    def _request(self, req: Request, now: float) -> None:
        key = self._facts(req.uri)[0]
        rec = self.stats.new_request(req.method.decode("ascii", "replace"), req.uri, now)
        r = Reader(req.client, req, key, rec)
        self.readers[req.client] = r
        waiting = self.sharing.pending(key)
        if waiting is not None and waiting.upstream == self._upstream_of(req):
            r.parked_until = now + self.cfg.join_wait  # admitted when the head arrives (or then)
            return
        self._admit(r, now)

    def _facts(self, uri: str) -> tuple[str, tuple[str, int], bytes]:
        """``uri``'s key, origin address and authority, remembered per URI (a hot object's
        requests all ask; at most ``_FACTS`` URIs, forgotten together past that)."""
        facts = self._uri_facts.get(uri)
        if facts is None:
            if len(self._uri_facts) >= _FACTS:
                self._uri_facts.clear()
            auth = uri.split("://", 1)[1].split("/", 1)[0]
            facts = (request_key(uri), split_authority(auth),
                     auth.encode("ascii", "surrogateescape"))
            self._uri_facts[uri] = facts
        return facts

    def _origin_of(self, uri: str) -> tuple[tuple[str, int], bytes]:
        _, upstream, auth = self._facts(uri)
        return upstream, auth

    def _upstream_of(self, req: Request) -> tuple[str, int]:
        """Where ``req``'s origin is: the URI's authority, or in transparent mode the
        connection's original destination (never Host: the same URI at another address is
        another object, never joined)."""
        return req.origin if req.origin is not None else self._origin_of(req.uri)[0]

    def _admit(self, r: Reader, now: float) -> None:
        host = self._origin_of(r.req.uri)[1]
        upstream = self._upstream_of(r.req)
        headers = list(r.req.headers)
        adm = self.sharing.admit(r.req.method, headers, r.key, upstream, host, now)
        if adm.kind is Admit.START:
            fields = policy.end_to_end(headers, drop=_NOT_FORWARDED_SHARED)
            s = SharedObject(
                r.key, r.req.uri, upstream, b"", [(b"host", host), *fields], self.cfg.window
            )
            self.sharing.open(s)
            self.stats.origin_requests += 1
            self._fetch(Flight(0, Kind.STREAM, r.client, s), r.req.uri, headers=tuple(fields))
            r.session = s
        elif adm.kind is Admit.JOIN:
            joined, p = adm.session, adm.plan
            assert joined is not None and p is not None
            s = joined
            self.stats.joins += 1
            s.readers += 1
            r.counted = True
            if s.state is DONE and self.disk is not None and s.spill is not None:
                self.disk.touch(s.spill)  # served whole from disk: evicted last
            r.session, r.pos, r.end = s, p.first, p.end
            r.rec.mode, r.rec.offset, r.rec.status = p.mode, s.buffer.received, p.status
            self._events.append(Admitted(r.client, r.key, p.mode, s.buffer.received))
            if p.status == 416:
                self._actions.append(Respond(r.client, 416, 0, 0, s.length))
                self._finish(r, now)
                return
            age = s.freshness.age(now - s.received_at)  # a reuse: RFC 9111 sec. 4, 5.1
            hdrs = tuple((k, v) for k, v in s.headers if k != b"age") + ((b"age", b"%d" % age),)
            how = _HOW.get(p.mode, b"range") + b"; offset=%d" % s.buffer.received
            hdrs += ((VMC_HEADER, how),)
            if p.parts:  # disjoint ranges: 206 multipart/byteranges (RFC 9110 sec. 14.6)
                return self._multipart(r, s, p.parts, hdrs, now)
            self._respond(r, p.status, p.end - p.first, p.first, s.length, hdrs)
            if r.req.method == b"HEAD":
                self._finish(r, now)
                return
            self._advance(r, now)
        else:
            self.stats.origin_requests += 1
            r.rec.mode = "passthrough"
            self._events.append(Admitted(r.client, r.key, "passthrough", 0))
            fields = policy.end_to_end(headers, drop=_NOT_FORWARDED)
            self._fetch(
                Flight(0, Kind.PASS, r.client),
                r.req.uri,
                method=r.req.method,
                headers=tuple(fields),
                body=r.req.body,
                origin=r.req.origin,
            )

    def _multipart(self, r: Reader, s: SharedObject, parts: Spans, hdrs: Fields, t: float) -> None:
        """One part per range, each with its head, from the same sources as any span."""
        boundary = b"vmc-%024x" % self._boundaries.getrandbits(96)
        ctype = policy.get(s.headers, b"content-type") or b""
        layout, r.tail, total = multipart_layout(parts, s.length, ctype, boundary)
        hdrs = tuple((k, v) for k, v in hdrs if k != b"content-type")
        hdrs += ((b"content-type", b"multipart/byteranges; boundary=" + boundary),)
        self._respond(r, 206, total, 0, s.length, hdrs)
        if r.req.method == b"HEAD":
            return self._finish(r, t)
        r.parts, r.end = layout, 0
        self._advance(r, t)

    def _frame(self, r: Reader, data: bytes, now: float) -> None:
        """Bytes of a multipart answer's framing (not of the representation)."""
        self._actions.append(Send(r.client, data))
        r.inflight += len(data)
        self.stats.client(r.rec, len(data), now)

    def _admit_parked(self, key: str, now: float) -> None:
        for r in [r for r in self.readers.values() if r.parked_until is not None and r.key == key]:
            r.parked_until = None
            self._admit(r, now)

    def _fetch(
        self,
        f: Flight,
        uri: str,
        method: bytes = b"GET",
        first: int = 0,
        end: int | None = None,
        if_range: bytes | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
        body: bytes = b"",
        origin: tuple[str, int] | None = None,
    ) -> Flight:
        self._next_fetch += 1
        f.id = self._next_fetch
        self.flights[f.id] = f
        if f.session is not None:
            origin = f.session.upstream
        if origin == self._origin_of(uri)[0]:
            origin = None  # the URI's authority: the usual case (and always the simulator's)
        self._actions.append(
            Fetch(f.id, uri, method, first, end, if_range, headers, body, origin)
        )
        return f

    def _respond(
        self,
        r: Reader,
        status: int,
        length: int | None,
        first: int = 0,
        total: int = 0,
        headers: tuple[tuple[bytes, bytes], ...] = (),
        content_range: bytes | None = None,
    ) -> None:
        r.responded = True
        self._actions.append(
            Respond(r.client, status, length, first, total, headers, content_range)
        )

    # ------------------------------------------------------------------ serving a span
    def _send(self, r: Reader, data: bytes, now: float) -> None:
        if data:
            self._actions.append(Send(r.client, data))
            r.inflight += len(data)
            r.pos += len(data)
            r.waiting_since = None
            if r.inflight >= self.cfg.send_window and r.blocked_since is None:
                r.blocked_since = now
            self.stats.client(r.rec, len(data), now)

    def _send_span(self, r: Reader, copy: Readable, n: int, now: float) -> None:
        """``n`` bytes from the disk copy, without reading them (the driver's sendfile)."""
        self._actions.append(SendSpan(r.client, copy, r.pos, n))
        r.inflight += n
        r.pos += n
        r.waiting_since = None
        if r.inflight >= self.cfg.send_window and r.blocked_since is None:
            r.blocked_since = now
        self.stats.client(r.rec, n, now)

    def _advance(self, r: Reader, now: float) -> None:
        """Send what ``r`` can take now, asking :func:`next_step` before every step."""
        s = r.session
        if (
            s is None
            or self.readers.get(r.client) is not r
            or r.parked_until is not None
            or not r.responded
        ):
            return
        while self._next_part(r, now) and r.inflight < self.cfg.send_window:
            if r.patch is not None:
                return  # the origin's Range answer drives this reader now
            if r.queue is not None:
                chunk = r.queue.pop()
                if chunk is not None:
                    self._send(r, chunk[: r.end - r.pos], now)
                    continue
                if r.queue.detached:
                    r.rec.detached = True
                    self._unsubscribe(r)
                    continue
                if r.queue.closed:
                    self._unsubscribe(r)
                    continue
                if r.waiting_since is None:
                    r.waiting_since = now
                return  # wait for the live stream
            step = next_step(s, r.pos, r.end, self.cfg.patch_budget, r.rec.detached)
            if step is Step.WINDOW:
                self._send(r, s.buffer.read(r.pos, min(r.end, r.pos + CHUNK)), now)
            elif step is Step.DISK:
                spill: Readable = s.spill  # type: ignore[assignment]  # the machine's own store made it
                on_disk = min(r.end, spill.written) - r.pos
                if self.cfg.sendfile_min and on_disk >= self.cfg.sendfile_min:
                    self._send_span(r, spill, min(on_disk, self.cfg.sendfile_span), now)
                else:
                    self._send(r, spill.read(r.pos, min(r.end, r.pos + CHUNK)), now)
            elif step is Step.PATCH_AND_FOLLOW:
                edge = s.buffer.received
                self._subscribe(r, edge, self.cfg.patch_budget)
                self._patch(r, s, edge, False, now)
            elif step is Step.PATCH:
                self._patch(r, s, r.end, True, now)
            elif step is Step.LIVE:
                self._subscribe(r, r.pos, self.cfg.queue_limit)
            else:
                self._end(r, now, f"stream {s.state} at {r.pos}/{s.length}: {s.error}", abort=True)
                return
        if r.pos >= r.end and r.inflight == 0:
            self._finish(r, now)
        elif r.blocked_since is None and (r.pos >= r.end or r.inflight >= self.cfg.send_window):
            r.blocked_since = now  # what is awaited now is the client taking its bytes

    def _next_part(self, r: Reader, now: float) -> bool:
        """Whether ``r`` has bytes left to send; a multipart answer moves to its next part here."""
        while r.parts is not None and r.pos >= r.end:
            if not r.parts:
                self._frame(r, r.tail, now)
                r.parts = None
                break
            head, r.pos, r.end = r.parts.pop(0)
            if r.queue is not None:
                self._unsubscribe(r)
            self._frame(r, head, now)
        return r.pos < r.end

    def _subscribe(self, r: Reader, offset: int, limit: int) -> None:
        assert r.session is not None and r.session.live
        r.queue = ClientQueue(offset, limit)
        self.subs.setdefault(r.session, {})[r.client] = r

    def _unsubscribe(self, r: Reader) -> None:
        if r.session is not None:
            self.subs.get(r.session, {}).pop(r.client, None)
        r.queue = None
        r.waiting_since = None

    def _patch(self, r: Reader, s: SharedObject, end: int, rejoin: bool, now: float) -> None:
        if not s.validators.can_patch_from_origin():
            self._end(
                r,
                now,
                "bytes no longer buffered and no strong validator to patch by Range",
                abort=True,
            )
            return
        self.stats.origin_requests += 1
        self._events.append(Patched(r.client, r.key, r.pos, end))
        r.patch = self._fetch(
            Flight(0, Kind.PATCH, r.client, s, end, rejoin, r.pos),
            s.uri,
            first=r.pos,
            end=end,
            if_range=s.validators.if_range(),
            headers=tuple(s.upstream_headers[1:]),
        )

    # ------------------------------------------------------------------ origin inputs
    def _origin(
        self, f: Flight, inp: OriginHead | OriginData | OriginEnd | OriginError, now: float
    ) -> None:
        if f.kind is Kind.STREAM:
            assert f.session is not None
            self._stream(f, f.session, inp, now)
            return
        r = self.readers.get(f.client)
        if r is None:
            self._cancel(f)
            return
        if f.kind is Kind.PASS:
            self._relay(r, f, inp, now)
        else:
            self._patched(r, f, inp, now)

    def _cancel(self, f: Flight) -> None:
        if self.flights.pop(f.id, None) is not None:
            self._actions.append(CancelFetch(f.id))

    def _relay(
        self,
        r: Reader,
        f: Flight,
        inp: OriginHead | OriginData | OriginEnd | OriginError,
        now: float,
    ) -> None:
        if isinstance(inp, OriginHead):
            r.rec.status = inp.status
            cl = policy.get(inp.headers, b"content-length")
            r.end = int(cl) if cl is not None and cl.isdigit() else 1 << 62
            self._respond(
                r,
                inp.status,
                int(cl) if cl is not None and cl.isdigit() else None,
                0,
                0,
                inp.headers,
                content_range=policy.get(inp.headers, b"content-range"),
            )
        elif isinstance(inp, OriginData):
            self.stats.origin(len(inp.data), r.rec)
            self._send(r, inp.data, now)
        elif isinstance(inp, OriginEnd):
            self.flights.pop(f.id, None)
            self._finish(r, now)
        elif not r.responded:  # no head yet: the client hears what went wrong
            self.flights.pop(f.id, None)
            self._failed(r, inp, now)
        else:
            self.flights.pop(f.id, None)
            self._end(r, now, inp.why, abort=True)

    def _patched(
        self,
        r: Reader,
        f: Flight,
        inp: OriginHead | OriginData | OriginEnd | OriginError,
        now: float,
    ) -> None:
        s = f.session
        assert s is not None
        if isinstance(inp, OriginHead):
            if not answer_continues(s, inp.status, inp.headers, f.first, to_end=False):
                self._cancel(f)
                self._end(
                    r,
                    now,
                    f"origin range answer does not match the stream (status {inp.status})",
                    True,
                )
        elif isinstance(inp, OriginData):
            self.stats.origin(len(inp.data), r.rec)
            self._send(r, inp.data[: f.end - r.pos], now)
            if r.pos >= f.end or (f.rejoin and s.live and s.buffer.holds(r.pos)):
                self._cancel(f)
                r.patch = None
                self._advance(r, now)
        else:
            self.flights.pop(f.id, None)
            r.patch = None
            if isinstance(inp, OriginError) or r.pos < f.end:
                why = inp.why if isinstance(inp, OriginError) else "origin range answer ended early"
                self._end(r, now, f"range patch failed: {why}", abort=True)
            else:
                self._advance(r, now)

    def _stream(
        self,
        f: Flight,
        s: SharedObject,
        inp: OriginHead | OriginData | OriginEnd | OriginError,
        now: float,
    ) -> None:
        if isinstance(inp, OriginHead):
            if s.state == STREAMING:  # a resume's answer: the rest of the same representation?
                if not answer_continues(s, inp.status, inp.headers, s.buffer.received, to_end=True):
                    self._cancel(f)
                    self.stats.stream_failures += 1
                    self._stream_over(s, FAILED, f"not resumed: origin answered {inp.status}", now)
                return
            self._head(f, s, inp, now)
        elif isinstance(inp, OriginData):
            self._body(s, inp.data, now)
        elif isinstance(inp, OriginEnd):
            self.flights.pop(f.id, None)
            if s.state != STREAMING:
                return
            if s.buffer.received != s.length:
                self._stream_broke(f, s, "origin body shorter than Content-Length", now)
                return
            if self.resumes.get(s):
                self.stats.stream_resumed += 1
            self._stream_over(s, DONE, "", now)
        else:
            self.flights.pop(f.id, None)
            if s.state == STREAMING:
                self._stream_broke(f, s, inp.why, now)
            else:  # the origin could not be reached: the first reader gets the error
                s.move(FAILED, f"origin request failed: {inp.why}")
                self.sharing.drop(s)
                r = self.readers.get(f.client)
                if r is not None:
                    self._failed(r, inp, now)
                self._admit_parked(s.key, now)

    def _failed(self, r: Reader, inp: OriginError, now: float) -> None:
        """502/504 naming the upstream failure (503 when the cap said no), counted as refused."""
        status = 503 if inp.busy else inp.status
        why = Refused.UPSTREAM_BUSY if inp.busy else inp.refusal
        if not inp.busy:  # the cap's refusals are counted where the cap is
            self.stats.refused[why] += 1
        body = b"%d %s\n" % (status, why.value.encode())
        r.rec.mode, r.rec.error, r.rec.status = "error", inp.why, status
        self._respond(r, status, len(body))
        self._frame(r, body, now)
        self._finish(r, now)

    def _head(self, f: Flight, s: SharedObject, inp: OriginHead, now: float) -> None:
        r = self.readers.get(f.client)
        verdict = self.sharing.head_verdict(inp.status, inp.headers, self.cfg.epoch + now)
        request_headers = list(r.req.headers) if r is not None else []
        if not verdict:
            s.move(FAILED, f"not shareable: {verdict.reason}")
            s.verdict = verdict
            self.sharing.drop(s)
            self.sharing.buffered.discard(s)
            self.stats.not_shared[verdict.reason] += 1
            if r is not None:  # relayed unshared: this fetch becomes the reader's own
                f.kind, f.session = Kind.PASS, None
                r.session = None
                r.rec.mode = "passthrough"
                self._events.append(Admitted(r.client, r.key, "passthrough", 0))
                self._relay(r, f, inp, now)
            else:
                self._cancel(f)
            self._admit_parked(s.key, now)
            return
        s.headers = [(k, v) for k, v in inp.headers]
        s.take_head(inp.status, inp.headers, request_headers, verdict, self.cfg.epoch + now, now)
        self.sharing.streaming(s)
        if self.disk is not None:
            copy: Any = self.disk.open(s.length)
            self._on_disk(s, copy)
        if r is not None:
            s.readers += 1
            r.counted = True
            r.rec.mode, r.rec.status, r.end = "origin", 200, s.length
            self._events.append(Admitted(r.client, r.key, "origin", 0))
            hdrs = (*s.headers, (VMC_HEADER, b"first; offset=0"))
            self._respond(r, 200, s.length, 0, s.length, hdrs)
            self._advance(r, now)
        self._admit_parked(s.key, now)
        if s.readers <= 0:
            self._abandon(s, now)

    def _body(self, s: SharedObject, data: bytes, now: float) -> None:
        if s.state != STREAMING or not data:
            return
        self.stats.origin(len(data))
        if not s.fits(len(data)):
            self.stats.stream_failures += 1
            self._stream_over(s, FAILED, "origin sent more than Content-Length", now)
            return
        readers = list(self.subs.get(s, {}).values())
        for r in feed(s, data, readers, self.stats):
            self.subs[s].pop(r.client, None)
            assert r.queue is not None
            self._events.append(Detached(r.client, r.key, r.queue.end_offset))
        if s.buffer.received == s.length:
            # Whole: DONE now, before its readers can finish and leave it with none (on sockets
            # the origin's end of message comes a read later; it is then ignored).
            if self.resumes.get(s):
                self.stats.stream_resumed += 1
            self._stream_over(s, DONE, "", now)
            return
        for r in readers:
            self._advance(r, now)

    def _stream_broke(self, f: Flight, s: SharedObject, why: str, now: float) -> None:
        tries = self.resumes.get(s, 0)
        if may_resume(s, tries, self.cfg.resume_attempts, self.cfg.retry_by_range):
            self.resumes[s] = tries + 1
            s.resumes = tries + 1
            self.stats.stream_retries += 1
            if self.cfg.resume_backoff > 0:  # the n-th resume waits backoff * n (the proxy's)
                self.resume_at[s] = now + self.cfg.resume_backoff * (tries + 1)
            else:
                self._resume(s)
            return
        self.stats.stream_failures += 1
        self._stream_over(s, FAILED, f"{why} (after {tries} resume attempts)", now)

    def _resume(self, s: SharedObject) -> None:
        """Ask the origin for the rest of ``s`` from its live edge, by Range + If-Range."""
        self.stats.origin_requests += 1
        self._fetch(
            Flight(0, Kind.STREAM, None, s),
            s.uri,
            first=s.buffer.received,
            if_range=s.validators.if_range(),
            headers=tuple(s.upstream_headers[1:]),
        )

    def _stream_over(self, s: SharedObject, state: SessionState, why: str, now: float) -> None:
        self.resume_at.pop(s, None)
        for f in [f for f in self.flights.values() if f.kind is Kind.STREAM and f.session is s]:
            if state is DONE:  # every byte is in: let the fetch end by itself, unheard
                self.flights.pop(f.id, None)
            else:
                self._cancel(f)
        s.move(state, why)
        subs = self.subs.pop(s, {})
        for r in subs.values():
            if r.queue is not None:
                r.queue.close()
        if self.sharing.drop(s) and self.disk is not None and s.spill is not None:
            self.disk.finished(s.spill)  # kept whole for later requests
            self._actions.append(Kept(FinishedCopy.of(s), s.spill))
        self.resumes.pop(s, None)
        for r in list(subs.values()):
            self._advance(r, now)

    def adopt_finished(self, copy: FinishedCopy, disk: Any) -> bool:
        """A finished object another process of this proxy kept (:class:`Kept`), on ``disk``: a
        whole copy of its body in this process's store. It is served from there while fresh, as
        if this process had fetched it (``vmc proxy --workers``); it replaces an older finished
        copy of the same key, never a live session. False (and ``disk`` closed) when this
        machine keeps no finished objects or is fetching the key itself."""
        if (self.disk is None or not self.sharing.disk or not getattr(disk, "complete", False)
                or copy.key in self.sharing.sessions):
            disk.close()
            return False
        s = copy.session(self.cfg.window)
        self._on_disk(s, disk)
        self.sharing.keep(s)
        self.disk.finished(disk)
        return True

    def _on_disk(self, s: SharedObject, copy: Any) -> None:
        """``copy`` holds ``s``'s body; a store that evicts may take it once nobody reads it."""
        if isinstance(copy, Evictable):
            copy.can_evict = lambda: s.readers <= 0
            copy.on_evict = lambda: self.sharing.forget(s)
        s.spill = copy

    def _abandon(self, s: SharedObject, now: float) -> None:
        if s.state == STREAMING:
            self._stream_over(s, FAILED, "abandoned: no readers left", now)

    # ------------------------------------------------------------------ the end of a request
    def _finish(self, r: Reader, now: float) -> None:
        self.stats.done(r.rec, now)
        self._actions.append(Finish(r.client))
        self._events.append(Finished(r.client, r.key, r.rec.client_bytes))
        self._leave(r, now)

    def _end(self, r: Reader, now: float, why: str, abort: bool) -> None:
        r.rec.error = why if abort else "client gone: " + why
        if abort:
            self._actions.append(Abort(r.client, why))
        self._events.append(Finished(r.client, r.key, r.rec.client_bytes, why))
        self._leave(r, now)

    def _leave(self, r: Reader, now: float) -> None:
        if self.readers.get(r.client) is not r:
            return
        del self.readers[r.client]
        if r.patch is not None:
            self._cancel(r.patch)
            r.patch = None
        for f in [f for f in self.flights.values() if f.kind is Kind.PASS and f.client == r.client]:
            self._cancel(f)
        self._unsubscribe(r)
        s = r.session
        if s is not None and r.counted:
            r.counted = False
            if self.sharing.release(s):
                self._abandon(s, now)


__all__ = [
    "Abort",
    "DiskStore",
    "MemoryCopy",
    "Readable",
    "Action",
    "Admitted",
    "CancelFetch",
    "ClientGone",
    "Detached",
    "DiskCopy",
    "Drained",
    "Event",
    "Fetch",
    "Finish",
    "Finished",
    "Flight",
    "Input",
    "Kept",
    "FinishedCopy",
    "MachineConfig",
    "MemoryDisk",
    "OriginData",
    "OriginEnd",
    "OriginError",
    "OriginHead",
    "OriginInterim",
    "Interim",
    "Kind",
    "Patched",
    "Reader",
    "Request",
    "Respond",
    "Send",
    "SendSpan",
    "SharingMachine",
]
