"""Result files that appear only complete: written under a temporary name beside the final one,
fsynced, then renamed (an interrupted run leaves the previous file, never a truncated one).

``-`` (stdout), devices and FIFOs cannot be replaced: they are written into directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


def is_stream(path: str | Path) -> bool:
    """``-``, an existing non-regular file (a device, a FIFO), or a link into /proc (/dev/stdout):
    written into, never replaced."""
    if str(path) == "-":
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode) or os.path.realpath(path).startswith("/proc/")


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


async def copy_into(src: Path, out: str) -> None:
    """Copy a verified file into stdout (``-``), a device or a FIFO without blocking the loop:
    a FIFO waits for its reader and a stalled reader for the fd to be writable, both
    cancellable (SIGINT, SIGTERM)."""
    loop = asyncio.get_running_loop()
    if out == "-":
        sys.stdout.flush()
        fd = os.dup(1)
    else:
        fifo = stat.S_ISFIFO(os.stat(out).st_mode)
        while True:
            try:
                fd = os.open(out, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                if exc.errno != errno.ENXIO or not fifo:  # ENXIO: a FIFO without its reader yet
                    raise
            await asyncio.sleep(0.05)
    blocking = os.get_blocking(fd)
    try:
        os.set_blocking(fd, False)  # shared with the other holders of stdout: restored below
    except OSError:
        pass
    try:
        with open(src, "rb") as fh:
            while chunk := fh.read(1 << 20):
                view = memoryview(chunk)
                while view:
                    try:
                        view = view[os.write(fd, view):]
                    except BlockingIOError:
                        ready: asyncio.Future[None] = loop.create_future()

                        def wake(fut: asyncio.Future[None] = ready) -> None:
                            if not fut.done():
                                fut.set_result(None)

                        loop.add_writer(fd, wake)
                        try:
                            await ready
                        finally:
                            loop.remove_writer(fd)
    finally:
        try:
            os.set_blocking(fd, blocking)
        except OSError:
            pass
        os.close(fd)



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
        fsync_dir(final.parent)
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
