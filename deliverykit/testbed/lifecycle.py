"""Lifecycle helpers: root check, namespace removal, stale-run cleanup, stopping processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
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


def cleanup_stale(prefix: str = "dk") -> list[str]:
    """Delete namespaces of runs with this prefix whose owning process is gone.

    Safe while other testbeds run: a namespace is removed only when the pid
    in its name (``<prefix>-<pid>-<hex>-<host>``) no longer exists.
    """
    if not PREFIX.match(prefix):
        raise TestbedError(f"bad prefix {prefix!r}: [a-z][a-z0-9]{{0,7}}")
    pattern = re.compile(rf"^{prefix}-(\d+)-[0-9a-f]{{4}}-")
    removed = []
    from pyroute2 import netns as _netns

    for name in sorted(_netns.listnetns()):
        m = pattern.match(name)
        if m and not _alive(int(m.group(1))):
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
