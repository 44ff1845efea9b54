"""HTTP/1.1 client connections around :class:`~vmc.core.machine.SharingMachine` (sans-IO).

A :class:`deliverykit.protocol.StreamCore` (the one core protocol's stream shape):
client connections come in as bytes, go out as bytes, with their opening, closing
and back-pressure; the origin side stays typed
(:class:`~vmc.core.machine.Fetch` actions out, ``Origin*`` inputs in), for the
driver's HTTP client or the simulator's origin. The shape::

    core.connection_made(conn, now); core.data_received(conn, data, now)
    core.writable(conn, n, now)      # n bytes left the transport: the client took them
    core.connection_lost(conn, now)
    core.origin_received(OriginHead | OriginData | OriginEnd | OriginError, now)
    for out in core.to_send(now): ... # Write(conn, data), Close(conn), Fetch, CancelFetch
    core.get_timer(now) / core.handle_timer(now) / core.next_event()

Each connection's framing is a :class:`vmc.core.h1.ServerConnection`: llhttp and
response heads built as bytes for the common case, h11 for everything else (and
from the first byte with ``reference_parser=True``, the readable reference the
agreement test compares against). One request at a time per connection (a
pipelined next request waits until the answer ends); a request the adapter
cannot route (not absolute-form ``http://`` and no Host) gets 400, malformed bytes
get 400 and a close: a clear answer, never a traceback.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import cast

import h11

from deliverykit.protocol import StreamClose, StreamWrite
from vmc.core.errors import URIError
from vmc.core.fetchgate import FetchGate
from vmc.core.h1 import Request as RequestHead, ServerConnection
from vmc.core.key import format_authority, normalise_uri, request_key, split_authority
from vmc.core.linger import HalfClose, Lingering, LingerLimits
from vmc.core.machine import (
    Abort,
    CancelFetch,
    ClientGone,
    DiskStore,
    Drained,
    Event,
    Fetch,
    Finish,
    Interim,
    Kept,
    Kind,
    MachineConfig,
    OriginData,
    OriginEnd,
    OriginError,
    OriginHead,
    OriginInterim,
    Request,
    Respond,
    Send,
    SendSpan,
    SharingMachine,
)
from vmc.core.plan import VMC_HEADER
from vmc.core.policy import end_to_end
from vmc.core.ranges import format_content_range
from vmc.core.reasons import Refused
from vmc.core.session import FinishedCopy
from vmc.core.slots import ConnectionSlots, SlotLimits
from vmc.core.stats import Stats

#: Bytes for a client connection (the one core protocol's stream output).
Write = StreamWrite
#: Close a client connection.
Close = StreamClose



@dataclass(frozen=True, slots=True)
class FileWrite:
    """Body bytes for a client connection straight from a disk copy (the pump sends them by
    sendfile, or reads them where its loop has none), in order with the connection's writes."""

    conn: Hashable
    """The client connection."""
    copy: object
    """The disk copy (the pump's ``SpillFile``)."""
    first: int
    """Offset in the copy."""
    count: int
    """How many bytes."""


class _Span:
    """``count`` bytes h11 frames without seeing them (its data pass-through)."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count


Output = Write | FileWrite | HalfClose | Close | Fetch | CancelFetch | Kept


@dataclass(slots=True)
class _Pending:
    """A request whose body is still arriving."""

    method: bytes
    uri: str
    headers: tuple[tuple[bytes, bytes], ...]
    origin: tuple[str, int] | None = None
    body: bytearray = field(default_factory=bytearray)

#: Fields the adapter sets itself or that are hop-by-hop (RFC 9110 sec. 7.6.1): never copied.
_OURS = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
        b"content-range",
        b"accept-ranges",
        b"via",
        VMC_HEADER,
    }
)

_REASONS = {
    501: b"Not Implemented",
    200: b"OK",
    206: b"Partial Content",
    100: b"Continue",
    400: b"Bad Request",
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    505: b"HTTP Version Not Supported",
    413: b"Content Too Large",
    403: b"Forbidden",
    416: b"Range Not Satisfiable",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
    504: b"Gateway Timeout",
}

#: Host field values whose split the core remembers (:meth:`HttpSharingCore._host_upstream`).
_HOSTS = 1024
#: (target, Host) pairs whose route the core remembers (:meth:`HttpSharingCore._route`).
_ROUTES = 4096

_INTERIM_REASONS = {102: b"Processing", 103: b"Early Hints"}


class HttpSharingCore:
    """h11 server connections feeding one :class:`SharingMachine` (module docstring); a
    :class:`~deliverykit.protocol.StreamCore` whose own outputs are ``Fetch``/``CancelFetch``."""

    def __init__(
        self,
        cfg: MachineConfig | None = None,
        default_authority: str | None = None,
        disk: DiskStore | None = None,
        upstreams: Iterable[str] | None = None,
        status_path: str | None = None,
        status_allow: Iterable[str] = ("127.0.0.0/8", "::1/128"),
        max_request_body: int = 1 << 20,
        slots: SlotLimits | None = None,
        max_header_bytes: int = 16384,
        gate: FetchGate | None = None,
        linger: LingerLimits | None = None,
        reference_parser: bool = False,
    ) -> None:
        """``upstreams`` ("host:port"): the only origins reached (absolute-form must name one,
        an origin-form Host that names one is used, else ``default_authority``); None: any
        absolute URI, origin-form by its Host (the simulator's and the tests' use).
        ``status_path``: answer the status JSON there to peers in ``status_allow`` (the driver
        names a connection's peer with :meth:`peer_known`); None: no status endpoint.
        ``gate``: the upstream cap (at most so many fetches out, the rest wait, then 503 +
        Retry-After); None: no cap. ``linger``: how long a connection we answered with an
        error and ended is still read (:mod:`vmc.core.linger`). ``reference_parser``: every
        connection framed by h11 alone (the reference the fast path is tested against)."""
        self.machine = SharingMachine(cfg, disk=disk)
        #: Authority for origin-form requests without a Host (reverse-proxy use).
        self.default_authority = default_authority
        #: ``default_authority`` split once, with ``upstreams`` (origin-form falls back to it).
        self._default: tuple[str, int] | None = None
        self._hosts: dict[str, tuple[str, int] | None] = {}
        self._routes: dict[tuple[str, str | None], str | Refused] = {}
        self.allowed: set[tuple[str, int]] | None = None
        if upstreams is not None:
            self.allowed = {split_authority(u) for u in upstreams}
            if default_authority is not None:
                self._default = split_authority(default_authority)
                self.allowed.add(self._default)
        self.status_path = status_path
        self.status_allow = [ipaddress.ip_network(n, strict=False) for n in status_allow]
        self.peers: dict[Hashable, str] = {}
        #: Transparent mode: each redirected connection's original destination (the driver's
        #: ``SO_ORIGINAL_DST``, :meth:`original_destination`); origin-form requests go there.
        self.original: dict[Hashable, tuple[str, int]] = {}
        #: Retry-After of the 503 for a full set of connection slots (the proxy's).
        self.retry_after = 2
        #: Bytes of request head accepted (431 past it).
        self.max_header_bytes = max_header_bytes
        #: Bytes of request body accepted (the proxy's ``max_request_body``; 413 past it).
        self.max_request_body = max_request_body
        self._reading: dict[Hashable, _Pending] = {}
        #: Connection slots and request deadlines (``slots``; none by default).
        self.slots = ConnectionSlots(slots or SlotLimits())
        self.conns: dict[Hashable, ServerConnection] = {}
        self.reference_parser = reference_parser
        self._busy: set[Hashable] = set()
        self._out: list[Output] = []
        #: The upstream cap (no cap by default).
        self.gate = gate or FetchGate()
        #: Broken streams holding their cap slot for their resume: session -> the broken fetch.
        self._held: dict[object, int] = {}
        #: Connections answered with an error and ended by us, still read until the client ends.
        self.lingering = Lingering(linger)
        #: The driver's own figures for the status JSON (its disk store, connection pool,
        #: open connections), merged in when set.
        self.status_extra: Callable[[], dict[str, object]] | None = None

    @property
    def stats(self) -> Stats:
        """The status log and counters (the machine's)."""
        return self.machine.stats

    # ------------------------------------------------------------------ client connections
    def connection_made(self, conn: Hashable, now: float) -> None:
        d = self.slots.opened(conn, now)
        if d.evict is not None:  # its slot goes to the newcomer
            self.stats.refused[ConnectionSlots.eviction_reason(d)] += 1
            self._forget(d.evict)
            self._out.append(Close(d.evict, abort=True))
        if not d.admitted:  # every slot is answering a request: 503 at once
            self.stats.refused[Refused.CONNECTION_LIMIT] += 1
            body = b"503 connection-limit\n"
            self._out.append(Write(conn, b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: "
                                   b"text/plain\r\ncontent-length: %d\r\nretry-after: %d\r\n"
                                   b"connection: close\r\n\r\n%s"
                                   % (len(body), self.retry_after, body)))
            self._linger(conn, now)
            return
        self.conns[conn] = ServerConnection(self.max_header_bytes, self.reference_parser)

    def _forget(self, conn: Hashable) -> None:
        self.conns.pop(conn, None)
        self.peers.pop(conn, None)
        self.original.pop(conn, None)
        self._reading.pop(conn, None)
        self.slots.closed(conn)

    def peer_known(self, conn: Hashable, host: str, now: float) -> None:
        """The driver names the address of ``conn``'s peer (for ``status_allow``)."""
        self.peers[conn] = host

    def original_destination(self, conn: Hashable, addr: tuple[str, int], now: float) -> None:
        """Transparent mode: ``conn`` was redirected to us on its way to ``addr`` (the driver
        reads it from the socket); its origin-form requests go there and nowhere else."""
        self.original[conn] = addr

    def data_received(self, conn: Hashable, data: bytes, now: float) -> None:
        if conn in self.lingering:
            if self.lingering.received(conn, len(data), now):
                self._out.append(Close(conn))
            return
        c = self.conns.get(conn)
        if c is None:
            return
        if data:
            self.slots.bytes_in(conn, now)
        try:
            c.receive_data(data)
        except h11.RemoteProtocolError as exc:
            return self._malformed(conn, exc, now)
        self._next_request(conn, now)

    def writable(self, conn: Hashable, n: int, now: float) -> None:
        if conn in self._busy:
            self.machine.input_received(Drained(conn, n), now)
            self._pump(now)

    def connection_lost(self, conn: Hashable, now: float) -> None:
        self._forget(conn)
        self.lingering.forget(conn)
        if conn in self._busy:
            self._busy.discard(conn)
            self.machine.input_received(ClientGone(conn), now)
            self._pump(now)

    # ------------------------------------------------------------------ the origin side
    def origin_received(
        self, inp: OriginHead | OriginInterim | OriginData | OriginEnd | OriginError, now: float
    ) -> None:
        flight = self.machine.flights.get(inp.fetch)
        self.machine.input_received(inp, now)
        if isinstance(inp, OriginError) and flight is not None and flight.kind is Kind.STREAM:
            # a broken stream keeps its slot for its resume (asked now or after the backoff)
            self._held[flight.session] = inp.fetch
        elif isinstance(inp, (OriginEnd, OriginError)):
            self._out.extend(self.gate.ended(inp.fetch))
        self._pump(now)

    # ------------------------------------------------------------------ the protocol's shape
    def to_send(self, now: float) -> list[Output]:
        out, self._out = self._out, []
        return out

    def get_timer(self, now: float) -> float | None:
        ds = [
            d
            for d in (
                self.machine.get_timer(now),
                self.slots.deadline(),
                self.gate.deadline(),
                self.lingering.deadline(),
            )
            if d is not None
        ]
        return min(ds) if ds else None

    def handle_timer(self, now: float) -> None:
        for conn in self.lingering.expired(now):
            self._out.append(Close(conn))
        for conn, why in self.slots.expired(now):
            if conn not in self.conns:
                continue
            if why is None:  # idle between requests: closed quietly
                self._forget(conn)
                self._out.append(Close(conn))
            else:
                self.stats.refused[why] += 1
                self._drop_pending(conn)
                self._bad(conn, 408, now)
                self.slots.closed(conn)
        self._busy_fetches(self.gate.expired(now), now)
        self.machine.handle_timer(now)
        self._pump(now)

    def next_event(self) -> Event | None:
        return self.machine.next_event()

    # ------------------------------------------------------------------ inside
    def _next_request(self, conn: Hashable, now: float) -> None:
        if conn in self._reading:
            return self._read_body(conn, now)
        c = self.conns.get(conn)
        if c is None or conn in self._busy:
            return
        try:
            ev = c.next_event()
            while isinstance(ev, h11.Data):  # a body: not shared (the machine passes it through)
                ev = c.next_event()
        except h11.RemoteProtocolError as exc:
            return self._malformed(conn, exc, now)
        if isinstance(ev, h11.ConnectionClosed):
            self._out.append(Close(conn))
            return
        if not isinstance(ev, RequestHead):
            return  # NEED_DATA, or EndOfMessage of a request already answered
        self.slots.head_in(conn, now)
        refused = self._refusal(ev)
        if refused is not None:
            self.stats.refused[refused[1]] += 1
            return self._bad(conn, refused[0], now)
        headers = ev.headers
        target = ev.target.decode("ascii", "surrogateescape")
        host = next((v for k, v in headers if k == b"host"), None)
        if self.status_path is not None and target.split("?", 1)[0] == self.status_path:
            return self._status(conn, target, now)
        original = None if target.lower().startswith(("http://", "https://")) else (
            self.original.get(conn))
        hostname = None if host is None else host.decode("ascii", "surrogateescape")
        uri = self._route(target, hostname, original)
        if uri is Refused.BAD_TARGET:
            self.stats.refused[uri] += 1
            return self._bad(conn, 400, now)
        if isinstance(uri, Refused):
            return self._refuse(conn, 403, uri, now)
        self._busy.add(conn)
        self._reading[conn] = _Pending(ev.method, uri, headers, original)
        if c.they_are_waiting_for_100_continue:
            self._emit(conn, c.send_interim, 100, [], b"")
        self._read_body(conn, now)

    def _read_body(self, conn: Hashable, now: float) -> None:
        """Take the request's body as far as it has arrived; at its end the request goes to the
        machine with it (a body is never dropped; one past ``max_request_body`` gets 413)."""
        c, p = self.conns.get(conn), self._reading.get(conn)
        if c is None or p is None:
            return
        try:
            while True:
                ev = c.next_event()
                if ev is h11.NEED_DATA:
                    return  # the rest comes with the next bytes
                if isinstance(ev, h11.EndOfMessage):
                    break
                if not isinstance(ev, h11.Data):  # closed mid-body
                    self._drop_pending(conn)
                    self._out.append(Close(conn))
                    return
                p.body += ev.data
                if len(p.body) > self.max_request_body:
                    self._drop_pending(conn)
                    self.stats.refused[Refused.BODY_TOO_LARGE] += 1
                    return self._bad(conn, 413, now)
        except h11.RemoteProtocolError:
            self._drop_pending(conn)
            return self._bad(conn, 400, now)
        del self._reading[conn]
        self.slots.busy(conn, now)
        req = Request(conn, p.method, p.uri, p.headers, bytes(p.body), p.origin)
        self.machine.input_received(req, now)
        self._pump(now)

    def _refusal(self, ev: RequestHead) -> tuple[int, Refused] | None:
        """What must not be forwarded (and why), or None."""
        if not ev.http_version.startswith(b"1."):  # RFC 9110 sec. 2.5: HTTP/1.x only here
            return 505, Refused.HTTP_VERSION
        # h11 bounds only an incomplete head; a whole one read at once is bounded here.
        if len(ev.target) + sum(len(k) + len(v) + 4 for k, v in ev.headers) > self.max_header_bytes:
            return 431, Refused.HEADER_TOO_LARGE
        names = [k for k, _ in ev.headers]
        if b"transfer-encoding" in names and b"content-length" in names:
            return 400, Refused.SMUGGLING  # RFC 9112 sec. 6.3 rule 3, sec. 11.2
        if names.count(b"host") > 1:
            return 400, Refused.DUPLICATE_HOST
        return None

    def _malformed(self, conn: Hashable, exc: h11.RemoteProtocolError, now: float) -> None:
        status = exc.error_status_hint or 400
        self.stats.refused[Refused.HEADER_TOO_LARGE if status == 431 else Refused.MALFORMED] += 1
        self._drop_pending(conn)
        self._bad(conn, status, now)

    def _drop_pending(self, conn: Hashable) -> None:
        self._reading.pop(conn, None)
        self._busy.discard(conn)

    def _route(
        self, target: str, host: str | None, original: tuple[str, int] | None = None
    ) -> str | Refused:
        """The normalised absolute URI a request goes to, or why not (as the proxy routes).
        ``original``: an origin-form request on a redirected connection (transparent mode)
        goes to that address, which must be allowed; its Host names the URI (the key and the
        upstream request) but cannot steer the connection elsewhere. Routes of
        non-transparent requests are remembered per (target, Host) (at most ``_ROUTES``): they
        depend on nothing else."""
        if original is None:
            known = self._routes.get((target, host))
            if known is None:
                if len(self._routes) >= _ROUTES:
                    self._routes.clear()
                known = self._routes[(target, host)] = self._find_route(target, host, None)
            return known
        if target.startswith("/"):
            self.stats.transparent += 1
        return self._find_route(target, host, original)

    def holds_fresh(self, uri: str, now: float) -> bool:
        """A finished object for ``uri`` is whole on disk here and still fresh at ``now``:
        ``vmc proxy --workers`` serves such a request where it landed (:mod:`vmc.aio.steer`)."""
        s = self.machine.sharing.finished.get(request_key(uri))
        return (s is not None and s.spill is not None and s.spill.complete
                and s.freshness.fresh(now - s.received_at))

    def adopt_finished(self, copy: FinishedCopy, disk: object, now: float) -> None:
        """A finished object another worker kept, on a copy of its file in our store
        (:meth:`vmc.core.machine.SharingMachine.adopt_finished`; refused, it closes ``disk``)."""
        self.machine.adopt_finished(copy, disk)

    def request_uri(self, conn: Hashable, target: bytes, host: bytes | None) -> str | None:
        """The URI a request for ``target`` with this Host on ``conn`` is keyed by (as
        :meth:`_route` routes it), or None when the core refuses it or answers it itself (the
        status path). Counts nothing. ``vmc proxy --workers`` sends a connection to the worker
        that owns its first request's object by it (:mod:`vmc.aio.steer`)."""
        t = target.decode("ascii", "surrogateescape")
        if self.status_path is not None and t.split("?", 1)[0] == self.status_path:
            return None
        original = None if t.lower().startswith(("http://", "https://")) else (
            self.original.get(conn))
        h = None if host is None else host.decode("ascii", "surrogateescape")
        uri = self._route(t, h, None) if original is None else self._find_route(t, h, original)
        return None if isinstance(uri, Refused) else uri

    def _find_route(
        self, target: str, host: str | None, original: tuple[str, int] | None
    ) -> str | Refused:
        low = target.lower()
        try:
            if original is not None and target.startswith("/"):
                if self.allowed is not None and original not in self.allowed:
                    return Refused.UPSTREAM_NOT_ALLOWED
                return normalise_uri(target, host or format_authority(*original))
            if low.startswith("https://"):
                return Refused.UPSTREAM_NOT_ALLOWED  # never tunnelled: no TLS here
            if low.startswith("http://"):
                uri = normalise_uri(target)
                authority = uri.split("://", 1)[1].split("/", 1)[0]
                if self.allowed is not None and split_authority(authority) not in self.allowed:
                    return Refused.UPSTREAM_NOT_ALLOWED
                return uri
            if not target.startswith("/"):
                return Refused.BAD_TARGET
            if self.allowed is None:
                named = host or self.default_authority
                return Refused.BAD_TARGET if named is None else normalise_uri(target, named)
            upstream = self._host_upstream(host) if host else None
            if upstream not in self.allowed:
                if self._default is None:
                    return Refused.UPSTREAM_NOT_ALLOWED
                upstream = self._default
            return normalise_uri(target, format_authority(*upstream))
        except URIError:
            return Refused.BAD_TARGET

    def _host_upstream(self, host: str) -> tuple[str, int] | None:
        """A Host field's (host, port), None if it names none; remembered per value (every
        request of a reverse-proxy client sends the same one; at most ``_HOSTS`` values)."""
        if host in self._hosts:
            return self._hosts[host]
        if len(self._hosts) >= _HOSTS:
            self._hosts.clear()
        try:
            upstream: tuple[str, int] | None = split_authority(host)
        except URIError:
            upstream = None
        self._hosts[host] = upstream
        return upstream

    def status(self, recent: int = 100) -> dict[str, object]:
        """The status JSON (the proxy's format where the core has the figure)."""
        snap: dict[str, object] = self.stats.snapshot(recent)
        m = self.machine
        snap["engine"] = "core"
        snap["live_sessions"] = len(m.sharing.sessions)
        snap["buffer_bytes"] = sum(s.buffer.memory for s in m.sharing.sessions.values())
        snap["buffer_committed"] = m.sharing.committed
        snap["window"] = m.cfg.window
        snap["buffer_budget"] = m.cfg.buffer_budget
        snap["queue_limit"] = m.cfg.queue_limit
        if self.gate.limit > 0:
            snap["upstream_limit"] = self.gate.snapshot()
        if self.status_extra is not None:
            snap.update(self.status_extra())
        return snap

    def _status(self, conn: Hashable, target: str, now: float) -> None:
        """The status endpoint: the JSON to an allowed peer, else 403 (it lists recent URIs)."""
        if not self._status_allowed(self.peers.get(conn)):
            return self._refuse(conn, 403, Refused.STATUS_NOT_ALLOWED, now)
        recent = 100
        if "recent=" in target:
            try:
                recent = max(0, min(2000, int(target.split("recent=", 1)[1].split("&", 1)[0])))
            except ValueError:
                pass
        body = json.dumps(self.status(recent), indent=1, default=str).encode()
        hdrs = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
        self._answer(conn, 200, hdrs, body, now)

    def _status_allowed(self, peer: str | None) -> bool:
        if peer is None:
            return False
        try:
            addr = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return any(addr.version == net.version and addr in net for net in self.status_allow)

    def _refuse(self, conn: Hashable, status: int, why: Refused, now: float) -> None:
        """Answer ``status`` with the reason's name and keep the connection (as the proxy's 403)."""
        self.stats.refused[why] += 1
        body = f"{status} {why.value}\n".encode()
        self._answer(conn, status, [(b"content-type", b"text/plain")], body, now)

    def _answer(
        self, conn: Hashable, status: int, hdrs: list[tuple[bytes, bytes]], body: bytes, now: float
    ) -> None:
        """A whole answer made here (not by the machine); the connection is kept."""
        hdrs = hdrs + [(b"content-length", b"%d" % len(body))]
        c = self.conns.get(conn)
        if c is None:
            return
        self._end_of_request(c)
        if self._emit(conn, c.send_response, status, hdrs, _REASONS[status]):
            self._emit(conn, c.send_data, body)
        self._finish(conn, now)

    def _busy_fetches(self, fetches: list[Fetch], now: float) -> None:
        """Fetches the cap refused: their readers get 503 + Retry-After (never sent)."""
        for f in fetches:
            self.stats.refused[Refused.UPSTREAM_BUSY] += 1
            why = f"upstream busy: {len(self.gate.out)} fetches out (limit {self.gate.limit})"
            self.machine.input_received(OriginError(f.fetch, why, busy=True), now)

    def _pump(self, now: float) -> None:
        for _ in range(1000):  # a refused fetch's answer may ask for another fetch: bounded
            refused = self._pump_once(now)
            if not refused:
                return
            self._busy_fetches(refused, now)

    def _pump_once(self, now: float) -> list[Fetch]:
        refused: list[Fetch] = []
        for a in self.machine.actions_to_send(now):
            if type(a) is Send:  # the data path's actions first, by their exact type
                c = self.conns.get(a.client)
                if c is not None:
                    self._emit(a.client, c.send_data, a.data)
                continue
            if type(a) is Respond:
                self._respond(a)
                continue
            if type(a) is Finish:
                self._finish(a.client, now)
                continue
            flight = self.machine.flights.get(a.fetch) if isinstance(a, Fetch) else None
            resume = flight is not None and flight.kind is Kind.STREAM
            held = self._held.pop(flight.session, None) if resume and flight else None
            if isinstance(a, Fetch) and held is not None:
                self.gate.hand_over(held, a.fetch)
                self._out.append(a)
            elif isinstance(a, Fetch):
                go = self.gate.offer(a, now)
                if isinstance(go, Fetch):
                    self._out.append(go)
                elif go is False:
                    refused.append(a)
            elif isinstance(a, CancelFetch):
                was_out, go_now = self.gate.cancelled(a.fetch)
                if was_out:
                    self._out.append(a)
                self._out.extend(go_now)
            elif isinstance(a, Respond):
                self._respond(a)
            elif isinstance(a, Interim):
                self._interim(a)
            elif isinstance(a, Send):
                c = self.conns.get(a.client)
                if c is not None:
                    self._emit(a.client, c.send_data, a.data)
            elif isinstance(a, SendSpan):
                self._send_span(a)
            elif isinstance(a, Finish):
                self._finish(a.client, now)
            elif isinstance(a, Abort):  # reset: a close would wait for bytes nobody takes
                self._busy.discard(a.client)
                self.conns.pop(a.client, None)
                self._out.append(Close(a.client, abort=True))
            elif isinstance(a, Kept):  # the driver's to offer to its other processes, if any
                self._out.append(a)
        m = self.machine
        for s, fetch in list(self._held.items()) if self._held else ():  # no resume: slot goes on
            if s not in m.resume_at:
                del self._held[s]
                self._out.extend(self.gate.ended(fetch))
        return refused

    def _respond(self, a: Respond) -> None:
        hdrs = [(k, v) for k, v in a.headers if k not in _OURS]
        hdrs += [(b"via", b"1.1 vmc"), (b"accept-ranges", b"bytes")]
        if a.length is not None:
            hdrs.append((b"content-length", b"%d" % a.length))
        if a.content_range is not None:  # a pass-through: the origin's, as it is
            hdrs.append((b"content-range", a.content_range))
        elif a.status == 206 and not any(  # a multipart answer's parts have their own
                k == b"content-type" and v.startswith(b"multipart/") for k, v in hdrs):
            hdrs.append(
                (
                    b"content-range",
                    format_content_range(a.first, a.first + (a.length or 0) - 1, a.total).encode(),
                )
            )
        elif a.status == 416:
            hdrs.append((b"content-range", b"bytes */%d" % a.total))
        if a.status == 503:  # the upstream cap said no
            hdrs.append((b"retry-after", b"%d" % self.retry_after))
        how = [v for k, v in a.headers if k == VMC_HEADER]  # the machine's, on shared answers
        hdrs.append((VMC_HEADER, how[0] if how else b"sim-core"))
        c = self.conns.get(a.client)
        if c is not None:
            self._emit(a.client, c.send_response, a.status, hdrs, _REASONS.get(a.status, b""))

    def _interim(self, a: Interim) -> None:
        """The origin's 1xx, hop-by-hop fields dropped (RFC 9110 sec. 15.2); never to an
        HTTP/1.0 client (it does not expect them)."""
        c = self.conns.get(a.client)
        if c is None or c.their_http_version in (None, b"1.0"):
            return
        self._emit(a.client, c.send_interim, a.status, end_to_end(list(a.headers)),
                   _INTERIM_REASONS.get(a.status, b""))

    def _emit(self, conn: Hashable, send: Callable[..., bytes], *args: object) -> bool:
        """``send(*args)``'s bytes to the client; what the framing refuses closes the
        connection (False)."""
        try:
            data = send(*args)
        except h11.LocalProtocolError:
            self.conns.pop(conn, None)
            self._out.append(Close(conn))
            return False
        if data:
            self._out.append(Write(conn, data))
        return True

    def _send_span(self, a: SendSpan) -> None:
        """A disk span framed by h11 (which only takes its length) and left to the driver."""
        c = self.conns.get(a.client)
        if c is None:
            return
        span = _Span(a.count)
        try:
            pieces = c.send_span(span, a.count)
        except h11.LocalProtocolError:
            self.conns.pop(a.client, None)
            self._out.append(Close(a.client))
            return
        for piece in pieces:
            if piece is span:
                self._out.append(FileWrite(a.client, a.copy, a.first, a.count))
            elif piece:
                self._out.append(Write(a.client, bytes(cast(bytes, piece))))

    @staticmethod
    def _end_of_request(c: ServerConnection) -> None:
        """Take the request's body (ignored: the machine shares bodiless requests) and its end,
        as far as they have arrived."""
        try:
            while c.their_state is h11.SEND_BODY:
                ev = c.next_event()
                if ev is h11.NEED_DATA or isinstance(ev, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
        except h11.RemoteProtocolError:
            pass

    def _finish(self, conn: Hashable, now: float) -> None:
        self._busy.discard(conn)
        c = self.conns.get(conn)
        if c is None:
            return
        if not self._emit(conn, c.send_end):
            return
        self._end_of_request(c)
        if c.our_state is h11.DONE and c.their_state is h11.DONE:
            c.start_next_cycle()
            self.slots.kept(conn, now)
            self._next_request(conn, now)
        elif c.our_state is h11.MUST_CLOSE or c.their_state is h11.MUST_CLOSE:
            self.conns.pop(conn, None)
            self._out.append(Close(conn))

    def _linger(self, conn: Hashable, now: float) -> None:
        """Our answer is written: end our side and read what still comes, then close (a client
        still sending its request must read the answer, not a reset: :mod:`vmc.core.linger`)."""
        self._out.append(HalfClose(conn))
        self.lingering.start(conn, now)

    def _bad(self, conn: Hashable, status: int, now: float) -> None:
        """Answer ``status`` (400: not HTTP or not routable; 413, 408, 431, 505) and close, by a
        lingering close (:meth:`_linger`)."""
        c = self.conns.pop(conn, None)
        if c is not None and c.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                data = c.send_response(
                    status, [(b"content-length", b"0"), (b"connection", b"close")],
                    _REASONS.get(status, b""),
                )
                data += c.send_end()
                self._out.append(Write(conn, data))
            except h11.LocalProtocolError:
                pass
        self._linger(conn, now)
