"""The vmc tests' proxy launcher: the same tests against either engine.

``VMC_ENGINE=core`` runs every proxy the tests start (the ``make_stack`` fixture, the
tests that start a :class:`~vmc.aio.proxy.Proxy` themselves, and ``vmc proxy``
subprocesses through :func:`engine_args`) as :class:`vmc.aio.pump.CorePump` over the
sans-IO sharing core, built from the same :class:`~vmc.aio.config.ProxyConfig` by
:func:`vmc.aio.pump.build_core_pump`; unset (or ``legacy``) runs the coroutine-per-request
proxy. docs/vmc.md lists the tests that do not pass on the core yet.
"""

from __future__ import annotations

import os
from typing import Any

from vmc.aio.config import ProxyConfig
from vmc.aio.proxy import Proxy
from vmc.aio.pump import CorePump, build_core_pump
from vmc.core.http import HttpSharingCore

#: ``core`` or ``legacy`` (the default until the core carries every proxy test).
ENGINE = os.environ.get("VMC_ENGINE", "legacy")
if ENGINE not in ("core", "legacy"):
    raise SystemExit(f"VMC_ENGINE must be core or legacy, not {ENGINE!r}")


def new_proxy(cfg: ProxyConfig) -> Proxy | CorePump:
    """A proxy (not started) with ``cfg`` on the engine the run asked for."""
    if ENGINE == "core":
        return build_core_pump(cfg)
    return Proxy(cfg)


def engine_args() -> list[str]:
    """Arguments for a ``vmc proxy`` subprocess to run the engine the run asked for."""
    return ["--engine", "core"] if ENGINE == "core" else []


def sessions(proxy: Proxy | CorePump) -> list[Any]:
    """The proxy's sharing sessions (each with ``uri``, ``live`` and ``buffer.received``)."""
    if isinstance(proxy, CorePump):
        core = proxy.core
        assert isinstance(core, HttpSharingCore)
        return list(core.machine.sharing.sessions.values())
    return list(proxy.sessions.values())


def _core(proxy: CorePump) -> HttpSharingCore:
    core = proxy.core
    assert isinstance(core, HttpSharingCore)
    return core


def finished(proxy: Proxy | CorePump) -> dict[str, Any]:
    """Finished objects kept whole on disk, by key."""
    if isinstance(proxy, CorePump):
        return dict(_core(proxy).machine.sharing.finished)
    return dict(proxy.finished)


def connections(proxy: Proxy | CorePump) -> int:
    """Client connections open."""
    return len(proxy.clients) if isinstance(proxy, CorePump) else proxy.connections


def upstream_open(proxy: Proxy | CorePump) -> int:
    """Origin connections (legacy) or fetches (core) holding a slot of the upstream cap."""
    if isinstance(proxy, CorePump):
        return len(_core(proxy).gate.out)
    assert proxy.limiter is not None
    return proxy.limiter.open


def upstream_waiting(proxy: Proxy | CorePump) -> int:
    """Requests waiting for a slot of the upstream cap."""
    if isinstance(proxy, CorePump):
        return len(_core(proxy).gate.waiting)
    assert proxy.limiter is not None
    return proxy.limiter.waiting


def requests_seen(proxy: Proxy | CorePump) -> int:
    """Requests the proxy has logged (each gets the next id)."""
    stats = _core(proxy).stats if isinstance(proxy, CorePump) else proxy.stats
    return stats._next_id
