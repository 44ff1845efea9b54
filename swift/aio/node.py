"""Asyncio UDP driver for sans-IO :class:`~swift.core.peer.Peer` objects.

A :class:`SwiftNode` is one UDP socket (:class:`deliverykit.aio.BatchedUDPEndpoint`:
``recvmmsg``/``sendmmsg``, with kernel arrival times when a swarm asks) pumped by
the toolkit's one driver, :class:`deliverykit.aio.CoreDriver`, on the loop's
clock.  The core it pumps is a :class:`SwarmMux`: every swarm served on the
socket (RFC 7574 figure 1) is a Peer, and the mux routes each datagram to its
swarm, so the driver still pumps one :class:`~deliverykit.protocol.DatagramCore`.
The node adds only what is not protocol: files (the download's final rename,
resume state) and the application's view (progress, events, refusals).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

from deliverykit.aio import BatchedUDPEndpoint, CoreDriver, make_udp_socket
from deliverykit.deadline import within
from swift._fast import recv_batch_ts
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
from swift.core.config import PeerConfig
from swift.core.content import Content
from swift.core.merkle import MerkleTree
from swift.core.mux import StorageFailed, SwarmEvent, SwarmMux  # noqa: F401  (the API's names)
from swift.core.peer import Peer
from swift.wire.constants import HashFunc, SigAlg

log = logging.getLogger("swift")


class SwiftNode:
    """Peers bound to a UDP socket; use as an async context manager."""

    #: seconds between background saves of the verified hashes (resume state)
    SAVE_EVERY = 2.0
    #: how many channel-close reasons :attr:`closed_reasons` keeps
    KEEP_REASONS = 256
    #: datagrams per recvmmsg: the driver drains (ACKs) after each batch, and a
    #: bigger batch delays ACKs and inflates the RTT LEDBAT sees
    RECV_BATCH = 32

    def __init__(self, peer: Peer, host: str = "127.0.0.1", port: int = 0,
                 on_event: Callable[[Any], None] | None = None) -> None:
        self.peer = peer
        #: the core the driver pumps: every swarm served on this socket (3.11)
        self.mux = SwarmMux(peer)
        self.host = host
        self.port = port
        self.on_event = on_event
        self.endpoint: BatchedUDPEndpoint | None = None
        self.driver: CoreDriver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._save_timer: asyncio.TimerHandle | None = None
        self._complete = asyncio.Event()
        #: why channels closed, the latest KEEP_REASONS (a peer opening and closing
        #: channels all day must not grow our memory)
        self.closed_reasons: deque[str] = deque(maxlen=self.KEEP_REASONS)
        #: (address, why) of handshakes refused (``HandshakeRefused``), the latest
        #: KEEP_REASONS: the download's hint says what was refused and why
        self.refusals: deque[tuple[Any, str]] = deque(maxlen=self.KEEP_REASONS)
        self.storage: FileStorage | None = None
        self.state_path: str | None = None
        self._saving: Future | None = None
        self._pool: ThreadPoolExecutor | None = None
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
        try:
            sock = make_udp_socket((self.host, self.port))
        except OSError as e:  # name the port: "Address already in use" alone says too little
            where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
            raise OSError(e.errno, e.strerror, f"UDP {where}") from None
        loop = self._loop = asyncio.get_running_loop()
        self.mux.epoch = time.time() - loop.time()
        self.driver = CoreDriver(self.mux, on_event=self._on_core_event, loop=loop)
        self.endpoint = BatchedUDPEndpoint(sock, self.driver.on_batch, batch=self.RECV_BATCH,
                                           loop=loop)
        self.driver.attach(self.endpoint)
        self.port = sock.getsockname()[1]
        self._want_kernel_ts()
        self._save_timer = loop.call_later(self.SAVE_EVERY, self._periodic_save)
        self.driver.kick()

    async def aclose(self) -> None:
        ep, driver = self.endpoint, self.driver
        if ep is None or driver is None:
            return
        now = self.now
        try:
            for p in self.peers:
                ep.send_many(p.close(now))
        except OSError:
            pass
        self._save_state(force=True)
        if self.error is not None and self._saving is not None:
            self._saving = None  # its failure is already self.error
        self._wait_saving()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        driver.close()
        if ep.backlogged:
            await ep.drain(1.0)  # the closing handshakes (what is left is counted as dropped)
        ep.close()
        self.endpoint = None
        if self.storage is not None:
            try:
                self.storage.close()
            except OSError as e:  # e.g. the last gathered write meets a full disk
                self._fail(e)
                if self.storage.fd >= 0:
                    os.close(self.storage.fd)
                    self.storage.fd = -1

    @property
    def peers(self) -> list[Peer]:
        """Every swarm served on this socket; channels demultiplex them (3.11)."""
        return self.mux.peers

    @property
    def sock(self) -> socket.socket | None:
        """The UDP socket (None before start and after close)."""
        return self.endpoint.sock if self.endpoint is not None else None

    @property
    def addr(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def now(self) -> float:
        """The swarms' clock (see :class:`SwarmMux`): pass it to Peer calls such
        as ``node.peer.live_append(data, node.now)``."""
        if self._loop is None:
            return time.time()
        return self._loop.time() + self.mux.epoch

    def kick(self) -> None:
        """After calling a Peer directly (e.g. ``live_append``): send what is due."""
        if self.driver is not None and self.error is None:
            self.driver.kick()

    _flush = kick  # the name callers used before the CoreDriver

    @property
    def _send(self) -> Callable[[list[tuple[bytes, Any]]], None]:
        """Where every datagram the node sends goes (the endpoint's ``send_many``).
        Assigning a wrapper watches the send path (tests/fuzz does); the driver
        sends through the endpoint, so the wrapper sees everything."""
        assert self.endpoint is not None, "the node is not started"
        return self.endpoint.send_many

    @_send.setter
    def _send(self, fn: Callable[[list[tuple[bytes, Any]]], None]) -> None:
        assert self.endpoint is not None, "the node is not started"
        self.endpoint.send_many = fn  # type: ignore[method-assign,assignment]  # tests swap it

    def add_swarm(self, peer: Peer) -> None:
        """Serve one more swarm on the same UDP port (RFC 7574 figure 1):
        handshakes are routed by swarm ID, later datagrams by channel ID."""
        self.mux.add(peer)
        self._want_kernel_ts()
        self.kick()

    def _want_kernel_ts(self) -> None:
        """Kernel arrival times (SO_TIMESTAMPNS) for the ACK delay samples
        (8.7), only when a swarm on this socket asks for them
        (``PeerConfig.delay_from_kernel``): they cost CPU on every datagram."""
        ep = self.endpoint
        if ep is None or ep.timestamps:
            return
        if any(p.config.delay_from_kernel for p in self.peers):
            try:
                ep.enable_timestamps(recv_batch_ts)
            except OSError:
                pass

    def connect(self, addr: tuple[str, int]) -> None:
        """Start a handshake with ``addr``, a ``(host, port)`` tuple; a host
        name is resolved here, in the address family of our socket."""
        self.peer.connect(self.resolve(addr), self.now)
        self.kick()

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
            await within(self._complete.wait(), timeout)
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
        self.mux.stop(exc)  # no more input, output or timer (its StorageFailed is ignored)
        if self.endpoint is not None:
            self.endpoint.pause_reading()
        self._complete.set()

    @property
    def progress(self) -> tuple[int, int | None]:
        """(verified chunks, total chunks or None)."""
        c = self.peer.content
        return c.have.count(), c.n_chunks


    # -- what the driver hands on ------------------------------------------------

    def _on_core_event(self, e: object) -> None:
        if isinstance(e, StorageFailed):
            self._fail(e.error)
            return
        assert isinstance(e, SwarmEvent)
        event = e.event
        if e.swarm == 0:
            if isinstance(event, ev.DownloadComplete):
                self._finish()
            elif isinstance(event, ev.ChannelClosed):
                self.closed_reasons.append(event.reason)
            elif isinstance(event, ev.HandshakeRefused):
                self.refusals.append((event.addr, event.reason))
        if self.on_event is not None:
            self.on_event(event)

    def _periodic_save(self) -> None:
        self._save_timer = None
        if self.endpoint is None:
            return
        self._save_state()
        if self.error is None:
            assert self._loop is not None
            self._save_timer = self._loop.call_later(self.SAVE_EVERY, self._periodic_save)

    def _finish(self) -> None:
        """Every chunk verified: cut the data to the content size, make it
        durable and give it its final name (then the hashes beside it)."""
        c = self.peer.content
        if (self.storage is not None and isinstance(c, Content) and c.tree.size is not None
                and self.error is None):
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
        if not isinstance(tree, MerkleTree) or tree.n_chunks is None:
            return  # live content keeps no hashes on disk
        if force:
            self._wait_saving()  # an older background snapshot must not land last
            try:
                tree.save(self.state_path)
            except OSError as e:
                self._fail(e)
            return
        if self._saving is not None:
            if not self._saving.done():
                return
            self._wait_saving()  # a failed background save stops the node
            if self.error is not None:
                return
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
        node.peer.set_playpos(start_chunk)  # the picker keeps order from here

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
