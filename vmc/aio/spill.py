"""A bounded on-disk store for what leaves a session's in-memory window (issue 19 item 1).

The window keeps memory bounded; alone, it makes a late joiner whose prefix left
it fetch that prefix from the origin by Range (3.4 origin copies for 8 curl
clients 0.4 s apart on a 30 MB object at the 8 MiB default). Each shareable
session therefore also writes its body, as it arrives, to a :class:`SpillFile`:
a late joiner reads its prefix from there, and a finished object stays readable
(an LRU of finished objects under ``budget`` bytes) until it is evicted, goes
stale, or the proxy exits. The origin is asked again only when the bytes are
in neither the window nor the store.

- Only shareable responses get a file (the proxy asks for one after RFC 9111's
  checks, :func:`vmc.core.policy.response_verdict`): a ``no-store`` or
  ``private`` response never touches the disk.
- Files are anonymous: ``O_TMPFILE`` where the file system has it, else created
  and unlinked at once, so a crash leaves nothing behind; closing is the cleanup.
- ``budget`` bytes are reserved per object by its Content-Length when the file
  is opened; finished, unread objects are evicted oldest-use first to make room;
  an object that still does not fit gets no file (counted ``disk-budget``).
- A write that fails (``ENOSPC``: counted ``disk-full``; any other error:
  ``disk-error``) retires the file at once: readers fall back to today's path
  (origin by Range); what the file held before is never read again, so nothing
  half-written is served.

Reads and writes are ``os.pread``/``os.pwrite`` on the event-loop thread: they
hit the page cache for the sizes at stake (a window's worth behind the live edge).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class DiskRefusal(str, Enum):
    """Why an object got no file, or lost it."""

    BUDGET = "disk-budget"
    FULL = "disk-full"
    ERROR = "disk-error"


@dataclass
class DiskStats:
    """What the store did (``/_vmc/status`` -> ``disk``)."""

    files: int = 0
    """Files opened."""
    spilled_bytes: int = 0
    """Body bytes written."""
    read_bytes: int = 0
    """Body bytes read back for clients."""
    sendfile_bytes: int = 0
    """Body bytes sent to clients straight from the file by sendfile (no copy through Python)."""
    direct_bytes: int = 0
    """The same by ``os.sendfile`` from the pump itself, on a loop without ``loop.sendfile``
    (uvloop; :meth:`vmc.aio.pump.CorePump._send_span_now`)."""
    hits: int = 0
    """Requests served from a finished object on disk (no origin request)."""
    evicted: int = 0
    """Finished objects evicted to make room."""
    peak_reserved: int = 0
    """Largest number of bytes reserved at once."""
    adopted: int = 0
    """Finished objects another worker kept, taken in on its file (``vmc proxy --workers``)."""
    refused: Counter[DiskRefusal] = field(default_factory=Counter)


def default_directory() -> str:
    """``/var/tmp`` (disk by convention; ``/tmp`` is often RAM) when writable, else the temporary
    directory."""
    if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK | os.X_OK):
        return "/var/tmp"
    return tempfile.gettempdir()


def _anonymous_file(directory: str) -> int:
    """A read-write file descriptor with no name in ``directory``."""
    try:
        return os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):
        fd, path = tempfile.mkstemp(prefix=".vmc-spill-", dir=directory)
        os.unlink(path)
        return fd


class SpillFile:
    """One object's body on disk, written in order from offset 0."""

    __slots__ = ("can_evict", "failed", "fd", "length", "on_evict", "store", "written")

    def __init__(self, store: DiskStore, fd: int, length: int) -> None:
        self.store = store
        self.length = length
        self.fd: int | None = fd
        #: Bytes ``[0, written)`` are on disk.
        self.written = 0
        #: A write failed: nothing is read from this file any more.
        self.failed = False
        #: Called before eviction: False while someone still reads the object.
        self.can_evict: Callable[[], bool] = lambda: True
        #: Called after eviction (the proxy forgets the finished object).
        self.on_evict: Callable[[], None] = lambda: None

    @property
    def complete(self) -> bool:
        return not self.failed and self.fd is not None and self.written == self.length

    def write(self, offset: int, data: bytes) -> bool:
        """Append ``data`` at ``offset`` (== ``written``); False (and the file retired) on
        failure."""
        if self.failed or self.fd is None or offset != self.written:
            return False
        try:
            n = os.pwrite(self.fd, data, offset)
            if n != len(data):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as exc:
            self.store.stats.refused[DiskRefusal.FULL if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                                     else DiskRefusal.ERROR] += 1
            self.failed = True
            self.close()
            return False
        self.written += n
        self.store.stats.spilled_bytes += n
        return True

    def holds(self, first: int) -> bool:
        """True when byte ``first`` can be read from this file."""
        return not self.failed and self.fd is not None and 0 <= first < self.written

    def read(self, first: int, end: int) -> bytes:
        """Bytes ``[first, min(end, written))`` (check :meth:`holds` first)."""
        assert self.fd is not None and self.holds(first)
        end = min(end, self.written)
        parts: list[bytes] = []
        pos = first
        try:
            while pos < end:
                got = os.pread(self.fd, end - pos, pos)
                if not got:  # shorter than written: the file is not what we wrote
                    raise OSError(errno.EIO, "spill file shorter than written")
                parts.append(got)
                pos += len(got)
        except OSError:  # the disk failed under us: retire the file, the reader falls back
            self.store.stats.refused[DiskRefusal.ERROR] += 1
            self.failed = True
            self.close()
        data = b"".join(parts)
        self.store.stats.read_bytes += len(data)
        return data

    def close(self) -> None:
        """Release the file and its reservation (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.store._release(self)


class DiskStore:
    """Anonymous spill files under ``directory``, ``budget`` bytes reserved at most."""

    def __init__(
        self, budget: int, directory: str | None = None, max_objects: int = 10_000
    ) -> None:
        self.budget = budget
        self.directory = directory or default_directory()
        #: Files open at once at most (finished objects are evicted past it, as for the budget).
        self.max_objects = max_objects
        self.reserved = 0
        self.stats = DiskStats()
        self._open: set[SpillFile] = set()
        #: Finished objects, least recently used first (eviction candidates).
        self._finished: OrderedDict[SpillFile, None] = OrderedDict()

    def open(self, length: int) -> SpillFile | None:
        """A file for an object of ``length`` bytes, or None (counted) when it cannot have one."""
        if length <= 0:
            return None
        if not self._make_room(length):
            self.stats.refused[DiskRefusal.BUDGET] += 1
            return None
        try:
            fd = _anonymous_file(self.directory)
        except OSError as exc:
            self.stats.refused[DiskRefusal.FULL if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                               else DiskRefusal.ERROR] += 1
            return None
        self.stats.files += 1
        return self._register(SpillFile(self, fd, length))

    def adopt(self, fd: int, length: int) -> SpillFile | None:
        """Another worker's finished file of ``length`` bytes (``fd``, ours to close): a whole
        copy in this store, its reservation charged here too, or None (``fd`` closed, counted)
        when it does not fit or is shorter than ``length``."""
        try:
            whole = length > 0 and os.fstat(fd).st_size >= length
        except OSError:
            whole = False
        if not whole:
            os.close(fd)
            self.stats.refused[DiskRefusal.ERROR] += 1
            return None
        if not self._make_room(length):
            os.close(fd)
            self.stats.refused[DiskRefusal.BUDGET] += 1
            return None
        f = SpillFile(self, fd, length)
        f.written = length
        self.stats.adopted += 1
        return self._register(f)

    def _register(self, f: SpillFile) -> SpillFile:
        """``f`` is open in this store, its length reserved."""
        self._open.add(f)
        self.reserved += f.length
        self.stats.peak_reserved = max(self.stats.peak_reserved, self.reserved)
        return f

    def _make_room(self, length: int) -> bool:
        if length > self.budget:
            return False
        for f in list(self._finished):
            if self.reserved + length <= self.budget and len(self._open) < self.max_objects:
                break
            if f.can_evict():
                self.stats.evicted += 1
                f.close()
                f.on_evict()
        return self.reserved + length <= self.budget and len(self._open) < self.max_objects

    def finished(self, f: SpillFile) -> None:
        """``f`` holds a whole object: keep it, most recently used, until evicted."""
        if f.complete:
            self._finished[f] = None
            self._finished.move_to_end(f)

    def touch(self, f: SpillFile) -> None:
        """``f`` was just served whole from disk (a hit, no origin request): evict it last."""
        self.stats.hits += 1
        if f in self._finished:
            self._finished.move_to_end(f)

    def _release(self, f: SpillFile) -> None:
        if f in self._open:
            self._open.discard(f)
            self.reserved -= f.length
        self._finished.pop(f, None)

    @property
    def objects(self) -> int:
        """Files open (in flight or finished)."""
        return len(self._open)

    def close(self) -> None:
        """Close every file (the proxy exits)."""
        for f in list(self._open):
            f.close()

    def snapshot(self) -> dict:
        st = self.stats
        return {"budget": self.budget, "reserved": self.reserved, "objects": self.objects,
                "finished": len(self._finished), "files": st.files,
                "spilled_bytes": st.spilled_bytes, "read_bytes": st.read_bytes,
                "sendfile_bytes": st.sendfile_bytes, "direct_bytes": st.direct_bytes,
                "hits": st.hits, "evicted": st.evicted, "adopted": st.adopted,
                "peak_reserved": st.peak_reserved,
                "refused": {k.value: n for k, n in st.refused.items()}}
