"""The one core protocol: how every sans-IO core is driven (docs/sim.md, "One core protocol").

A core is a state machine fed bytes and the time; it never reads a clock or
touches a socket.  A driver (:class:`deliverykit.aio.CoreDriver` on sockets, on
the event loop's clock, or :class:`deliverykit.sim.Host` in virtual time) owns
the clock and the transport and does exactly this::

    core.datagram_received(data, addr, now)     # every datagram that arrives
    for data, addr in core.datagrams_to_send(now):  # after every input (and timer)
        send(data, addr)
    deadline = core.get_timer(now)              # absolute time, or None: no timer
    ...at deadline: core.handle_timer(deadline)  # then drain datagrams_to_send again
    while (event := core.next_event()) is not None:  # what happened, for the application
        ...

The shape is aioquic's ``QuicConnection`` (docs: ../shared/design/house-style.md),
which :class:`swift.core.peer.Peer` already has.  Because the simulated core is
the same object that runs on sockets, no protocol logic is duplicated for
simulation.  ``addr`` is how the transport names a remote (:data:`Address`): the
socket module's tuple on UDP (:data:`SockAddr`: ``(ip, port)``, or ``(ip, port,
flowinfo, scope_id)`` on IPv6), an ``(ip, port)`` tuple in the simulator
(:data:`SimAddr`).

One optional extension: a core that measures one-way delay may take the
datagram's kernel arrival time as ``datagram_received(data, addr, now,
arrived=None)`` (``arrived`` on the driver's clock, at or before ``now``);
:class:`~deliverykit.aio.CoreDriver` passes it only when its endpoint was asked
for kernel timestamps (``BatchedUDPEndpoint.enable_timestamps``).

Byte streams (TCP) have a second shape, :class:`StreamCore`, with the same
timer and events: a stream's opening, its bytes, its closing and its
back-pressure (how many bytes the transport has passed on) go in with the time,
and :class:`StreamWrite` / :class:`StreamClose` (plus any core-specific outputs)
come out of ``to_send(now)``::

    core.connection_made(conn, now)             # a stream opened (accepted)
    core.data_received(conn, data, now)         # its bytes, in order
    core.writable(conn, n, now)                 # n bytes we wrote left for the peer
    core.connection_lost(conn, now)             # it closed or broke
    for out in core.to_send(now): ...           # StreamWrite(conn, data), StreamClose(conn), ...
    core.get_timer(now) / core.handle_timer(now) / core.next_event()  # as DatagramCore
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

__all__ = [
    "Address",
    "ConnId",
    "DatagramCore",
    "Outgoing",
    "SimAddr",
    "SockAddr",
    "StreamClose",
    "StreamCore",
    "StreamWrite",
    "is_datagram_core",
    "is_stream_core",
]

#: a UDP socket address as the socket module gives and takes it: ``(host, port)``
#: on IPv4, ``(host, port, flowinfo, scope_id)`` on IPv6
SockAddr: TypeAlias = tuple[str, int] | tuple[str, int, int, int]
#: the simulator's address of a node or a multicast group: ``(dotted IPv4, port)``
#: (deliverykit.sim.network.node_address), the shape of an IPv4 SockAddr
SimAddr: TypeAlias = tuple[str, int]
#: how a driver names a remote, on any transport: what ``datagram_received`` gets and
#: ``datagrams_to_send`` names (a core may accept wider, never return narrower)
Address: TypeAlias = SockAddr | SimAddr
#: one datagram to send and where to
Outgoing: TypeAlias = tuple[bytes, Address]


@runtime_checkable
class DatagramCore(Protocol):
    """A sans-IO protocol core driven by datagrams, one timer and the time ``now`` (seconds)."""

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        """Process one datagram that arrived from ``addr`` at ``now``."""

    def datagrams_to_send(self, now: float) -> Sequence[Outgoing]:
        """Datagrams due at ``now``; the driver calls this after every input and timer
        until it returns nothing."""

    def get_timer(self, now: float) -> float | None:
        """Absolute time at which :meth:`handle_timer` must run, or None for no timer.
        A deadline at or before ``now`` means "run it now"."""

    def handle_timer(self, now: float) -> None:
        """The deadline of :meth:`get_timer` passed: timeouts, retransmissions, pacing."""

    def next_event(self) -> object | None:
        """The oldest pending event (a frozen dataclass of the core's package) or None."""


def is_datagram_core(obj: object) -> bool:
    """True when ``obj`` has every method of :class:`DatagramCore` (names only, as
    ``isinstance`` with a runtime-checkable Protocol checks)."""
    return isinstance(obj, DatagramCore)


# ---------------------------------------------------------------------- byte streams

#: how a driver names one stream (a connection): any hashable, chosen by the driver
ConnId = Hashable


@dataclass(frozen=True, slots=True)
class StreamWrite:
    """Bytes for stream ``conn``, in order after what was written before."""

    conn: ConnId
    """The stream."""
    data: bytes
    """The bytes."""


@dataclass(frozen=True, slots=True)
class StreamClose:
    """Close stream ``conn`` once what was written to it has left, or at once (``abort``)."""

    conn: ConnId
    """The stream."""
    abort: bool = False
    """Drop what is still unsent and reset the stream (TCP RST): for a peer that takes nothing."""


@runtime_checkable
class StreamCore(Protocol):
    """A sans-IO protocol core driven by byte streams, one timer and the time ``now`` (seconds).

    The driver names each stream (``conn``, hashable) and reports its life with the
    time: opened, bytes in (in order), bytes the transport passed on (``writable``: the
    back-pressure a core needs to stop feeding a reader that does not read), closed.
    After every input and timer it drains :meth:`to_send` (until it returns nothing)
    and carries out :class:`StreamWrite` and :class:`StreamClose`; any other output is
    the core's own (a vmc core's origin fetches) and goes to whatever the driver was
    given for it. Timer and events are :class:`DatagramCore`'s.
    """

    def connection_made(self, conn: ConnId, now: float) -> None:
        """Stream ``conn`` opened at ``now`` (a client connected)."""

    def data_received(self, conn: ConnId, data: bytes, now: float) -> None:
        """Bytes that arrived on ``conn`` at ``now``, in order."""

    def writable(self, conn: ConnId, n: int, now: float) -> None:
        """``n`` more bytes written to ``conn`` left the driver's buffer: the peer takes them."""

    def connection_lost(self, conn: ConnId, now: float) -> None:
        """Stream ``conn`` closed or broke at ``now``; nothing more is written to it."""

    def to_send(self, now: float) -> Sequence[object]:
        """Outputs due at ``now``: :class:`StreamWrite`, :class:`StreamClose`, or the core's own;
        the driver calls this after every input and timer until it returns nothing."""

    def get_timer(self, now: float) -> float | None:
        """Absolute time at which :meth:`handle_timer` must run, or None for no timer."""

    def handle_timer(self, now: float) -> None:
        """The deadline of :meth:`get_timer` passed."""

    def next_event(self) -> object | None:
        """The oldest pending event (a frozen dataclass of the core's package) or None."""


def is_stream_core(obj: object) -> bool:
    """True when ``obj`` has every method of :class:`StreamCore` (names only)."""
    return isinstance(obj, StreamCore)
