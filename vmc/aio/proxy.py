"""The VMC proxy: HTTP/1.1 (h11) on both sides, sharing in-flight GETs (paper sec. 2, 3.2).

For each request the proxy computes the key (MD5 of the normalised absolute
URI) and, when :mod:`vmc.core.policy` allows, either starts a
:class:`~vmc.aio.session.Session` (first request: the origin body streams to
the client through the session buffer) or joins the live one:

- a VMC-aware client (request header ``VMC: 1``) that asks for the whole object
  gets ``206 Partial Content`` with ``Content-Range: bytes N-(len-1)/len`` where
  N is the live edge, and the live stream; it fetches ``bytes=0-(N-1)`` itself
  (served from the buffer, or from the origin by Range when the window no
  longer holds it: the paper's "request for data they missed");
- any other client gets ``200 OK`` with the whole body: the proxy patches the
  prefix itself (buffer, else origin Range with If-Range) and then hands over to
  the live stream (the paper's "proxy caches could be used to hide this extra
  step from the clients", sec. 5);
- a Range request on a live object gets 206 with exactly the bytes asked (one
  range; several ranges are coalesced, and if still several the Range is
  ignored, which RFC 9110 sec. 14.2 allows), or 416.

Everything else is passed through unshared. Responses never claim more than
they deliver: if the origin fails mid-stream, the session resumes the stream
from its live edge by Range + If-Range for all sharers at once (bounded
attempts, strong validator required); if the origin's answer is another
representation or attempts run out, each client's connection is closed before
its Content-Length is satisfied (RFC 9112 sec. 6.3 rule 6).

Not an open proxy: only configured upstreams are reached. Statistics are JSON at
``GET /_vmc/status``.

Limits (docs/security/vmc-proxy.md): connection slots with slow-loris eviction
and a total deadline per request head and body (the client side,
:mod:`vmc.aio.downstream`), the buffer budget charged by what a session can hold,
and every refusal counted under its own name in ``refused``. 1xx responses from the origin are forwarded to the
client whose request caused them (RFC 9110 sec. 15.2; never to an HTTP/1.0 client).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import secrets
import time
from dataclasses import dataclass

import h11

from vmc.aio import upstream as up
from vmc.aio.config import SO_ORIGINAL_DST, ProxyConfig, original_dst  # noqa: F401 - re-exported
from vmc.aio.deadline import within
from vmc.aio.downstream import CHUNK, Client, ClientGone, Downstream
from vmc.aio.session import DONE, FAILED, STREAMING, RepresentationChanged, Session
from vmc.aio.spill import DiskStore
from vmc.core import policy, ranges
from vmc.core.errors import URIError
from vmc.core.key import format_authority, normalise_uri, request_key, split_authority
from vmc.core.plan import VMC_HEADER, Plan, content_range, multipart_layout
from vmc.core.reasons import Refused, by_name
from vmc.core.sharing import Admit, Sharing, Step, answer_continues, may_resume, next_step
from vmc.core.stats import RequestRecord, Stats


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes."""

    upstream: tuple[str, int]
    """Origin address (allowed by configuration)."""
    uri: str
    """Normalised absolute URI (its MD5 is the session key)."""
    path: bytes
    """Origin-form target sent upstream."""
    host: bytes
    """Host field sent upstream."""


#: Bytes on disk from which a span leaves by sendfile rather than by reads (issue 17), and the
#: most one sendfile call sends: each span must be taken within ``client_write_timeout``.
SENDFILE_MIN = 1 << 20
SENDFILE_SPAN = 4 << 20


def sendfile_supported() -> bool:
    """Does the running loop have ``loop.sendfile``? asyncio's loops do (zero copy on a plain
    socket, else their fallback); uvloop's raises NotImplementedError, so bodies go by reads."""
    return isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop)


class StreamFailed(Exception):
    """The bytes promised to a client cannot be delivered (origin failure, mismatch)."""


#: Upstream failures: (status, ``refused`` counter) sent to the client (item 17: what it was).
UPSTREAM_FAILURES: list[tuple[type[up.UpstreamError], int, Refused]] = [
    (up.UpstreamUnreachable, 502, Refused.UPSTREAM_UNREACHABLE),
    (up.UpstreamClosed, 502, Refused.UPSTREAM_CLOSED),
    (up.UpstreamTimeout, 504, Refused.UPSTREAM_TIMEOUT),
    (up.UpstreamBadResponse, 502, Refused.UPSTREAM_BAD_RESPONSE),
]


class Proxy(Downstream):
    """Run with ``await Proxy(cfg).start()``; stop with ``await proxy.close()``."""

    def __init__(self, cfg: ProxyConfig, clock=time.monotonic) -> None:
        super().__init__(cfg, Stats(), clock)
        self.allowed: set[tuple[str, int]] = {split_authority(u) for u in cfg.upstreams}
        self.default = split_authority(cfg.default_upstream) if cfg.default_upstream else None
        if self.default:
            self.allowed.add(self.default)
        self.limiter = (up.Limiter(cfg.max_upstream, cfg.upstream_queue_wait, cfg.upstream_queue_max)
                        if cfg.max_upstream > 0 else None)
        self.pool = up.Pool(limiter=self.limiter) if cfg.upstream_keepalive else None
        self._status_nets = [ipaddress.ip_network(n, strict=False) for n in cfg.status_allow]
        self._server: asyncio.AbstractServer | None = None
        #: Bodies on disk: what left a window, and finished objects (``finished``) kept for reuse.
        self.store = DiskStore(cfg.disk_budget, cfg.disk_dir) if cfg.disk_budget > 0 and cfg.sharing else None
        #: The sharing decisions and their state (sans-IO): live sessions, finished ones, the budget.
        self.sharing = Sharing(self.stats, cfg.window, cfg.buffer_budget, cfg.sharing, self.store is not None)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._on_connect, self.cfg.host, self.cfg.port,
                                                  reuse_port=self.cfg.reuse_port or None)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[:2]  # type: ignore[attr-defined]  # asyncio's or uvloop's Server

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for s in list(self.sessions.values()):
            if s.pump_task:
                s.pump_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.pool is not None:
            self.pool.close()
        self.finished.clear()
        if self.store is not None:
            self.store.close()
        if self._server is not None:
            await self._server.wait_closed()

    def snapshot(self, recent: int = 100) -> dict:
        snap = self.stats.snapshot(recent)
        snap["live_sessions"] = len(self.sessions)
        snap["buffer_bytes"] = sum(s.buffer.memory for s in self.sessions.values())
        snap["queued_bytes"] = sum(sub.queue.queued for s in self.sessions.values() for sub in s.subscribers)
        snap["connections"] = self.connections
        snap["pid"] = os.getpid()  # which worker answered (vmc proxy --workers N)
        if self.pool is not None:
            snap["upstream_connections_opened"] = self.pool.opened
            snap["upstream_connections_reused"] = self.pool.reused
            snap["upstream_connections_dirty"] = self.pool.dirty
        if self.limiter is not None:
            lim = self.limiter
            snap["upstream_limit"] = {"max": lim.limit, "open": lim.open, "peak": lim.peak,
                                      "waiting": lim.waiting, "queued": lim.queued, "refused": lim.refused}
        snap["window"] = self.cfg.window
        snap["buffer_budget"] = self.cfg.buffer_budget
        snap["buffer_committed"] = self.committed_buffer
        snap["queue_limit"] = self.cfg.queue_limit
        snap["disk"] = self.store.snapshot() if self.store is not None else None
        return snap

    @property
    def sessions(self) -> dict[str, Session]:
        """Live sessions by key (the core's registry)."""
        return self.sharing.sessions  # type: ignore[return-value]  # the proxy registers Sessions only

    @property
    def finished(self) -> dict[str, Session]:
        """Finished sessions whole on disk, by key (the core's registry)."""
        return self.sharing.finished  # type: ignore[return-value]

    @property
    def committed_buffer(self) -> int:
        """Bytes the buffered sessions may hold at most (:meth:`Sharing.charge`)."""
        return self.sharing.committed

    # ------------------------------------------------------------------ routing
    def _route(self, req: h11.Request, client: Client) -> Route | None:
        """Where the request goes, or None when that upstream is not allowed."""
        target = req.target.decode("ascii", "surrogateescape")
        headers = [(k.lower(), v) for k, v in req.headers]
        host_hdr = policy.get(headers, b"host")
        host = host_hdr.decode("ascii", "surrogateescape") if host_hdr else None
        if target.lower().startswith(("http://", "https://")):
            if target.lower().startswith("https://"):
                return None
            uri = normalise_uri(target)
            auth = uri.split("://", 1)[1].split("/", 1)[0]
            upstream = split_authority(auth)
            if upstream not in self.allowed:
                return None
            send_host = auth
        elif client.original_dst is not None:
            upstream = client.original_dst
            self.stats.transparent += 1
            if upstream not in self.allowed:
                return None
            send_host = host or format_authority(*upstream)
            uri = normalise_uri(target, send_host)
        else:
            upstream = None
            if host:
                try:
                    h = split_authority(host)
                    if h in self.allowed:
                        upstream = h
                except URIError:
                    pass
            if upstream is None:
                upstream = self.default
            if upstream is None:
                return None
            send_host = format_authority(*upstream)
            uri = normalise_uri(target, send_host)
        rest = uri.split("://", 1)[1]
        path = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        enc = "surrogateescape"
        assert upstream is not None
        return Route(upstream, uri, path.encode("ascii", enc), send_host.encode("ascii", enc))

    def _upstream_headers(self, req_headers: policy.Headers, send_host: bytes) -> list[tuple[bytes, bytes]]:
        hdrs = up.end_to_end(req_headers, drop=(b"host", b"range", b"if-range", VMC_HEADER, b"expect"))
        hdrs.insert(0, (b"host", send_host))
        hdrs.append((b"via", b"1.1 vmc"))
        return hdrs

    async def _serve_request(self, client: Client, req: h11.Request, body: bytes) -> bool:
        """Answer one request; False when the connection must close."""
        now = self.clock()
        target = req.target.decode("ascii", "surrogateescape")
        if target.split("?", 1)[0] == self.cfg.status_path:
            if not self._status_allowed(client):
                await self._error(client, 403, Refused.STATUS_NOT_ALLOWED, close=False)
                return True
            return await self._status(client, target)
        try:
            routed = self._route(req, client)
        except URIError:
            routed = None
            await self._error(client, 400, Refused.BAD_TARGET)
            return False
        if routed is None:
            await self._error(client, 403, Refused.UPSTREAM_NOT_ALLOWED, close=False)
            return True
        headers = [(k.lower(), v) for k, v in req.headers]
        rec = self.stats.new_request(req.method.decode("ascii", "replace"), routed.uri, now)
        try:
            await self._dispatch(client, req.method, headers, body, routed, rec)
        except StreamFailed as exc:
            rec.error = str(exc)
            client.abort()
            return False
        except ClientGone as exc:
            rec.error = "client gone: " + str(exc)
            client.abort()
            return False
        return True

    def _status_allowed(self, client: Client) -> bool:
        peer = client.writer.get_extra_info("peername")
        if not peer:
            return False
        try:
            addr = ipaddress.ip_address(peer[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            return any(addr.ipv4_mapped in net for net in self._status_nets)
        return any(addr in net for net in self._status_nets)

    async def _status(self, client: Client, target: str) -> bool:
        recent = 100
        if "recent=" in target:
            try:
                recent = max(0, min(2000, int(target.split("recent=", 1)[1].split("&", 1)[0])))
            except ValueError:
                pass
        body = json.dumps(self.snapshot(recent), indent=1, default=str).encode()
        await client.send(
            h11.Response(
                status_code=200,
                headers=[(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                         (b"cache-control", b"no-store")],
            )
        )
        await client.send(h11.Data(data=body))
        await client.send(h11.EndOfMessage())
        return True

    async def _dispatch(
        self,
        client: Client,
        method: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        route: Route,
        rec: RequestRecord,
    ) -> None:
        key = request_key(route.uri)
        pending = self.sharing.pending(key)
        if pending is not None and isinstance(pending, Session):
            try:
                await within(pending.ready.wait(), self.cfg.join_wait)
            except asyncio.TimeoutError:
                pass
        adm = self.sharing.admit(method, headers, key, route.upstream, route.host, self.clock())
        if adm.kind is Admit.JOIN:
            assert isinstance(adm.session, Session) and adm.plan is not None
            await self._join(client, adm.session, adm.plan, method, rec)
        elif adm.kind is Admit.START:
            await self._start_session(client, key, route, headers, rec)
        else:
            await self._passthrough(client, method, headers, body, route, rec)

    # ------------------------------------------------------------------ sessions
    async def _start_session(
        self,
        client: Client,
        key: str,
        route: Route,
        headers: list[tuple[bytes, bytes]],
        rec: RequestRecord,
    ) -> None:
        up_headers = self._upstream_headers(headers, route.host)
        upstream, path = route.upstream, route.path
        s = Session(key, route.uri, upstream, path, up_headers, self.cfg.window)
        self.sharing.open(s)
        try:
            self.stats.origin_requests += 1
            resp = await up.request(*upstream, b"GET", path, up_headers, timeout=self.cfg.upstream_timeout,
                                    pool=self.pool, limiter=self.limiter, on_interim=self._interim_to(client))
        except BaseException as exc:
            s.move(FAILED, f"origin request failed: {exc}")
            s.ready.set()
            self._drop(s)
            if not isinstance(exc, up.UpstreamError):
                raise
            rec.mode, rec.error = "error", str(exc)
            await self._upstream_error(client, exc, rec)
            return
        s.received_at = self.clock()
        verdict = self.sharing.head_verdict(resp.status, resp.headers, time.time())
        if not verdict:
            s.move(FAILED, f"not shareable: {verdict.reason}")
            s.verdict = verdict
            s.ready.set()
            self._drop(s)
            self.sharing.buffered.discard(s)
            self.stats.not_shared[verdict.reason] += 1
            await self._relay(client, b"GET", resp, rec)
            return
        s.headers = up.end_to_end(resp.headers, drop=(b"accept-ranges", b"content-range", VMC_HEADER))
        s.take_head(resp.status, resp.headers, headers, verdict, time.time(), s.received_at)
        self.sharing.streaming(s)
        if self.store is not None:
            s.spill = self.store.open(s.length)
            if s.spill is not None:
                s.spill.can_evict = lambda: s.readers <= 0
                s.spill.on_evict = lambda: self.sharing.forget(s)
        rec.mode = "origin"
        s.readers += 1
        resumable = may_resume(s, 0, max(1, self.cfg.resume_attempts), self.cfg.retry_by_range)
        s.start(resp, self.stats, self._drop,
                refetch=(lambda off, slot: self._refetch(s, off, slot)) if resumable else None,
                attempts=self.cfg.resume_attempts, backoff=self.cfg.resume_backoff)
        s.ready.set()
        try:
            await self._respond_shared(client, s, b"GET", 200, 0, s.length, rec, b"first")
        finally:
            self._release(s)

    def _drop(self, s: Session) -> None:
        """The pump ended (or never ran): the session leaves the registry."""
        if self.sharing.drop(s) and self.store is not None and s.spill is not None:
            self.store.finished(s.spill)

    def _release(self, s: Session) -> None:
        if self.sharing.release(s) and s.pump_task is not None:
            s.pump_task.cancel()  # its done-callback cleans up, even if it never started

    async def _join(self, client: Client, s: Session, p: Plan, method: bytes, rec: RequestRecord) -> None:
        self.stats.joins += 1
        s.readers += 1
        if s.state == DONE and s.spill is not None and self.store is not None:
            self.store.touch(s.spill)  # served whole from disk, no origin request: a hit
        try:
            rec.mode = p.mode
            rec.offset = s.buffer.received
            if p.status == 416:
                rec.status = 416
                cr = content_range(p, s.length) or ""
                hdrs = [(b"content-range", cr.encode()), (b"content-length", b"0")]
                await client.send(h11.Response(status_code=416, headers=hdrs))
                await client.send(h11.EndOfMessage())
                return
            if p.parts:
                await self._respond_multipart(client, s, p.parts, rec)
                return
            how = {"range": b"range", "joined-vmc": b"joined", "joined": b"patched"}[p.mode]
            await self._respond_shared(client, s, method, p.status, p.first, p.end, rec, how)
        finally:
            self._release(s)

    async def _respond_shared(
        self, client: Client, s: Session, method: bytes, status: int, first: int, end: int,
        rec: RequestRecord, how: bytes,
    ) -> None:
        """Send a 200 (whole) or 206 (``[first, end)``) built from the session, then the bytes."""
        hdrs = list(s.headers)
        if how != b"first":  # a reuse: RFC 9111 sec. 4, 5.1
            hdrs = [(k, v) for k, v in hdrs if k != b"age"]
            hdrs.append((b"age", b"%d" % s.freshness.age(self.clock() - s.received_at)))
        hdrs.append((b"content-length", str(end - first).encode()))
        hdrs.append((b"accept-ranges", b"bytes"))
        if status == 206:
            hdrs.append((b"content-range", ranges.format_content_range(first, end - 1, s.length).encode()))
        hdrs.append((b"via", b"1.1 vmc"))
        hdrs.append((VMC_HEADER, b"%s; offset=%d" % (how, s.buffer.received)))
        rec.status = status
        await client.send(h11.Response(status_code=status, headers=hdrs))
        if method == b"HEAD":
            await client.send(h11.EndOfMessage())
            self.stats.done(rec, self.clock())
            return
        await self._serve_span(client, s, first, end, rec)
        await client.send(h11.EndOfMessage())
        self.stats.done(rec, self.clock())

    async def _respond_multipart(
        self, client: Client, s: Session, parts: tuple[tuple[int, int], ...], rec: RequestRecord
    ) -> None:
        """206 multipart/byteranges, one part per disjoint range (RFC 9110 sec. 14.6)."""
        boundary = secrets.token_hex(12).encode()
        ctype = policy.get(s.headers, b"content-type") or b""
        layout, tail, total = multipart_layout(parts, s.length, ctype, boundary)
        hdrs = [(k, v) for k, v in s.headers if k not in (b"content-type", b"age")]
        hdrs += [
            (b"age", b"%d" % s.freshness.age(self.clock() - s.received_at)),
            (b"content-type", b"multipart/byteranges; boundary=" + boundary),
            (b"content-length", str(total).encode()),
            (b"accept-ranges", b"bytes"),
            (b"via", b"1.1 vmc"),
            (VMC_HEADER, b"range; offset=%d" % s.buffer.received),
        ]
        rec.status = 206
        await client.send(h11.Response(status_code=206, headers=hdrs))
        for head, a, e in layout:
            await self._write(client, head, rec)
            await self._serve_span(client, s, a, e, rec)
        await self._write(client, tail, rec)
        await client.send(h11.EndOfMessage())
        self.stats.done(rec, self.clock())

    async def _write(self, client: Client, data: bytes, rec: RequestRecord) -> None:
        await client.send(h11.Data(data=data))
        self.stats.client(rec, len(data), self.clock())

    async def _serve_span(self, client: Client, s: Session, pos: int, end: int, rec: RequestRecord) -> None:
        """Write stream bytes ``[pos, end)``: buffer, origin Range patch, then the live stream."""
        while pos < end:
            step = next_step(s, pos, end, self.cfg.patch_budget, rec.detached)
            if step is Step.WINDOW:
                data = s.buffer.read(pos, min(end, pos + 4 * CHUNK))
                await self._write(client, data, rec)
                pos += len(data)
            elif step is Step.DISK:  # left the window: from disk
                assert s.spill is not None
                on_disk = min(end, s.spill.written) - pos
                if (on_disk >= SENDFILE_MIN and s.spill.fd is not None and self.store is not None
                        and sendfile_supported()):
                    n = min(on_disk, SENDFILE_SPAN)  # zero copy, in spans of bounded size
                    await client.sendfile(s.spill.fd, pos, n)
                    self.store.stats.sendfile_bytes += n
                    self.stats.client(rec, n, self.clock())
                    pos += n
                    continue
                data = s.spill.read(pos, min(end, pos + 4 * CHUNK))
                await self._write(client, data, rec)
                pos += len(data)
            elif step is Step.PATCH_AND_FOLLOW:
                # Take the live stream from the edge now (bounded queue) while the gap
                # [pos, edge) comes from the origin by Range; then drain the queue. If the
                # queue overflows first, the client continues from where it stopped.
                edge = s.buffer.received
                sub = s.subscribe(edge, self.cfg.patch_budget)
                try:
                    while pos < edge:
                        pos = await self._patch(client, s, pos, edge, rec, rejoin=False)
                    pos = await self._follow(client, s, sub, pos, end, rec)
                finally:
                    s.unsubscribe(sub)
            elif step is Step.PATCH:
                pos = await self._patch(client, s, pos, end, rec)
            elif step is Step.LIVE:
                sub = s.subscribe(pos, self.cfg.queue_limit)
                try:
                    pos = await self._follow(client, s, sub, pos, end, rec)
                finally:
                    s.unsubscribe(sub)
            else:
                # The stream failed before reaching pos, and the session's own resume attempts
                # (shared by every sharer) are spent or were refused: a clean error.
                raise StreamFailed(f"stream {s.state} at {pos}/{s.length}: {s.error}")

    async def _follow(self, client: Client, s: Session, sub, pos: int, end: int, rec: RequestRecord) -> int:
        """Write the live stream from ``sub``'s queue; StreamFailed if no byte comes for ``stall_timeout`` s."""
        q = sub.queue
        loop = asyncio.get_running_loop()
        limit = self.cfg.stall_timeout
        while pos < end:
            chunk = q.pop()
            if chunk is None:
                if q.detached:
                    rec.detached = True
                    return pos
                if q.closed:
                    return pos
                if s.pump_task is not None and s.pump_task.done() and s.state == STREAMING:
                    raise StreamFailed("the origin fetch ended without finishing the stream")
                sub.wake.clear()
                t0 = loop.time()
                timer = loop.call_later(limit, sub.wake.set) if limit > 0 else None
                try:
                    await sub.wake.wait()
                finally:
                    if timer is not None:
                        timer.cancel()
                if limit > 0 and q.queued == 0 and not q.closed and loop.time() - t0 >= limit:
                    raise StreamFailed(f"live stream stalled: no data for {limit:g} s at {pos}/{s.length}")
                continue
            if len(chunk) > end - pos:
                chunk = chunk[: end - pos]
            await self._write(client, chunk, rec)
            pos += len(chunk)
        return pos

    async def _refetch(self, s: Session, offset: int, slot: up.Slot) -> up.UpstreamResponse:
        """The rest of the session's representation, ``[offset, length)``, by Range + If-Range.

        RepresentationChanged when the origin answers with anything but exactly that (a 200
        means If-Range did not match: a new representation); UpstreamError otherwise. The
        request uses the session's limiter ``slot``, which stays the caller's when this raises.
        """
        hdrs = list(s.upstream_headers)
        hdrs.append((b"range", b"bytes=%d-" % offset))
        hdrs.append((b"if-range", s.validators.if_range() or b""))
        self.stats.origin_requests += 1
        resp = await up.request(*s.upstream, b"GET", s.target, hdrs, timeout=self.cfg.upstream_timeout,
                                pool=self.pool, limiter=self.limiter, slot=slot)
        if resp.status != 206:
            resp.detach_slot()
            resp.close()
            if resp.status == 200 or 400 <= resp.status < 500:
                raise RepresentationChanged(f"origin answered the resume with {resp.status}")
            raise up.UpstreamError(f"origin answered the resume with {resp.status}")
        if not answer_continues(s, resp.status, resp.headers, offset, to_end=True):
            resp.detach_slot()
            resp.close()
            raise RepresentationChanged("origin's resume is not the rest of the same representation")
        return resp

    async def _patch(
        self, client: Client, s: Session, pos: int, end: int, rec: RequestRecord, rejoin: bool = True
    ) -> int:
        """Fetch ``[pos, end)`` from the origin by Range and write it; with ``rejoin``, stop as soon
        as the buffer covers pos again."""
        if not s.validators.can_patch_from_origin():
            raise StreamFailed("bytes no longer buffered and no strong validator to patch by Range")
        hdrs = list(s.upstream_headers)
        hdrs.append((b"range", ranges.format_range(pos, end - 1).encode()))
        hdrs.append((b"if-range", s.validators.if_range() or b""))
        self.stats.origin_requests += 1
        try:
            resp = await up.request(*s.upstream, b"GET", s.target, hdrs, timeout=self.cfg.upstream_timeout,
                                    pool=self.pool, limiter=self.limiter)
        except up.UpstreamError as exc:
            raise StreamFailed(f"range patch failed: {exc}") from exc
        try:
            if not answer_continues(s, resp.status, resp.headers, pos, to_end=False):
                raise StreamFailed(f"origin range answer does not match the stream (status {resp.status})")
            start = pos
            async for chunk in resp.chunks():
                self.stats.origin(len(chunk), rec)
                if len(chunk) > end - pos:
                    chunk = chunk[: end - pos]
                await self._write(client, chunk, rec)
                pos += len(chunk)
                if pos >= end or (rejoin and s.live and s.buffer.holds(pos)):
                    break
            if pos == start:
                raise StreamFailed("origin range answer was empty")
            return pos
        except up.UpstreamError as exc:
            raise StreamFailed(f"range patch broke: {exc}") from exc
        finally:
            resp.close()

    # ------------------------------------------------------------------ pass-through
    async def _passthrough(
        self,
        client: Client,
        method: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        route: Route,
        rec: RequestRecord,
    ) -> None:
        upstream, path = route.upstream, route.path
        hdrs = up.end_to_end(headers, drop=(b"host", VMC_HEADER, b"expect"))
        hdrs.insert(0, (b"host", route.host))
        hdrs.append((b"via", b"1.1 vmc"))
        self.stats.origin_requests += 1
        try:
            resp = await up.request(*upstream, method, path, hdrs, body, timeout=self.cfg.upstream_timeout,
                                    pool=self.pool, limiter=self.limiter, on_interim=self._interim_to(client))
        except up.UpstreamError as exc:
            rec.mode, rec.error = "error", str(exc)
            await self._upstream_error(client, exc, rec)
            return
        await self._relay(client, method, resp, rec)

    async def _upstream_error(self, client: Client, exc: up.UpstreamError, rec: RequestRecord) -> None:
        """502/504 saying what went wrong upstream; 503 + Retry-After when the upstream cap is full."""
        if isinstance(exc, up.UpstreamBusy):
            rec.status = 503
            await self._error(client, 503, Refused.UPSTREAM_BUSY, close=False,
                              extra=[(b"retry-after", str(self.cfg.retry_after).encode())])
            return
        status, why = 502, Refused.UPSTREAM_ERROR
        for cls, code, name in UPSTREAM_FAILURES:
            if isinstance(exc, cls):
                status, why = code, name
                break
        rec.status = status
        await self._error(client, status, why, close=False)

    def _interim_to(self, client: Client) -> up.OnInterim | None:
        """Forward the origin's 1xx responses to ``client`` (RFC 9110 sec. 15.2), hop-by-hop fields
        dropped; never to an HTTP/1.0 client (sec. 15.2: it does not expect them)."""
        if client.conn.their_http_version in (None, b"1.0"):
            return None

        async def forward(ev: h11.InformationalResponse) -> None:
            await client.send(h11.InformationalResponse(
                status_code=ev.status_code, headers=up.end_to_end([(k.lower(), v) for k, v in ev.headers]),
                reason=ev.reason))

        return forward

    async def _relay(self, client: Client, method: bytes, resp: up.UpstreamResponse, rec: RequestRecord) -> None:
        """Forward an unshared origin response; the framing is h11's (CL kept when known)."""
        rec.mode = "passthrough"
        rec.status = resp.status
        hdrs = up.end_to_end(resp.headers)
        cl = resp.header(b"content-length")
        if cl is not None and resp.header(b"transfer-encoding") is None:
            hdrs.append((b"content-length", cl))
        hdrs.append((b"via", b"1.1 vmc"))
        try:
            await client.send(h11.Response(status_code=resp.status, headers=hdrs, reason=resp.reason or b""))
            async for chunk in resp.chunks():  # nothing for HEAD, but the exchange completes
                self.stats.origin(len(chunk), rec)
                await self._write(client, chunk, rec)
            await client.send(h11.EndOfMessage())
            self.stats.done(rec, self.clock())
        except up.UpstreamError as exc:
            raise StreamFailed(str(exc)) from exc
        finally:
            resp.close()


async def serve(cfg: ProxyConfig, stats_out: str | None = None, stats_every: float = 0.0) -> int:
    """Run a proxy until SIGINT or SIGTERM (CLI entry); returns the exit code (130 / 143).

    ``stats_out``: write the status JSON there every ``stats_every`` s (if > 0) and on exit, through
    a temporary file renamed into place (never a half-written file under the final name). The
    final counters go to stdout as JSON (a summary line to stderr) whichever signal stopped us.
    """
    import os
    import sys

    from deliverykit.cliutil import Stopper

    proxy = await Proxy(cfg).start()
    host, port = proxy.address
    host = f"[{host}]" if ":" in host else host
    print(f"vmc proxy on http://{host}:{port}/ (status {cfg.status_path}); "
          f"upstreams {sorted(proxy.allowed)}", flush=True)
    stopper = Stopper().install()

    def dump() -> None:
        if stats_out:
            with open(stats_out + ".tmp", "w") as fh:
                json.dump(proxy.snapshot(recent=proxy.stats.keep), fh, indent=1, default=str)
            os.replace(stats_out + ".tmp", stats_out)

    try:
        while not stopper.stopped:
            if not await stopper.wait(stats_every if stats_every > 0 else None):
                dump()
    finally:
        stopper.remove()
        dump()
        await proxy.close()
        st = proxy.stats
        print(f"vmc proxy {stopper.describe() or 'stopped'}: {st._next_id} requests, {st.sessions} sessions, "
              f"{st.joins} joins, {st.origin_bytes} origin bytes, {st.client_bytes} client bytes, "
              f"refused {by_name(st.refused)}", file=sys.stderr, flush=True)
        print(json.dumps(proxy.snapshot(recent=0), default=str), flush=True)  # the final counters
    return stopper.exit_code()
