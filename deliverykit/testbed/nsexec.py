"""Run Python code inside a network namespace: a forked child that calls setns(2).

The child is forked from the calling process (so ``fn`` and its arguments need
not be picklable, only the result), switches its network namespace with
``setns(CLONE_NEWNET)`` through pyroute2, runs the callable (a coroutine
function or a returned coroutine is run with ``asyncio.run``), and sends back
a pickled ``("ok", value)`` or ``("err", exception, traceback_text)`` over a
pipe. Only sockets and ``/proc/sys/net`` follow the new namespace; ``/sys``
still shows the parent's (use ``Testbed.exec`` for tools that read it).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import pickle
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from deliverykit.cliutil import stop_signals_held

from .errors import RemoteError, RemoteTraceback, TestbedError, TestbedTimeout

_PENDING = object()


def enter_netns(ns: str) -> None:
    """Move the calling (single-threaded) process into netns ``ns``; never creates one."""
    from pyroute2 import netns as _netns  # already imported by spawn_in_netns before the fork

    _netns.setns(ns, flags=0)


def _call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(fn(*args, **kwargs))
    value = fn(*args, **kwargs)
    if inspect.iscoroutine(value):
        return asyncio.run(value)
    return value


def _child_main(ns: str, fn: Callable[..., Any], args: tuple, kwargs: dict, wfd: int) -> None:
    """Body of the forked child; never returns (``os._exit``)."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            # a fork from inside a running event loop (an async test) inherits the
            # "running loop" marker, which would make asyncio.run() refuse to start
            asyncio.events._set_running_loop(None)
            enter_netns(ns)
            payload = pickle.dumps(("ok", _call(fn, args, kwargs)))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            text = traceback.format_exc()
            try:
                payload = pickle.dumps(("err", exc, text))
                pickle.loads(payload)  # an exception that pickles but cannot be rebuilt
            except Exception:  # noqa: BLE001
                payload = pickle.dumps(("err", RemoteError(f"{type(exc).__name__}: {exc}"), text))
        view = memoryview(payload)
        while view:
            view = view[os.write(wfd, view) :]
    except BaseException:  # noqa: BLE001 - a broken pipe: the parent gave up on us
        pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(0)


class Task:
    """A callable running in a namespace child; ``result()`` waits for it.

    ``result`` returns the callable's value, or re-raises its exception (with
    the child's traceback as ``__cause__``), or raises ``TestbedTimeout``
    after killing a child that ran out of time.
    """

    def __init__(self, pid: int, rfd: int, label: str) -> None:
        self.pid = pid
        self.label = label
        self._rfd: int | None = rfd
        self._buf = bytearray()
        self._status: int | None = None
        self._outcome: Any = _PENDING

    @property
    def alive(self) -> bool:
        """True while the child has not exited."""
        if self._status is not None:
            return False
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return True
        self._status = status
        return False

    def _read_until_eof(self, deadline: float | None) -> bool:
        while self._rfd is not None:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._rfd], [], [], wait)
            if not ready:
                return False
            chunk = os.read(self._rfd, 1 << 16)
            if not chunk:
                os.close(self._rfd)
                self._rfd = None
            else:
                self._buf += chunk
        return True

    def _reap(self) -> None:
        if self._status is None:
            _, self._status = os.waitpid(self.pid, 0)

    def result(self, timeout: float | None = None) -> Any:
        """Wait up to ``timeout`` seconds (None: forever) and return or raise the outcome."""
        if self._outcome is _PENDING:
            deadline = None if timeout is None else time.monotonic() + timeout
            if not self._read_until_eof(deadline):
                self.kill()
                raise TestbedTimeout(f"{self.label} did not finish within {timeout} s (killed)")
            self._reap()
            if not self._buf:
                self._outcome = ("died", self._status)
            else:
                self._outcome = pickle.loads(bytes(self._buf))
            self._buf = bytearray()
        kind = self._outcome[0]
        if kind == "ok":
            return self._outcome[1]
        if kind == "died":
            status = self._outcome[1]
            how = (
                f"signal {os.WTERMSIG(status)}"
                if status is not None and os.WIFSIGNALED(status)
                else f"status {status}"
            )
            raise TestbedError(f"{self.label} died without a result ({how})")
        _, exc, text = self._outcome
        raise exc from RemoteTraceback(text)

    def kill(self) -> None:
        """Kill the child (if still running), reap it and close the pipe. Idempotent."""
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reap()
        if self._rfd is not None:
            os.close(self._rfd)
            self._rfd = None
        if self._outcome is _PENDING:
            self._outcome = ("died", self._status)


def spawn_in_netns(
    ns: str, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None, label: str = ""
) -> Task:
    """Fork a child that enters ``ns`` and runs ``fn(*args, **kwargs)``; return its ``Task``."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    import pyroute2.netns  # noqa: F401 - import once here, not in every forked child
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    rfd, wfd = os.pipe()
    with stop_signals_held():  # a Ctrl-C now reaches the parent once it has the Task
        pid = os.fork()
        if pid == 0:  # child
            os.close(rfd)
            _child_main(ns, fn, args, kwargs or {}, wfd)
        os.close(wfd)
        return Task(pid, rfd, label or f"{getattr(fn, '__qualname__', fn)!s} in netns {ns}")


def write_sysctls(settings: dict[str, str]) -> None:
    """Write ``net.ipv4.ip_forward``-style keys under /proc/sys (call inside the namespace)."""
    for key, value in settings.items():
        with open("/proc/sys/" + key.replace(".", "/"), "w") as fh:
            fh.write(str(value))


def ethtool_features(ifname: str, changes: dict[str, bool]) -> dict[str, bool]:
    """Set ``ethtool -K``-style features of ``ifname`` (e.g. ``tx-udp-segmentation``)
    and return every feature's state after (call inside the namespace).  A name
    the device does not have is a KeyError naming the ones it has."""
    from pyroute2.ethtool import Ethtool

    eth = Ethtool()
    try:
        feats = eth.get_features(ifname)
        if changes:
            unknown = sorted(set(changes) - set(feats.features))
            if unknown:
                raise KeyError(f"{ifname} has no feature {', '.join(unknown)} "
                               f"(it has: {', '.join(sorted(feats.features))})")
            for name, on in changes.items():
                feats.features[name].enable = on
            eth.set_features(ifname, feats)
            feats = eth.get_features(ifname)
        return {name: bool(f.enable) for name, f in feats.features.items()}
    finally:
        eth.close()


class Event:
    """A one-shot flag that forked children can set and the parent (or other children) wait on.

    Create it before ``spawn`` so the child inherits it: the child calls
    ``ev.set()`` when ready (e.g. after binding its socket); the parent calls
    ``ev.wait(timeout)``. Backed by a pipe, so it works across namespaces.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._set = False

    def set(self) -> None:
        try:
            os.write(self._w, b"!")
        except BlockingIOError:  # the pipe is full of earlier sets: it is set
            pass

    def wait(self, timeout: float | None = None) -> bool:
        if not self._set:
            ready, _, _ = select.select([self._r], [], [], timeout)
            self._set = bool(ready)
        return self._set

    def close(self) -> None:
        """Release the pipe (idempotent); the parent's testbed does it on exit."""
        fds, self._r, self._w = (self._r, self._w), -1, -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)
