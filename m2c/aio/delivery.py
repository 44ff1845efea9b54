"""Where a receiver's decoded blocks go: a temporary file, verified, then delivered.

:class:`Delivery` is the receiver's output, apart from the multicast pump
(:class:`m2c.aio.driver.MulticastReceiver`): blocks are written into a
temporary file at their offsets; only once the whole file is on disk (fsync)
and its SHA-256 matches the session description does it reach the output:
``os.replace`` (and a directory fsync) for a regular file, a copy for a
device, a FIFO or ``-`` (stdout), which are never replaced.  Otherwise the
temporary file is removed and an existing output is left as it was.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile

from deliverykit.outputs import copy_into, fsync_dir

__all__ = ["Delivery", "sha256_file", "via_proc"]

HASH_CHUNK = 1 << 20
"""bytes read at a time to hash a file"""


def sha256_file(path: str) -> str:
    """The SHA-256 of the file at ``path``, hex (read in chunks: any size)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(HASH_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def via_proc(path: str) -> bool:
    """True if ``path`` reaches its file through /proc (/dev/stdout, /dev/fd/N,
    /proc/self/fd/N): a link to an open file, not a path to replace."""
    for _ in range(40):
        if os.path.realpath(os.path.dirname(os.path.abspath(path))).startswith("/proc/"):
            return True
        if not os.path.islink(path):
            return False
        target = os.readlink(path)
        path = os.path.join(os.path.dirname(os.path.abspath(path)), target)
    return False


def _mode(path: str) -> int:
    """``st_mode`` of ``path`` (following links), 0 if it does not exist."""
    try:
        return os.stat(path).st_mode
    except OSError:
        return 0


class Delivery:
    """A receiver's output file ``out_path`` (``-``: stdout) of ``size`` bytes that must
    hash to ``sha256``."""

    def __init__(self, out_path: str, size: int, sha256: str) -> None:
        self.out_path = out_path
        self.size = size
        self.sha256 = sha256
        self.fd = -1
        """the temporary file, open for pwrite (-1: closed)"""
        self.tmp = ""
        """the temporary file's path ("" until :meth:`open`)"""
        self.to_stream = False
        """the output is written into (a device, FIFO or stdout), never replaced"""

    def refusal(self) -> str | None:
        """Why the output can never be written (a Unix socket: open() gives ENXIO for ever),
        said before anything is received; None if it can."""
        if self.out_path != "-" and stat.S_ISSOCK(_mode(self.out_path)):
            return (f"{self.out_path} is a Unix socket, which cannot be written as a file "
                    f"(use a path, a FIFO or - for stdout)")
        return None

    def _is_stream(self) -> bool:
        """``-`` (stdout) or an existing non-regular file (a device such as /dev/null, a
        FIFO, a socket), or a path through /proc: replacing its path would not reach the
        file, and replacing the link itself would break /dev/stdout."""
        if self.out_path == "-":
            return True
        try:
            st = os.stat(self.out_path)
        except OSError:
            return False
        return not stat.S_ISREG(st.st_mode) or via_proc(self.out_path)

    def final(self) -> str:
        """The path os.replace acts on: a symbolic link's target, so the link stays."""
        return os.path.realpath(self.out_path)

    def open(self) -> None:
        """Create the temporary file (OSError if it cannot be).  A regular output gets it
        next to itself (same file system, so os.replace is atomic); a device, FIFO or
        stdout gets it in $TMPDIR.  Its size is reserved up front (posix_fallocate) so a
        full disk is known at once."""
        self.to_stream = self._is_stream()
        if self.to_stream:
            d, base = tempfile.gettempdir(), "m2c-" + (os.path.basename(self.out_path)
                                                         if self.out_path != "-" else "stdout")
        else:
            d, base = os.path.split(self.final())
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".part", dir=d)
        try:
            try:  # keep the mode of the file it will replace; else rw-r--r--
                mode = os.stat(self.out_path).st_mode & 0o777 if not self.to_stream else 0o600
            except OSError:
                mode = 0o644
            os.fchmod(fd, mode)
            os.ftruncate(fd, self.size)
            if self.size:
                try:
                    os.posix_fallocate(fd, 0, self.size)
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                        raise
        except OSError:
            os.close(fd)
            os.unlink(tmp)
            raise
        self.fd, self.tmp = fd, tmp

    def write(self, offset: int, block: bytes) -> None:
        """A decoded block at its file offset (OSError: disk full, quota, I/O error)."""
        os.pwrite(self.fd, block, offset)

    def verified(self) -> bool:
        """The whole file on disk (fsync) and its SHA-256 that of the session (OSError: a
        delayed write error, reading it back)."""
        os.fsync(self.fd)
        return sha256_file(self.tmp) == self.sha256

    def close(self) -> None:
        """Close the temporary file (kept until :meth:`deliver` or :meth:`discard`)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    async def deliver(self) -> None:
        """Put the verified file in place: rename it over a regular output, or copy it into
        a stream without blocking the loop (cancellable: a FIFO waiting for its reader)."""
        if self.to_stream:
            await copy_into(self.tmp, self.out_path)
        else:
            final = self.final()
            os.replace(self.tmp, final)
            fsync_dir(os.path.dirname(final))

    def discard(self) -> None:
        """Remove the temporary file if it is still there."""
        if self.tmp and os.path.exists(self.tmp):
            os.unlink(self.tmp)

    def io_error(self, exc: OSError, what: str) -> str:
        """One line for an I/O error on ``what``, naming the temporary file's directory
        when it is not the output's."""
        reason = (exc.strerror or str(exc)).lower()
        where = f" (temporary file in {os.path.dirname(self.tmp)})" if self.tmp and \
            os.path.dirname(self.tmp) != os.path.dirname(os.path.abspath(self.out_path)) else ""
        return f"{reason} writing {what}{where}"
