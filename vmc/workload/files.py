"""Copying a verified download into a stream (stdout, a device, a FIFO) without blocking
the event loop.

Result files that appear only complete (temporary name, fsync, rename, fsync of the
directory) are :mod:`deliverykit.outputs`, shared by every package.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
import sys
from pathlib import Path


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
