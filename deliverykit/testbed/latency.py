"""What the namespace testbed adds to a path, measured (``python -m deliverykit.testbed
latency``): the figures the simulator's validation scenarios model of it
(:data:`deliverykit.sim.validate.TESTBED_ACCESS_DELAY` and
:data:`~deliverykit.sim.validate.TESTBED_IGMP_LATENCY`), so anyone can measure them
again on their own host.

Two measurements on one fresh testbed:

- **Round trip**: UDP ping-pong between two asyncio processes (as the protocol
  drivers run) in two hosts on one bridge (two veth crossings each way: four
  access-link crossings a round trip), so it includes the host's processing. The
  one-way delay of one access link is taken as a quarter of the median round trip.
- **IGMP join and leave** through the topology M2C's testbed twins build
  (:func:`m2c.experiments.fairness_testbed.build`): a sender on a bridge with IGMP
  snooping and a querier, a link from it (fast leave on that port) to a second,
  non-snooping bridge holding the receiver. Join: from ``IP_ADD_MEMBERSHIP`` until
  the first packet of a sender sending every ``interval`` s reaches the socket.
  Leave: from ``IP_DROP_MEMBERSHIP`` until the last packet the receiver's interface
  counts (``/proc/net/dev``) before it stays still for ``quiet`` s: the kernel sends the
  IGMPv3 state-change report a few timer ticks after the call, and the bridge prunes
  the port when it gets it. A leave after which packets never stop within
  ``window`` s is counted as unpruned, not as a latency.

Both are wall-clock figures of a shared host: measure on a quiet one (the load
average is reported beside them).
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import struct
import time
from dataclasses import dataclass
from typing import Any, cast

from deliverykit.deadline import within

from .core import Testbed

GROUP = "239.255.77.1"
PORT = 47_001
#: sender's packet spacing in the join/leave measurement, s (its resolution)
INTERVAL = 0.0005
#: leave: the interface must stay still this long for the traffic to count as stopped
QUIET = 0.1


@dataclass(frozen=True, slots=True)
class Samples:
    """Measured values, ms."""

    values_ms: tuple[float, ...]

    def _q(self, q: float) -> float:
        if not self.values_ms:
            return float("nan")
        xs = sorted(self.values_ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    @property
    def median(self) -> float:
        return statistics.median(self.values_ms) if self.values_ms else float("nan")

    @property
    def p10(self) -> float:
        return self._q(0.1)

    @property
    def p90(self) -> float:
        return self._q(0.9)


@dataclass(frozen=True, slots=True)
class Latency:
    """One measurement: round trips, joins, leaves (ms), leaves that did not prune, and
    the host's load average at the start."""

    rtt: Samples
    join: Samples
    leave: Samples
    unpruned: int
    load: tuple[float, float, float]

    @property
    def access_delay_s(self) -> float:
        """One access link's one-way delay: a quarter of the median round trip."""
        return self.rtt.median / 4 / 1000


class _Echo(asyncio.DatagramProtocol):
    def __init__(self, count: int, done: asyncio.Future[int]) -> None:
        self.count, self.done, self.n = count, done, 0
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        assert self.transport is not None
        self.transport.sendto(data, addr)
        self.n += 1
        if self.n >= self.count and not self.done.done():
            self.done.set_result(self.n)


def _echo(port: int, count: int, deadline_s: float) -> int:
    """Answer up to ``count`` UDP pings on an asyncio loop, as the protocol drivers run
    (bounded by ``deadline_s``); how many it answered."""
    async def main() -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        tr, proto = await loop.create_datagram_endpoint(lambda: _Echo(count, done),
                                                        local_addr=("0.0.0.0", port))
        try:
            return await within(done, deadline_s)
        except TimeoutError:
            return proto.n
        finally:
            tr.close()
    return asyncio.run(main())


class _Pinger(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiting: dict[int, tuple[float, asyncio.Future[float]]] = {}

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        (i,) = struct.unpack_from("!I", data)
        got = self.waiting.pop(i, None)
        if got is not None and not got[1].done():
            got[1].set_result((time.monotonic() - got[0]) * 1e3)


def _ping(dst: str, port: int, count: int, spacing: float, timeout: float) -> list[float]:
    """``count`` pings of 64 bytes ``spacing`` s apart from an asyncio loop; round trips
    in ms (lost ones left out)."""
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        tr, proto = await loop.create_datagram_endpoint(_Pinger, remote_addr=(dst, port))
        out: list[float] = []
        try:
            for i in range(count):
                fut: asyncio.Future[float] = loop.create_future()
                proto.waiting[i] = (time.monotonic(), fut)
                tr.sendto(struct.pack("!I", i) + bytes(60))
                try:
                    out.append(await within(fut, timeout))
                except TimeoutError:
                    proto.waiting.pop(i, None)
                await asyncio.sleep(spacing)
        finally:
            tr.close()
        return out
    return asyncio.run(main())


def _send(group: str, port: int, seconds: float, interval: float) -> int:
    """Send small datagrams to ``group`` every ``interval`` s for ``seconds``; how many."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 4)
    end = time.monotonic() + seconds
    n = 0
    try:
        while time.monotonic() < end:
            s.sendto(b"dk-latency", (group, port))
            n += 1
            time.sleep(interval)
    finally:
        s.close()
    return n


def _rx_packets(ifname: str) -> int:
    """The interface's received packets, from /proc/self/net/dev (the calling process's
    namespace; a forked child's /sys still shows the parent's)."""
    with open("/proc/self/net/dev") as f:
        for line in f:
            name, sep, rest = line.partition(":")
            if sep and name.strip() == ifname:
                return int(rest.split()[1])
    raise ValueError(f"no interface {ifname!r} in this namespace")


def _join_leave(group: str, port: int, addr: str, ifname: str, reps: int,
                window: float, quiet: float) -> list[tuple[float | None, float | None]]:
    """``reps`` joins and leaves of ``group`` on ``addr``; per rep the join's and the
    leave's latency in ms (None: no packet within ``window`` s after the join, or the
    traffic did not stop within ``window`` s after the leave)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.setblocking(False)
    mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton(addr))
    out: list[tuple[float | None, float | None]] = []
    try:
        for _ in range(reps):
            t_join = time.monotonic()
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
            join: float | None = None
            while time.monotonic() - t_join < window:
                try:
                    s.recv(64)
                    join = (time.monotonic() - t_join) * 1e3
                    break
                except BlockingIOError:
                    time.sleep(0.0001)
            time.sleep(0.2)
            while True:  # drain what queued while joined
                try:
                    s.recv(64)
                except BlockingIOError:
                    break
            t_leave = time.monotonic()
            s.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)
            last, count = t_leave, _rx_packets(ifname)
            leave: float | None = None
            while time.monotonic() - t_leave < window:
                now, c = time.monotonic(), _rx_packets(ifname)
                if c != count:
                    last, count = now, c
                elif now - last >= quiet:
                    leave = (last - t_leave) * 1e3
                    break
                time.sleep(0.0001)
            out.append((join, leave))
            time.sleep(quiet)
    finally:
        s.close()
    return out


def measure(pings: int = 300, reps: int = 12, window: float = 1.0) -> Latency:
    """Both measurements on a fresh testbed (root); see the module's docstring."""
    if pings < 1 or reps < 1:
        raise ValueError(f"pings and reps must be >= 1, not {pings!r} and {reps!r}")
    load = os.getloadavg()
    with Testbed(prefix="dklat") as tb:
        core = tb.bridge("core")
        edge = tb.bridge("edge", snooping=False, querier=False)
        tb.trunk(core, edge, fastleave=True)
        a, c, b = tb.host("a"), tb.host("c"), tb.host("b")
        pa = tb.attach(a, core, "10.0.77.1/24")
        tb.attach(c, core, "10.0.77.2/24")
        pb = tb.attach(b, edge, "10.0.77.11/24")
        tb.mroute(a, pa.a)
        tb.mroute(b, pb.a)
        tb.settle(core)
        spacing = 0.01
        echo = tb.spawn(c, _echo, PORT, pings, pings * (spacing + 0.5) + 5)
        time.sleep(0.2)
        rtts = tb.run(a, _ping, "10.0.77.2", PORT, pings, spacing, 0.5,
                      timeout=pings * (spacing + 0.5) + 10)
        echo.result(10)
        per_rep = 0.2 + 2 * window + 2 * QUIET
        seconds = 0.5 + reps * per_rep
        sender = tb.spawn(a, _send, GROUP, PORT + 1, seconds, INTERVAL)
        time.sleep(0.3)
        jl = tb.run(b, _join_leave, GROUP, PORT + 1, "10.0.77.11", pb.a.ifname, reps, window,
                    QUIET, timeout=seconds + 10)
        sender.result(seconds + 10)
    joins = tuple(j for j, _ in jl if j is not None)
    leaves = tuple(x for _, x in jl if x is not None)
    return Latency(Samples(tuple(rtts)), Samples(joins), Samples(leaves),
                   sum(x is None for _, x in jl), load)


def report(lat: Latency) -> str:
    """The measurement beside the values the validation scenarios model."""
    from deliverykit.sim.validate import TESTBED_ACCESS_DELAY, TESTBED_IGMP_LATENCY

    def row(name: str, s: Samples, model: str) -> str:
        return (f"{name:<30} {len(s.values_ms):>4} {s.median:>9.3f} {s.p10:>9.3f} "
                f"{s.p90:>9.3f}   {model}")

    lines = [f"load average at the start: {lat.load[0]:.2f} {lat.load[1]:.2f} {lat.load[2]:.2f}"
             " (measure on a quiet host)",
             f"{'ms':<30} {'n':>4} {'median':>9} {'p10':>9} {'p90':>9}   modelled",
             row("UDP round trip, one bridge", lat.rtt,
                 f"4 x {TESTBED_ACCESS_DELAY * 1e3:.3f} = {4 * TESTBED_ACCESS_DELAY * 1e3:.3f}"),
             row("IGMP join, to first packet", lat.join, f"{TESTBED_IGMP_LATENCY * 1e3:.3f}"),
             row("IGMP leave, to last packet", lat.leave, f"{TESTBED_IGMP_LATENCY * 1e3:.3f}"),
             f"one access link one way (round trip / 4): {lat.access_delay_s * 1e3:.3f} ms",
             f"leaves after which traffic did not stop: {lat.unpruned}"]
    return "\n".join(lines)
