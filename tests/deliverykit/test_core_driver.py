"""CoreDriver: any DatagramCore pumped over real loopback UDP (deliverykit.aio)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

import pytest

from deliverykit.aio import CoreDriver, open_core, open_udp
from deliverykit.errors import DecodeError
from deliverykit.protocol import is_datagram_core


@dataclass(frozen=True, slots=True)
class Echoed:
    """The core answered one datagram."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Ticked:
    """The core's timer ran."""

    at: float


class EchoTimerCore:
    """A tiny sans-IO core: echoes b"re:"+data, refuses b"bad" (DecodeError) and
    b"boom" (a bug: RuntimeError), and ticks every ``period`` seconds ``ticks`` times."""

    def __init__(self, period: float = 0.02, ticks: int = 0) -> None:
        self.period = period
        self.ticks_left = ticks
        self.next_tick: float | None = None
        self.out: list[tuple[bytes, Any]] = []
        self.events: deque[object] = deque()
        self.handle_timer_calls: list[tuple[float, float]] = []  # (now, deadline)
        self.timer_calls_before_deadline = 0

    def start(self, now: float) -> None:
        if self.ticks_left:
            self.next_tick = now + self.period

    def datagram_received(self, data: bytes, addr: Any, now: float) -> None:
        if data == b"bad":
            raise DecodeError("malformed test datagram")
        if data == b"boom":
            raise RuntimeError("a bug in the core")
        self.out.append((b"re:" + data, addr))
        self.events.append(Echoed(data))

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        out, self.out = self.out, []
        return out

    def get_timer(self, now: float) -> float | None:
        return self.next_tick

    def handle_timer(self, now: float) -> None:
        assert self.next_tick is not None
        self.handle_timer_calls.append((now, self.next_tick))
        if now < self.next_tick:
            self.timer_calls_before_deadline += 1
            return
        self.events.append(Ticked(now))
        self.ticks_left -= 1
        self.next_tick = now + self.period if self.ticks_left > 0 else None

    def next_event(self) -> object | None:
        return self.events.popleft() if self.events else None


async def _wait_for(pred, timeout=5.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.005)


def test_the_test_core_is_a_datagram_core():
    assert is_datagram_core(EchoTimerCore())


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_datagrams_in_are_answered_and_events_reach_on_event(host):
    core = EchoTimerCore()
    events: list[object] = []
    got: list[bytes] = []
    async with open_core(core, (host, 0), on_event=events.append) as driver, \
            open_udp((host, 0), lambda b, now: got.extend(d for d, _ in b)) as client:
        n = 200  # far below the 4 MiB socket buffers: loopback loses none of these
        client.send_many((b"%d" % i, driver.transport.local_addr[:2]) for i in range(n))
        await _wait_for(lambda: len(got) >= n)
    assert client.stats["tx_dropped"] == driver.transport.stats["tx_dropped"] == 0
    assert sorted(got) == sorted(b"re:%d" % i for i in range(n))
    echoed = [e.data for e in events if isinstance(e, Echoed)]
    assert sorted(echoed) == sorted(b"%d" % i for i in range(n))
    stats = driver.stats
    assert stats["datagrams_in"] == stats["datagrams_out"] == stats["events"] == n


async def test_timer_fires_at_its_deadline_and_rearms_one_handle_at_a_time():
    loop = asyncio.get_running_loop()
    core = EchoTimerCore(period=0.02, ticks=5)
    events: list[object] = []
    async with open_core(core, ("127.0.0.1", 0), on_event=events.append) as driver:
        core.start(driver.now)
        driver.kick()
        # exactly one asyncio handle is armed, for the core's deadline
        assert driver._timer is not None and driver._timer.when() == core.next_tick
        await _wait_for(lambda: core.ticks_left == 0)
        await asyncio.sleep(0.05)  # nothing more may run once the core wants no timer
        assert driver._timer is None
    ticks = [e for e in events if isinstance(e, Ticked)]
    assert len(ticks) == 5
    # each run came at or after its deadline, never before (no spurious early runs),
    # and one run per deadline: no busy loop
    assert core.timer_calls_before_deadline == 0
    assert len(core.handle_timer_calls) == 5
    assert all(now >= deadline for now, deadline in core.handle_timer_calls)
    assert driver.stats["timers"] == 5
    assert all(t.at <= loop.time() for t in ticks)


async def test_a_moved_deadline_replaces_the_armed_handle():
    core = EchoTimerCore(period=60.0, ticks=1)
    async with open_core(core, ("127.0.0.1", 0)) as driver:
        core.start(driver.now)
        driver.kick()
        first = driver._timer
        assert first is not None
        core.next_tick = driver.now + 0.01  # the core now wants its timer sooner
        driver.kick()
        assert first.cancelled()
        await _wait_for(lambda: core.ticks_left == 0)
    assert len(core.handle_timer_calls) == 1


@pytest.mark.parametrize("bad", [b"bad", b"boom"])
async def test_a_core_raising_on_a_datagram_is_counted_and_the_rest_goes_on(bad):
    core = EchoTimerCore()
    got: list[bytes] = []
    async with open_core(core, ("127.0.0.1", 0)) as driver, \
            open_udp(("127.0.0.1", 0), lambda b, now: got.extend(d for d, _ in b)) as client:
        dst = driver.transport.local_addr
        client.send_many([(b"one", dst), (bad, dst), (b"two", dst)])
        await _wait_for(lambda: len(got) == 2)
        client.sendto(b"three", dst)
        await _wait_for(lambda: len(got) == 3)
        assert driver.stats["core_errors"] == 1
        assert driver.transport.stats["handler_errors"] == 1
    assert got == [b"re:one", b"re:two", b"re:three"]


async def test_close_cancels_the_timer_and_ignores_later_input():
    core = EchoTimerCore(period=0.01, ticks=100)
    driver = CoreDriver(core)
    core.start(driver.now)
    driver.kick()
    handle = driver._timer
    assert handle is not None
    driver.close()
    assert handle.cancelled() and driver.closed
    await asyncio.sleep(0.05)
    assert core.handle_timer_calls == []
    driver.on_batch([(b"late", ("127.0.0.1", 9))], driver.now)
    driver.kick()
    assert core.out == [] and driver._timer is None


async def test_attach_after_construction_sends_what_the_core_queued():
    core = EchoTimerCore()
    driver = CoreDriver(core)
    got: list[bytes] = []
    async with open_udp(("127.0.0.1", 0), lambda b, now: got.extend(d for d, _ in b)) as rx, \
            open_udp(("127.0.0.1", 0), driver.on_batch) as ep:
        core.out.append((b"queued", rx.local_addr))
        driver.kick()  # no transport yet: the datagram waits in the core
        assert core.out
        driver.attach(ep)
        driver.kick()
        await _wait_for(lambda: got == [b"queued"])
    driver.close()


class FlakyTimerCore(EchoTimerCore):
    """Its timer raises on the first run (a bug), then ticks as usual."""

    def handle_timer(self, now: float) -> None:
        if not self.handle_timer_calls:
            self.handle_timer_calls.append((now, -1.0))
            self.next_tick = now + self.period
            raise RuntimeError("a bug in the timer")
        super().handle_timer(now)


async def test_a_timer_that_raises_is_counted_and_rearmed():
    core = FlakyTimerCore(period=0.01, ticks=2)
    async with open_core(core, ("127.0.0.1", 0)) as driver:
        core.start(driver.now)
        driver.kick()
        await _wait_for(lambda: core.ticks_left == 0)
        assert driver.stats["core_errors"] == 1
        assert driver.transport.stats["handler_errors"] == 1
    assert len(core.handle_timer_calls) == 3  # the failed run, then both ticks


class StuckCore(EchoTimerCore):
    """A broken core whose timer is always due: it never moves its deadline on."""

    def get_timer(self, now: float) -> float | None:
        return self.next_tick

    def handle_timer(self, now: float) -> None:
        self.handle_timer_calls.append((now, now))


async def test_a_core_whose_timer_is_always_due_is_held_back_not_spun():
    from deliverykit.aio import MAX_SAME_TIMERS, STUCK_BACKOFF

    core = StuckCore()
    async with open_core(core, ("127.0.0.1", 0)) as driver:
        core.next_tick = driver.now
        driver.kick()
        await _wait_for(lambda: len(core.handle_timer_calls) > MAX_SAME_TIMERS + 20)
        assert driver.stats["stuck_timers"] > 0
    # past the guard, every run waited STUCK_BACKOFF after the one before
    late = [now for now, _ in core.handle_timer_calls[MAX_SAME_TIMERS + 2:]]
    assert all(b - a >= STUCK_BACKOFF * 0.999 for a, b in zip(late, late[1:]))


async def test_swift_node_is_one_core_on_the_driver(tmp_path):
    """swift's node is a CoreDriver pumping one DatagramCore (its SwarmMux) on a
    BatchedUDPEndpoint: the driver's counters are the endpoint's datagrams."""
    import os

    from swift.aio.node import SwarmMux, downloader, seeder

    data = os.urandom(200 * 1024 + 77)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    loop = asyncio.get_running_loop()
    async with seeder(str(src)) as s, downloader(s.peer.swarm_id, str(tmp_path / "out.bin")) as d:
        for node in (s, d):
            assert isinstance(node.driver, CoreDriver) and isinstance(node.mux, SwarmMux)
            assert node.driver.core is node.mux and is_datagram_core(node.mux)
            assert node.driver.transport is node.endpoint
            # the swarms' clock ticks with the loop's (shifted to Unix time for live signatures)
            assert node.now - loop.time() == pytest.approx(node.mux.epoch, abs=1e-3)
        d.connect(s.addr)
        assert await d.wait_complete(60)
        for node in (s, d):
            assert node.driver.stats["datagrams_in"] == node.endpoint.stats["rx_packets"] > 0
            assert node.driver.stats["datagrams_out"] >= node.endpoint.stats["tx_packets"] > 0
            assert node.driver.stats["core_errors"] == 0
    assert (tmp_path / "out.bin").read_bytes() == data


class SourceCore(EchoTimerCore):
    """Has ``n`` numbered datagrams to send, 64 per datagrams_to_send call."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.todo = list(range(n))
        self.calls = 0

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        self.calls += 1
        out, self.todo = self.todo[:64], self.todo[64:]
        return [(b"%d" % i, None) for i in out]


async def test_draining_pauses_on_a_send_backlog_and_resumes_when_it_clears():
    """A datagram socket whose receiver is not reading fills up (a Unix datagram
    pair blocks where loopback UDP would drop): the driver stops taking datagrams
    from the core, so its endpoint's backlog stays small and nothing is dropped;
    once the receiver reads, on_drain resumes the driver until the core is empty."""
    import socket

    from deliverykit.aio import BatchedUDPEndpoint

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setblocking(False)
    b.setblocking(False)
    got: list[bytes] = []
    core = SourceCore(5000)
    driver = CoreDriver(core)
    tx = BatchedUDPEndpoint(a, driver.on_batch, max_backlog=1000)
    rx = BatchedUDPEndpoint(b, lambda batch, now: got.extend(d for d, _ in batch))
    try:
        rx.pause_reading()
        driver.attach(tx)
        driver.kick()
        assert tx.backlogged and driver.stats["backlogged"] == 1
        assert core.todo  # the core still holds what the socket cannot take
        assert tx.stats["tx_dropped"] == 0
        rx.resume_reading()
        await _wait_for(lambda: len(got) == 5000)
    finally:
        driver.close()
        tx.close()
        rx.close()
    assert got == [b"%d" % i for i in range(5000)]
    assert tx.stats["tx_dropped"] == 0 and not core.todo


def _kernel_stamps_live(sock: Any) -> bool:
    """True once the kernel stamps datagrams as they arrive.  Linux turns
    receive timestamps on for the whole stack lazily (net_enable_timestamp
    defers the switch to a work queue when no socket had them on); until then
    a datagram gets its stamp when it is read, i.e. the read time.  ``sock`` has
    SO_TIMESTAMPNS on and keeps the switch on while it is open."""
    import socket
    import time

    from swift._fast import recv_batch_ts

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"probe", sock.getsockname())
        time.sleep(0.05)  # the probe waits 50 ms in the buffer
        got = recv_batch_ts(sock, 4, 64)
    return bool(got) and 0 < got[0][2] < time.time() - 0.04


async def test_swift_kernel_arrival_times_reach_the_peer_on_its_clock():
    """A datagram that waited in the socket: the Peer's arrival time is the
    kernel's (before it waited), moved onto the Peer's clock, not the later
    time the driver read it (8.7 delay samples leave out our loop's wait)."""
    import os
    import socket

    from swift.aio.node import SwiftNode
    from swift.core.config import PeerConfig
    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer

    # a socket of our own holds the kernel's timestamping switch on (and waits until it is:
    # bounded), so the datagram below is stamped when it arrives (see _kernel_stamps_live)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as keeper:
        keeper.bind(("127.0.0.1", 0))
        keeper.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_TIMESTAMPNS", 35), 1)
        for _ in range(100):
            if _kernel_stamps_live(keeper):
                break
        else:
            pytest.fail("the kernel never turned receive timestamps on (SO_TIMESTAMPNS)")

        data = os.urandom(4096)
        tree = MerkleTree.build([data[i:i + 1024] for i in range(0, 4096, 1024)], chunk_size=1024)
        peer = Peer(Content.seeded(tree, MemoryStorage(data)), PeerConfig(delay_from_kernel=True))
        async with SwiftNode(peer) as node:
            assert node.endpoint is not None and node.endpoint.timestamps
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                node.endpoint.pause_reading()
                sent = node.now
                s.sendto(b"\x00\x00\x00\x00garbage", node.addr)
                await asyncio.sleep(0.2)  # the datagram waits in the socket buffer
                resumed = node.now
                node.endpoint.resume_reading()
                await _wait_for(
                    lambda: node.driver is not None and node.driver.stats["datagrams_in"] == 1)
    # the kernel's time, moved from the wall clock onto the loop's: the two clocks are read
    # at slightly different moments, so allow a few ms of skew on a loaded machine, far
    # less than the 200 ms the datagram waited (the read time would be past `resumed`)
    assert sent - 0.02 <= peer._arrived < resumed - 0.1
