"""Types of ``deliverykit._speedups``, the one C extension (sources in ``csrc/``).

Every function takes positional arguments only (``METH_VARARGS``) and has a
pure-Python twin with the same parameters, named beside each group below;
``deliverykit.fastpath.load`` picks one or the other. tests/test_lint_gate.py
checks that this stub names exactly what the built extension exports and that
each function takes as many arguments as its twin.
"""

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

from _typeshed import FileDescriptorLike, ReadableBuffer, WriteableBuffer

# (host, port) for IPv4, (host, port, flowinfo, scope_id) for IPv6, as the
# socket module gives them; None for another address family.
_SockAddr: TypeAlias = tuple[str, int] | tuple[str, int, int, int] | None

# --- core.c; twins in deliverykit/fastpath.py (py_*) -------------------------

def xor_into(dst: WriteableBuffer, src: ReadableBuffer, /) -> None:
    """dst[i] ^= src[i] in place; lengths must match (ValueError), dst writable (BufferError)."""

def recv_batch(
    sock: FileDescriptorLike, max_count: int, size: int, /
) -> list[tuple[bytes, _SockAddr]]:
    """Up to ``max_count`` (1..1024) datagrams of up to ``size`` bytes (recvmmsg); never blocks."""

def send_batch(sock: FileDescriptorLike, items: Any, /) -> int:
    """Send an iterable of (data, address or None) with sendmmsg; returns how many went."""

def send_gso(sock: FileDescriptorLike, items: Any, max_segs: int, /) -> int:
    """send_batch with same-address, same-length runs as UDP GSO messages; items sent."""

class TxBatch:
    """Datagrams to send without a Python object each; send() uses UDP GSO."""

    last_errno: int
    def append(self, item: tuple[bytes, tuple[str, int]], /) -> None: ...
    def send(self, sock: FileDescriptorLike, max_segs: int, /) -> int: ...
    def take_rest(self) -> list[tuple[bytes, tuple[str, int]]]: ...
    def items(self) -> list[tuple[bytes, tuple[str, int]]]: ...
    def counts(self) -> dict[str, tuple[int, int]]: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

def tx_batch() -> TxBatch:
    """A new, empty TxBatch."""

def group_by_destination(items: Any, /) -> list[Any]:
    """(data, address) items grouped by address, stable (first appearance order)."""

# --- corecast.c; twins in corecast/_fast.py (py_cc_*) ------------------------

# (-1, error code) | (0, dst) | (1, dst, hash_id, hash, payload_offset, seq)
# | (2, dst, hash, eid): an inner packet classified at the CoreCast ITR.
_CcParsed: TypeAlias = (
    tuple[Literal[-1], int]
    | tuple[Literal[0], bytes]
    | tuple[Literal[1], bytes, int, bytes, int, int]
    | tuple[Literal[2], bytes, bytes, bytes]
)

# a map-cache trie node as cc_trie_lookup walks it: [child for bit 0, child for bit 1,
# value, has_value] (corecast.core.maptrie.TrieNode)
_V = TypeVar("_V")
_TrieNode: TypeAlias = list[_TrieNode[_V] | _V | bool | None]
# one item of the ITR's inside batches (corecast._fast.Frame), a list of one kind: bytes
# (RX ring, raw packets) or (bytes, addr) as recv_batch gives them; ItrTable.batch
# appends (packet, (rloc, port)) to ``out``
_CcFrame = TypeVar("_CcFrame", bytes, tuple[bytes, tuple[str, int] | tuple[str, int, int, int]])
_CcOut: TypeAlias = tuple[bytes, tuple[str, int]]

class _CcSink(Protocol):
    # a list, a TxBatch, or anything with append (corecast._fast.TxSink)
    def append(self, item: _CcOut, /) -> None: ...

# ItrTable.batch's ctx (corecast._fast.BatchCtx): (ranges, lisp_header, data_port,
# extra_every, max_served, own, headers_by_rloc, digest, linear, check_hash)
_CcCtx: TypeAlias = tuple[
    tuple[tuple[bytes, bytes], ...],
    bytes,
    int,
    int,
    int,
    tuple[bytes, ...],
    dict[bytes, bytes],
    Callable[[int, bytes | memoryview], bytes],
    bool,
    bool,
]

def cc_parse(pkt: ReadableBuffer, ranges: tuple[tuple[bytes, bytes], ...], /) -> _CcParsed:
    """Classify an inner packet at the CoreCast ITR (``ranges``: the reserved ranges)."""

def cc_trie_lookup(root: _TrieNode[_V], addr: ReadableBuffer, /) -> tuple[int, _V] | None:
    """Longest-prefix walk of a map-cache trie: (prefix length, value) or None."""

class ItrTable:
    """The CoreCast ITR's data-path state (twin: ``corecast._fast.PyItrTable``): the
    map-cache's entries as a compact table under a binary trie per family, and the
    payloadBuffer.  Changed only through these methods; ``batch`` reads it with no
    Python attribute lookup.  Made by :func:`cc_itr_table`."""

    def __len__(self) -> int: ...
    def set_entry(
        self,
        prefix: bytes,
        plen: int,
        rlocs: tuple[bytes, ...],
        rloc_strs: tuple[str, ...],
        expires: float,
        header: bytes | None,
        /,
    ) -> None:
        """Add or replace the entry of ``prefix/plen`` (host bits masked)."""
    def remove_entry(self, prefix: bytes, plen: int, /) -> bool:
        """Remove the entry of exactly ``prefix/plen``; True if there was one."""
    def entries(
        self,
    ) -> list[tuple[bytes, int, tuple[bytes, ...], tuple[str, ...], float, bytes | None, int]]:
        """Every entry, sorted: (network, plen, rlocs, rloc_strs, expires, header, hits)."""
    def add_channel(self, eid: bytes, /) -> bool:
        """A payloadBuffer entry with no payload yet; False if there is one."""
    def set_payload(self, eid: bytes, hash: bytes, seq: int, packet: bytes, /) -> None:
        """A channel's new payload with a fresh servedRLOC (KeyError: no such channel)."""
    def channel(self, eid: bytes, /) -> tuple[bytes, int, bytes, dict[bytes, int] | None] | None:
        """(hash, seq, packet, servedRLOC) of a channel; the dict is the table's own."""
    def channels(self) -> list[bytes]:
        """The channels, in the order they were added."""
    def batch(
        self,
        frames: list[_CcFrame],
        start: int,
        l2: int,
        ctx: _CcCtx,
        now: float,
        out: _CcSink,
        ctr: list[int],
        /,
    ) -> int:
        """The ITR data path for a batch; the index of the first frame left to the
        Python core.  ``ctx`` is ``corecast._fast.ItrPath.ctx()`` (10 items)."""

def cc_itr_table() -> ItrTable:
    """A new, empty :class:`ItrTable`."""

def cc_ring_read(
    ring: WriteableBuffer, frame_size: int, frame_nr: int, start: int, max_frames: int, /
) -> tuple[list[bytes], int, int]:
    """Frames of a TPACKET_V2 RX ring from slot ``start``: (frames, next slot, truncated)."""

def cc_blast(
    sock: FileDescriptorLike,
    items: list[tuple[bytes, tuple[str, int]]],
    count: int,
    seconds: float,
    /,
) -> int:
    """sendmmsg ``count`` datagrams cycling over prebuilt items, for at most ``seconds``."""

# --- m2c.c; twins in m2c/_fast.py (same names) -------------------------------

def m2c_ldpc_matrix(k: int, m: int, n1: int, seed: int, /) -> tuple[bytes, bytes]:
    """RFC 5170 left matrix in CSR form: (row_ptr, cols), uint32 each."""

def m2c_ldpc_graph(
    k: int, n: int, n1: int, seed: int, /
) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """Tanner graph of H: (eq_ptr, eq_vars, var_ptr, var_eqs, degrees), uint32 each."""

def m2c_ldpc_alloc(size: int, /) -> bytearray:
    """``size`` bytes, contents undefined (not zeroed)."""

def m2c_ldpc_encode(
    src: ReadableBuffer, symbol_size: int, row_ptr: ReadableBuffer, cols: ReadableBuffer, /
) -> bytes:
    """The staircase repair symbols of ``src`` (k symbols of ``symbol_size`` bytes)."""

def m2c_ldpc_add(
    k: int,
    E: int,
    eq_ptr: ReadableBuffer,
    eq_vars: ReadableBuffer,
    var_ptr: ReadableBuffer,
    var_eqs: ReadableBuffer,
    unknown: WriteableBuffer,
    partial: WriteableBuffer,
    values: WriteableBuffer,
    known: WriteableBuffer,
    esi: int,
    symbol: ReadableBuffer,
    /,
) -> int:
    """One iterative decoding step; how many source symbols became known."""

class _LDPCPeeler:
    received: int
    duplicates: int
    source_known: int
    def add(self, esi: int, symbol: ReadableBuffer, /) -> int: ...
    def take(self, esi: int, symbol: ReadableBuffer, /) -> bool: ...
    def take_many(self, items: Any, /) -> bool: ...  # an iterable of (esi, symbol)
    def take_at(
        self, esis: ReadableBuffer, offsets: ReadableBuffer, buf: ReadableBuffer, /
    ) -> bool: ...
    def source_block(self) -> bytes: ...
    def source(self, i: int, /) -> bytes | None: ...

def m2c_ldpc_peeler(
    k: int,
    E: int,
    eq_ptr: ReadableBuffer,
    eq_vars: ReadableBuffer,
    var_ptr: ReadableBuffer,
    var_eqs: ReadableBuffer,
    unknown: WriteableBuffer,
    partial: WriteableBuffer,
    values: WriteableBuffer,
    known: WriteableBuffer,
    got: WriteableBuffer,
    error: type[Exception] = ...,
    /,
) -> _LDPCPeeler:
    """``m2c_ldpc_add``'s state held: ``.add(esi, symbol)`` per symbol; ``.take(esi,
    symbol)`` is LDPCDecoder.add (``error`` raised for a bad ESI or length; a bytes source
    symbol held, not copied); ``.take_many(items)``, ``.take_at(esis, offsets, buf)``."""

def m2c_ldpc_add_many(
    k: int,
    E: int,
    eq_ptr: ReadableBuffer,
    eq_vars: ReadableBuffer,
    var_ptr: ReadableBuffer,
    var_eqs: ReadableBuffer,
    unknown: WriteableBuffer,
    partial: WriteableBuffer,
    values: WriteableBuffer,
    known: WriteableBuffer,
    esis: ReadableBuffer,
    symbols: ReadableBuffer,
    /,
) -> int:
    """``m2c_ldpc_add`` for each (uint32 ESI, E-byte symbol)."""

def m2c_ldpc_eliminate(
    k: int,
    E: int,
    eq_ptr: ReadableBuffer,
    eq_vars: ReadableBuffer,
    unknown: ReadableBuffer,
    partial: ReadableBuffer,
    known: ReadableBuffer,
    values: bool,
    /,
) -> tuple[int, bool, bytes, bytes]:
    """Maximum-likelihood step: (deficit, determined, esis, symbols)."""

# --- swift.c; twins in swift/_fast.py (py_*) ---------------------------------

# decode_raw 5-tuples: (type, start, end, x, y), RFC 7574 section 8.
_RawMsg: TypeAlias = tuple[int, int, int, int | bytes | None, bytes | None]

def recv_batch_ts(
    sock: FileDescriptorLike, max_count: int, size: int, /
) -> list[tuple[bytes, _SockAddr, float]]:
    """recv_batch with each datagram's kernel arrival time (SO_TIMESTAMPNS), or -1.0."""

def decode_msgs(
    data: ReadableBuffer,
    pos: int,
    addressing: int,
    hash_size: int,
    sig_size: int,
    chunk_size: int,
    /,
) -> tuple[list[_RawMsg], int, str | None]:
    """PPSPP messages of one datagram from ``pos``: (messages, pos, error or None)."""

def binmap_find(
    halves: ReadableBuffer,
    deep: ReadableBuffer,
    root: int,
    root_layer: int,
    lo: int,
    hi: int,
    val: bool,
    /,
) -> int:
    """The first chunk in [lo, hi] whose bit is ``val``, or -1."""

def uncle_stop(
    chunk: int,
    top: int,
    halves_a: ReadableBuffer,
    deep_a: ReadableBuffer,
    root_a: int,
    layer_a: int,
    halves_b: ReadableBuffer,
    deep_b: ReadableBuffer,
    root_b: int,
    layer_b: int,
    /,
) -> int:
    """The layer where MerkleTree.uncles stops: the lowest m in [1, top] whose block of
    2**m chunks around ``chunk`` has a filled chunk in binmap a or b, else ``top``."""

def merkle_walk(
    hashes: WriteableBuffer,
    known: WriteableBuffer,
    hash_size: int,
    n_chunks: int,
    root: int,
    chunk: int,
    leaf: ReadableBuffer,
    offered: dict[int, bytes],
    hasher: Any,  # a hashlib constructor
    zero: ReadableBuffer,
    /,
) -> int:
    """MerkleTree.verify's walk from ``chunk``'s leaf digest to the first trusted node:
    1 verified (the path written into ``hashes``/``known``), 0 not, -1 a hash missing."""

def merkle_uncles(
    hashes: ReadableBuffer,
    known: ReadableBuffer,
    hash_size: int,
    n_chunks: int,
    chunk: int,
    stop: int,
    zero: ReadableBuffer,
    /,
) -> list[tuple[int, bytes]]:
    """The uncle hashes of ``chunk`` below layer ``stop``, height descending (zero hash
    past the content); KeyError for one not known."""

def data_datagram(
    channel: int,
    hashes: ReadableBuffer,
    known: ReadableBuffer,
    hash_size: int,
    n_chunks: int,
    chunk: int,
    stop: int,
    zero: ReadableBuffer,
    ts: ReadableBuffer,
    src: int | ReadableBuffer,
    offset: int,
    length: int,
    /,
) -> bytes:
    """One DATA datagram (chunk32): channel ID, INTEGRITY for each uncle below ``stop``,
    DATA with ``ts`` and ``length`` bytes at ``offset`` of ``src`` (fd to pread, or buffer)."""

def seed_datagram(
    channel: int,
    tree: Any,
    chunk: int,
    binmap_a: Any,
    binmap_b: Any,
    ts: ReadableBuffer,
    src: int | ReadableBuffer,
    offset: int,
    length: int,
    /,
) -> bytes:
    """``MerkleTree.data_datagram`` for the upload path in one call: the chunk's peak
    layer, ``uncle_stop`` over the two Binmaps, then ``data_datagram`` (IndexError
    for a chunk past the end)."""

def picker_next_wanted(have: Any, inflight: Any, peer: Any, pos: int, hi: int, /) -> int:
    """The first chunk in ``[pos, hi)`` that the Binmaps ``have`` and ``inflight`` lack
    and ``peer`` holds, or -1 (``swift.core.picker.next_wanted`` in one call)."""

def ledbat_on_ack(
    ledbat: Any,
    delay: float,
    bytes_acked: int,
    now: float,
    rtt: float | None,
    /,
) -> None:
    """Ledbat.on_ack (RFC 6817 2.4.2) on the Ledbat object's own attributes."""

def sendside_recv(
    send: Any,
    lo: int,
    hi: int,
    delay_us: int | None,
    now: float,
    arrived: float | None,
    /,
) -> int:
    """The send side of one ACK (``delay_us`` given: SendSide.on_ack, Ledbat.on_ack
    included) or HAVE (None: SendSide.delivered_by_have) of chunks ``[lo, hi)``; 0, or
    -1 with nothing done (loss repair in flight; chunks outside 0 <= lo <= hi < 2**63; a
    delay not an int in [0, 2**64)): the caller then runs the method."""

def binmap_set1(
    halves: WriteableBuffer,
    deep: WriteableBuffer,
    free: WriteableBuffer,
    st: WriteableBuffer,
    root: int,
    root_layer: int,
    i: int,
    val: bool,
    /,
) -> int:
    """Set (``val``) or clear chunk ``i``; 1 if it changed."""

# --- sim.c; twin in deliverykit/sim/scheduler.py (py_sim_heap, PyEventHeap) -----

class EventHeap:
    """The simulator's event heap (twin: ``deliverykit.sim.scheduler.PyEventHeap``):
    entries ``(when, seq, callback, args)`` leave in ``(when, seq)`` order, the keys
    kept inline.  Made by :func:`sim_heap`."""

    def push(
        self, when: float, seq: int, callback: Callable[..., None], args: tuple[Any, ...], /
    ) -> None: ...
    def pop_until(
        self, until: float, /
    ) -> tuple[float, Callable[..., None], tuple[Any, ...]] | None: ...
    def peek(self) -> float | None: ...
    def __len__(self) -> int: ...

def sim_heap() -> EventHeap:
    """A new, empty event heap for ``deliverykit.sim.Scheduler``."""
