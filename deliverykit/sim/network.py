"""The network model: access links, drop-tail queues, loss, pair delays, bottlenecks, multicast.

A unicast datagram from node S to node D crosses, in order::

    S.up  ->  [shared bottlenecks between S's and D's groups]  ->  pair delay  ->  D.down

Each :class:`Link` serialises at its rate (``size * 8 / rate`` seconds, the
size counting the scenario's header ``overhead``), queues in FIFO order behind
what it is still sending, drops the tail when the queue (bytes or packets, the
packet in service included, as tbf counts) would exceed its limit, then adds
its propagation delay; random loss (Bernoulli or Gilbert-Elliott) strikes
after the queue, so a lost packet used the link.  Hence LEDBAT sees queueing
delay and loss-based control sees drop-tail loss, as on the testbed.  A link
with a ``burst`` is a token bucket instead, as tc-tbf: a packet leaves once the
bucket (refilled at the rate, at most ``burst`` bytes, full at the start) holds
its size, so after an idle spell up to ``burst`` bytes leave at once; over time
the rate is the same.

Every hop is entered by an event at the time the packet reaches it, so a
shared queue serves packets in their true arrival order.  A multicast datagram
crosses the sender's uplink once and is copied at the "router" (the time it
leaves the uplink) to every member whose join has taken effect and whose leave
has not; the sender gets no copy (IP_MULTICAST_LOOP off).  Members behind the
same chain of shared bottlenecks get one copy through it (a multicast router
forwards a packet once per link, whatever the number of receivers behind it),
copied to each of them only at its end, the edge: a datagram to R members
costs O(R) events, and a shared bottleneck queues it once.

A scenario whose nodes never leave may set :attr:`Network.direct_downlinks`: a
unicast datagram to a node whose downlink has no rate and no loss (nothing can
queue or drop it there) then takes one event, at its arrival, instead of one
when it reaches the downlink and one when it arrives.  The arrival time (the
same float sum), the fates and the order of events are those of the two-event
path; the downlink counts the datagram when it arrives rather than when it
enters, which differs only in a run stopped at ``until`` with datagrams less
than one downlink delay from their destination.
"""

from __future__ import annotations

import enum
import hashlib
import random
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from deliverykit.protocol import Address, SimAddr
from deliverykit.sim.scenario import (
    LinkSpec,
    LossKind,
    LossSpec,
    MulticastGroupSpec,
    QueueUnit,
    Scenario,
)
from deliverykit.sim.scheduler import Scheduler

__all__ = ["Address", "Fate", "Link", "Network", "SimAddr", "node_address"]

#: ``deliver(node_name, data, source_address)`` at the current virtual time
Deliver = Callable[[str, bytes, SimAddr], None]


class Fate(enum.IntEnum):
    """What became of one datagram copy (counted in :attr:`Network.fates`)."""

    DELIVERED = 0
    #: the drop-tail queue was full
    QUEUE_DROP = 1
    #: random loss on a link
    LOSS = 2
    #: no node or group has that address
    NO_ROUTE = 3
    #: the destination has left (or not yet arrived)
    ABSENT = 4


#: seconds under which two virtual times count as equal (1 ns; float sums drift)
EPSILON = 1e-9


def node_address(index: int, port: int) -> SimAddr:
    """Address of the ``index``-th node: 10.x.y.z (never .0 or .255), ``port``."""
    n = index + 1
    return (f"10.{n // 64516 % 256}.{n // 254 % 254}.{n % 254 + 1}", port)


class _Loss:
    """Per-link random loss drawing from the link's own random sub-stream."""

    __slots__ = ("bad", "kind", "loss_bad", "loss_good", "p", "p_bg", "p_gb", "rng")

    def __init__(self, spec: LossSpec, rng: random.Random) -> None:
        self.kind = spec.kind
        self.rng = rng
        self.p = spec.p
        self.p_gb, self.p_bg = spec.p_gb, spec.p_bg
        self.loss_good, self.loss_bad = spec.loss_good, spec.loss_bad
        self.bad = False

    def lost(self) -> bool:
        if self.kind is LossKind.BERNOULLI:
            return self.rng.random() < self.p
        # Gilbert-Elliott: move the chain one packet, then draw in the new state
        r = self.rng.random
        if self.bad:
            if r() < self.p_bg:
                self.bad = False
        elif r() < self.p_gb:
            self.bad = True
        return r() < (self.loss_bad if self.bad else self.loss_good)


class Link:
    """One direction of a link (see the module docstring)."""

    __slots__ = (
        "_queue",
        "backlog",
        "burst",
        "busy_until",
        "bytes",
        "count_packets",
        "delay",
        "limit",
        "loss",
        "losses",
        "max_backlog",
        "name",
        "queue_drops",
        "rate",
        "sent",
        "spec",
        "tokens",
    )

    def __init__(self, name: str, spec: LinkSpec, rng: random.Random | None) -> None:
        """``rng``: the link's random sub-stream, needed only by a link with loss."""
        self.name = name
        self.spec = spec
        #: bytes per second (None: no serialisation)
        self.rate = spec.rate / 8.0 if spec.rate is not None else None
        self.delay = spec.delay
        self.limit = spec.queue
        self.count_packets = spec.queue_unit is QueueUnit.PACKETS
        self.loss: _Loss | None = None
        if spec.loss.kind is not LossKind.NONE:
            if rng is None:
                raise ValueError(f"link {name} has loss and needs its random stream")
            self.loss = _Loss(spec.loss, rng)
        #: token bucket depth in bytes (None: a pure serialiser), and the tokens
        #: left at ``busy_until`` (the bucket starts full, as tbf's)
        self.burst = float(spec.burst) if spec.burst is not None else None
        self.tokens = self.burst or 0.0
        self.busy_until = 0.0
        #: (time the packet's last bit leaves, its size in queue units)
        self._queue: deque[tuple[float, int]] = deque()
        self.backlog = 0
        self.sent = 0
        self.bytes = 0
        self.queue_drops = 0
        self.losses = 0
        self.max_backlog = 0

    def transmit(self, now: float, size: int) -> float:
        """Offer a packet of ``size`` bytes at ``now``: the time it reaches the far
        end, or a negative number: ``-Fate.QUEUE_DROP`` or ``-Fate.LOSS``."""
        rate = self.rate
        if rate is None:
            done = now
        else:
            q = self._queue
            gone = now + EPSILON  # float sums: a packet done "at now" has left
            while q and q[0][0] <= gone:
                self.backlog -= q.popleft()[1]
            units = 1 if self.count_packets else size
            if self.limit is not None and self.backlog + units > self.limit:
                self.queue_drops += 1
                return -float(Fate.QUEUE_DROP)
            busy = self.busy_until
            start = busy if busy > now else now  # max(now, busy), without the call
            burst = self.burst
            if burst is None:
                done = start + size / rate
            else:  # tbf: leave once the bucket holds the packet (a packet over the
                # bucket waits for its size, where tbf would drop it: the scenario's error)
                tokens = self.tokens + (start - busy) * rate
                if tokens > burst:
                    tokens = burst
                if tokens >= size:
                    done = start
                    self.tokens = tokens - size
                else:
                    done = start + (size - tokens) / rate
                    self.tokens = 0.0
            self.busy_until = done
            q.append((done, units))
            backlog = self.backlog = self.backlog + units
            if backlog > self.max_backlog:
                self.max_backlog = backlog
        self.sent += 1
        self.bytes += size
        if self.loss is not None and self.loss.lost():
            self.losses += 1
            return -float(Fate.LOSS)
        return done + self.delay

    def queueing_delay(self, now: float) -> float:
        """Seconds a packet offered at ``now`` would wait before its first bit leaves."""
        return max(0.0, self.busy_until - now)


#: ``receiver(data, source_address)``: a present node's host takes a datagram now
Receiver = Callable[[bytes, SimAddr], None]


@dataclass(slots=True)
class _Node:
    name: str
    index: int
    group: str
    addr: SimAddr
    up: Link
    down: Link
    present: bool = False
    #: set while the node is present by a driver that takes its datagrams directly
    #: (:class:`deliverykit.sim.Simulation`); None: :attr:`Network.deliver` by name
    receiver: Receiver | None = None


@dataclass(slots=True)
class _Group:
    spec: MulticastGroupSpec
    #: node name -> (join effective, leave effective or None)
    members: dict[str, tuple[float, float | None]] = field(default_factory=dict)


class Network:
    """Moves datagrams between the scenario's nodes in virtual time."""

    def __init__(self, sched: Scheduler, scenario: Scenario, deliver: Deliver,
                 trace: bool = False) -> None:
        self.sched = sched
        self.scenario = scenario
        self.deliver = deliver
        self.overhead = scenario.overhead
        self.nodes: dict[str, _Node] = {}
        #: keyed by any Address a core may name (only SimAddr keys exist: another
        #: address is no route)
        self.by_addr: dict[Address, _Node] = {}
        for i, spec in enumerate(scenario.nodes):
            addr = node_address(i, scenario.port)
            n = _Node(spec.name, i, spec.group, addr,
                      self._link(f"{spec.name}.up", spec.up, f"link/{spec.name}.up"),
                      self._link(f"{spec.name}.down", spec.down, f"link/{spec.name}.down"))
            self.nodes[spec.name] = n
            self.by_addr[addr] = n
        self.groups: dict[Address, _Group] = {g.addr: _Group(g) for g in scenario.multicast}
        self._pair: dict[frozenset[str], float] = {}
        for pd in scenario.pair_delays:
            if pd.delay < 0:
                raise ValueError(f"pair delay {pd.a}-{pd.b} is negative")
            self._pair[frozenset((pd.a, pd.b))] = pd.delay
        #: (from group, to group) -> the bottleneck links crossed that way
        self._bneck: dict[tuple[str, str], list[Link]] = {}
        self.bottlenecks: list[Link] = []
        for b in scenario.bottlenecks:
            fwd = Link(f"{b.name}.ab", b.link, sched.stream(f"bottleneck/{b.name}.ab"))
            rev = Link(f"{b.name}.ba", b.link, sched.stream(f"bottleneck/{b.name}.ba"))
            self.bottlenecks += [fwd, rev]
            for ga in b.a:
                for gb in b.b:
                    self._bneck.setdefault((ga, gb), []).append(fwd)
                    self._bneck.setdefault((gb, ga), []).append(rev)
        self._path: dict[tuple[int, int], tuple[float, tuple[Link, ...]]] = {}
        self.fates = [0] * len(Fate)
        #: one event per datagram to a node with a plain downlink (module docstring);
        #: nodes may then not leave
        self.direct_downlinks = False
        #: (sender, destination address) -> (sender node, target node, path delay,
        #: downlink delay) of a route :meth:`send` found to take the one-event path; used
        #: only while :attr:`direct_downlinks` (nothing it depends on changes then: the
        #: scenario's links, groups and delays are fixed and nodes may not leave)
        self._direct_routes: dict[tuple[str, Address], tuple[_Node, _Node, float, float]] = {}
        self._trace = hashlib.sha256() if trace else None
        self._pack = struct.Struct("<dHHIB").pack

    def _link(self, name: str, spec: LinkSpec, stream: str) -> Link:
        """A node's access link; its random sub-stream only when it has loss (deriving
        one is a SHA-256 and a Mersenne Twister seeding per link, and a stream depends
        on the seed and its name alone, so skipping one changes no other link's numbers)."""
        rng = self.sched.stream(stream) if spec.loss.kind is not LossKind.NONE else None
        return Link(name, spec, rng)

    # -- membership -----------------------------------------------------------------

    def set_present(self, name: str, present: bool, receiver: Receiver | None = None) -> None:
        """A node arrives (True) or leaves (False); datagrams to an absent node are dropped.
        ``receiver``: what takes the node's datagrams while it is present (default:
        :attr:`deliver` with its name)."""
        node = self.nodes[name]
        if not present and self.direct_downlinks:
            raise ValueError(f"{name} leaves, but direct_downlinks needs nodes that stay")
        node.present = present
        node.receiver = receiver if present else None

    def address(self, name: str) -> SimAddr:
        return self.nodes[name].addr

    def join(self, name: str, group: SimAddr) -> None:
        """``name`` asks to join multicast ``group`` now (effective after the join latency)."""
        g = self.groups[group]
        now = self.sched.now
        cur = g.members.get(name)
        if cur is not None and cur[1] is None:
            return  # already a member
        g.members[name] = (now + g.spec.join_latency, None)

    def leave(self, name: str, group: SimAddr) -> None:
        """``name`` leaves ``group`` now (traffic still arrives for the leave latency)."""
        g = self.groups[group]
        cur = g.members.get(name)
        if cur is not None and cur[1] is None:
            g.members[name] = (cur[0], self.sched.now + g.spec.leave_latency)

    # -- sending --------------------------------------------------------------------

    def _record(self, fate: Fate, src: _Node, dst_index: int, size: int) -> None:
        self.fates[fate] += 1
        if self._trace is not None:
            self._trace.update(
                self._pack(self.sched.now, src.index, dst_index & 0xFFFF, size, fate)
            )

    def trace_hash(self) -> str:
        """SHA-256 over every datagram's fate, time, endpoints and size (needs ``trace=True``)."""
        if self._trace is None:
            raise ValueError("this network was built without trace=True")
        return self._trace.hexdigest()

    def send(self, src_name: str, data: bytes, dst: Address) -> None:
        """``src_name`` sends ``data`` to address ``dst`` now."""
        if self.direct_downlinks:
            route = self._direct_routes.get((src_name, dst))
            if route is not None:  # what the lines below decide for it, remembered
                frm, to, pair, down_delay = route
                size = len(data) + self.overhead
                t = frm.up.transmit(self.sched.now, size)
                if t < 0:
                    self._record(Fate(int(-t)), frm, to.index, size)
                else:
                    self.sched.at(t + pair + down_delay, self._arrive_direct, frm, to, data,
                                  size)
                return
        src = self.nodes[src_name]
        size = len(data) + self.overhead
        group = self.groups.get(dst) if self.groups else None
        target = self.by_addr.get(dst) if group is None else None
        if group is None and target is None:
            self._record(Fate.NO_ROUTE, src, 0xFFFF, size)
            return
        t = src.up.transmit(self.sched.now, size)
        if t < 0:
            self._record(Fate(int(-t)), src, 0xFFFF if target is None else target.index, size)
            return
        if target is not None:
            p = self._path.get((src.index, target.index)) or self._path_of(src, target)
            if p[1]:
                self._route(src, target, data, size, t)
                return
            # _route without bottlenecks (the same event, the same time)
            down = target.down
            if self.direct_downlinks and down.rate is None and down.loss is None and \
                    target.present:
                self._direct_routes[(src_name, dst)] = (src, target, p[0], down.delay)
                self.sched.at(t + p[0] + down.delay, self._arrive_direct, src, target, data,
                              size)
            else:
                self.sched.at(t + p[0], self._downlink, src, target, data, size)
        else:
            assert group is not None
            self.sched.at(t, self._fan_out, src, group, data, size)

    def _fan_out(self, src: _Node, group: _Group, data: bytes, size: int) -> None:
        t = self.sched.now
        now = t + EPSILON  # a change that takes effect at now has
        shared: dict[tuple[Link, ...], list[_Node]] = {}
        for name, (joined, left) in group.members.items():
            if name == src.name or joined > now or (left is not None and left <= now):
                continue
            dst = self.nodes[name]
            delay, links = self._path_of(src, dst)
            if links:
                shared.setdefault(links, []).append(dst)
            else:
                self.sched.at(t + delay, self._downlink, src, dst, data, size)
        for links, dsts in shared.items():
            self.sched.at(t, self._shared_hop, src, dsts, data, size, links, 0)

    def _shared_hop(self, src: _Node, dsts: list[_Node], data: bytes, size: int,
                    links: tuple[Link, ...], i: int) -> None:
        """One multicast copy through shared bottleneck ``links[i]`` for every member in
        ``dsts``; after the last one it is copied to each member's pair delay and downlink."""
        t = links[i].transmit(self.sched.now, size)
        if t < 0:
            for dst in dsts:  # the copy each member would have had
                self._record(Fate(int(-t)), src, dst.index, size)
        elif i + 1 < len(links):
            self.sched.at(t, self._shared_hop, src, dsts, data, size, links, i + 1)
        else:
            for dst in dsts:
                self.sched.at(t + self._path_of(src, dst)[0], self._downlink, src, dst, data,
                              size)

    def _path_of(self, src: _Node, dst: _Node) -> tuple[float, tuple[Link, ...]]:
        key = (src.index, dst.index)
        p = self._path.get(key)
        if p is None:
            pair = self._pair
            delay = pair.get(frozenset((src.name, dst.name)))
            if delay is None:
                delay = pair.get(frozenset((src.group, dst.group)), 0.0)
            links = tuple(self._bneck.get((src.group, dst.group), ()))
            p = self._path[key] = (delay, links)
        return p

    def _route(self, src: _Node, dst: _Node, data: bytes, size: int, t: float) -> None:
        """The packet left ``src``'s uplink at ``t``: on through the bottlenecks to ``dst``."""
        delay, links = self._path_of(src, dst)
        if links:
            self.sched.at(t, self._hop, src, dst, data, size, links, 0, delay)
        else:
            self.sched.at(t + delay, self._downlink, src, dst, data, size)

    def _hop(self, src: _Node, dst: _Node, data: bytes, size: int, links: tuple[Link, ...],
             i: int, delay: float) -> None:
        t = links[i].transmit(self.sched.now, size)
        if t < 0:
            self._record(Fate(int(-t)), src, dst.index, size)
        elif i + 1 < len(links):
            self.sched.at(t, self._hop, src, dst, data, size, links, i + 1, delay)
        else:
            self.sched.at(t + delay, self._downlink, src, dst, data, size)

    def _downlink(self, src: _Node, dst: _Node, data: bytes, size: int) -> None:
        if not dst.present:
            self._record(Fate.ABSENT, src, dst.index, size)
            return
        t = dst.down.transmit(self.sched.now, size)
        if t < 0:
            self._record(Fate(int(-t)), src, dst.index, size)
        else:
            self.sched.at(t, self._arrive, src, dst, data, size)

    def _arrive(self, src: _Node, dst: _Node, data: bytes, size: int) -> None:
        if not dst.present:
            self._record(Fate.ABSENT, src, dst.index, size)
            return
        self._record(Fate.DELIVERED, src, dst.index, size)
        if dst.receiver is not None:
            dst.receiver(data, src.addr)
        else:
            self.deliver(dst.name, data, src.addr)

    def _arrive_direct(self, src: _Node, dst: _Node, data: bytes, size: int) -> None:
        """:meth:`_downlink` and :meth:`_arrive` in one event, for a downlink with no
        rate and no loss to a node that was present when the datagram was sent and
        cannot have left since (:attr:`direct_downlinks`)."""
        down = dst.down
        down.sent += 1
        down.bytes += size
        self.fates[Fate.DELIVERED] += 1
        if self._trace is not None:
            self._trace.update(self._pack(self.sched.now, src.index, dst.index & 0xFFFF, size,
                                          Fate.DELIVERED))
        if dst.receiver is not None:
            dst.receiver(data, src.addr)
        else:
            self.deliver(dst.name, data, src.addr)

    # -- statistics -----------------------------------------------------------------

    def links(self) -> list[Link]:
        out = []
        for n in self.nodes.values():
            out += [n.up, n.down]
        return out + self.bottlenecks

    def summary(self) -> dict[str, int]:
        """Datagram copies by fate."""
        return {f.name.lower(): self.fates[f] for f in Fate}
