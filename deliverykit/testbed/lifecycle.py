"""Lifecycle helpers: root check, namespace removal, stale-run cleanup, stopping processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from typing import Any

from .errors import TestbedError

NETNS_DIR = "/var/run/netns"
PREFIX = re.compile(r"^[a-z][a-z0-9]{0,7}$")


def have_root() -> bool:
    """True when this process may create namespaces (effective uid 0)."""
    return os.geteuid() == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_netns(name: str) -> None:
    from pyroute2 import netns as _netns

    try:
        _netns.remove(name)
    except FileNotFoundError:
        pass


def _pids_in_netns(name: str) -> list[int]:
    """Processes whose network namespace is ``name`` (matched by the nsfs inode)."""
    try:
        st = os.stat(os.path.join(NETNS_DIR, name))
    except OSError:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ns = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (ns.st_dev, ns.st_ino) == (st.st_dev, st.st_ino):
            pids.append(int(entry))
    return pids


def _kill_all(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL what is still there after ``grace`` seconds."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cleanup_stale(prefix: str | None = None) -> list[str]:
    """Delete the namespaces of testbed runs whose owning process is gone.

    ``prefix`` limits it to one prefix (experiments use their own, such as
    ``m2chet`` or ``swfc``); None takes every testbed run name
    (``<prefix>-<pid>-<4 hex>-<host>``). Safe while other testbeds run: a
    namespace is removed only when the pid in its name no longer exists.
    Processes still running inside a stale namespace (orphans of a killed
    run) are stopped first, so nothing of the dead run is left.
    """
    if prefix is not None and not PREFIX.match(prefix):
        raise TestbedError(f"bad prefix {prefix!r}: [a-z][a-z0-9]{{0,7}}")
    pattern = re.compile(
        rf"^({prefix if prefix is not None else '[a-z][a-z0-9]{0,7}'})-(\d+)-[0-9a-f]{{4}}-"
    )
    removed = []
    from pyroute2 import netns as _netns

    for name in sorted(_netns.listnetns()):
        m = pattern.match(name)
        if m and not _alive(int(m.group(2))):
            _kill_all([p for p in _pids_in_netns(name) if p != os.getpid()])
            remove_netns(name)
            removed.append(name)
    return removed


def stop_process(proc: subprocess.Popen[Any], grace: float = 3.0) -> None:
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
