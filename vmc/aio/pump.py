"""A thin asyncio pump around the sans-IO sharing core (issue 19 item 2; docs/vmc-sim.md).

:class:`CorePump` owns the sockets and the clock and nothing else: client bytes
go to :class:`vmc.core.http.HttpSharingCore`, its ``Write``/``Close`` go to the
transports, its ``Fetch`` actions become origin requests
(:func:`vmc.aio.upstream.request`) whose head, body chunks and end go back in as
``Origin*`` inputs, and its one timer is re-armed after every input. The very
:class:`~vmc.core.machine.SharingMachine` inside is what :mod:`vmc.sim` drives
in simulated time.

Back-pressure: bytes written to a client count as taken (``writable``) at once
unless its transport asked us to pause (write buffer past its high-water mark);
then they count when it resumes.

This pump is the path to the proxy as a pump (docs/vmc-sim.md, "What is left"):
it serves GET/HEAD sharing with window, the on-disk store, Range patches,
detach and resume, and passes the rest through; :class:`vmc.aio.proxy.Proxy`
remains the full proxy (limits, upstream cap, status endpoint, 1xx, multipart).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from vmc.aio import upstream as up
from vmc.aio.spill import DiskStore
from vmc.core.http import Close, HttpSharingCore, Write
from vmc.core.key import split_authority
from vmc.core.machine import (
    CancelFetch,
    Fetch,
    MachineConfig,
    OriginData,
    OriginEnd,
    OriginError,
    OriginHead,
)
from vmc.core.ranges import format_range

#: Rounds of outputs handled per input before yielding (bounds a runaway loop).
MAX_ROUNDS = 10_000


class _Client(asyncio.Protocol):
    def __init__(self, pump: CorePump) -> None:
        self.pump = pump
        self.conn = next(pump._ids)
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.unreported = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.pump.clients[self.conn] = self
        self.pump.core.connection_made(self.conn, self.pump.clock())

    def data_received(self, data: bytes) -> None:
        self.pump.core.data_received(self.conn, data, self.pump.clock())
        self.pump.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pump.clients.pop(self.conn, None)
        self.pump.core.connection_lost(self.conn, self.pump.clock())
        self.pump.flush()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.pump.flush()


class CorePump:
    """``await CorePump(cfg, default_authority=...).start()``; ``.address``; ``await .close()``."""

    def __init__(
        self,
        cfg: MachineConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        default_authority: str | None = None,
        upstream_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        disk_dir: str | None = None,
    ) -> None:
        cfg = cfg or MachineConfig()
        #: Bodies on disk, as the proxy keeps them (anonymous files under ``disk_dir``), or None.
        self.store = (
            DiskStore(cfg.disk_budget, disk_dir) if cfg.disk_budget > 0 and cfg.sharing else None
        )
        self.core = HttpSharingCore(cfg, default_authority, disk=self.store)
        self.host, self.port = host, port
        self.upstream_timeout = upstream_timeout
        self.clock = clock
        self.clients: dict[int, _Client] = {}
        self.fetches: dict[int, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def start(self) -> CorePump:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), self.host, self.port)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        name = self._server.sockets[0].getsockname()  # type: ignore[attr-defined]  # asyncio's or uvloop's
        return str(name[0]), int(name[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self.clients.values()):
            if c.transport is not None:
                c.transport.close()
        for t in list(self.fetches.values()):
            t.cancel()
        await asyncio.gather(*self.fetches.values(), return_exceptions=True)
        if self._timer is not None:
            self._timer.cancel()
        if self.store is not None:
            self.store.close()
        if self._server is not None:
            await self._server.wait_closed()

    # ------------------------------------------------------------------ the pump
    def flush(self) -> None:
        """Carry out what the core asks, report what the clients took, re-arm the timer."""
        core = self.core
        for _ in range(MAX_ROUNDS):
            outs = core.to_send(self.clock())
            for out in outs:
                if isinstance(out, Write):
                    c = self.clients.get(out.conn)  # type: ignore[call-overload]
                    if c is not None and c.transport is not None and not c.transport.is_closing():
                        c.transport.write(out.data)
                        c.unreported += len(out.data)
                elif isinstance(out, Close):
                    c = self.clients.get(out.conn)  # type: ignore[call-overload]
                    if c is not None and c.transport is not None:
                        c.transport.close()
                elif isinstance(out, Fetch):
                    self.fetches[out.fetch] = asyncio.get_running_loop().create_task(
                        self._fetch(out)
                    )
                elif isinstance(out, CancelFetch):
                    task = self.fetches.pop(out.fetch, None)
                    if task is not None:
                        task.cancel()
            taken = [
                (c.conn, c.unreported)
                for c in self.clients.values()
                if c.unreported and not c.paused
            ]
            for conn, n in taken:
                self.clients[conn].unreported = 0
                core.writable(conn, n, self.clock())
            if not outs and not taken:
                break
        self._arm()

    def _arm(self) -> None:
        deadline = self.core.get_timer(self.clock())
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if deadline is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(0.0, deadline - self.clock()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.core.handle_timer(self.clock())
        self.flush()

    async def _fetch(self, f: Fetch) -> None:
        """One origin request for the core: its head, body and end (or failure) as inputs."""
        rest = f.uri.split("://", 1)[1]
        authority, _, path = rest.partition("/")
        host, port = split_authority(authority)
        hdrs = [(b"host", authority.encode("ascii", "surrogateescape")), (b"via", b"1.1 vmc")]
        if f.ranged:
            hdrs.append(
                (b"range", format_range(f.first, None if f.end is None else f.end - 1).encode())
            )
            if f.if_range:
                hdrs.append((b"if-range", f.if_range))
        resp: up.UpstreamResponse | None = None
        core = self.core
        try:
            resp = await up.request(
                host,
                port,
                f.method,
                b"/" + path.encode("ascii", "surrogateescape"),
                hdrs,
                timeout=self.upstream_timeout,
            )
            core.origin_received(
                OriginHead(f.fetch, resp.status, tuple(resp.headers)), self.clock()
            )
            self.flush()
            async for chunk in resp.chunks():
                if f.fetch not in self.fetches:
                    return
                core.origin_received(OriginData(f.fetch, chunk), self.clock())
                self.flush()
            if f.fetch in self.fetches:
                core.origin_received(OriginEnd(f.fetch), self.clock())
        except up.UpstreamError as exc:
            if f.fetch in self.fetches:
                core.origin_received(OriginError(f.fetch, str(exc)), self.clock())
        finally:
            self.fetches.pop(f.fetch, None)
            if resp is not None:
                resp.close()
            self.flush()
