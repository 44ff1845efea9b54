"""The VMC proxy (``vmc proxy``): the sans-IO sharing core on sockets (paper sec. 2, 3.2).

Every decision (route, refuse, start, join with its answer, patch, detach, resume, fail) is
made by :class:`vmc.core.http.HttpSharingCore` around :class:`vmc.core.machine.SharingMachine`,
the very machine :mod:`vmc.sim` drives in simulated time; :class:`Proxy` is
:class:`vmc.aio.pump.CorePump` (sockets, clock, origin connections, disk files) built from a
:class:`~vmc.aio.config.ProxyConfig`. docs/vmc.md ("The proxy engine") maps each decision to
the code that makes it; docs/security/vmc-proxy.md lists the limits and refusals.

:func:`serve` is the CLI role: the proxy until SIGINT or SIGTERM, the status JSON written to
``--stats-out`` periodically and at the end, one summary line on stderr and the final counters
as JSON on stdout, exit 130 / 143 (README "Signals and exit codes").
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from typing import Any

from vmc.aio import upstream as up  # noqa: F401 - ``proxy.up``: the conformance suite patches it
from vmc.aio.config import SO_ORIGINAL_DST, ProxyConfig, original_dst  # noqa: F401 - re-exported
from vmc.aio.pump import SENDFILE_MIN, SENDFILE_SPAN, CorePump, snapshot
from vmc.aio.steer import Steering
from vmc.core.fetchgate import FetchGate
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig
from vmc.core.slots import SlotLimits
from vmc.core.stats import Stats

__all__ = ["Proxy", "ProxyConfig", "machine_config", "serve", "slot_limits"]


def machine_config(cfg: ProxyConfig, epoch: float = 0.0) -> MachineConfig:
    """The sharing core's settings from the proxy's (the same names, the same defaults);
    ``epoch``: Unix time at the pump clock's zero (for Date, Expires and Age)."""
    return MachineConfig(
        window=cfg.window,
        queue_limit=cfg.queue_limit,
        buffer_budget=cfg.buffer_budget,
        patch_budget=cfg.patch_budget,
        disk_budget=cfg.disk_budget,
        join_wait=cfg.join_wait,
        resume_attempts=cfg.resume_attempts,
        retry_by_range=cfg.retry_by_range,
        sharing=cfg.sharing,
        send_window=cfg.write_high_water,
        stall_timeout=cfg.stall_timeout,
        client_write_timeout=cfg.client_write_timeout,
        resume_backoff=cfg.resume_backoff,
        epoch=epoch,
        seed=secrets.randbits(64),
    )


def slot_limits(cfg: ProxyConfig) -> SlotLimits:
    """The core's connection slots and request deadlines from the proxy's settings."""
    return SlotLimits(cfg.max_connections, cfg.idle_timeout, cfg.head_timeout, cfg.body_timeout)


class Proxy(CorePump):
    """``await Proxy(cfg).start()``; ``.address``; ``.snapshot(recent)``; ``await .close()``.

    The pump over a new sharing core with every setting of ``cfg``: routing to the configured
    upstreams (transparent mode: each redirected connection's original destination), the
    status endpoint, connection slots and request deadlines, the upstream cap and keep-alive
    pool, the disk store, sendfile (``loop.sendfile`` on asyncio's loop; ``os.sendfile`` from the
    pump on uvloop), ``--workers``' shared
    port (``cfg.reuse_port``) and, with ``steering``, each connection sent to the worker that
    owns its object (:mod:`vmc.aio.steer`)."""

    def __init__(self, cfg: ProxyConfig, steering: Steering | None = None) -> None:
        mcfg = machine_config(cfg, epoch=time.time() - time.monotonic())
        mcfg.sendfile_min, mcfg.sendfile_span = SENDFILE_MIN, SENDFILE_SPAN  # uvloop: the pump's
        super().__init__(
            mcfg,
            cfg.host,
            cfg.port,
            cfg.default_upstream,
            cfg.upstream_timeout,
            disk_dir=cfg.disk_dir,
            upstreams=list(cfg.upstreams),
            status_path=cfg.status_path,
            status_allow=list(cfg.status_allow),
            max_request_body=cfg.max_request_body,
            slots=slot_limits(cfg),
            max_header_bytes=cfg.max_header_bytes,
            gate=FetchGate(cfg.max_upstream, cfg.upstream_queue_wait, cfg.upstream_queue_max),
            pool=up.Pool() if cfg.upstream_keepalive else None,
            reuse_port=cfg.reuse_port,
            transparent=cfg.transparent,
            steering=steering,
        )
        #: The settings this proxy was built from.
        self.cfg = cfg
        self.http.retry_after = cfg.retry_after

    @property
    def http(self) -> HttpSharingCore:
        """The sharing core (client connections around the machine)."""
        assert isinstance(self.core, HttpSharingCore)
        return self.core

    @property
    def stats(self) -> Stats:
        """The counters and the status log (the core's)."""
        return self.http.stats

    @property
    def sessions(self) -> dict[str, Any]:
        """Live shared fetches, by key."""
        return dict(self.http.machine.sharing.sessions)

    @property
    def finished(self) -> dict[str, Any]:
        """Finished objects kept whole on disk, by key."""
        return dict(self.http.machine.sharing.finished)

    def snapshot(self, recent: int = 100) -> dict[str, Any]:
        """The status JSON (``/_vmc/status``): counters, limits, the last ``recent`` requests."""
        return snapshot(self, recent)

    @property
    def connections(self) -> int:
        """Client connections open."""
        return len(self.clients)


async def serve(cfg: ProxyConfig, stats_out: str | None = None, stats_every: float = 0.0,
                steering: Steering | None = None) -> int:
    """``vmc proxy``: a :class:`Proxy` until SIGINT or SIGTERM; the exit code (130 / 143).

    ``stats_out``: the status JSON written there every ``stats_every`` s (if > 0) and on exit,
    under its final name only when whole (:func:`deliverykit.outputs.write_when_done`). The
    final counters go to stdout as JSON, a summary line to stderr, whichever signal stopped
    us. ``--workers N`` runs N of these (:func:`vmc.aio.workers.serve_workers`), each with its
    ``steering`` end (:mod:`vmc.aio.steer`)."""
    from deliverykit.cliutil import Stopper
    from deliverykit.outputs import write_when_done

    proxy = await Proxy(cfg, steering).start()
    host, port = proxy.address
    host = f"[{host}]" if ":" in host else host
    allowed = sorted(cfg.upstreams + ([cfg.default_upstream] if cfg.default_upstream else []))
    print(f"vmc proxy on http://{host}:{port}/ (status {cfg.status_path}); upstreams {allowed}",
          flush=True)
    stopper = Stopper().install()

    def dump() -> None:
        if stats_out:
            write_when_done(stats_out, json.dumps(snapshot(proxy, 2000), indent=1, default=str))

    try:
        while not stopper.stopped:
            if not await stopper.wait(stats_every if stats_every > 0 else None):
                dump()
    finally:
        stopper.remove()
        dump()
        await proxy.close()
        snap = snapshot(proxy, 0)
        print(f"vmc proxy {stopper.describe() or 'stopped'}: {snap['requests']} requests, "
              f"{snap['sessions']} sessions, {snap['joins']} joins, {snap['origin_bytes']} origin "
              f"bytes, {snap['client_bytes']} client bytes, refused {snap['refused']}",
              file=sys.stderr, flush=True)
        print(json.dumps(snap, default=str), flush=True)
    return stopper.exit_code()
