"""Result files that appear only complete: written under a temporary name beside the final one,
fsynced, then renamed (an interrupted run leaves the previous file, never a truncated one).

``-`` (stdout), devices and FIFOs cannot be replaced: they are written into directly.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


def is_stream(path: str | Path) -> bool:
    """``-``, or an existing non-regular file (a device, a FIFO): written into, never replaced."""
    if str(path) == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; once the block succeeds it is fsynced and renamed
    over ``path``. On any exception (Ctrl-C too) it is removed and ``path`` is left as it was."""
    final = Path(os.path.realpath(path))  # a symbolic link stays a link
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        try:  # the mode of the file it replaces; else what the umask gives a new file
            mode = final.stat().st_mode & 0o777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (see :func:`replacing`); ``-``, a device or
    a FIFO get it written directly."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if str(path) == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        return
    if is_stream(path):
        with open(path, "wb") as fh:
            fh.write(raw)
        return
    with replacing(path) as tmp:
        tmp.write_bytes(raw)
