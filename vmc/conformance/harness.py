"""Test-side pieces for the HTTP proxy cases: our origin as a process and a strict HTTP/1.1 client.

The client is h11 over a plain socket, so it can tell a complete response
(framing satisfied: Content-Length reached or the last chunk seen) from one cut
short (connection closed first): RFC 9112 sec. 6.3, 7.1.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import h11

from vmc.aio.origin import body_slice, expected

__all__ = ["CLOSE", "CraftedOrigin", "Fetched", "Handler", "Origin", "RecordingUpstream",
           "body_slice", "describe_body", "expected", "fetch", "free_port", "multipart_parts",
           "origin", "raw_exchange", "response", "start_fetch"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Fetched:
    status: int | None = None
    reason: bytes = b""
    """The final response's reason phrase."""
    headers: dict[str, str] = field(default_factory=dict)
    interim: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    """1xx responses before the final one: (status, header fields)."""
    body: bytes = b""
    complete: bool = False
    """The framing said the message ended (EndOfMessage), not a cut connection."""
    error: str | None = None
    received: int = 0
    """body bytes received so far (grows while the fetch runs)"""
    t_head: float | None = None
    t_first_byte: float | None = None
    t_done: float | None = None

    @property
    def content_length(self) -> int | None:
        v = self.headers.get("content-length")
        return int(v) if v is not None and v.isdigit() else None


def fetch(addr: tuple[str, int], target: str, headers: list[tuple[str, str]] | None = None,
          timeout: float = 30.0, progress: threading.Event | None = None,
          into: Fetched | None = None) -> Fetched:
    """GET ``target`` from ``addr``; never raises for network trouble (see ``error``)."""
    r = into if into is not None else Fetched()
    conn = h11.Connection(h11.CLIENT)
    hdrs = [("host", f"{addr[0]}:{addr[1]}"), ("user-agent", "deliverykit-conformance"),
            *(headers or [])]
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    try:
        with socket.create_connection(addr, timeout=timeout) as s:
            s.sendall(conn.send(h11.Request(method="GET", target=target, headers=hdrs)))
            s.sendall(conn.send(h11.EndOfMessage()))
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    s.settimeout(max(0.1, deadline - time.monotonic()))
                    data = s.recv(65536)
                    conn.receive_data(data)
                    continue
                if isinstance(ev, h11.Response):
                    r.status = ev.status_code
                    r.reason = bytes(ev.reason)
                    r.headers = {k.decode().lower(): v.decode("latin-1") for k, v in ev.headers}
                    r.t_head = time.monotonic()
                elif isinstance(ev, h11.InformationalResponse):
                    r.interim.append((ev.status_code, {k.decode().lower(): v.decode("latin-1")
                                                        for k, v in ev.headers}))
                elif isinstance(ev, h11.Data):
                    if r.t_first_byte is None:
                        r.t_first_byte = time.monotonic()
                    chunks.append(bytes(ev.data))
                    r.received += len(ev.data)
                    if progress is not None:
                        progress.set()
                elif isinstance(ev, h11.EndOfMessage):
                    r.complete = True
                    break
                elif isinstance(ev, h11.ConnectionClosed):
                    break
            r.body = b"".join(chunks)
    except h11.RemoteProtocolError as exc:
        r.error = f"connection ended early: {exc}"
        r.body = b"".join(chunks)
    except OSError as exc:
        r.error = f"{type(exc).__name__}: {exc}"
        r.body = b"".join(chunks)
    r.t_done = time.monotonic()
    return r


def start_fetch(addr: tuple[str, int], target: str, headers: list[tuple[str, str]] | None = None,
                timeout: float = 30.0) -> tuple[threading.Thread, Fetched, threading.Event]:
    """``fetch`` in a thread: (thread, result filled on completion, event set at the first
    body byte)."""
    res, ev = Fetched(), threading.Event()
    th = threading.Thread(target=fetch, args=(addr, target, headers, timeout, ev, res), daemon=True)
    th.start()
    return th, res, ev


def multipart_parts(r: Fetched) -> list[tuple[int, int, int, bytes]]:
    """(first, last, complete, bytes) of each part of a multipart/byteranges body
    (RFC 9110 sec. 14.6)."""
    ctype = r.headers.get("content-type", "")
    boundary = ctype.split("boundary=", 1)[1].strip().strip('"').encode()
    parts = []
    for chunk in r.body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, body = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, _, v in
                (line.decode("latin-1").partition(":") for line in head.split(b"\r\n"))}
        spec = hdrs["content-range"].split()[1]
        rng, complete = spec.split("/")
        a, b = map(int, rng.split("-"))
        parts.append((a, b, int(complete), body[:b - a + 1]))
    return parts


class Origin:
    """Our paced origin (``python -m vmc origin``) as a subprocess."""

    def __init__(self, proc: subprocess.Popen, addr: tuple[str, int]) -> None:
        self.proc, self.addr = proc, addr
        self._stats_calls = 0

    @property
    def authority(self) -> str:
        return f"{self.addr[0]}:{self.addr[1]}"

    def stats(self) -> dict:
        """The origin's counters; our own stats requests are subtracted from ``requests``."""
        self._stats_calls += 1
        r = fetch(self.addr, "/_origin/stats", timeout=10)
        assert r.status == 200 and r.complete, f"origin stats: {r.status} {r.error}"
        d = json.loads(r.body)
        d["requests"] -= self._stats_calls
        return d


@contextmanager
def origin(rate: float = 0.0) -> Iterator[Origin]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "vmc", "origin", "--listen", f"127.0.0.1:{port}",
                             "--rate", str(rate), "--loop", "asyncio"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if "vmc origin on" not in line:
            err = proc.stderr.read(2000).decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"origin did not start: {line!r} {err}")
        yield Origin(proc, ("127.0.0.1", port))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        for s in (proc.stdout, proc.stderr):
            if s is not None:
                s.close()


def describe_body(path: str, size: int, body: bytes, probe: int = 64) -> str:
    """Where ``body`` came from, as runs of the representation of ``path``: for a failure message.

    E.g. ``1000000 bytes: [0,3096)=repr[1000,4096) [3096,1000000)=repr[3096,1000000)``, or
    ``?`` for bytes found nowhere. Offsets are the smallest that match (the pattern repeats
    every 65521 bytes).
    """
    full = expected(path, size)
    runs: list[str] = []
    i = 0
    while i < len(body) and len(runs) < 8:
        k = full.find(body[i:i + probe])
        if k < 0:
            runs.append(f"[{i},{min(i + probe, len(body))})=?")
            i += probe
            continue
        n = 0
        while i + n < len(body) and k + n < size and body[i + n] == full[k + n]:
            n += 1
        runs.append(f"[{i},{i + n})=repr[{k},{k + n})")
        i += n
    more = " ..." if i < len(body) else ""
    return f"{len(body)} bytes: {' '.join(runs)}{more}"


class RecordingUpstream:
    """A loopback HTTP/1.1 upstream that records every request a proxy forwards and answers
    ``200 ok``.

    Each connection is read with h11 (RFC 9112 framing; Transfer-Encoding
    beats Content-Length, as sec. 6.3 says), so ``requests`` holds what the
    upstream would have acted on: ``(target, header fields, body so far)``,
    recorded as soon as the head is read. Bytes that
    do not parse end the connection and are noted in ``errors``.
    """

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.addr: tuple[str, int] = self.sock.getsockname()
        self.requests: list[tuple[str, list[tuple[str, str]], bytearray]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    @property
    def authority(self) -> str:
        return f"{self.addr[0]}:{self.addr[1]}"

    def __enter__(self) -> RecordingUpstream:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._acceptor.join(5)
        for th in self._threads:
            th.join(5)
        self.sock.close()

    def snapshot(self) -> tuple[list, list[str]]:
        with self._lock:
            return list(self.requests), list(self.errors)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            th = threading.Thread(target=self._serve, args=(c,), daemon=True)
            self._threads.append(th)
            th.start()

    def _serve(self, c: socket.socket) -> None:
        conn = h11.Connection(h11.SERVER)
        c.settimeout(0.5)
        req, body = None, bytearray()
        with c:
            while not self._stop.is_set():
                try:
                    ev = conn.next_event()
                except h11.RemoteProtocolError as exc:
                    with self._lock:
                        self.errors.append(f"unparseable bytes from the proxy: {exc}")
                    return
                if ev is h11.NEED_DATA:
                    try:
                        data = c.recv(65536)
                    except TimeoutError:
                        continue
                    except OSError:
                        return
                    conn.receive_data(data)
                    if not data:
                        return
                elif isinstance(ev, h11.Request):
                    req, body = ev, bytearray()
                    fields = [(k.decode(), v.decode("latin-1")) for k, v in req.headers]
                    # recorded at its head: what was forwarded, even if the body never comes
                    with self._lock:
                        self.requests.append((req.target.decode("latin-1"), fields, body))
                elif isinstance(ev, h11.Data):
                    body += ev.data
                elif isinstance(ev, h11.EndOfMessage) and req is not None:
                    try:
                        c.sendall(conn.send(h11.Response(status_code=200, headers=[
                            ("content-length", "2"), ("content-type", "text/plain")])))
                        c.sendall(conn.send(h11.Data(data=b"ok")) + conn.send(h11.EndOfMessage()))
                    except (OSError, h11.LocalProtocolError):
                        return
                    if conn.our_state is h11.MUST_CLOSE:
                        return
                    conn.start_next_cycle()
                elif isinstance(ev, h11.ConnectionClosed):
                    return


def raw_exchange(addr: tuple[str, int], data: bytes, timeout: float = 4.0) -> tuple[bytes, bool]:
    """Send ``data`` as is, read until the peer closes or ``timeout`` passes:
    (bytes, closed by peer)."""
    out = b""
    deadline = time.monotonic() + timeout
    with socket.create_connection(addr, timeout=timeout) as s:
        s.sendall(data)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out, False
            s.settimeout(left)
            try:
                more = s.recv(65536)
            except TimeoutError:
                return out, False
            except ConnectionResetError:
                return out, True
            if not more:
                return out, True
            out += more


#: A crafted origin's reply is a sequence of steps: bytes to send as they are, a float to sleep that
#: many seconds, or :data:`CLOSE` to close the connection (else it stays open for the next request).
CLOSE = object()
Step = object
Handler = Callable[[str, dict[str, str]], Iterable[Step]]


def response(status: int = 200, headers: Sequence[tuple[str, str]] = (), body: bytes = b"",
             reason: str = "OK", length: int | None = None) -> bytes:
    """One raw HTTP/1.1 response; Content-Length is ``len(body)`` unless ``length`` says otherwise
    (-1: none at all). Nothing is checked: a crafted origin says exactly what it is told to."""
    lines = [f"HTTP/1.1 {status} {reason}".encode()]
    lines += [f"{k}: {v}".encode("latin-1") for k, v in headers]
    if length != -1:
        lines.append(b"content-length: %d" % (len(body) if length is None else length))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class CraftedOrigin:
    """A loopback origin that misbehaves on purpose: ``handler(target, header fields)`` gives
    the steps.

    Requests are read with a minimal parser of its own (head up to the blank line, a Content-Length
    body skipped), not h11, so nothing the origin sends can confuse its side. Every request is
    recorded in ``requests`` (target, lower-case header fields) in arrival order. Threads, one per
    connection, all stopped and joined on exit.
    """

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.sock.settimeout(0.2)
        self.addr: tuple[str, int] = self.sock.getsockname()[:2]
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    @property
    def authority(self) -> str:
        return f"{self.addr[0]}:{self.addr[1]}"

    def count(self, prefix: str) -> int:
        """Requests whose target starts with ``prefix``."""
        with self._lock:
            return sum(1 for t, _ in self.requests if t.startswith(prefix))

    def __enter__(self) -> CraftedOrigin:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._acceptor.join(5)
        for th in list(self._threads):
            th.join(5)
        self.sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            th = threading.Thread(target=self._serve, args=(c,), daemon=True)
            self._threads.append(th)
            th.start()

    def _read_request(self, c: socket.socket, buf: bytearray) -> tuple[str, dict[str, str]] | None:
        while b"\r\n\r\n" not in buf:
            if self._stop.is_set() or len(buf) > 65536:
                return None
            try:
                more = c.recv(65536)
            except TimeoutError:
                continue
            if not more:
                return None
            buf += more
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        length = hdrs.get("content-length", "0")
        n = int(length) if length.isdigit() else 0
        while len(rest) < n and not self._stop.is_set():
            try:
                more = c.recv(65536)
            except TimeoutError:
                continue
            if not more:
                return None
            rest += more
        buf[:] = rest[n:]
        return (parts[1] if len(parts) > 1 else ""), hdrs

    def _serve(self, c: socket.socket) -> None:
        c.settimeout(0.2)
        buf = bytearray()
        with c:
            while not self._stop.is_set():
                try:
                    req = self._read_request(c, buf)
                except OSError:
                    return
                if req is None:
                    return
                with self._lock:
                    self.requests.append(req)
                try:
                    for step in self.handler(*req):
                        if step is CLOSE:
                            return
                        if isinstance(step, (int, float)):
                            if self._stop.wait(step):
                                return
                        else:
                            c.sendall(step)  # type: ignore[arg-type]  # not a delay: bytes
                except OSError:
                    return
