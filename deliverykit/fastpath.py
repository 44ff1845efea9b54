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
import warnings
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from deliverykit.protocol import SockAddr

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

F = TypeVar("F", bound=Callable[..., Any])

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

    Stops early on a full socket buffer once something was sent; raises
    BlockingIOError if nothing could be sent, like the C version.
    """
    sent = 0
    for data, addr in items:
        try:
            if addr is None:
                sock.send(data)
            else:
                sock.sendto(data, addr)
        except (BlockingIOError, InterruptedError) as exc:
            if sent:
                return sent
            raise exc
        except OSError as exc:
            if exc.errno == 105 and sent:  # ENOBUFS
                return sent
            raise
        sent += 1
    return sent


xor_into = load("xor_into", py_xor_into)
recv_batch = load("recv_batch", py_recv_batch)
send_batch = load("send_batch", py_send_batch)

__all__ = [
    "have_c", "load", "speedups", "xor_into", "recv_batch", "send_batch",
    "py_xor_into", "py_recv_batch", "py_send_batch",
]
