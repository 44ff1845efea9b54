"""Drive :class:`~deliverykit.protocol.DatagramCore` objects in virtual time.

The simulator's twin of an asyncio driver (``deliverykit.aio.CoreDriver``): a
datagram reaches the core at its arrival time, the core's timer runs at its
:meth:`get_timer` deadline, and after every input the driver drains
:meth:`datagrams_to_send` into the network and collects :meth:`next_event`.
No protocol logic lives here.

A protocol adapter (e.g. :mod:`swift.sim`) implements :class:`Application`:
it makes the core of each node when the node arrives, starts it (a swift
leecher connects to the seeder) and reads the events.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from deliverykit.protocol import DatagramCore, Outgoing, SimAddr
from deliverykit.sim.network import Network
from deliverykit.sim.scenario import NodeSpec, Scenario
from deliverykit.sim.scheduler import Scheduler

__all__ = ["QUIET_COUNTER", "Application", "Host", "QuietCore", "RunStats", "Simulation",
           "StuckCore"]

#: datagrams_to_send rounds per input, as the asyncio driver bounds its flush loop
MAX_FLUSH_ROUNDS = 64
#: timer runs of one core at one virtual instant before the run is stopped as stuck
MAX_SAME_TIME_TIMERS = 1000
#: a core may say what it queued: an ``int`` attribute of this name that grows by one
#: for every datagram and every event it queues, on a core whose timer a received
#: datagram never moves (corecast's ETR and clients).  After a datagram that queued
#: nothing :meth:`Host.deliver` does not flush (a flush would send nothing, hand no
#: event and keep the timer), and after one that queued only datagrams it sends them
#: without asking again for datagrams, events or the timer; an optional shortcut, the
#: run is the same
QUIET_COUNTER = "outputs_queued"


class QuietCore(DatagramCore, Protocol):
    """A core with the counter :data:`QUIET_COUNTER` names."""

    outputs_queued: int


class StuckCore(RuntimeError):
    """A core's timer keeps asking to run again at the same virtual time."""


class Application(Protocol):
    """What a protocol adapter gives the simulator."""

    def make_core(self, node: NodeSpec, addr: SimAddr, sim: Simulation) -> DatagramCore:
        """The core of ``node``, made when it arrives."""

    def on_start(self, host: Host) -> None:
        """The node has arrived and its core exists (e.g. connect to a peer)."""

    def on_event(self, host: Host, event: object) -> None:
        """An event the core reported, at ``host.sim.now``."""

    def on_stop(self, host: Host) -> None:
        """The node leaves now (it may still send, e.g. closing handshakes)."""

    def done(self, sim: Simulation) -> bool:
        """True when the run can end before the scenario's duration."""


class Host:
    """One node: its core, its timer and its counters."""

    __slots__ = (
        "_deadline",
        "_gen",
        "_last_fire",
        "_quiet",
        "_same_fires",
        "addr",
        "core",
        "name",
        "present",
        "received",
        "sent",
        "sim",
        "spec",
        "timers",
    )

    def __init__(self, sim: Simulation, spec: NodeSpec, core: DatagramCore) -> None:
        self.sim = sim
        self.spec = spec
        self.name = spec.name
        self.addr = sim.network.address(spec.name)
        self.core = core
        self.present = True
        self._deadline: float | None = None
        self._gen = 0
        self.received = 0
        self.sent = 0
        self.timers = 0
        self._last_fire = -1.0
        self._same_fires = 0
        #: the core, when it counts what it queues (:data:`QUIET_COUNTER`)
        self._quiet: QuietCore | None = (
            cast(QuietCore, core) if type(getattr(core, QUIET_COUNTER, None)) is int else None)

    @property
    def quiet(self) -> bool:
        """Does the core say when a datagram queued nothing (:data:`QUIET_COUNTER`)?"""
        return self._quiet is not None

    def deliver(self, data: bytes, src: SimAddr) -> None:
        """A datagram arrives now."""
        self.received += 1
        quiet = self._quiet
        if quiet is None:
            self.core.datagram_received(data, src, self.sim.sched.now)
            self.flush()
            return
        before = quiet.outputs_queued
        now = self.sim.sched.now
        quiet.datagram_received(data, src, now)
        queued = quiet.outputs_queued - before
        if not queued or not self.present:
            return  # a flush would do nothing (or, absent, is not done)
        out = quiet.datagrams_to_send(now)
        if len(out) == queued:
            # everything it queued is datagrams, and it has them all: the flush's next
            # datagrams_to_send would be empty, next_event None and the timer the same
            self.sent += queued
            send = self.sim.network.send
            name = self.name
            for d, dst in out:
                send(name, d, dst)
            return
        self._drain(out, now)

    def flush(self) -> None:
        """Send what the core has due, hand its events on, re-arm its timer."""
        if not self.present:
            return
        now = self.sim.sched.now
        self._drain(self.core.datagrams_to_send(now), now)

    def _drain(self, out: Sequence[Outgoing], now: float) -> None:
        """:meth:`flush` from the first ``datagrams_to_send``'s answer ``out`` on."""
        sim = self.sim
        core = self.core
        if out:
            send = sim.network.send
            name = self.name
            rounds = 1
            while True:  # at most MAX_FLUSH_ROUNDS calls that return datagrams
                self.sent += len(out)
                for data, dst in out:
                    send(name, data, dst)
                if rounds >= MAX_FLUSH_ROUNDS:
                    break
                out = core.datagrams_to_send(now)
                if not out:
                    break
                rounds += 1
        e = core.next_event()
        if e is not None:
            app = sim.app
            while e is not None:
                app.on_event(self, e)
                e = core.next_event()
        # _arm, inline: this runs after every datagram a host receives
        deadline = core.get_timer(now)
        if deadline != self._deadline:
            self._deadline = deadline
            self._gen += 1
            if deadline is not None:
                sim.sched.at(deadline, self._fire, self._gen)

    def send(self, items: Iterable[Outgoing]) -> None:
        """Send datagrams the adapter got from the core outside datagrams_to_send."""
        for data, dst in items:
            self.sent += 1
            self.sim.network.send(self.name, data, dst)

    def _arm(self, now: float) -> None:
        deadline = self.core.get_timer(now)
        if deadline == self._deadline:
            return
        self._deadline = deadline
        self._gen += 1
        if deadline is not None:
            self.sim.sched.at(deadline, self._fire, self._gen)

    def _fire(self, gen: int) -> None:
        if gen != self._gen or not self.present:
            return  # superseded by a later arm, or the node left
        self._deadline = None
        self.timers += 1
        now = self.sim.sched.now
        if now == self._last_fire:
            self._same_fires += 1
            if self._same_fires > MAX_SAME_TIME_TIMERS:
                raise StuckCore(f"{self.name}: the timer ran {MAX_SAME_TIME_TIMERS} times at "
                                f"t={now} without its deadline moving on")
        else:
            self._last_fire, self._same_fires = now, 0
        self.core.handle_timer(now)
        self.flush()


@dataclass(frozen=True, slots=True)
class RunStats:
    """What one run cost and did."""

    #: virtual seconds simulated
    virtual_s: float
    #: CPU seconds of this process spent in the run
    cpu_s: float
    #: scheduler events executed
    events: int
    #: datagrams the cores handed to the network
    datagrams: int
    #: datagram copies by fate (delivered, queue_drop, loss, no_route, absent)
    fates: dict[str, int]

    @property
    def datagrams_per_cpu_s(self) -> float:
        return self.datagrams / self.cpu_s if self.cpu_s > 0 else 0.0

    @property
    def virtual_per_cpu_s(self) -> float:
        return self.virtual_s / self.cpu_s if self.cpu_s > 0 else 0.0


class Simulation:
    """A scenario, an application and the scheduler that runs them."""

    def __init__(self, scenario: Scenario, app: Application, seed: int | None = None,
                 trace: bool = False) -> None:
        self.scenario = scenario
        self.app = app
        self.seed = scenario.seed if seed is None else seed
        self.sched = Scheduler(self.seed)
        self.network = Network(self.sched, scenario, self._deliver, trace=trace)
        self.hosts: dict[str, Host] = {}
        for spec in scenario.nodes:
            self.sched.at(spec.arrive, self._arrive, spec)
            if spec.depart is not None:
                self.sched.at(spec.depart, self._depart, spec.name)

    @property
    def now(self) -> float:
        return self.sched.now

    def _deliver(self, name: str, data: bytes, src: SimAddr) -> None:
        host = self.hosts.get(name)
        if host is not None and host.present:
            host.deliver(data, src)

    def _arrive(self, spec: NodeSpec) -> None:
        core = self.app.make_core(spec, self.network.address(spec.name), self)
        host = self.hosts[spec.name] = Host(self, spec, core)
        # the network hands the host its datagrams directly while it is present (what
        # _deliver would do by name)
        self.network.set_present(spec.name, True, host.deliver)
        self.app.on_start(host)
        host.flush()

    def depart(self, name: str, at: float | None = None) -> None:
        """Node ``name`` leaves at virtual time ``at`` (default now)."""
        self.sched.at(self.sched.now if at is None else at, self._depart, name)

    def _depart(self, name: str) -> None:
        host = self.hosts.get(name)
        if host is None or not host.present:
            return
        self.app.on_stop(host)
        host.present = False
        self.network.set_present(name, False)

    def run(self, until: float | None = None,
            progress: Callable[[float], None] | None = None) -> RunStats:
        """Run until the application is done, nothing is left to do, or ``until``
        (default: the scenario's duration).  ``progress(now)`` is called about
        once per virtual second."""
        end = self.scenario.duration if until is None else until
        cpu0 = time.process_time()
        ev0 = self.sched.executed
        app = self.app

        # after every event: the run ends at the moment it is done
        stop = functools.partial(app.done, self)

        step = 1.0
        t = self.sched.now
        while t < end and len(self.sched) and not app.done(self):
            t = self.sched.run(until=min(end, t + step), stop=stop)
            if progress is not None:
                progress(t)
        cpu = time.process_time() - cpu0
        fates = self.network.summary()
        sent = sum(h.sent for h in self.hosts.values())
        return RunStats(self.sched.now, cpu, self.sched.executed - ev0, sent, fates)
