"""Test-side PPSPP pieces: our peer as processes, a raw test peer, a tampering UDP relay.

Everything talks UDP on 127.0.0.1. The raw peer and the relay parse and build
datagrams with :mod:`swift.wire.codec` (RFC 7574 sec. 8), so a case reads the
messages by the same field names as our dissectors.
"""

from __future__ import annotations

import hashlib
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc, IntegrityMethod, MsgType, Version


@dataclass(frozen=True)
class Profile:
    """The PPSPP dialect the implementation under test speaks (its registry ``env``
    ``PPSPP_PROFILE``).

    ``rfc`` (default): RFC 7574 with SHA-256 Merkle trees. ``libswift``: draft-10 as the libswift
    C++ peer speaks it (docs/swift-libswift-compat.md): SHA-1 trees, no Chunk Size option; our peers
    then run with ``--profile libswift``.
    """

    name: str = "rfc"

    @property
    def hash_func(self) -> HashFunc:
        return HashFunc.SHA1 if self.name == "libswift" else HashFunc.SHA256

    @property
    def hash_name(self) -> str:
        return "sha1" if self.name == "libswift" else "sha256"

    @property
    def cli(self) -> list[str]:
        return ["--hash", self.hash_name, "--profile", self.name]


PROFILE = Profile()
"""The profile of the case running now (set per case by the PPSPP cases' autouse fixture)."""


def set_profile(name: str) -> Profile:
    global PROFILE
    if name not in ("rfc", "libswift"):
        raise ValueError(f"unknown PPSPP_PROFILE {name!r} (rfc or libswift)")
    PROFILE = Profile(name)
    return PROFILE


CAMS = {
    "bin32": ChunkAddressing.BIN32,
    "byte64": ChunkAddressing.BYTE64,
    "chunk32": ChunkAddressing.CHUNK32,
    "bin64": ChunkAddressing.BIN64,
    "chunk64": ChunkAddressing.CHUNK64,
}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_content(path: str, size: int, seed: int = 1) -> bytes:
    import random

    data = random.Random(seed).randbytes(size)
    with open(path, "wb") as f:
        f.write(data)
    return data


def ctx_for(addressing: str, chunk_size: int = 1024) -> C.WireContext:
    return C.WireContext.make(CAMS[addressing], PROFILE.hash_func, chunk_size=chunk_size)


def to_chunks(ctx: C.WireContext, start: int, end: int) -> tuple[int, int]:
    """A message's chunk spec as the half-open chunk range [lo, hi) (sec. 4)."""
    if ctx.is_bin:
        b = start
        layer = 0
        while b & 1:
            b >>= 1
            layer += 1
        width = 1 << layer
        lo = (start >> (layer + 1)) * width if layer else start >> 1
        return lo, lo + width
    if ctx.addressing == ChunkAddressing.BYTE64:
        return start // ctx.chunk_size, end // ctx.chunk_size + 1
    return start, end + 1


def spec_for(ctx: C.WireContext, lo: int, hi: int) -> tuple[int, int]:
    """(start, end) wire values for chunks [lo, hi); bins need an aligned power of two."""
    if ctx.is_bin:
        w = hi - lo
        layer = w.bit_length() - 1
        assert w == 1 << layer and lo % w == 0, "bin specs need aligned power-of-two ranges"
        b = ((lo >> layer) << (layer + 1)) + (1 << layer) - 1
        return b, b
    if ctx.addressing == ChunkAddressing.BYTE64:
        return lo * ctx.chunk_size, hi * ctx.chunk_size - 1
    return lo, hi - 1


@contextmanager
def our_seeder(
    path: str, addressing: str, chunk_size: int = 1024
) -> Iterator[tuple[tuple[str, int], str]]:
    """Our peer seeding ``path`` (``python -m swift seed``): yields (address, root hash hex)."""
    port = free_udp_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swift",
            "seed",
            path,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--addressing",
            addressing,
            "--chunk-size",
            str(chunk_size),
            *PROFILE.cli,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        root = proc.stdout.readline().decode().strip()
        if len(root) not in (40, 64):
            raise RuntimeError(f"our seeder did not start: {root!r}")
        yield ("127.0.0.1", port), root
    finally:
        _stop(proc)


def our_leech(root: str, peer: tuple[str, int], out: str, addressing: str, chunk_size: int = 1024,
              timeout: float = 20) -> subprocess.CompletedProcess:
    """Our peer downloading (``python -m swift download``); exit 0 = complete and verified."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "swift",
            "download",
            root,
            "--peer",
            f"{peer[0]}:{peer[1]}",
            "-o",
            out,
            "--host",
            "127.0.0.1",
            "--addressing",
            addressing,
            "--chunk-size",
            str(chunk_size),
            *PROFILE.cli,
            "--timeout",
            str(timeout),
            "-q",
        ],
        capture_output=True,
        timeout=timeout + 20,
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    for s in (proc.stdout, proc.stderr):
        if s is not None:
            s.close()


# ------------------------------------------------------------------ raw test peer

@dataclass(frozen=True)
class Undecodable:
    """A datagram the raw peer received but our codec could not parse to its end."""

    data: bytes
    """The datagram as received."""
    error: str
    """Why the codec stopped (DecodeError, or the Decoded.error of a partial parse)."""

    def describe(self) -> str:
        head = self.data[:48].hex() + ("..." if len(self.data) > 48 else "")
        return f"{len(self.data)} bytes ({self.error}): {head}"


class RawPeer:
    """A UDP socket speaking PPSPP message by message (no state machine)."""

    def __init__(self, ctx: C.WireContext, channel: int = 0x1234ABCD) -> None:
        self.ctx, self.channel = ctx, channel
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.remote_channel: int | None = None
        self.received: list[tuple[float, C.Decoded]] = []
        self.undecodable: list[Undecodable] = []
        """Datagrams our codec could not parse whole (kept: a reply we cannot read is no
        refusal)."""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def options(self, swarm: bytes | None, **over) -> C.HandshakeOptions:
        base: dict[str, Any] = dict(
            version=Version.V1,
            min_version=Version.V1,
            swarm_id=swarm,
            integrity=IntegrityMethod.MERKLE,
            hash_func=PROFILE.hash_func,
            addressing=self.ctx.addressing,
            chunk_size=None if PROFILE.name == "libswift" else self.ctx.chunk_size,
        )
        base.update(over)
        return C.HandshakeOptions(**base)

    def send(self, addr: tuple[str, int], dest: int, msgs: list) -> None:
        self.sock.sendto(C.encode_datagram(self.ctx, dest, msgs), addr)

    def send_raw(self, addr: tuple[str, int], data: bytes) -> None:
        self.sock.sendto(data, addr)

    def handshake(
        self, addr: tuple[str, int], opts: C.HandshakeOptions, extra: list | None = None
    ) -> None:
        self.send(addr, 0, [C.Handshake(self.channel, opts), *(extra or [])])

    def recv(self, timeout: float, until: Callable[[C.Decoded], bool] | None = None,
             max_datagrams: int = 100000) -> list[C.Decoded]:
        """Datagrams received within ``timeout`` s (stops early when ``until`` is true)."""
        out: list[C.Decoded] = []
        deadline = time.monotonic() + timeout
        while len(out) < max_datagrams:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                break
            try:
                d = C.decode_datagram(data, self.ctx)
            except C.DecodeError as exc:
                self.undecodable.append(Undecodable(data, str(exc)))
                continue
            if d.error is not None:
                self.undecodable.append(Undecodable(data, d.error))
            self.received.append((time.monotonic(), d))
            out.append(d)
            for m in d.messages:
                if m.type == MsgType.HANDSHAKE and m.channel and self.remote_channel is None:
                    self.remote_channel = m.channel
            if until is not None and until(d):
                break
        return out


def messages(dgrams: list[C.Decoded], t: MsgType) -> list:
    return [m for d in dgrams for m in d.messages if m.type == t]


# ------------------------------------------------------------------ tampering relay

@dataclass
class Relay:
    """UDP relay between one client (the implementation) and a server (our peer).

    ``tamper(decoded, from_server) -> list of messages | None``: return a
    replacement message list to re-encode, or None to forward the bytes as
    they are. Every decoded datagram is logged per direction.
    """

    server: tuple[str, int]
    ctx: C.WireContext
    tamper: Callable[[C.Decoded, bool], list | None] | None = None
    to_server: list[tuple[float, C.Decoded]] = field(default_factory=list)
    to_client: list[tuple[float, C.Decoded]] = field(default_factory=list)
    client: tuple[str, int] | None = None
    undecodable: list[tuple[bool, Undecodable]] = field(default_factory=list)
    """(from_server, datagram) for datagrams too short to carry even a channel ID (not forwarded to
    log())."""

    def __post_init__(self) -> None:
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.back.connect(self.server)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.front.getsockname()

    def inject_to_client(self, channel: int, msgs: list) -> None:
        if self.client is not None:
            self.front.sendto(C.encode_datagram(self.ctx, channel, msgs), self.client)

    def _run(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.front, selectors.EVENT_READ, False)
            sel.register(self.back, selectors.EVENT_READ, True)
            while not self._stop.is_set():
                for key, _ in sel.select(0.1):
                    from_server = key.data
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data, addr = sock.recvfrom(65536)
                    except OSError:
                        continue
                    if not from_server:
                        self.client = addr
                    out = data
                    try:
                        d = C.decode_datagram(data, self.ctx)
                    except C.DecodeError as exc:
                        d = None
                        with self._lock:
                            self.undecodable.append((from_server, Undecodable(data, str(exc))))
                    if d is not None:
                        with self._lock:
                            (self.to_client if from_server else self.to_server).append(
                                (time.monotonic(), d)
                            )
                        if self.tamper is not None:
                            new = self.tamper(d, from_server)
                            if new is not None:
                                if not new:
                                    continue  # dropped
                                out = C.encode_datagram(self.ctx, d.channel, new)
                    try:
                        if from_server:
                            if self.client is not None:
                                self.front.sendto(out, self.client)
                        else:
                            self.back.send(out)
                    except OSError:
                        pass

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.front.close()
        self.back.close()

    def log(self, from_server: bool) -> list[C.Decoded]:
        with self._lock:
            return [d for _, d in (self.to_client if from_server else self.to_server)]


def chunk_of_file(data: bytes, i: int, chunk_size: int = 1024) -> bytes:
    return data[i * chunk_size:(i + 1) * chunk_size]


def corrupt(payload: bytes) -> bytes:
    return bytes(b ^ 0xA5 for b in payload)


def exists_nonempty(path: str) -> bool:
    return os.path.exists(path) and os.path.getsize(path) > 0


# ------------------------------------------------------------------ live streaming (sec. 6)

def live_ctx(chunk_size: int = 1024) -> C.WireContext:
    """Wire context of a live swarm as the cases run it: chunk32, SHA-256, ECDSA P-256 signatures
    (7.7)."""
    from swift.wire.constants import SigAlg

    return C.WireContext.make(
        ChunkAddressing.CHUNK32, HashFunc.SHA256, SigAlg.ECDSAP256SHA256, chunk_size
    )


@contextmanager
def our_live_source(path: str, rate: float, per_sig: int = 4, window: int = 4096,
                    chunk_size: int = 1024) -> Iterator[tuple[tuple[str, int], str]]:
    """Our live injector (``python -m swift live-source``) paced at ``rate``: yields (address, swarm
    ID hex)."""
    port = free_udp_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swift",
            "live-source",
            "--input",
            path,
            "--rate",
            str(rate),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--per-sig",
            str(per_sig),
            "--window",
            str(window),
            "--chunk-size",
            str(chunk_size),
            "--linger",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        swarm = proc.stdout.readline().decode().strip()
        if not swarm or any(ch not in "0123456789abcdef" for ch in swarm):
            raise RuntimeError(f"our live source did not start: {swarm!r}")
        yield ("127.0.0.1", port), swarm
    finally:
        _stop(proc)


def our_live_view(swarm: str, peer: tuple[str, int], out: str, nbytes: int, per_sig: int = 4,
                  duration: float = 10.0) -> subprocess.CompletedProcess:
    """Our live viewer (verifies every signed munro and chunk): exit 0 once ``nbytes`` are written
    in order."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "swift",
            "live-view",
            swarm,
            "--peer",
            f"{peer[0]}:{peer[1]}",
            "-o",
            out,
            "--host",
            "127.0.0.1",
            "--per-sig",
            str(per_sig),
            "--bytes",
            str(nbytes),
            "--duration",
            str(duration),
        ],
        capture_output=True,
        timeout=duration + 20,
    )


def in_stream_at_chunk(data: bytes, got: bytes, chunk_size: int = 1024) -> bool:
    """``got`` is a run of whole chunks of ``data``, starting on a chunk boundary (where a viewer
    joined)."""
    if not got:
        return False
    start = 0
    while True:
        i = data.find(got, start)
        if i < 0:
            return False
        if i % chunk_size == 0:
            return True
        start = i + 1
