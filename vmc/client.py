"""A VMC-aware HTTP GET (paper sec. 3.2, 5: "clients ... need to be aware that they
should respond to a portion of a data-object ... by requesting the rest").

:func:`fetch` sends ``GET`` with ``VMC: 1``. A ``200`` is stored as it comes.
A ``206`` to a request that had no Range (the proxy joined us to a live
stream at offset N) is stored at its Content-Range offset while, in parallel,
the missing parts are requested with ``Range`` + ``If-Range`` (the first
answer's strong ETag or Last-Modified), repeating until no hole is left (a
server may send fewer bytes than asked, RFC 9110 sec. 15.3.7). The result is
checked: every byte present, the length equal to the complete length, and the
``Repr-Digest: sha-256`` (RFC 9530) when the server offered one.

:class:`Download` owns the output (see docs/security/vmc-client-origin.md): a file is written
as ``FILE.part`` and renamed once verified; after a failure a resumable part is kept with a
``FILE.part.json`` record and the next run continues with Range + If-Range; ``-``, devices
and FIFOs are written into after verification, never replaced.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import enum
import errno
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from deliverykit.outputs import copy_into, fsync_dir, is_stream
from vmc.aio import upstream as up
from vmc.core import policy, ranges
from vmc.core.errors import RangeError, VMCError
from vmc.core.key import format_authority, split_authority

VMC_REQUEST = (b"vmc", b"1")


class FetchError(VMCError):
    """The object could not be fetched completely and consistently."""


class BusyError(FetchError):
    """503 Service Unavailable; ``retry_after`` seconds from its Retry-After (RFC 9110 sec. 10.2.3),
    if any."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__(f"status 503 (Retry-After: {retry_after})")
        self.retry_after = retry_after


def _retry_after(value: bytes | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (RFC 9110 sec. 10.2.3): delay-seconds, or an
    HTTP-date (sec. 5.6.7, any of its three forms) counted from ``now`` (default: the wall
    clock), never negative; None when absent or unparseable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    when = policy.http_date(value)
    if when is None:
        return None
    return max(0.0, when - (time.time() if now is None else now))


@dataclass
class FetchResult:
    """Outcome of :func:`fetch`."""

    url: str
    status: int
    """Status of the first answer (200, or 206 when joined to a live stream)."""
    length: int
    """Complete length of the representation."""
    parts: list[tuple[int, int, int]] = field(default_factory=list)
    """(first, end, status) of every answer used, in the order they were requested."""
    digest_ok: bool | None = None
    """True/False when a Repr-Digest was offered, else None."""
    ttfb: float = 0.0
    """Seconds to the first body byte."""
    elapsed: float = 0.0
    """Seconds to the last byte."""
    body: bytes | None = None
    """The body when no output path was given."""
    vmc: str = ""
    """The proxy's VMC response header, if any."""


def _target(url: str, via_proxy: bool) -> tuple[str, int, bytes, bytes]:
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise FetchError(f"only http:// URLs: {url}")
    host, port = split_authority(parts.netloc)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = format_authority(host, port).encode()
    target = f"http://{authority.decode()}{path}".encode() if via_proxy else path.encode()
    return host, port, target, authority


class OutputKind(enum.Enum):
    """Where :class:`Download` puts the body."""

    MEMORY = "memory"
    """Kept in memory and returned as :attr:`FetchResult.body` (``out=None``)."""
    DISCARD = "discard"
    """Counted, not kept (load generation)."""
    FILE = "file"
    """A regular file: written as ``FILE.part``, renamed to ``FILE`` once verified."""
    STREAM = "stream"
    """Standard output (``-``), a device or a FIFO: a temporary file, copied in once verified."""


@dataclass
class PartState:
    """What ``FILE.part.json`` records beside a kept ``FILE.part``: enough to resume safely."""

    url: str
    length: int
    """Complete length of the representation the part belongs to."""
    etag: str | None
    last_modified: str | None
    date: str | None
    have: list[tuple[int, int]]
    """Inclusive byte spans present in the part (fsynced before this record was written)."""

    @property
    def validators(self) -> policy.Validators:
        def enc(text: str | None) -> bytes | None:
            return None if text is None else text.encode("latin-1")

        return policy.Validators(
            enc(self.etag), enc(self.last_modified), self.length, enc(self.date)
        )

    @property
    def kept(self) -> int:
        return sum(b - a + 1 for a, b in self.have)

    @classmethod
    def load(cls, meta: Path, part: Path, url: str) -> PartState | None:
        """The record, if it belongs to ``url`` and to a part of the recorded size; else None."""
        try:
            raw = json.loads(meta.read_text(encoding="utf-8"))
            state = cls(
                str(raw["url"]),
                int(raw["length"]),
                raw["etag"],
                raw["last_modified"],
                raw["date"],
                [(int(a), int(b)) for a, b in raw["have"]],
            )
            size = part.stat().st_size
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if state.url != url or size != state.length or state.validators.if_range() is None:
            return None
        if any(not 0 <= a <= b < state.length for a, b in state.have):
            return None
        return state

    def save(self, meta: Path) -> None:
        """Write the record atomically (temporary name, fsync, rename)."""
        tmp = meta.with_name(meta.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "url": self.url,
                    "length": self.length,
                    "etag": self.etag,
                    "last_modified": self.last_modified,
                    "date": self.date,
                    "have": self.have,
                },
                fh,
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, meta)


class _Restart(Exception):
    """The kept part belongs to another representation: fetch the object afresh."""


class _Sink:
    """Where body bytes go: a file (sparse writes at offsets), a bytearray, or nowhere."""

    def __init__(self, length: int, fh: BinaryIO | None = None, discard: bool = False,
                 have: list[tuple[int, int]] | None = None,
                 on_write: Callable[[int], None] | None = None) -> None:
        self.length = length
        self.fh = fh
        self.discard = discard
        self.on_write = on_write
        self.have: list[tuple[int, int]] = list(have or [])  # coalesced inclusive spans received
        self.mem: bytearray | None = bytearray(length) if fh is None and not discard else None

    @property
    def got(self) -> int:
        return sum(b - a + 1 for a, b in self.have)

    def write(self, off: int, data: bytes) -> None:
        if off + len(data) > self.length:
            raise FetchError("server sent bytes past the complete length")
        if self.mem is not None:
            self.mem[off : off + len(data)] = data
        elif self.fh is not None:
            self.fh.seek(off)
            self.fh.write(data)
        if data:
            self.have = ranges.coalesce(self.have + [(off, off + len(data) - 1)])
            if self.on_write is not None:
                self.on_write(len(data))

    def holes(self) -> list[tuple[int, int]]:
        out, pos = [], 0
        for a, b in self.have:
            if a > pos:
                out.append((pos, a))
            pos = max(pos, b + 1)
        if pos < self.length:
            out.append((pos, self.length))
        return out

    def sha256(self) -> bytes | None:
        if self.discard:
            return None
        if self.mem is not None:
            return hashlib.sha256(self.mem).digest()
        assert self.fh is not None
        self.fh.flush()
        h = hashlib.sha256()
        self.fh.seek(0)
        while chunk := self.fh.read(1 << 20):
            h.update(chunk)
        return h.digest()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


class _Output:
    """The body's destination and its life: opened on the first answer, then either
    :meth:`commit` (verified: fsync and rename, or copy into a stream) or :meth:`abandon`
    (a file keeps ``FILE.part`` + ``FILE.part.json`` when it can be resumed, else nothing)."""

    def __init__(self, url: str, out: str | Path | None, discard: bool,
                 on_write: Callable[[int], None] | None = None) -> None:
        self.url = url
        self.out = None if out is None else str(out)
        self.on_write = on_write
        self.sink: _Sink | None = None
        self.validators: policy.Validators | None = None
        self.resume: PartState | None = None
        self.kept = 0
        """Bytes left in :attr:`part` by :meth:`abandon` (0: nothing kept)."""
        self.note = ""
        """Why nothing was kept although some bytes had arrived."""
        self._tmp: Path | None = None
        if discard:
            self.kind = OutputKind.DISCARD
        elif self.out is None:
            self.kind = OutputKind.MEMORY
        elif is_stream(self.out):
            self.kind = OutputKind.STREAM
        else:
            self.kind = OutputKind.FILE
            self.final = Path(os.path.realpath(self.out))  # a symbolic link stays a link
            self.part = self.final.with_name(self.final.name + ".part")
            self.meta = self.final.with_name(self.final.name + ".part.json")
            if self.part.exists():
                self.resume = PartState.load(self.meta, self.part, url)

    def plan(self) -> tuple[policy.Validators, list[tuple[int, int]], int] | None:
        """(validators, holes, length) when a Range request can continue earlier bytes."""
        if self.sink is not None and self.sink.got and self.validators is not None \
                and self.validators.if_range() is not None:
            holes = self.sink.holes()
            return (self.validators, holes, self.sink.length) if holes else None
        if self.resume is not None and self.resume.have:
            probe = _Sink(self.resume.length, discard=True, have=self.resume.have)
            holes = probe.holes()
            return (self.resume.validators, holes, self.resume.length) if holes else None
        return None

    def forget(self) -> None:
        """The held bytes belong to another representation: the next :meth:`open` starts afresh."""
        self.resume, self.validators = None, None

    def open(self, length: int, v: policy.Validators, continuing: bool) -> _Sink:
        """The sink for a representation of ``length`` bytes; ``continuing``: the answer matched
        :meth:`plan`, so the bytes already held stay."""
        self.validators = v
        if continuing and self.sink is not None:
            return self.sink
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        if self.kind is OutputKind.MEMORY or self.kind is OutputKind.DISCARD:
            self.sink = _Sink(
                length, discard=self.kind is OutputKind.DISCARD, on_write=self.on_write
            )
            return self.sink
        if self.kind is OutputKind.STREAM:
            if self._tmp is None:
                fd, name = tempfile.mkstemp(prefix=".vmc-get-", suffix=".part")
                os.close(fd)
                self._tmp = Path(name)
            path = self._tmp
            have: list[tuple[int, int]] = []
        else:
            path = self.part
            resume, self.resume = (self.resume if continuing else None), None
            have = resume.have if resume is not None else []
        fh = _open_locked(path)
        try:
            if self.kind is OutputKind.FILE:
                self.meta.unlink(
                    missing_ok=True
                )  # rewritten by abandon(): a stale record never survives
            if not have:
                fh.truncate(0)
                self._reserve(fh, length)
        except OSError:  # a full disk: nothing of this object is worth keeping
            fh.close()
            path.unlink(missing_ok=True)
            raise
        self.sink = _Sink(length, fh, have=have, on_write=self.on_write)
        return self.sink

    def _reserve(self, fh: BinaryIO, length: int) -> None:
        """Size the file and reserve its blocks, so a full disk is known before any byte."""
        if self.kind is OutputKind.FILE:
            try:  # keep the mode of the file it will replace
                os.fchmod(fh.fileno(), self.final.stat().st_mode & 0o777)
            except OSError:
                pass
        os.ftruncate(fh.fileno(), length)
        if length:
            try:
                os.posix_fallocate(fh.fileno(), 0, length)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise

    @property
    def where(self) -> str:
        return "stdout" if self.out == "-" else str(self.out)

    async def commit(self) -> None:
        """The sink is complete and verified: make it the output."""
        sink, self.sink = self.sink, None
        if sink is None or sink.fh is None:
            return
        try:
            sink.fh.flush()
            os.fsync(sink.fh.fileno())
        finally:
            sink.close()
        if self.kind is OutputKind.FILE:
            os.replace(self.part, self.final)
            self.meta.unlink(missing_ok=True)
            fsync_dir(self.final.parent)
        elif self.kind is OutputKind.STREAM:
            assert self._tmp is not None and self.out is not None
            try:
                await copy_into(self._tmp, self.out)
            finally:
                self._tmp.unlink(missing_ok=True)
                self._tmp = None

    def abandon(self) -> None:
        """The fetch failed or was cancelled: keep a resumable ``FILE.part``, else remove it."""
        sink, self.sink = self.sink, None
        if self._tmp is not None:
            if sink is not None:
                sink.close()
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
            return
        if self.kind is not OutputKind.FILE:
            if sink is not None:
                sink.close()
            return
        if (
            sink is None
        ):  # failed before a usable answer: a part from an earlier run stays as it was
            if self.resume is not None:
                self.resume.save(self.meta)
                self.kept = self.resume.kept
            return
        v = self.validators
        try:
            if sink.got and v is not None and v.if_range() is not None and not self.note:
                assert sink.fh is not None
                sink.fh.flush()
                os.fsync(sink.fh.fileno())
                PartState(
                    self.url,
                    sink.length,
                    _text(v.etag),
                    _text(v.last_modified),
                    _text(v.date),
                    sink.have,
                ).save(self.meta)
                self.kept = sink.got
                return
        except OSError as exc:  # e.g. the disk filled up: a part without its record is useless
            self.note = f"could not record it ({(exc.strerror or str(exc)).lower()})"
        finally:
            sink.close()
        if sink.got and not self.note:
            self.note = "no validator (strong ETag or Last-Modified) to resume it safely"
        self.part.unlink(missing_ok=True)
        self.meta.unlink(missing_ok=True)

    def kept_message(self) -> str:
        """One clause for the failure line: what is left and how to go on."""
        if self.kind is not OutputKind.FILE:
            return ""
        if self.kept:
            total = (
                f" of {self.validators.length}"
                if self.validators and self.validators.length
                else ""
            )
            if self.resume is not None:
                total = f" of {self.resume.length}"
            return (f"{self.kept}{total} bytes kept in {self.part}: run the same command again "
                    f"to resume")
        if self.note:
            return f"partial download removed: {self.note}"
        return ""


def _open_locked(path: Path) -> BinaryIO:
    """Open (creating) ``path`` for reading and writing under an exclusive lock: two ``vmc get``
    runs for one output would otherwise interleave their bytes in one part file."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FetchError(f"{path} is being written by another download") from None
    return os.fdopen(fd, "r+b")


def _upstream_text(exc: up.UpstreamError) -> str:
    """The failure in words: ``cannot connect to h:p: connection refused``, not an
    exception repr."""
    text, cause = str(exc), exc.__cause__
    if isinstance(cause, (TimeoutError, asyncio.TimeoutError)) and not getattr(
        cause, "strerror", None
    ):
        return text.replace(repr(cause), "timed out")
    if isinstance(cause, OSError) and (cause.errno or cause.strerror):
        words = os.strerror(cause.errno) if cause.errno and cause.errno > 0 else str(cause.strerror)
        return text.replace(repr(cause), words.lower())
    return text


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _offered_sha256(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """SHA-256 of the whole representation if offered: ``Repr-Digest: sha-256=:b64:`` (RFC 9530)
    or the obsolete ``Digest: SHA-256=b64`` (RFC 3230)."""
    for k, v in headers:
        for item in v.split(b","):
            name, _, val = item.strip().partition(b"=")
            try:
                if (
                    k == b"repr-digest"
                    and name.lower() == b"sha-256"
                    and val[:1] == val[-1:] == b":"
                ):
                    return base64.b64decode(val[1:-1], validate=True)
                if k == b"digest" and name.lower() == b"sha-256":
                    return base64.b64decode(val, validate=True)
            except ValueError:
                return None
    return None


async def _drain(resp: up.UpstreamResponse, sink: _Sink, first: int, end: int, on_byte=None) -> int:
    pos = first
    async for chunk in resp.chunks():
        if on_byte is not None:
            on_byte()
            on_byte = None
        if pos + len(chunk) > end:
            raise FetchError("answer longer than announced")
        sink.write(pos, chunk)
        pos += len(chunk)
    if pos != end:
        raise FetchError(f"answer ended at {pos}, expected {end}")
    return pos


class Download:
    """One GET to completion: ``result = await Download(url, out=...).run()``.

    The body goes to :class:`_Output`: memory (``out=None``), nowhere (``discard``), a regular
    file (written as ``FILE.part``, fsynced and renamed once every byte is present, the length
    matches and the offered digest agrees) or a stream (``-``, a device, a FIFO: written into
    once verified, never replaced). On failure or cancellation a file keeps ``FILE.part`` when
    a strong validator makes a resume safe (:attr:`kept`, :meth:`kept_message`); the next
    Download of the same URL to the same file continues with Range + If-Range, and starts
    afresh when the object changed meanwhile.
    """

    def __init__(
        self,
        url: str,
        proxy: str | None = None,
        out: str | Path | None = None,
        vmc: bool = True,
        timeout: float = 60.0,
        extra_headers: list[tuple[bytes, bytes]] | None = None,
        discard: bool = False,
        busy_retries: int = 0,
        max_retry_after: float = 30.0,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.url, self.proxy, self.vmc, self.timeout = url, proxy, vmc, timeout
        self.extra_headers = list(extra_headers or [])
        self.busy_retries, self.max_retry_after = busy_retries, max_retry_after
        self.on_progress = on_progress
        self.output = _Output(url, out, discard, on_write=self._wrote)

    def _wrote(self, n: int) -> None:
        sink = self.output.sink
        if self.on_progress is not None and sink is not None:
            self.on_progress(sink.got, sink.length)

    @property
    def received(self) -> int:
        """Bytes held so far (including those a resumed part already had)."""
        sink = self.output.sink
        return sink.got if sink is not None else self.output.kept

    @property
    def kept(self) -> int:
        return self.output.kept

    def kept_message(self) -> str:
        return self.output.kept_message()

    async def run(self) -> FetchResult:
        """Fetch, verify and commit; :class:`FetchError` (or OSError writing) on failure."""
        busy_left, restarted = self.busy_retries, False
        try:
            while True:
                try:
                    result = await self._once()
                except BusyError as exc:
                    wait = exc.retry_after
                    if busy_left <= 0 or wait is None or wait > self.max_retry_after:
                        raise
                    busy_left -= 1
                    await asyncio.sleep(wait)
                    continue
                except _Restart:
                    if restarted:
                        raise FetchError(
                            "the server's range answers do not match its own validators"
                        ) from None
                    restarted = True
                    self.output.forget()
                    continue
                break
            await self.output.commit()
            return result
        except BaseException:
            self.output.abandon()
            raise

    async def _once(self) -> FetchResult:
        t0 = time.monotonic()
        via = self.proxy is not None
        host, port, target, authority = _target(self.url, via)
        conn_host, conn_port = split_authority(self.proxy) if self.proxy else (host, port)
        headers = [(b"host", authority)] + self.extra_headers
        if self.vmc:
            headers.append(VMC_REQUEST)
        plan = self.output.plan()
        if plan is not None:
            cond = plan[0].if_range()
            assert cond is not None
            a, b = plan[1][0]
            headers += [(b"range", ranges.format_range(a, b - 1).encode()), (b"if-range", cond)]
        try:
            resp = await up.request(
                conn_host, conn_port, b"GET", target, headers, timeout=self.timeout
            )
        except up.UpstreamError as exc:
            raise FetchError(_upstream_text(exc)) from exc
        result = FetchResult(
            self.url, resp.status, 0, vmc=(resp.header(b"vmc") or b"").decode("latin-1")
        )
        first_byte: list[float] = []

        def mark() -> None:
            first_byte.append(time.monotonic())

        try:
            if resp.status == 200:
                v = policy.validators_of(200, resp.headers)
                cl = resp.header(b"content-length")
                if cl is None or not cl.isdigit():
                    body = await resp.read_all()
                    length = len(body)
                    sink = self.output.open(length, dataclasses.replace(v, length=length), False)
                    sink.write(0, body)
                    mark()
                else:
                    length = int(cl)
                    sink = self.output.open(length, v, False)
                    await _drain(resp, sink, 0, length, mark)
                result.parts.append((0, length, 200))
            elif resp.status == 206:
                try:
                    cr = ranges.parse_content_range(resp.header(b"content-range") or b"")
                except RangeError as exc:
                    raise FetchError(f"206 with a bad Content-Range: {exc}") from exc
                if cr.first is None or cr.length is None or cr.last is None:
                    raise FetchError("206 without a complete length")
                length = cr.length
                v = policy.validators_of(206, resp.headers)
                continuing = False
                if (
                    plan is not None
                ):  # our Range + If-Range: the kept bytes must be the same object's
                    if length != plan[2] or not policy.same_representation(plan[0], v):
                        raise _Restart()
                    v, continuing = plan[0], True
                sink = self.output.open(length, v, continuing)
                live = asyncio.create_task(_drain(resp, sink, cr.first, cr.last + 1, mark))
                try:
                    await _fill_holes(
                        sink,
                        conn_host,
                        conn_port,
                        target,
                        authority,
                        v,
                        result,
                        self.timeout,
                        exclude=(cr.first, cr.last + 1),
                        extra=self.extra_headers,
                        busy_retries=self.busy_retries,
                        max_retry_after=self.max_retry_after,
                    )
                    await live
                finally:
                    live.cancel()
                result.parts.insert(0, (cr.first, cr.last + 1, 206))
                if sink.holes():
                    await _fill_holes(
                        sink,
                        conn_host,
                        conn_port,
                        target,
                        authority,
                        v,
                        result,
                        self.timeout,
                        extra=self.extra_headers,
                        busy_retries=self.busy_retries,
                        max_retry_after=self.max_retry_after,
                    )
            elif resp.status == 416 and plan is not None:
                raise _Restart()
            elif resp.status == 503:
                raise BusyError(_retry_after(resp.header(b"retry-after")))
            else:
                raise FetchError(f"status {resp.status} {resp.reason.decode('latin-1')}".rstrip())
            if sink.holes():
                raise FetchError(f"missing bytes {sink.holes()[:3]}")
            result.length = length
            want = _offered_sha256(resp.headers)
            if want is not None:
                mine = sink.sha256()
                if mine is not None:
                    result.digest_ok = want == mine
                if result.digest_ok is False:
                    self.output.note = "its bytes do not match the offered Repr-Digest"
                    raise FetchError("digest mismatch")
            if sink.mem is not None:
                result.body = bytes(sink.mem)
        except up.UpstreamError as exc:
            raise FetchError(_upstream_text(exc)) from exc
        finally:
            resp.close()
        result.ttfb = (first_byte[0] - t0) if first_byte else time.monotonic() - t0
        result.elapsed = time.monotonic() - t0
        return result


async def fetch(
    url: str,
    proxy: str | None = None,
    out: str | Path | None = None,
    vmc: bool = True,
    timeout: float = 60.0,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    discard: bool = False,
    busy_retries: int = 0,
    max_retry_after: float = 30.0,
) -> FetchResult:
    """GET ``url`` (through ``proxy`` "host:port" if given), patching a partial answer.

    Raises :class:`FetchError` on any inconsistency; never returns a short body, and never
    leaves a short file under ``out`` (see :class:`Download`). ``discard=True`` keeps no bytes
    (load generation): coverage and length are still checked, the digest is not. A ``503``
    with ``Retry-After`` (the proxy's upstream cap is full) is retried after that delay up to
    ``busy_retries`` times, if the delay is at most ``max_retry_after`` s; else :class:`BusyError`.
    """
    return await Download(url, proxy, out, vmc, timeout, extra_headers, discard, busy_retries,
                          max_retry_after).run()


async def _fill_holes(
    sink: _Sink, host: str, port: int, target: bytes, authority: bytes, v: policy.Validators,
    result: FetchResult, timeout: float, exclude: tuple[int, int] | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    busy_retries: int = 0,
    max_retry_after: float = 30.0,
) -> None:
    """Request every hole (outside ``exclude``, the part still arriving) by Range until none is
    left.

    A ``503`` with an acceptable Retry-After is waited out and the same Range asked again (up to
    ``busy_retries`` times in all), keeping what has arrived. Without a strong validator no
    If-Range is sent (RFC 9110 sec. 13.1.5), but the answer's ETag and Last-Modified must still
    equal the first answer's where both carry them.
    """
    cond = v.if_range()
    busy_left = busy_retries
    for _ in range(64):
        holes = sink.holes()
        if exclude is not None:
            a0, b0 = exclude
            holes = [
                (a, min(b, a0)) if a < a0 else (max(a, b0), b)
                for a, b in holes
                if not (a0 <= a and b <= b0)
            ]
            holes = [(a, b) for a, b in holes if a < b]
        if not holes:
            return
        a, b = holes[0]
        hdrs = [(b"host", authority), (b"range", ranges.format_range(a, b - 1).encode())] + list(
            extra or []
        )
        if cond:
            hdrs.append((b"if-range", cond))
        resp = await up.request(host, port, b"GET", target, hdrs, timeout=timeout)
        try:
            if resp.status == 503:
                wait = _retry_after(resp.header(b"retry-after"))
                if busy_left <= 0 or wait is None or wait > max_retry_after:
                    raise BusyError(wait)
                busy_left -= 1
                resp.close()
                await asyncio.sleep(wait)
                continue
            if resp.status != 206:
                raise FetchError(f"range request answered {resp.status}: "
                                 "representation changed or ranges unsupported")
            cr = ranges.parse_content_range(resp.header(b"content-range") or b"")
            got = policy.validators_of(206, resp.headers)
            if cond:
                same = policy.same_representation(v, got)
            else:
                same = (v.etag is None or got.etag == v.etag) and (
                    v.last_modified is None or got.last_modified in (None, v.last_modified))
            if cr.first is None or cr.last is None or cr.length != sink.length or not same:
                raise FetchError("range answer is for another representation")
            await _drain(resp, sink, cr.first, cr.last + 1)
            result.parts.append((cr.first, cr.last + 1, 206))
        except RangeError as exc:
            raise FetchError(f"bad Content-Range: {exc}") from exc
        finally:
            resp.close()
    raise FetchError("too many range requests")


def fetch_sync(url: str, **kw) -> FetchResult:
    """Blocking wrapper of :func:`fetch`."""
    return asyncio.run(fetch(url, **kw))
