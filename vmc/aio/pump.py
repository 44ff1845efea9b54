"""A thin asyncio pump around a sans-IO stream core (issue 19 item 2; docs/vmc-sim.md).

:class:`CorePump` drives any :class:`deliverykit.protocol.StreamCore` (by default
:class:`vmc.core.http.HttpSharingCore`) and owns the sockets and the clock and
nothing else: client bytes go to the core, its ``StreamWrite``/``StreamClose`` go
to the transports, any other output to ``on_output``; for the sharing core its
``Fetch`` actions become origin requests
(:func:`vmc.aio.upstream.request`) whose head, body chunks and end go back in as
``Origin*`` inputs, and its one timer is re-armed after every input. The very
:class:`~vmc.core.machine.SharingMachine` inside is what :mod:`vmc.sim` drives
in simulated time.

Back-pressure: bytes written to a client count as taken (``writable``) at once
unless its transport asked us to pause (write buffer past its high-water mark);
then they count when it resumes.

``vmc proxy`` is this pump over the sharing core (:class:`vmc.aio.proxy.Proxy` builds it
from the proxy's settings). The sockets are the pump's: the origin connection pool, coalesced
writes, a client's half-close, sendfile, the original destination of a redirected
connection (transparent mode), the FIN of a lingering close.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, cast, runtime_checkable

import h11

from deliverykit.protocol import StreamClose, StreamCore, StreamWrite
from vmc.aio import upstream as up
from vmc.aio.config import original_dst
from vmc.aio.spill import DiskStore
from vmc.aio.steer import Handed, Steering, first_head
from vmc.core.fetchgate import FetchGate
from vmc.core.http import FileWrite, HttpSharingCore
from vmc.core.key import split_authority
from vmc.core.linger import HalfClose
from vmc.core.machine import (
    CancelFetch,
    Fetch,
    Kept,
    MachineConfig,
    OriginData,
    OriginEnd,
    OriginError,
    OriginHead,
    OriginInterim,
)
from vmc.core.ranges import format_range
from vmc.core.reasons import Refused
from vmc.core.slots import SlotLimits

#: Rounds of outputs handled per input before yielding (bounds a runaway loop).
MAX_ROUNDS = 10_000

#: Disk spans of at least this many bytes leave by sendfile, at most ``SENDFILE_SPAN`` per call
#: (the old proxy's rule: each span must be taken within ``client_write_timeout``).
SENDFILE_MIN = 1 << 20
SENDFILE_SPAN = 4 << 20
#: On a loop without ``loop.sendfile`` (uvloop) the pump sends a span itself, at once, by
#: ``os.sendfile`` while the transport holds nothing, the rest by a read into the transport:
#: spans of at least this many bytes, at most ``DIRECT_SPAN`` each (what a read may then buffer).
DIRECT_MIN = 32 << 10
DIRECT_SPAN = 256 << 10


def sendfile_supported() -> bool:
    """Does the running loop have ``loop.sendfile``? asyncio's loops do (zero copy on a plain
    socket, else their fallback); uvloop's raises NotImplementedError, so there the pump sends
    spans itself (:meth:`CorePump._send_span_now`)."""
    return isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop)


@runtime_checkable
class PeerAware(Protocol):
    """A stream core that wants each connection's peer address (the status endpoint's check)."""

    def peer_known(self, conn: int, host: str, now: float) -> None:
        """``conn``'s peer is ``host``."""


@runtime_checkable
class Redirectable(Protocol):
    """A stream core that serves redirected connections (transparent mode): it takes each
    one's original destination."""

    def original_destination(self, conn: int, addr: tuple[str, int], now: float) -> None:
        """``conn`` was on its way to ``addr`` when it was redirected to us."""


@runtime_checkable
class OriginSink(Protocol):
    """A stream core whose ``Fetch`` outputs the pump carries out: it takes the answers."""

    def origin_received(
        self,
        inp: OriginHead | OriginInterim | OriginData | OriginEnd | OriginError,
        now: float,
    ) -> None:
        """The origin's 1xx, head, a body chunk, the end, or the failure of one fetch."""


def _coalesced(outs: Sequence[object]) -> list[object]:
    """Consecutive writes to one connection as one (a small answer's head and body leave in
    one send(): one system call, one wake-up of the client)."""
    merged: list[object] = []
    run: list[StreamWrite] = []

    def end_run() -> None:
        if len(run) == 1:
            merged.append(run[0])
        elif run:
            merged.append(StreamWrite(run[0].conn, b"".join(w.data for w in run)))
        run.clear()

    for out in outs:
        if isinstance(out, StreamWrite) and (not run or run[0].conn == out.conn):
            run.append(out)
            continue
        end_run()
        if isinstance(out, StreamWrite):
            run.append(out)
        else:
            merged.append(out)
    end_run()
    return merged


class _Client(asyncio.Protocol):
    def __init__(self, pump: CorePump, first: bytes | None = None) -> None:
        self.pump = pump
        self.conn = next(pump._ids)
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.unreported = 0
        #: While a sendfile runs on this connection: the outputs for it that wait their turn.
        self.held: list[object] | None = None
        #: A connection another worker handed us: the bytes it had read (fed first).
        self.first = first
        #: Its first read is still to be looked at for its object's worker (``--workers``).
        self.steer = pump.steering is not None and first is None
        #: Handed to another worker: this process no longer serves it.
        self.handed_off = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, but uvloop's (the CLI's default loop) is no asyncio.Transport
        # subclass: an isinstance check refused every client there
        self.transport = cast(asyncio.Transport, transport)
        self.pump.clients[self.conn] = self
        self.pump.feed(self.conn, self.pump.core.connection_made, self.conn)
        peer = transport.get_extra_info("peername")
        core = self.pump.core
        if peer and isinstance(core, PeerAware):
            self.pump.feed(self.conn, core.peer_known, self.conn, str(peer[0]))
        if self.pump.transparent and isinstance(core, Redirectable):
            dst = original_dst(transport.get_extra_info("socket"))
            if dst is not None:  # None: not redirected (a client that came to our address)
                self.pump.feed(self.conn, core.original_destination, self.conn, dst)
        if self.first is not None:  # read by the worker that handed it to us
            first, self.first = self.first, None
            self.pump.feed(self.conn, core.data_received, self.conn, first)

    def data_received(self, data: bytes) -> None:
        if self.steer:
            self.steer = False
            if self.pump.hand_off(self, data):
                return
        self.pump.feed(self.conn, self.pump.core.data_received, self.conn, data)

    def eof_received(self) -> bool:
        """A client that half-closes after its request still gets its answer (h11 sees the
        end; the core closes once it has answered); False would close the transport now."""
        self.pump.feed(self.conn, self.pump.core.data_received, self.conn, b"")
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.handed_off:
            return  # the core forgot it at the hand-off
        self.pump.clients.pop(self.conn, None)
        self.pump.feed(None, self.pump.core.connection_lost, self.conn)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.unreported and self not in self.pump._owed:
            self.pump._owed.append(self)
        self.pump.flush()


_Pump = TypeVar("_Pump", bound="CorePump")


class CorePump:
    """``await CorePump(cfg, default_authority=...).start()``; ``.address``; ``await .close()``.

    With ``core``, that :class:`~deliverykit.protocol.StreamCore` is driven instead of a new
    sharing core (``cfg``, ``default_authority`` and ``disk_dir`` are then unused); outputs
    other than writes, closes and the sharing core's fetches go to ``on_output`` (counted in
    ``counters["unhandled_outputs"]`` without one). A core that raises on an input or a timer
    is counted (``counters["core_errors"]``) and that connection closed; the pump goes on.
    """

    def __init__(
        self,
        cfg: MachineConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        default_authority: str | None = None,
        upstream_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        disk_dir: str | None = None,
        core: StreamCore | None = None,
        on_output: Callable[[object], None] | None = None,
        upstreams: list[str] | None = None,
        status_path: str | None = None,
        status_allow: list[str] | None = None,
        max_request_body: int = 1 << 20,
        slots: SlotLimits | None = None,
        max_header_bytes: int = 16384,
        gate: FetchGate | None = None,
        pool: up.Pool | None = None,
        reuse_port: bool = False,
        transparent: bool = False,
        steering: Steering | None = None,
    ) -> None:
        self.store: DiskStore | None = None
        if core is None:
            cfg = cfg or MachineConfig()
            #: Bodies on disk, as the proxy keeps them (anonymous files under ``disk_dir``).
            if cfg.disk_budget > 0 and cfg.sharing:
                self.store = DiskStore(cfg.disk_budget, disk_dir)
            core = HttpSharingCore(
                cfg,
                default_authority,
                disk=self.store,
                upstreams=upstreams,
                status_path=status_path,
                status_allow=status_allow or ["127.0.0.0/8", "::1/128"],
                max_request_body=max_request_body,
                slots=slots,
                max_header_bytes=max_header_bytes,
                gate=gate,
            )
        self.core: StreamCore = core
        #: Idle keep-alive origin connections (``upstream_keepalive``); None: one per fetch.
        self.pool = pool
        if isinstance(core, HttpSharingCore) and core.status_extra is None:
            core.status_extra = lambda: driver_status(self)
        self.on_output = on_output
        #: The pump's own counters: inputs or timers the core raised on, outputs nobody took.
        self.counters = {"core_errors": 0, "unhandled_outputs": 0}
        self.host, self.port = host, port
        #: SO_REUSEPORT on the listening socket (``vmc proxy --workers N``: one per process).
        self.reuse_port = reuse_port
        #: Transparent mode: read each connection's original destination (SO_ORIGINAL_DST)
        #: for the core, which routes its origin-form requests there.
        self.transparent = transparent
        #: ``--workers N``: each connection goes to the worker that owns its first request's
        #: object (:mod:`vmc.aio.steer`); None: served where it landed.
        self.steering = steering
        self.upstream_timeout = upstream_timeout
        self.clock = clock
        self.clients: dict[int, _Client] = {}
        self.fetches: dict[int, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: The core deadline the loop timer is armed for (it may fire before the core's
        #: current one, never after).
        self._armed_at: float | None = None
        #: Clients written to whose bytes the core has not yet been told were taken.
        self._owed: list[_Client] = []
        self._files: set[asyncio.Task[None]] = set()
        #: Disk spans sent at once by os.sendfile (no ``loop.sendfile``: uvloop).
        self._direct = False

    async def start(self: _Pump) -> _Pump:
        loop = asyncio.get_running_loop()
        if isinstance(self.core, HttpSharingCore) and not sendfile_supported():
            mcfg = self.core.machine.cfg  # uvloop: spans sent at once (_send_span_now)
            if mcfg.sendfile_min > 0:
                mcfg.sendfile_min, mcfg.sendfile_span = DIRECT_MIN, DIRECT_SPAN
            self._direct = True
        self._server = await loop.create_server(lambda: _Client(self), self.host, self.port,
                                                reuse_port=self.reuse_port or None)
        if self.steering is not None:
            loop.add_reader(self.steering.rx.fileno(), self._take_over)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        name = self._server.sockets[0].getsockname()  # type: ignore[attr-defined]  # asyncio's or uvloop's
        return str(name[0]), int(name[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self.steering is not None:
            asyncio.get_running_loop().remove_reader(self.steering.rx.fileno())
        for c in list(self.clients.values()):
            if c.transport is not None:
                c.transport.close()
        for t in [*self.fetches.values(), *self._files]:
            t.cancel()
        await asyncio.gather(*self.fetches.values(), *self._files, return_exceptions=True)
        if self._timer is not None:
            self._timer.cancel()
        if self.store is not None:
            self.store.close()
        if self.pool is not None:
            self.pool.close()
        if self._server is not None:
            await self._server.wait_closed()

    def snapshot(self, recent: int = 100) -> dict[str, object]:
        """The status JSON (``/_vmc/status``), for the sharing core."""
        return snapshot(self, recent)

    # ------------------------------------------------------------------ --workers' steering
    def hand_off(self, client: _Client, data: bytes) -> bool:
        """``client``'s first read ``data``: if its request is for an object another worker owns,
        pass the connection and ``data`` to that worker (:mod:`vmc.aio.steer`) and forget it
        here; False: it is served here."""
        st, core = self.steering, self.core
        if st is None or client.transport is None or not isinstance(core, HttpSharingCore):
            return False
        if client.conn not in core.conns:  # refused at once (connection limit): answered here
            return False
        head = first_head(data)
        uri = None if head is None else core.request_uri(client.conn, *head)
        if uri is None or (dest := st.owner(uri)) == st.index:
            return False
        if core.holds_fresh(uri, self.clock()):  # the owner offered it finished: served here
            return False
        sock = client.transport.get_extra_info("socket")
        if sock is None or not st.send(dest, data, sock.fileno()):
            return False
        # The owner holds the connection now (its own descriptor); ours closes without a FIN,
        # since closing a descriptor is not a shutdown while another refers to the socket.
        client.handed_off = True
        self.clients.pop(client.conn, None)
        self.feed(None, core.connection_lost, client.conn)
        client.transport.close()
        return True

    def _take_over(self) -> None:
        """What other workers sent: connections (served from the bytes they read) and finished
        objects (kept in our store on their file, when the core takes them)."""
        assert self.steering is not None
        loop = asyncio.get_running_loop()
        for item in self.steering.receive():
            if isinstance(item, Handed):
                task = loop.create_task(self._adopt(item.sock, item.data))
                self._files.add(task)
                task.add_done_callback(self._files.discard)
                continue
            core = self.core
            if self.store is None or not isinstance(core, HttpSharingCore):
                os.close(item.fd)
                continue
            copy = self.store.adopt(item.fd, item.copy.length)
            if copy is not None:
                self.feed(None, core.adopt_finished, item.copy, copy)

    async def _adopt(self, sock: socket.socket, first: bytes) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: _Client(self, first), sock)
        except OSError:  # gone before we could take it (counted as taken over, then closed)
            sock.close()

    # ------------------------------------------------------------------ the pump
    def feed(self, conn: int | None, method: Callable[..., None], *args: object) -> None:
        """One input to the core (with the time), then :meth:`flush`; an input the core raises
        on is counted and its connection (``conn``) closed."""
        try:
            method(*args, self.clock())
        except Exception:
            self.counters["core_errors"] += 1
            c = self.clients.get(conn) if conn is not None else None
            if c is not None and c.transport is not None:
                c.transport.abort()
        self.flush()

    def flush(self) -> None:
        """Carry out what the core asks, report what the clients took, re-arm the timer."""
        core = self.core
        for _ in range(MAX_ROUNDS):
            outs = core.to_send(self.clock())
            for out in _coalesced(outs) if len(outs) > 1 else outs:
                self._carry_out(out)
            # only the clients written to since the last round (not a walk over every client)
            taken = [c for c in self._owed if c.unreported and not c.paused]
            self._owed = [c for c in self._owed if c.unreported and c.paused]
            for c in taken:
                n, c.unreported = c.unreported, 0
                if self.clients.get(c.conn) is not c:
                    continue  # gone meanwhile: the core heard connection_lost
                try:
                    core.writable(c.conn, n, self.clock())
                except Exception:
                    self.counters["core_errors"] += 1
            if not outs and not taken:
                break
        self._arm()

    def _carry_out(self, out: object) -> None:
        if isinstance(out, StreamWrite | FileWrite | HalfClose | StreamClose):
            c = self.clients.get(out.conn)  # type: ignore[call-overload]  # conn ids are ints
            if c is not None and c.held is not None and not (
                isinstance(out, StreamClose) and out.abort
            ):
                c.held.append(out)  # after the sendfile running on this connection
                return
        if isinstance(out, FileWrite):
            c = self.clients.get(out.conn)  # type: ignore[call-overload]  # conn ids are ints
            if c is not None and c.transport is not None and not c.transport.is_closing():
                if self._direct:
                    self._send_span_now(c, out)
                    return
                c.held = []
                sending = asyncio.get_running_loop().create_task(self._send_file(c, out))
                self._files.add(sending)
                sending.add_done_callback(self._files.discard)
        elif isinstance(out, StreamWrite):
            c = self.clients.get(out.conn)  # type: ignore[call-overload]  # conn ids are ints
            if c is not None and c.transport is not None and not c.transport.is_closing():
                c.transport.write(out.data)
                self._owe(c, len(out.data))
        elif isinstance(out, HalfClose):
            c = self.clients.get(out.conn)  # type: ignore[call-overload]  # conn ids are ints
            if c is not None and c.transport is not None and not c.transport.is_closing():
                if c.transport.can_write_eof():
                    c.transport.write_eof()  # FIN once the answer has left; we keep reading
        elif isinstance(out, StreamClose):
            c = self.clients.get(out.conn)  # type: ignore[call-overload]  # conn ids are ints
            if c is not None and c.transport is not None:
                if out.abort:
                    c.transport.abort()
                else:
                    c.transport.close()
        elif isinstance(out, Fetch):
            self.fetches[out.fetch] = asyncio.get_running_loop().create_task(self._fetch(out))
        elif isinstance(out, CancelFetch):
            task = self.fetches.pop(out.fetch, None)
            if task is not None:
                task.cancel()
        elif isinstance(out, Kept):  # with --workers, the other workers serve it too
            fd = getattr(out.disk, "fd", None)
            if self.steering is not None and fd is not None:
                self.steering.offer(out.copy, fd)
        elif self.on_output is not None:
            self.on_output(out)
        else:
            self.counters["unhandled_outputs"] += 1

    async def _send_file(self, c: _Client, out: FileWrite) -> None:
        """A disk span to a client by ``loop.sendfile`` (zero copy on a plain socket); the
        span counts as taken when the call returns, then the held outputs go out in order. A
        connection that breaks meanwhile is aborted (its end reaches the core as usual); one
        that stops taking bytes is the core's to cut off (``client_write_timeout``)."""
        assert c.transport is not None
        copy = out.copy
        fd = getattr(copy, "fd", None)
        try:
            if fd is None:
                raise OSError("the disk copy is gone")
            with os.fdopen(os.dup(fd), "rb") as f:
                await asyncio.get_running_loop().sendfile(c.transport, f, out.first, out.count,
                                                          fallback=True)
        except (OSError, RuntimeError):
            c.held = None
            c.transport.abort()
            return
        if self.store is not None:
            self.store.stats.sendfile_bytes += out.count
        self._owe(c, out.count)
        held, c.held = c.held or [], None
        for i, o in enumerate(held):
            self._carry_out(o)
            if c.held is not None:  # another sendfile: the rest waits for it
                c.held.extend(held[i + 1:])
                break
        self.flush()

    def _send_span_now(self, c: _Client, out: FileWrite) -> None:
        """A disk span on a loop without ``loop.sendfile``: ``os.sendfile`` to the socket while
        the transport holds nothing (so the bytes stay in order), the rest read into the
        transport (which buffers it and pauses past its high-water mark, as for any write)."""
        assert c.transport is not None
        fd = getattr(out.copy, "fd", None)
        sock = c.transport.get_extra_info("socket")
        sent = 0
        try:
            if fd is None:
                raise OSError("the disk copy is gone")
            if sock is not None and c.transport.get_write_buffer_size() == 0:
                try:
                    sent = os.sendfile(sock.fileno(), fd, out.first, out.count)
                except (BlockingIOError, InterruptedError):
                    sent = 0
            if sent < out.count:
                rest = os.pread(fd, out.count - sent, out.first + sent)
                if len(rest) != out.count - sent:
                    raise OSError("the disk copy is short")
                c.transport.write(rest)
        except OSError:
            c.transport.abort()
            return
        if self.store is not None:
            self.store.stats.direct_bytes += sent
            self.store.stats.read_bytes += out.count - sent
        self._owe(c, out.count)

    def _owe(self, c: _Client, n: int) -> None:
        """``n`` bytes went to ``c``'s transport: reported to the core as taken (``writable``)
        at the end of this round, or when the transport resumes."""
        if not c.unreported:
            self._owed.append(c)
        c.unreported += n

    def _arm(self) -> None:
        """Keep one loop timer at or before the core's deadline. A deadline that moved later
        keeps the armed timer (an idle deadline moves on every request: no new TimerHandle per
        input); when it fires early, :meth:`_on_timer` asks the core again and re-arms, so
        ``handle_timer`` is only ever called once the core's deadline has passed."""
        now = self.clock()
        deadline = self.core.get_timer(now)
        if deadline is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer, self._armed_at = None, None
            return
        if self._timer is not None and self._armed_at is not None and self._armed_at <= deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._armed_at = deadline
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, deadline - now), self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._armed_at = None, None
        deadline = self.core.get_timer(self.clock())
        if deadline is not None and deadline > self.clock():
            self._arm()  # armed for an earlier deadline that has since moved on
            return
        self.feed(None, self.core.handle_timer)

    async def _fetch(self, f: Fetch) -> None:
        """One origin request for the core: its head, body and end (or failure) as inputs."""
        rest = f.uri.split("://", 1)[1]
        authority, _, path = rest.partition("/")
        host, port = f.origin if f.origin is not None else split_authority(authority)
        hdrs = [(b"host", authority.encode("ascii", "surrogateescape")), *f.headers]
        hdrs.append((b"via", b"1.1 vmc"))
        if f.ranged:
            hdrs.append(
                (b"range", format_range(f.first, None if f.end is None else f.end - 1).encode())
            )
            if f.if_range:
                hdrs.append((b"if-range", f.if_range))
        resp: up.UpstreamResponse | None = None
        core = self.core
        assert isinstance(core, OriginSink), "a core that asks for fetches takes their answers"
        take = core.origin_received
        gate = core.gate if isinstance(core, HttpSharingCore) else None
        if self.pool is not None and gate is not None and gate.limit > 0:
            # the cap is on connections: idle ones count until closed
            while self.pool.idle + len(self.fetches) > gate.limit and self.pool.evict_idle():
                pass

        async def interim(ev: h11.InformationalResponse) -> None:
            hdrs = tuple((k.lower(), v) for k, v in ev.headers)
            self.feed(None, take, OriginInterim(f.fetch, ev.status_code, hdrs))

        try:
            resp = await up.request(
                host,
                port,
                f.method,
                b"/" + path.encode("ascii", "surrogateescape"),
                hdrs,
                f.body,
                timeout=self.upstream_timeout,
                pool=self.pool,
                on_interim=interim,
            )
            self.feed(None, take, OriginHead(f.fetch, resp.status, tuple(resp.headers)))
            async for chunk in resp.chunks():
                if f.fetch not in self.fetches:
                    return
                self.feed(None, take, OriginData(f.fetch, chunk))
            if f.fetch in self.fetches:
                # the connection goes before the core hears the end: the upstream cap's slot
                # passes on only once its socket is closed (the cap is on connections)
                resp.close()
                self.feed(None, take, OriginEnd(f.fetch))
        except up.UpstreamError as exc:
            if resp is not None:
                resp.close()
            if f.fetch in self.fetches:
                status, why = failure(exc)
                self.feed(None, take, OriginError(f.fetch, str(exc), refusal=why, status=status))
        finally:
            self.fetches.pop(f.fetch, None)
            if resp is not None:
                resp.close()
            self.flush()


def failure(exc: up.UpstreamError) -> tuple[int, Refused]:
    """The answer and counter for an origin failure (the proxy's ``UPSTREAM_FAILURES``)."""
    for cls, status, why in (
        (up.UpstreamUnreachable, 502, Refused.UPSTREAM_UNREACHABLE),
        (up.UpstreamClosed, 502, Refused.UPSTREAM_CLOSED),
        (up.UpstreamTimeout, 504, Refused.UPSTREAM_TIMEOUT),
        (up.UpstreamBadResponse, 502, Refused.UPSTREAM_BAD_RESPONSE),
    ):
        if isinstance(exc, cls):
            return status, why
    return 502, Refused.UPSTREAM_ERROR


def snapshot(pump: CorePump, recent: int = 100) -> dict[str, object]:
    """The status JSON of a pump running the sharing core (the proxy's format, where it has it)."""
    core = pump.core
    assert isinstance(core, HttpSharingCore)
    return core.status(recent)


def driver_status(pump: CorePump) -> dict[str, object]:
    """The pump's own figures in the status JSON: connections, disk store, origin pool."""
    snap: dict[str, object] = {
        "connections": len(pump.clients),
        "pid": os.getpid(),
        "core_errors": pump.counters["core_errors"],
        **(pump.steering.counters if pump.steering is not None else {}),
        "disk": pump.store.snapshot() if pump.store is not None else None,
    }
    if pump.pool is not None:
        snap["upstream_connections_opened"] = pump.pool.opened
        snap["upstream_connections_reused"] = pump.pool.reused
        snap["upstream_connections_dirty"] = pump.pool.dirty
    return snap
