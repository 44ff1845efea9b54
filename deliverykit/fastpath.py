"""C fast paths and their pure-Python twins.

Every function in ``deliverykit._speedups`` has a twin here with the same
signature and results (tests/test_fastpath.py proves it with hypothesis).
``load()`` picks the C version unless ``DELIVERYKIT_PURE=1`` is set or the
extension was not built; protocol packages use the same switch for their own
loops::

    from deliverykit.fastpath import load
    xor_into = load("xor_into", py_xor_into)
"""

from __future__ import annotations

import os
import socket
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from deliverykit.protocol import SockAddr

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

F = TypeVar("F", bound=Callable[..., Any])
#: a (data, address) pair, whatever the data's and the address's types
_Pair = TypeVar("_Pair", bound=tuple[Any, Any])

PURE_ENV = "DELIVERYKIT_PURE"


def _import_speedups() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from deliverykit import _speedups

        # not the extension (e.g. a stray folder of that name)
        if not hasattr(_speedups, "xor_into"):
            raise ImportError("deliverykit._speedups is not the compiled extension")
    except ImportError:
        warnings.warn(
            "deliverykit._speedups is not built; using the pure-Python twins (slower)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return _speedups


speedups = _import_speedups()


def have_c() -> bool:
    """True when the C fast paths are in use."""
    return speedups is not None


def load(name: str, twin: F) -> F:
    """The C function ``name`` when available and not disabled, else ``twin``."""
    if speedups is not None:
        fn = getattr(speedups, name, None)
        if fn is not None:
            return cast(F, fn)  # the C function takes and returns what its twin does
    return twin


# --- twins -----------------------------------------------------------------


def py_xor_into(dst: bytearray | memoryview, src: bytes | bytearray | memoryview) -> None:
    """dst[i] ^= src[i] in place; lengths must match."""
    if memoryview(dst).readonly:
        raise BufferError("xor_into: dst is read-only")
    if len(dst) != len(src):
        raise ValueError(f"xor_into: length mismatch ({len(dst)} != {len(src)})")
    n = len(dst)
    if n == 0:
        return
    x = int.from_bytes(dst, "little") ^ int.from_bytes(src, "little")
    dst[:] = x.to_bytes(n, "little")


def py_recv_batch(sock: socket.socket, max_count: int, size: int) -> list[tuple[bytes, SockAddr]]:
    """Up to ``max_count`` datagrams of at most ``size`` bytes; never blocks.  The
    addresses are the socket module's for an AF_INET/AF_INET6 socket, the only
    kind the toolkit reads (the C version gives None for another family)."""
    if not (1 <= max_count <= 1024 and 1 <= size <= 65536):
        raise ValueError("recv_batch: 1 <= max_count <= 1024, 1 <= size <= 65536")
    out: list[tuple[bytes, SockAddr]] = []
    recvfrom = sock.recvfrom
    flags = socket.MSG_DONTWAIT
    try:
        for _ in range(max_count):
            out.append(recvfrom(size, flags))
    except BlockingIOError:
        pass
    except OSError:
        if not out:
            raise
    return out


def py_send_batch(
    sock: socket.socket, items: Iterable[tuple[ReadableBuffer, SockAddr | None]]
) -> int:
    """Send (data, address-or-None) pairs; returns how many went.

    Once something went, any error ends the call with the count (the caller's
    next call starts at the item that failed and meets its error then); raises
    (BlockingIOError on a full buffer) only when nothing could be sent, like
    the C version.
    """
    sent = 0
    for data, addr in items:
        try:
            if addr is None:
                sock.send(data)
            else:
                sock.sendto(data, addr)
        except OSError:
            if sent:
                return sent
            raise
        sent += 1
    return sent


#: the largest UDP payload of one GSO message (IPv4: 65,535 - 20 - 8)
GSO_MAX_BYTES = 65507
#: udp(7): the cmsg level and type that set a message's GSO segment size
SOL_UDP, UDP_SEGMENT = 17, 103


def gso_runs(
    items: Sequence[tuple[ReadableBuffer, SockAddr]], max_segs: int
) -> list[tuple[int, int]]:
    """(first, count) of each run ``send_gso`` sends as one message: consecutive
    items with the same address and length (the run's last may be shorter), at
    most ``max_segs`` items and GSO_MAX_BYTES bytes; an empty datagram is a run of
    its own (as a GSO segment it would vanish)."""
    runs: list[tuple[int, int]] = []
    start = 0
    seg = total = 0
    open_ = False
    for i, (data, addr) in enumerate(items):
        n = len(memoryview(data))
        if (open_ and 0 < n <= seg and i - start < max_segs and total + n <= GSO_MAX_BYTES
                and addr == items[start][1]):
            total += n
            open_ = n == seg
            continue
        if i:
            runs.append((start, i - start))
        start, seg, total, open_ = i, n, n, n > 0
    if items:
        runs.append((start, len(items) - start))
    return runs


def py_send_gso(
    sock: socket.socket, items: Iterable[tuple[ReadableBuffer, SockAddr]], max_segs: int
) -> int:
    """send_batch with each run (:func:`gso_runs`) as one UDP GSO message
    (``UDP_SEGMENT`` = the run's first length); returns how many items went,
    always a prefix.  Errors as in send_batch.  Twin of the C ``send_gso``."""
    if not 1 <= max_segs <= 128:
        raise ValueError("send_gso: 1 <= max_segs <= 128")
    seq = list(items)
    if any(addr is None for _, addr in seq):
        raise TypeError("send_gso: every item needs an address")
    sent = 0
    for first, count in gso_runs(seq, max_segs):
        try:
            _send_run(sock, seq[first:first + count])
        except OSError:
            if sent:
                return sent
            raise
        sent += count
    return sent


def _send_run(sock: socket.socket, run: Sequence[tuple[ReadableBuffer, SockAddr]]) -> None:
    """One run of :func:`gso_runs` (same address; one datagram, or one UDP GSO
    message whose segment size is the first datagram's length)."""
    if len(run) == 1:
        sock.sendto(run[0][0], run[0][1])
    else:
        seg = len(memoryview(run[0][0])).to_bytes(2, sys.byteorder)
        sock.sendmsg([d for d, _ in run], [(SOL_UDP, UDP_SEGMENT, seg)], 0, run[0][1])


def py_group_by_destination(items: Iterable[_Pair]) -> list[_Pair]:
    """The (data, address) items grouped by address, groups in the order their
    address first appears, each in its own order (a stable sort by first
    appearance: what :func:`py_send_gso` needs for long runs)."""
    seq = list(items)
    for item in seq:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError("group_by_destination: items are (data, address) pairs")
    return [seq[i] for i in _grouped_order([addr for _, addr in seq])]


def _grouped_order(addrs: Sequence[Any]) -> list[int]:
    """Indices of ``addrs`` grouped by value: groups in the order their value
    first appears, each in its own order (the grouping of
    :func:`py_group_by_destination` and :meth:`PyTxBatch.send`)."""
    groups: dict[Any, list[int]] = {}
    for i, addr in enumerate(addrs):
        groups.setdefault(addr, []).append(i)
    return [i for g in groups.values() for i in g]


class PyTxBatch:
    """Datagrams to send (twin of the C ``TxBatch``, ``tx_batch()``): appended as
    ``(data, (host, port))`` pairs, sent by :meth:`send` grouped by destination
    with each run of same-size datagrams to one address as one UDP GSO message
    (as :func:`py_send_gso`).  The C type holds each datagram as references to
    its header and body, without a Python object per datagram; this twin holds
    the pairs."""

    def __init__(self) -> None:
        self._items: list[tuple[bytes, tuple[str, int]]] = []
        self._sent: set[int] = set()
        #: the errno at which the last send() stopped, or 0
        self.last_errno = 0

    def append(self, item: tuple[bytes, tuple[str, int]]) -> None:
        if (not isinstance(item, tuple) or len(item) != 2 or not isinstance(item[0], bytes)
                or not isinstance(item[1], tuple) or len(item[1]) < 2):
            raise TypeError("TxBatch.append: a (bytes, (host, port)) pair")
        host, port = item[1][0], item[1][1]
        if not isinstance(host, str):
            raise TypeError("TxBatch.append: the host is a str")
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
            ok = 0 <= port <= 65535
        except OSError:
            ok = False
        if not ok:
            raise ValueError(f"TxBatch.append: not an address and port: {host}")
        self._items.append((item[0], (host, port)))

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[bytes, tuple[str, int]]]:
        """Every datagram, in the order appended."""
        return list(self._items)

    def counts(self) -> dict[str, tuple[int, int]]:
        """{host: (datagrams, bytes)} over every datagram."""
        out: dict[str, tuple[int, int]] = {}
        for data, (host, _port) in self._items:
            pk, by = out.get(host, (0, 0))
            out[host] = (pk + 1, by + len(data))
        return out

    def _grouped(self) -> list[int]:
        """Indices of the datagrams grouped by destination (stable)."""
        return _grouped_order([addr for _data, addr in self._items])

    def send(self, sock: socket.socket, max_segs: int) -> int:
        """Send, grouped by destination (runs as GSO messages when max_segs > 1);
        returns how many went.  Never raises for the socket's errors: stops at
        the first the kernel refuses, keeps its errno in ``last_errno`` and leaves
        the rest to :meth:`take_rest`."""
        if not 1 <= max_segs <= 128:
            raise ValueError("TxBatch.send: 1 <= max_segs <= 128")
        self.last_errno = 0
        order = self._grouped()
        items = [self._items[i] for i in order]
        sent = 0
        for first, count in gso_runs(items, max_segs):
            try:
                _send_run(sock, items[first:first + count])
            except OSError as exc:
                self.last_errno = exc.errno or 0
                break
            sent += count
        self._sent.update(order[:sent])
        return sent

    def take_rest(self) -> list[tuple[bytes, tuple[str, int]]]:
        """The datagrams :meth:`send` did not send, grouped as it orders them;
        empties the batch."""
        rest = [self._items[i] for i in self._grouped() if i not in self._sent]
        self.clear()
        return rest

    def clear(self) -> None:
        self._items = []
        self._sent = set()


def py_tx_batch() -> PyTxBatch:
    """A new, empty batch of datagrams to send (twin of the C ``tx_batch``)."""
    return PyTxBatch()


xor_into = load("xor_into", py_xor_into)
recv_batch = load("recv_batch", py_recv_batch)
send_batch = load("send_batch", py_send_batch)
send_gso = load("send_gso", py_send_gso)
group_by_destination = load("group_by_destination", py_group_by_destination)
tx_batch = load("tx_batch", py_tx_batch)

__all__ = [
    "have_c", "load", "speedups", "xor_into", "recv_batch", "send_batch", "send_gso",
    "group_by_destination", "gso_runs", "py_xor_into", "py_recv_batch", "py_send_batch",
    "py_send_gso", "py_group_by_destination", "tx_batch", "py_tx_batch", "PyTxBatch",
]
