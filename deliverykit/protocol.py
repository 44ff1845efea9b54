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
simulation.  ``addr`` is whatever the transport names a remote by: an
``(ip, port)`` tuple on UDP, the same tuple in the simulator.

One optional extension: a core that measures one-way delay may take the
datagram's kernel arrival time as ``datagram_received(data, addr, now,
arrived=None)`` (``arrived`` on the driver's clock, at or before ``now``);
:class:`~deliverykit.aio.CoreDriver` passes it only when its endpoint was asked
for kernel timestamps (``BatchedUDPEndpoint.enable_timestamps``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Address", "DatagramCore", "Outgoing", "is_datagram_core"]

#: a transport address: ``(ip, port)`` on UDP and in the simulator; hashable
Address = Hashable
#: one datagram to send and where to
Outgoing = tuple[bytes, Address]


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
