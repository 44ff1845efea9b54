"""A core that counts what it queues lets ``Host.deliver`` skip the flush after a
datagram that queued nothing (deliverykit/sim/pump.py, ``QUIET_COUNTER``).

The same run with and without the counter: the same trace (every datagram's fate,
time, endpoints and size), the same events in the same order, the same timers; only
fewer calls of ``datagrams_to_send``, ``next_event`` and ``get_timer``."""

from __future__ import annotations

from typing import Any

from deliverykit.sim import Host, LinkSpec, NodeSpec, Scenario, Simulation, node_address
from deliverykit.sim.pump import QUIET_COUNTER
from tests.sim.sim_support import App, Sender

PORT = 7000


class Echo:
    """Answers every third datagram, reports every fifth as an event, no timer; counts
    the calls a flush makes."""

    def __init__(self, quiet: bool) -> None:
        self.out: list[tuple[bytes, Any]] = []
        self.events: list[object] = []
        self.n = 0
        self.calls = 0
        if quiet:
            self.outputs_queued = 0

    def datagram_received(self, data: bytes, addr: Any, now: float) -> None:
        self.n += 1
        queued = 0
        if self.n % 3 == 0:
            self.out.append((b"re:" + data[:4], addr))
            queued += 1
        if self.n % 7 == 0:
            self.out += [(b"twice:" + data[:4], addr)] * 2
            queued += 2
        if self.n % 5 == 0:
            self.events.append(("got", self.n, now))
            queued += 1
        if hasattr(self, "outputs_queued"):
            self.outputs_queued += queued

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        self.calls += 1
        out, self.out = self.out, []
        return out

    def get_timer(self, now: float) -> float | None:
        self.calls += 1
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def next_event(self) -> object | None:
        self.calls += 1
        return self.events.pop(0) if self.events else None


class Recording(App):
    def __init__(self, factories: dict[str, Any]) -> None:
        super().__init__(factories)
        self.seen: list[tuple[str, object]] = []

    def on_event(self, host: Host, event: object) -> None:
        self.seen.append((host.name, event))


def _run(quiet: bool) -> tuple[str, list[tuple[str, object]], Echo, Any]:
    nodes = (NodeSpec("s", up=LinkSpec(rate=8e6)), NodeSpec("e", down=LinkSpec(delay=0.002)))
    sc = Scenario("quiet", nodes, duration=5.0)
    echo = Echo(quiet)
    app = Recording({"s": lambda: Sender(node_address(1, PORT), 60, 200, every=0.01,
                                         burst=3),
                     "e": lambda: echo})
    sim = Simulation(sc, app, trace=True)
    stats = sim.run()
    return sim.network.trace_hash(), app.seen, echo, stats


def test_a_counting_core_gives_the_same_run_with_fewer_calls():
    trace0, seen0, echo0, stats0 = _run(quiet=False)
    trace1, seen1, echo1, stats1 = _run(quiet=True)
    assert echo1.n == echo0.n == 60
    assert (trace1, seen1) == (trace0, seen0)
    assert len(seen1) == 12
    assert (stats1.datagrams, stats1.fates, stats1.events, stats1.virtual_s) == (
        stats0.datagrams, stats0.fates, stats0.events, stats0.virtual_s)
    # a flush after each of the 60 datagrams (3+ calls each) without the counter; with
    # it: one datagrams_to_send after the 21 that queued only datagrams (n % 3 or
    # n % 7 == 0, not n % 5); after the 12 that queued an event (n % 5) that call and
    # the rest of a flush (5 that also queued datagrams: datagrams_to_send again, two
    # next_event, get_timer; 7 without: two next_event, get_timer); nothing after the
    # other 27; and the flush on arrival (three calls)
    assert echo0.calls >= 3 * 60
    assert echo1.calls == 3 + 21 + 5 * 5 + 7 * 4


def test_the_counter_must_be_an_int():
    """Only an int attribute of that name counts (a method or a property object of
    another meaning does not switch the shortcut on)."""
    assert QUIET_COUNTER == "outputs_queued"

    class Other(Echo):
        def outputs_queued(self) -> int:  # type: ignore[override]  # not a counter
            return 0

    nodes = (NodeSpec("s"), NodeSpec("e"))
    sim = Simulation(Scenario("q", nodes, duration=1.0),
                     App({"s": lambda: Echo(False), "e": lambda: Other(False)}))
    sim.run()
    assert all(not h.quiet for h in sim.hosts.values())
