"""Where a result came from: the metadata every experiment writes beside its figures.

``run_metadata(package)`` names the code (toolkit version, git commit of the
package's source tree with ``+dirty`` when it has local changes, or None when
installed from a wheel), the interpreter, the host and its load (2 shared cores
swing figures a lot, so the load belongs next to every number) and the time.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["git_commit", "run_metadata"]


def git_commit(path: str | os.PathLike) -> str | None:
    """HEAD of the git tree holding ``path`` (+``+dirty`` if files under it changed); None outside
    git."""
    where = Path(path)
    where = where if where.is_dir() else where.parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def run_metadata(package: str, **params) -> dict:
    """Metadata for one run of an experiment of ``package`` (an importable name), plus
    ``params``."""
    spec_file = sys.modules[package].__file__ if package in sys.modules else None
    try:
        version = metadata.version("corecast")
    except metadata.PackageNotFoundError:
        version = None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "package": package,
        "version": version,
        "commit": git_commit(spec_file) if spec_file else None,
        "argv": sys.argv,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "load_average": load,
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "params": params,
    }
