"""``vmc proxy --workers N``: each object has one worker, and a connection goes to it (issue 17).

N workers share the listening address with SO_REUSEPORT, and the kernel picks a worker by the
connection's 4-tuple, not by the object asked for. Without steering, clients of one object that
land on k workers cost k origin copies, and a late client joins the stream in flight only on the
worker that holds it. With steering, the worker that reads a connection's first request head
works out which object it names (the URI the sharing core keys it by,
:meth:`vmc.core.http.HttpSharingCore.request_uri`), and the object's owner is ``crc32(uri) % N``.
If that is another worker, the connection's socket and the bytes read from it go to the owner
over a Unix socket (SCM_RIGHTS, unix(7)); the owner serves the connection from those bytes on,
as if it had accepted it. So each object has one session, in one process, as with one worker,
for one sendmsg per handed-off connection.

Once the owner has an object whole on disk (its session ended DONE and was kept: the machine's
``Kept`` action), it offers that file to every other worker: the facts the sharing decisions
read (:class:`vmc.core.session.FinishedCopy`, pickled: the socket is only ever between this
proxy's workers) with a descriptor of the file. Each takes it into its own store
(:meth:`vmc.aio.spill.DiskStore.adopt`) and core (``adopt_finished``), and from then on serves a
request for it where it lands, while it is fresh: a hot finished object is served by every
core, from one origin copy. A live stream is still steered to its owner (that is where the
joins are).

What is steered, and what is served where it landed:

* A connection is steered by its first request only (a later request on a kept-alive connection
  for another object is served by the worker the connection is on: it may fetch that object
  again).
* Only a GET or HEAD whose whole head came in the connection's first read (a client sends a
  head in one write; on loopback and Ethernet one read takes it), whose target the core would
  route, and not for the status path (each worker answers that for itself). Anything else (a
  head in pieces, another method, a refused or malformed head) is served where it landed, so
  every refusal is the core's.
* A hand-off the kernel refuses (the owner's queue full: EAGAIN; the owner gone) is counted and
  the connection served where it landed.

The sockets are one ``socketpair(AF_UNIX, SOCK_SEQPACKET)`` per worker, made by the parent
before it forks (no name in the filesystem: only the workers hold them). Worker ``i`` reads the
first end of pair ``i`` and writes to the second end of every pair.
"""

from __future__ import annotations

import array
import os
import pickle
import socket
import zlib
from dataclasses import dataclass, field

from vmc.aio.parse import Malformed, parse_head
from vmc.core.session import FinishedCopy

#: Bytes of a first read that may be handed off with its socket (a head is at most
#: ``max_header_bytes``, 16 KiB by default; a first read may hold a pipelined request too).
MAX_HANDOFF = 64 << 10
#: Methods whose requests are steered (the ones a session serves).
STEERED = (b"GET", b"HEAD")
_INT = array.array("i").itemsize


@dataclass(frozen=True)
class Handed:
    """A connection another worker handed us, with the bytes it had read from it."""

    sock: socket.socket
    data: bytes


@dataclass(frozen=True)
class Offered:
    """A finished object another worker kept, with a descriptor of its file (ours to close)."""

    copy: FinishedCopy
    fd: int


_CONN, _KEPT = b"C", b"F"


@dataclass
class Steering:
    """One worker's end of the steering sockets (``vmc proxy --workers N``)."""

    #: This worker's index, 0..n-1.
    index: int
    #: Its receiving end (connections handed to it arrive here).
    rx: socket.socket
    #: The sending end towards each worker, by index (this worker's own is never used).
    peers: list[socket.socket]
    #: Connections handed to another worker, taken over from one, and hand-offs that failed
    #: (the connection then stayed here); finished objects offered to the other workers (one
    #: count per worker) and records that could not be sent or read.
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("handed_off", "taken_over", "handoff_failed", "offered", "offer_failed"), 0))

    @property
    def n(self) -> int:
        return len(self.peers)

    def owner(self, uri: str) -> int:
        """The worker that owns the object ``uri`` names (the same in every worker)."""
        return zlib.crc32(uri.encode("utf-8", "surrogateescape")) % self.n

    def _send(self, dest: int, record: bytes, fd: int) -> bool:
        try:  # (socket.send_fds drops its flags before Python 3.12: sendmsg as it does)
            sent = self.peers[dest].sendmsg(
                [record], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))],
                socket.MSG_DONTWAIT)
        except OSError:
            return False
        return sent == len(record)  # SOCK_SEQPACKET sends a record whole or not at all

    def send(self, dest: int, data: bytes, fd: int) -> bool:
        """Hand the connection ``fd`` and the bytes read from it to worker ``dest``; False (and
        counted) when the kernel refuses, so the caller serves it."""
        if len(data) > MAX_HANDOFF or not self._send(dest, _CONN + data, fd):
            self.counters["handoff_failed"] += 1
            return False
        self.counters["handed_off"] += 1
        return True

    def offer(self, copy: FinishedCopy, fd: int) -> None:
        """Offer a finished object kept on the file ``fd`` to every other worker: each then
        serves requests for it that land there, from the same file, while it is fresh."""
        record = _KEPT + pickle.dumps(copy, protocol=5)
        for dest in range(self.n):
            if dest == self.index:
                continue
            ok = len(record) <= MAX_HANDOFF and self._send(dest, record, fd)
            self.counters["offered" if ok else "offer_failed"] += 1

    def receive(self) -> list[Handed | Offered]:
        """What other workers sent that is waiting (connections, finished objects); empty when
        nothing is."""
        got: list[Handed | Offered] = []
        while True:
            try:
                data, anc, flags, _ = self.rx.recvmsg(
                    MAX_HANDOFF + 1, socket.CMSG_SPACE(4 * _INT),
                    socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC)
            except (BlockingIOError, InterruptedError):
                return got
            fds = array.array("i")
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % _INT])
            if not data and not fds:
                return got  # every sender closed (the workers are stopping)
            item = self._parse(data, list(fds), flags)
            if item is None:
                for fd in fds:  # not a whole record of ours: never serve half of one
                    os.close(fd)
                self.counters["handoff_failed"] += 1
            else:
                got.append(item)

    def _parse(self, data: bytes, fds: list[int], flags: int) -> Handed | Offered | None:
        if len(fds) != 1 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            return None
        kind, body = data[:1], data[1:]
        if kind == _CONN and body:
            sock = socket.socket(fileno=fds[0])
            sock.setblocking(False)
            self.counters["taken_over"] += 1
            return Handed(sock, body)
        if kind == _KEPT:
            try:  # from a socket only this proxy's workers hold (made before the fork)
                copy = pickle.loads(body)
            except Exception:
                return None
            return Offered(copy, fds[0]) if isinstance(copy, FinishedCopy) else None
        return None

    def close(self) -> None:
        self.rx.close()
        for s in self.peers:
            s.close()


def pairs(n: int) -> list[tuple[socket.socket, socket.socket]]:
    """The parent's ``n`` socket pairs, made before it forks: (worker i's receiving end, the end
    every worker sends to worker i on)."""
    made = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(n)]
    for pair in made:
        for end in pair:
            end.setblocking(False)
    return made


def for_worker(i: int, made: list[tuple[socket.socket, socket.socket]]) -> Steering:
    """Worker ``i``'s :class:`Steering` from the parent's pairs, closing the receiving ends that
    are other workers' (in the forked worker)."""
    for j, (rx, _) in enumerate(made):
        if j != i:
            rx.close()
    return Steering(i, made[i][0], [tx for _, tx in made])


def first_head(data: bytes) -> tuple[bytes, bytes | None] | None:
    """(target, Host) of the request head ``data`` starts with, when it is one to steer: whole,
    well formed, a GET or HEAD; else None (served where it landed). The core decides the rest
    (:meth:`vmc.core.http.HttpSharingCore.request_uri`)."""
    if len(data) > MAX_HANDOFF or b"\r\n\r\n" not in data:
        return None
    try:
        head = parse_head(data)
    except Malformed:
        return None
    if head.method not in STEERED:
        return None
    hosts = [v for k, v in head.headers if k == b"host"]
    return head.target, hosts[0] if len(hosts) == 1 else None
