"""Asyncio UDP driver for a sans-IO :class:`~swift.core.peer.Peer`.

The only place that reads a clock or touches a socket.  One non-blocking UDP
socket read with ``loop.add_reader`` in batches (``recvmmsg`` through
``swift._fast.recv_batch_ts``, with kernel arrival times), sends in batches (``sendmmsg``), and one
timer re-armed from :meth:`Peer.get_timer` (the aioquic pattern).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, cast

from deliverykit.fastpath import load, py_send_batch
from swift._fast import SO_TIMESTAMPNS, recv_batch_ts
from swift.aio.files import (  # noqa: F401  (the API's names)
    CacheStatus,
    DownloadPaths,
    TreeLoad,
    fsync_dir,
    load_or_build_tree,
    mhash_path,
    move_state,
    saved_tree,
)
from swift.aio.storage import FileStorage
from swift.core import events as ev
from swift.core.content import Content
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import HashFunc, SigAlg

log = logging.getLogger("swift")
send_batch = load("send_batch", py_send_batch)


class SwiftNode:
    """A Peer bound to a UDP socket; use as an async context manager."""

    #: seconds between background saves of the verified hashes (resume state)
    SAVE_EVERY = 2.0
    #: how many channel-close reasons :attr:`closed_reasons` keeps
    KEEP_REASONS = 256

    def __init__(self, peer: Peer, host: str = "127.0.0.1", port: int = 0,
                 on_event: Callable[[Any], None] | None = None) -> None:
        self.peer = peer
        #: every swarm served on this socket; channels demultiplex them (3.11)
        self.peers: list[Peer] = [peer]
        self.host = host
        self.port = port
        self.on_event = on_event
        self.sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._backlog: list[tuple[bytes, Any]] = []
        self._complete = asyncio.Event()
        #: why channels closed, the latest KEEP_REASONS (a peer opening and closing
        #: channels all day must not grow our memory)
        self.closed_reasons: deque[str] = deque(maxlen=self.KEEP_REASONS)
        #: (address, why) of handshakes refused (``HandshakeRefused``), the latest
        #: KEEP_REASONS: the download's hint says what was refused and why
        self.refusals: deque[tuple[Any, str]] = deque(maxlen=self.KEEP_REASONS)
        self.storage: FileStorage | None = None
        self.state_path: str | None = None
        self._last_save = 0.0
        self._saving: Future | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._kernel_ts = False
        #: a local I/O error (disk full, output unwritable) that stopped the node
        self.error: OSError | None = None
        #: a download's data and state files (None: not a download)
        self.paths: DownloadPaths | None = None
        #: chunks found verified on disk when a download started (resumed)
        self.resumed = 0
        #: True once a download's data is under its final name
        self.finished = False
        if peer.content.complete:
            self._complete.set()

    # -- lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> SwiftNode:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def start(self) -> None:
        fam = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        try:
            s.bind((self.host, self.port))
        except OSError as e:  # name the port: "Address already in use" alone says too little
            s.close()
            where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
            raise OSError(e.errno, e.strerror, f"UDP {where}") from None
        s.setblocking(False)
        self.sock = s
        self._kernel_ts = False
        self._want_kernel_ts()
        self.port = s.getsockname()[1]
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(s.fileno(), self._on_readable)
        self._arm()

    async def aclose(self) -> None:
        if self.sock is None:
            return
        try:
            for p in self.peers:
                self._send(p.close(time.time()))
        except OSError:
            pass
        self._save_state(force=True)
        if self.error is not None and self._saving is not None:
            self._saving = None  # its failure is already self.error
        self._wait_saving()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        assert self._loop is not None
        self._loop.remove_reader(self.sock.fileno())
        if self._backlog:
            self._loop.remove_writer(self.sock.fileno())
        if self._timer:
            self._timer.cancel()
        self.sock.close()
        self.sock = None
        if self.storage is not None:
            try:
                self.storage.close()
            except OSError as e:  # e.g. the last gathered write meets a full disk
                self._fail(e)
                if self.storage.fd >= 0:
                    os.close(self.storage.fd)
                    self.storage.fd = -1

    @property
    def addr(self) -> tuple[str, int]:
        return (self.host, self.port)

    def add_swarm(self, peer: Peer) -> None:
        """Serve one more swarm on the same UDP port (RFC 7574 figure 1):
        handshakes are routed by swarm ID, later datagrams by channel ID."""
        self.peers.append(peer)
        self._want_kernel_ts()
        self._flush()

    def _want_kernel_ts(self) -> None:
        """Kernel arrival times (SO_TIMESTAMPNS) for the ACK delay samples
        (8.7), only when a swarm on this socket asks for them
        (``PeerConfig.delay_from_kernel``): they cost CPU on every datagram."""
        if self.sock is None or self._kernel_ts:
            return
        if any(p.config.delay_from_kernel for p in self.peers):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self._kernel_ts = True
            except OSError:
                pass

    def _route(self, data: bytes) -> Peer | None:
        """The swarm a datagram is for; one no swarm claims goes to the first,
        which counts it (malformed, refused, unknown channel) as a node with
        one swarm would: ``ppspp seed`` serves two by default (SHA-256, SHA-1)."""
        if len(self.peers) == 1 or len(data) < 4:
            return self.peer
        cid = int.from_bytes(data[:4], "big")
        if cid:
            for p in self.peers:
                if cid in p.channels:
                    return p
            return self.peer
        try:
            msgs = C.decode_datagram(data, self.peer.ctx).messages
        except C.DecodeError:
            return self.peer
        if not msgs or msgs[0].type != 0 or msgs[0].options.swarm_id is None:
            return self.peer
        sid = msgs[0].options.swarm_id
        for p in self.peers:
            if p.swarm_id == sid:
                return p
        return self.peer

    def connect(self, addr: tuple[str, int]) -> None:
        """Start a handshake with ``addr``, a ``(host, port)`` tuple; a host
        name is resolved here, in the address family of our socket."""
        self.peer.connect(self.resolve(addr), time.time())
        self._flush()

    def resolve(self, addr: Any) -> tuple[str, int]:
        """``(host, port)`` -> ``(ip, port)`` in our socket's family, or a
        clear TypeError/ValueError (a "host:port" string, a wrong family)."""
        if isinstance(addr, (str, bytes)):
            raise TypeError(f"address must be a (host, port) tuple, not {addr!r}")
        try:
            host, port = addr
        except (TypeError, ValueError):
            raise TypeError(f"address must be a (host, port) tuple, not {addr!r}") from None
        if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
            raise TypeError(f"address must be (str host, int port), not {addr!r}")
        if not 0 < port < 65536:
            raise ValueError(f"port {port} is outside 1-65535")
        fam = self.sock.family if self.sock is not None else (
            socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        except socket.gaierror as e:
            raise ValueError(f"cannot resolve {host!r}: {e.strerror}") from None
        for f, _, _, _, sa in infos:
            if f == fam:
                return (str(sa[0]), port)
        mine = "IPv6" if fam == socket.AF_INET6 else "IPv4"
        theirs = "IPv4" if mine == "IPv6" else "IPv6"
        raise ValueError(f"{host} is an {theirs} address but this node is bound to {self.host} "
                         f"({mine}): bind an {theirs} address (e.g. --host "
                         f"{'::' if theirs == 'IPv6' else '0.0.0.0'})")

    async def wait_complete(self, timeout: float | None = None) -> bool:
        """Wait until every chunk is verified and stored; raises the OSError
        that stopped the node (e.g. disk full) instead of waiting on."""
        try:
            await asyncio.wait_for(self._complete.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        if self.error is not None:
            raise self.error
        return True

    def _fail(self, exc: OSError) -> None:
        """Stop on a local I/O error: no more datagrams, no hash-file
        saves, its half-written temporary files removed; waiters wake up."""
        if self.error is not None:
            return
        if exc.filename is None and self.storage is not None:
            exc = OSError(exc.errno, exc.strerror, self.storage.path)
        self.error = exc
        log.debug("stopping: %s", exc)
        if self.state_path is not None:
            for tmp in (self.state_path + ".tmp", self.state_path + ".json.tmp"):
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        if self._loop is not None and self.sock is not None:
            self._loop.remove_reader(self.sock.fileno())
        self._complete.set()

    @property
    def progress(self) -> tuple[int, int | None]:
        """(verified chunks, total chunks or None)."""
        c = self.peer.content
        return c.have.count(), c.n_chunks

    # -- pump ------------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            self._read_batches()
        except OSError as e:  # our storage (disk full, I/O error): stop
            self._fail(e)

    def _read_batches(self) -> None:
        s = self.sock
        if s is None or self.error is not None:
            return
        for _ in range(8):
            try:
                batch = recv_batch_ts(s, 32, 65536)
            except OSError:
                break
            if not batch:
                break
            now = time.time()
            for data, addr, arrived in batch:
                peer = self._route(data)
                if peer is None:
                    continue
                try:
                    peer.datagram_received(data, addr[:2], now, arrived)
                except OSError as e:  # our storage (disk full, I/O error): stop
                    self._fail(e)
                    return
                except Exception:  # no datagram may take the node down
                    peer.stats["internal_error"] = peer.stats.get("internal_error", 0) + 1
                    log.exception("PPSPP datagram from %s", addr)
            self._flush()  # ACK promptly: batching delays ACKs and inflates RTT
            if len(batch) < 32:
                break

    def _send(self, items: list[tuple[bytes, Any]]) -> None:
        if not items or self.sock is None:
            return
        if self._backlog:
            self._backlog.extend(items)
            return
        try:
            n = send_batch(self.sock, items)
        except BlockingIOError:
            n = 0
        except OSError:
            n = len(items)  # e.g. ICMP unreachable: a lost datagram
        if n < len(items):
            self._backlog = list(items[n:])
            assert self._loop is not None
            self._loop.add_writer(self.sock.fileno(), self._on_writable)

    def _on_writable(self) -> None:
        if self.sock is None:
            return
        items, self._backlog = self._backlog, []
        try:
            n = send_batch(self.sock, items)
        except BlockingIOError:
            n = 0
        except OSError:
            n = len(items)
        if n < len(items):
            self._backlog = items[n:]
            return
        assert self._loop is not None
        self._loop.remove_writer(self.sock.fileno())
        self._flush()

    def _flush(self) -> None:
        if self.error is not None:
            return
        for _ in range(64):
            if self._backlog:
                break
            now = time.time()
            out = []
            try:
                for peer in self.peers:
                    out += peer.datagrams_to_send(now, budget=64)
            except OSError as e:  # gathered chunk writes flushed there: disk full
                self._fail(e)
                return
            if not out:
                break
            self._send(out)
        self._events()
        self._arm()

    def _events(self) -> None:
        for extra in self.peers[1:]:
            while (e := extra.next_event()) is not None:
                if self.on_event is not None:
                    self.on_event(e)
        while True:
            e = self.peer.next_event()
            if e is None:
                break
            if isinstance(e, ev.DownloadComplete):
                self._finish()
            elif isinstance(e, ev.ChannelClosed):
                self.closed_reasons.append(e.reason)
            elif isinstance(e, ev.HandshakeRefused):
                self.refusals.append((e.addr, e.reason))
            if self.on_event is not None:
                self.on_event(e)
        self._save_state()

    def _finish(self) -> None:
        """Every chunk verified: cut the data to the content size, make it
        durable and give it its final name (then the hashes beside it)."""
        c = self.peer.content
        if self.storage is not None and c.tree.size is not None and self.error is None:
            try:
                self.storage.truncate(c.tree.size)
                os.fsync(self.storage.fd)
                if self.paths is not None and not self.finished:
                    on_disk = os.fstat(self.storage.fd).st_size
                    if on_disk != c.tree.size:  # never give a wrong length the final name
                        raise OSError(0, f"{on_disk} bytes on disk, the content {c.tree.size}",
                                      self.paths.part)
                    self._save_state(force=True)
                    self._wait_saving()
                    os.replace(self.paths.part, self.paths.final)
                    fsync_dir(self.paths.final)
                    self.storage.path = self.paths.final
                    self.finished = True
                    if self.error is None and os.path.exists(self.paths.part_state + ".json"):
                        move_state(self.paths.part_state, self.paths.final_state)
                    self.state_path = self.paths.final_state
            except OSError as exc:
                self._fail(exc)
        if self.paths is None:
            self._save_state(force=True)
        self._complete.set()

    def _arm(self) -> None:
        if self._loop is None or self.sock is None:
            return
        now = time.time()
        when = min(p.get_timer(now) for p in self.peers)
        if self._timer is not None:
            if self._timer.when() <= self._loop.time() + max(0.0, when - now) + 0.001:
                return  # the armed timer fires first anyway
            self._timer.cancel()
        self._timer = self._loop.call_at(self._loop.time() + max(0.0, when - now), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.error is not None:
            return
        for p in self.peers:
            p.handle_timer(time.time())
        self._flush()

    def _save_state(self, force: bool = False) -> None:
        """Persist verified hashes now and then so a restart resumes (5.3).

        Periodic saves (every ``SAVE_EVERY`` s) write in a worker thread, one
        at a time: rewriting the hash file on the event loop stalled it for
        up to ~0.2 s on a busy disk, and every datagram waiting meanwhile
        counted as queuing delay for LEDBAT at the sender.  The final save
        (complete, close) is synchronous."""
        if self.state_path is None or self.error is not None:
            return
        tree = self.peer.content.tree
        if tree.n_chunks is None:
            return
        now = time.time()
        if force:
            self._wait_saving()  # an older background snapshot must not land last
            self._last_save = now
            try:
                tree.save(self.state_path)
            except OSError as e:
                self._fail(e)
            return
        if now - self._last_save < self.SAVE_EVERY:
            return
        if self._saving is not None:
            if not self._saving.done():
                return
            self._wait_saving()  # a failed background save stops the node
            if self.error is not None:
                return
        self._last_save = now
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="swift-save")
        self._saving = self._pool.submit(tree.write_snapshot, self.state_path, tree.snapshot())

    def _wait_saving(self) -> None:
        if self._saving is not None:
            saving, self._saving = self._saving, None
            try:
                saving.result()
            except OSError as e:
                self._fail(e)


# --- convenience constructors (the Python API) ------------------------------------


def tree_for_file(path: str, hash_func: HashFunc = HashFunc.SHA256, chunk_size: int = 1024,
                  cache: bool = True) -> MerkleTree:
    """Merkle tree of a file, from its cached hash file when that is provably
    current (see :func:`swift.aio.files.load_or_build_tree`, which also says
    why a cache was not used; here that reason is logged as a warning).

    The hash file is ``path.mhash`` for the default metadata (SHA-256, 1 KiB
    chunks) and ``path.<hash>-<chunk size>.mhash`` otherwise, so seeding
    with another ``--chunk-size`` or hash does not overwrite the other's."""
    got = load_or_build_tree(path, hash_func, chunk_size, cache)
    if got.message:
        log.warning("%s", got.message)
    return got.tree


def seeder(path: str, config: PeerConfig | None = None, host: str = "127.0.0.1",
           port: int = 0, **kw: Any) -> SwiftNode:
    """A node seeding ``path`` (``async with seeder(...) as node``)."""
    config = config or PeerConfig()
    tree = tree_for_file(path, config.hash_func, config.chunk_size)
    storage = FileStorage(path)
    node = SwiftNode(Peer(Content.seeded(tree, storage), config), host, port, **kw)
    node.storage = storage
    return node


def downloader(root_hash: bytes | str, out: str, config: PeerConfig | None = None,
               host: str = "127.0.0.1", port: int = 0, **kw: Any) -> SwiftNode:
    """A node downloading into ``out`` (see :class:`swift.aio.files.DownloadPaths`).

    Chunks go to ``out.part``, verified hashes to ``out.part.mhash``; ``out``
    appears (fsync, one rename) only when every chunk is verified and the
    length is right, with ``out.mhash`` beside it.  Resumes ``out.part``, or an
    earlier complete ``out`` with its ``out.mhash`` (moved back to ``.part``
    and re-verified); any other existing ``out`` stays untouched until the
    complete download replaces it.  Only chunks whose hash checks are kept;
    bytes past the content are cut off once the size is known.

    ``root_hash``: the swarm ID as bytes or hex text.  ``out`` must be a
    regular file or not exist yet."""
    if isinstance(root_hash, str):
        try:
            root_hash = bytes.fromhex(root_hash)
        except ValueError:
            raise ValueError(f"root hash {root_hash!r} is not hexadecimal") from None
    out = os.fspath(out)
    if os.path.isdir(out):
        raise ValueError(f"{out} is a directory: give a file name to download into")
    if os.path.exists(out) and not os.path.isfile(out):
        raise ValueError(f"{out} is not a regular file (a device, FIFO or socket): download "
                         "to a file, or stream with -o - (stdout)")
    config = config or PeerConfig()
    paths = DownloadPaths(out)
    if os.path.exists(paths.part) and not os.path.isfile(paths.part):
        raise ValueError(f"{paths.part} is not a regular file: remove it or download elsewhere")
    tree = None
    if os.path.exists(paths.part):
        tree = saved_tree(paths.part_state, root_hash, config.chunk_size)
    elif os.path.exists(out):
        tree = saved_tree(paths.final_state, root_hash, config.chunk_size)
        if tree is not None:  # an earlier download of this root: verify it again as a .part
            os.replace(out, paths.part)
            move_state(paths.final_state, paths.part_state)
    if tree is None:
        tree = MerkleTree.for_root(root_hash, config.hash_func, config.chunk_size)
    storage = FileStorage(paths.part, writable=True)
    content = Content(tree, storage)
    resumed = content.resume()
    if tree.size is not None and os.fstat(storage.fd).st_size > tree.size:
        storage.truncate(tree.size)  # bytes past the content were never verified
    node = SwiftNode(Peer(content, config), host, port, **kw)
    node.storage = storage
    node.state_path = paths.part_state
    node.paths = paths
    node.resumed = resumed
    if content.complete:
        node._finish()
    return node


#: live integrity methods by CLI name (RFC 7574 6.1.1, 6.1.2)
LIVE_METHODS = ("umt", "sign-all")


def live_source(config: PeerConfig | None = None, host: str = "127.0.0.1", port: int = 0,
                per_sig: int = 4, window: int = 4096, method: str = "umt",
                sig_alg: SigAlg | None = None, key: Any = None,
                **kw: Any) -> SwiftNode:
    """A live injector (RFC 7574 6.1); feed it with ``node.peer.live_append``.

    ``method``: "umt" (Unified Merkle Tree, 6.1.2, munros of ``per_sig``
    chunks) or "sign-all" (every chunk signed, 6.1.1); ``sig_alg``:
    any algorithm of 7.7 (RSASHA1, RSASHA256, ECDSAP256SHA256 -- the default --
    or ECDSAP384SHA384), or pass an existing private ``key``.
    """
    from swift.core.live import LiveContent, LiveTree, SignAllTree
    config = config or PeerConfig()
    if method == "sign-all":
        tree: Any = SignAllTree.source(config.chunk_size, config.hash_func, key=key, alg=sig_alg)
    elif method == "umt":
        tree = LiveTree.source(per_sig, config.chunk_size, config.hash_func, key=key, alg=sig_alg)
    else:
        raise ValueError(f"live method must be one of {LIVE_METHODS}")
    live = cast(Content, LiveContent(tree, window))  # the same interface, live (6.1)
    return SwiftNode(Peer(live, config), host, port, **kw)


def live_viewer(swarm_id: bytes, config: PeerConfig | None = None, host: str = "127.0.0.1",
                port: int = 0, per_sig: int = 4, window: int = 4096, method: str = "umt",
                **kw: Any) -> SwiftNode:
    """A live viewer/relay for the stream whose swarm ID is the source's public
    key (its first octet names the signature algorithm, 6.1)."""
    from swift.core.live import LiveContent, LiveTree, SignAllTree
    config = config or PeerConfig()
    if method == "sign-all":
        tree: Any = SignAllTree(swarm_id, config.chunk_size, config.hash_func)
    elif method == "umt":
        tree = LiveTree(swarm_id, per_sig, config.chunk_size, config.hash_func)
    else:
        raise ValueError(f"live method must be one of {LIVE_METHODS}")
    live = cast(Content, LiveContent(tree, window))  # the same interface, live (6.1)
    return SwiftNode(Peer(live, config), host, port, **kw)


class InOrderReader:
    """Yields verified content bytes in order as they arrive (play while downloading).

    Advances the peer's playback position so the VoD pickers fetch what comes
    next first (paper III-C).
    """

    def __init__(self, node: SwiftNode, start_chunk: int = 0) -> None:
        self.node = node
        self.cursor = start_chunk

    def ready(self) -> list[bytes]:
        """Chunks from the cursor that are verified and stored, in order."""
        c = self.node.peer.content
        out = []
        if getattr(c, "live", False) and self.node.peer.live_start is not None:
            self.cursor = max(self.cursor, self.node.peer.live_start)
            low = c.have.find_filled(0)
            if low is not None and low > self.cursor:
                self.cursor = low  # fell behind the discard window: skip ahead
        while c.have.has(self.cursor):
            out.append(c.chunk_bytes(self.cursor))
            self.cursor += 1
        self.node.peer.set_playpos(self.cursor)
        return out
