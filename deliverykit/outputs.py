"""Output files that appear under their final name only when complete.

One implementation for every package (m2c, vmc, swift, ``deliverykit analyse``):
a result is written to a temporary file beside its final path (same file
system, named ``.NAME.XXXX.part``), flushed and fsynced, renamed over the
final path (``os.replace``, atomic) and the directory fsynced so the rename
survives a crash.  On any failure (Ctrl-C too) the temporary file is removed
and an existing file is left as it was.

Outputs that cannot be replaced are written into, never replaced: ``-``
(stdout), a device such as /dev/null, a FIFO, a link into /proc
(/dev/stdout).  A symbolic link stays a link; its target is replaced.  A
verified download goes into such a stream by :func:`copy_into`, which never
blocks the event loop.
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
from typing import IO, Any

__all__ = [
    "copy_into",
    "fsync_dir",
    "fsync_parent",
    "is_stream",
    "replace_when_done",
    "replacing",
    "write_when_done",
]

TEMP_SUFFIX = ".part"


def is_stream(path: str | os.PathLike[str]) -> bool:
    """``-``, an existing non-regular file (a device, a FIFO) or a link into /proc
    (/dev/stdout): written into, never replaced."""
    if os.fspath(path) == "-":
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode) or os.path.realpath(path).startswith("/proc/")


def fsync_dir(directory: str | os.PathLike[str], *, strict: bool = False) -> None:
    """Make a rename in ``directory`` durable.  Best effort unless ``strict``: not every
    file system lets a directory be opened or fsynced."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)


def fsync_parent(path: str | os.PathLike[str], *, strict: bool = False) -> None:
    """:func:`fsync_dir` of the directory holding ``path``."""
    fsync_dir(os.path.dirname(os.path.abspath(path)), strict=strict)


def _new_file_mode(path: str) -> int:
    """The mode of the file being replaced, else what open() would give (0o666 & ~umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for the block to fill; once the block
    succeeds it gets the replaced file's mode, is fsynced and renamed over ``path``, and
    the directory is fsynced.  On any exception it is removed and ``path`` left as it was."""
    final = os.path.realpath(path)
    fd, name = tempfile.mkstemp(prefix=f".{os.path.basename(final)}.", suffix=TEMP_SUFFIX,
                                dir=os.path.dirname(final))
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, _new_file_mode(final))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        fsync_dir(os.path.dirname(final))
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def replace_when_done(path: str | os.PathLike[str], mode: str = "w",
                      **open_kw: Any) -> Iterator[IO[Any]]:
    """``with replace_when_done(p) as f: f.write(...)``: ``p`` appears (or is replaced)
    only if the block ends without an exception (see :func:`replacing`); ``open_kw`` as
    for open(), ``encoding`` UTF-8 by default in text mode.  ``-`` is stdout; a device or
    FIFO is opened and written into."""
    if "b" not in mode:
        open_kw.setdefault("encoding", "utf-8")
    if os.fspath(path) == "-":
        sys.stdout.flush()  # text already written goes first
        out: IO[Any] = sys.stdout.buffer if "b" in mode else sys.stdout
        yield out
        out.flush()
        return
    if is_stream(path):
        with open(path, mode, **open_kw) as f:
            yield f
        return
    with replacing(path) as tmp, open(tmp, mode, **open_kw) as f:
        yield f
        f.flush()


def write_when_done(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all, by
    :func:`replace_when_done`."""
    if isinstance(data, str):
        with replace_when_done(path, "w") as f:
            f.write(data)
    else:
        with replace_when_done(path, "wb") as f:
            f.write(data)


async def copy_into(src: str | os.PathLike[str], out: str) -> None:
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
