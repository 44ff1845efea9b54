"""Squid native access.log lines (paper sec. 3.3: the Wits cache logs).

Format (Squid ``logformat squid``), whitespace-separated::

    time.ms elapsed client code/status bytes method URL ident hierarchy/peer type

e.g.::

    1066036250.123 245 10.0.0.1 TCP_MISS/200 4512 GET http://a.example/x - DIRECT/1.2.3.4 text/html

:func:`parse_line` raises :class:`LogError` on a malformed line. The paper
"clean[ed] the log files ... requests which did not result in data being
returned, or which were not well-formed" were removed: :func:`clean` keeps GETs
with a 2xx status and a positive byte count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from vmc.core.errors import VMCError


class LogError(VMCError):
    """A Squid log line is not in the native format."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One access.log line."""

    time: float
    """Request completion time, seconds since the epoch (Squid logs the end of the transaction)."""
    elapsed_ms: int
    """Milliseconds the transaction took."""
    client: str
    """Client address."""
    code: str
    """Squid result code (TCP_MISS, TCP_HIT, ...)."""
    status: int
    """HTTP status."""
    bytes: int
    """Bytes delivered to the client."""
    method: str
    """Request method."""
    url: str
    """Requested URL."""
    ident: str = "-"
    """RFC 931 ident."""
    hierarchy: str = "DIRECT"
    """Hierarchy code."""
    peer: str = "-"
    """Peer host."""
    type: str = "-"
    """Content type."""

    @property
    def start(self) -> float:
        """When the request started: logged time minus elapsed."""
        return self.time - self.elapsed_ms / 1000.0

    def object_path(self) -> str:
        """Origin path for this entry's body: a stable name for (URL, logged size).

        The paper "used the logs to generate random bytes up to the length of
        each request": our origin generates them from the path, so the same URL
        and size always give the same object (and the same proxy key). The path
        without the query is also a file name for a static origin (nginx).
        """
        h = hashlib.md5(self.url.encode("utf-8", "surrogateescape")).hexdigest()[:20]
        return f"/o/{h}-{self.bytes}?size={self.bytes}"

    def format(self) -> str:
        """The native log line."""
        return (
            f"{self.time:.3f} {self.elapsed_ms:6d} {self.client} {self.code}/{self.status:03d} "
            f"{self.bytes} {self.method} {self.url} {self.ident} {self.hierarchy}/{self.peer} "
            f"{self.type}"
        )


def parse_line(line: str) -> LogEntry:
    """Parse one native-format line."""
    f = line.split()
    if len(f) < 7:
        raise LogError(f"too few fields: {line[:80]!r}")
    try:
        t = float(f[0])
        elapsed = int(f[1])
        code, _, status = f[3].partition("/")
        st = int(status)
        nbytes = int(f[4])
    except ValueError as exc:
        raise LogError(f"bad number in {line[:80]!r}") from exc
    if elapsed < 0 or nbytes < 0 or t < 0:
        raise LogError(f"negative field in {line[:80]!r}")
    hier, _, peer = (f[8] if len(f) > 8 else "DIRECT/-").partition("/")
    return LogEntry(t, elapsed, f[2], code, st, nbytes, f[5], f[6], f[7] if len(f) > 7 else "-",
                    hier, peer or "-", f[9] if len(f) > 9 else "-")


def read_log(lines: Iterable[str], strict: bool = False) -> Iterator[LogEntry]:
    """Entries of a log; malformed lines are skipped (or raise when ``strict``)."""
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        try:
            yield parse_line(line)
        except LogError:
            if strict:
                raise


def clean(entries: Iterable[LogEntry]) -> list[LogEntry]:
    """The paper's cleaning: GET, 2xx, bytes > 0, URL well-formed (http); sorted by start."""
    out = [
        e for e in entries
        if e.method == "GET" and 200 <= e.status < 300 and e.bytes > 0
        and e.url.startswith("http://")
    ]
    out.sort(key=lambda e: e.start)
    return out
