"""Output files that appear under their final name only when complete.

A session description a receiver may read while ``m2c send`` writes it, an
experiment's CSV, JSON or plot: each is written to a temporary file next to
its final path (same file system), flushed to disk and renamed over the final
path (``os.replace``, atomic); on any failure the temporary file is removed and
an existing file is left as it was.  Outputs that cannot be replaced (a
device such as /dev/null, a FIFO, /dev/stdout) are written into directly.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["replace_when_done", "write_when_done"]


def _replaceable(path: str) -> bool:
    """False for an existing non-regular file or a link into /proc (/dev/stdout)."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    return stat.S_ISREG(st.st_mode) and not os.path.realpath(path).startswith("/proc/")


def _new_file_mode(path: str) -> int:
    """The mode of the file being replaced, else what open() would give (0o666 & ~umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def replace_when_done(path: str | os.PathLike[str], mode: str = "w",
                      **open_kw: Any) -> Iterator[IO[Any]]:
    """``with replace_when_done(p) as f: f.write(...)``: ``p`` appears (or is replaced)
    only if the block ends without an exception; ``open_kw`` as for open()
    (``encoding`` defaults to UTF-8 in text mode)."""
    if "b" not in mode:
        open_kw.setdefault("encoding", "utf-8")
    final = os.fspath(path)
    if final == "-":  # stdout, as cliutil.output_path allows
        out = sys.stdout.buffer if "b" in mode else sys.stdout
        yield out
        out.flush()
        return
    if not _replaceable(final):
        with open(final, mode, **open_kw) as f:  # noqa: SIM115 - a device or FIFO
            yield f
        return
    final = os.path.realpath(final)  # a symbolic link stays, its target is replaced
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(final)}.", suffix=".part",
                               dir=os.path.dirname(final))
    try:
        os.fchmod(fd, _new_file_mode(final))
        with os.fdopen(fd, mode, **open_kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_when_done(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` by :func:`replace_when_done`."""
    with replace_when_done(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
