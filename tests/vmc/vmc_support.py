"""The vmc tests' proxy helpers: the proxy (:class:`vmc.aio.proxy.Proxy`, the pump over the
sans-IO sharing core) and what tests read from it.

There is one engine since the coroutine-per-request proxy was removed; ``VMC_ENGINE`` is
still read so that old command lines (``VMC_ENGINE=core``) run the same tests, and
:func:`engine_args` gives ``vmc proxy`` subprocesses nothing extra.
"""

from __future__ import annotations

import os
from typing import Any

from vmc.aio.config import ProxyConfig
from vmc.aio.proxy import Proxy

#: ``core``, the only engine (``legacy`` is gone).
ENGINE = os.environ.get("VMC_ENGINE", "core")
if ENGINE != "core":
    raise SystemExit(f"VMC_ENGINE: the only engine is core, not {ENGINE!r}")


def new_proxy(cfg: ProxyConfig) -> Proxy:
    """A proxy (not started) with ``cfg``."""
    return Proxy(cfg)


def engine_args() -> list[str]:
    """Arguments for a ``vmc proxy`` subprocess (none: the default engine is the only one)."""
    return []


def sessions(proxy: Proxy) -> list[Any]:
    """The proxy's sharing sessions (each with ``uri``, ``live`` and ``buffer.received``)."""
    return list(proxy.sessions.values())


def finished(proxy: Proxy) -> dict[str, Any]:
    """Finished objects kept whole on disk, by key."""
    return proxy.finished


def connections(proxy: Proxy) -> int:
    """Client connections open."""
    return proxy.connections


def upstream_open(proxy: Proxy) -> int:
    """Fetches holding a slot of the upstream cap."""
    return len(proxy.http.gate.out)


def upstream_waiting(proxy: Proxy) -> int:
    """Requests waiting for a slot of the upstream cap."""
    return len(proxy.http.gate.waiting)


def requests_seen(proxy: Proxy) -> int:
    """Requests the proxy has logged (each gets the next id)."""
    return proxy.stats._next_id
