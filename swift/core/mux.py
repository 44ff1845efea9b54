"""The swarms served on one UDP socket as one sans-IO core (RFC 7574 figure 1).

:class:`SwarmMux` routes each datagram to the :class:`~swift.core.peer.Peer`
of its swarm, so a driver (``deliverykit.aio.CoreDriver`` in
:class:`swift.aio.node.SwiftNode`) still pumps one
:class:`~deliverykit.protocol.DatagramCore`.  No clock, no socket: the time
comes in as ``now``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from deliverykit.protocol import Address, Outgoing
from swift.core.events import SwiftEvent
from swift.core.peer import Peer
from swift.wire import codec as C

__all__ = ["StorageFailed", "SwarmEvent", "SwarmMux"]


@dataclass(frozen=True, slots=True)
class SwarmEvent:
    """An event of one swarm served by a :class:`SwarmMux`."""

    #: the swarm's index in ``SwarmMux.peers`` (0: the node's own swarm)
    swarm: int
    #: the Peer's event (a :mod:`swift.core.events` dataclass)
    event: SwiftEvent


@dataclass(frozen=True, slots=True)
class StorageFailed:
    """A swarm's storage raised (disk full, I/O error): the mux has stopped."""

    #: the error, as the storage raised it
    error: OSError


class SwarmMux:
    """The swarms served on one UDP socket as one :class:`~deliverykit.protocol.DatagramCore`.

    Handshakes are routed by swarm ID, later datagrams by channel ID; a datagram
    no swarm claims goes to the first, which counts it (malformed, refused,
    unknown channel) as a node with one swarm would (``ppspp seed`` serves two
    by default: SHA-256 and SHA-1).  Sans-IO: the time comes in as ``now``.

    The Peers see ``now + epoch``: live streams sign and judge their munros with
    Unix-time NTP timestamps (RFC 7574 6.1.2), so the node sets ``epoch`` to the
    Unix time at the loop's zero and the Peers' clock reads Unix time while
    ticking with the loop's.  A storage error stops the mux (no input, output
    or timer afterwards) and is reported once as :class:`StorageFailed`.
    """

    #: DATA datagrams per swarm per ``datagrams_to_send`` round
    BUDGET = 64

    def __init__(self, peer: Peer, epoch: float = 0.0) -> None:
        self.peers: list[Peer] = [peer]
        self.epoch = epoch
        #: the storage error that stopped the mux
        self.failed: OSError | None = None
        #: datagrams dropped because the mux had stopped
        self.dropped = 0
        self._events: deque[StorageFailed] = deque()

    def add(self, peer: Peer) -> None:
        self.peers.append(peer)

    def route(self, data: bytes) -> Peer:
        """The swarm a datagram is for (the first when none claims it)."""
        peers = self.peers
        first = peers[0]
        if len(peers) == 1 or len(data) < 4:
            return first
        cid = int.from_bytes(data[:4], "big")
        if cid:
            for p in peers:
                if cid in p.channels:
                    return p
            return first
        try:
            msgs = C.decode_datagram(data, first.ctx).messages
        except C.DecodeError:
            return first
        m0 = msgs[0] if msgs else None
        if not isinstance(m0, C.Handshake) or m0.options.swarm_id is None:
            return first
        sid = m0.options.swarm_id
        for p in peers:
            if p.swarm_id == sid:
                return p
        return first

    def stop(self, error: OSError) -> None:
        """Stop on a local I/O error; reported once as :class:`StorageFailed`."""
        if self.failed is None:
            self.failed = error
            self._events.append(StorageFailed(error))

    # --- DatagramCore ---------------------------------------------------------------
    def datagram_received(self, data: bytes, addr: Address, now: float,
                          arrived: float | None = None) -> None:
        if self.failed is not None:
            self.dropped += 1
            return
        peer = self.route(data)
        epoch = self.epoch
        try:
            # (host, port): an IPv6 socket address's flowinfo and scope_id go
            peer.datagram_received(data, addr[:2] if isinstance(addr, tuple) else addr,
                                   now + epoch,
                                   None if arrived is None else arrived + epoch)
        except OSError as e:  # our storage (disk full, I/O error): stop
            self.stop(e)
        except Exception:  # counted per swarm too (``ppspp`` prints it); the driver logs it
            peer.stats["internal_error"] = peer.stats.get("internal_error", 0) + 1
            raise

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        if self.failed is not None:
            return []
        t = now + self.epoch
        out: list[Outgoing] = []
        try:
            for peer in self.peers:
                out += peer.datagrams_to_send(t, budget=self.BUDGET)
        except OSError as e:  # gathered chunk writes flushed there: disk full
            self.stop(e)
            return []
        return out

    def get_timer(self, now: float) -> float | None:
        if self.failed is not None:
            return None
        t = now + self.epoch
        return min(p.get_timer(t) for p in self.peers) - self.epoch

    def handle_timer(self, now: float) -> None:
        if self.failed is not None:
            return
        t = now + self.epoch
        try:
            for p in self.peers:
                p.handle_timer(t)
        except OSError as e:
            self.stop(e)

    def next_event(self) -> SwarmEvent | StorageFailed | None:
        if self._events:
            return self._events.popleft()
        peers = self.peers
        for i in range(1, len(peers)):  # the other swarms first, as before the mux
            e = peers[i].next_event()
            if e is not None:
                return SwarmEvent(i, e)
        e = peers[0].next_event()
        return None if e is None else SwarmEvent(0, e)
