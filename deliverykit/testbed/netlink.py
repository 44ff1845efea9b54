"""pyroute2 behind one worker thread, so the testbed works inside a running event loop.

pyroute2 0.9's synchronous ``IPRoute`` drives its own asyncio loop and picks
up the caller's running loop if there is one, so it fails ("This event loop is
already running") when called from async code, such as a pytest-asyncio test.
Every netlink call of a testbed therefore runs on a private thread that never
has a running loop; callers see ordinary blocking methods.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from deliverykit.cliutil import hold_stop_signals_in_this_thread


class NetlinkWorker:
    """One thread that owns every pyroute2 object of a testbed."""

    def __init__(self) -> None:
        # Ctrl-C goes to the main thread; pyroute2's forked helpers start as cliutil says
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dk-testbed-netlink",
                                        initializer=hold_stop_signals_in_this_thread)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._pool.submit(fn, *args, **kwargs).result()

    def create_netns(self, ns: str) -> None:
        from pyroute2 import netns

        self.call(netns.create, ns)

    def iproute(self, ns: str) -> IPRouteProxy:
        from pyroute2 import IPRoute

        return IPRouteProxy(self, self.call(IPRoute, netns=ns))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


class IPRouteProxy:
    """An ``IPRoute`` whose methods run on the worker thread (same names and arguments)."""

    def __init__(self, worker: NetlinkWorker, ipr: Any) -> None:
        self._worker = worker
        self._ipr = ipr

    def __getattr__(self, name: str) -> Callable[..., Any]:
        target = getattr(self._ipr, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._worker.call(lambda: _materialize(target(*args, **kwargs)))

        return call


def _materialize(value: Any) -> Any:
    """Dumps may come back as generators: consume them on the worker thread."""
    if hasattr(value, "__next__"):
        return tuple(value)
    return value
