"""Multicast through shared bottlenecks: one copy per link, fan-out at the edge.

A multicast router forwards a packet once per link whatever the number of
receivers behind it; the simulator's network copies a datagram to each member
only after the bottlenecks the members share (issue 18: 1,000 receivers)."""

from __future__ import annotations

from deliverykit.sim import (
    BottleneckSpec,
    LinkSpec,
    MulticastGroupSpec,
    NodeSpec,
    QueueUnit,
    Scenario,
    Simulation,
)
from tests.sim.sim_support import App, Recorder, Sender

GROUP = MulticastGroupSpec("239.1.2.3", 5000)
SIZE = 972  # 1000 bytes on the wire


def _crowd(receivers: int, datagrams: int, bottleneck: LinkSpec | None,
           every: float = 0.01, burst: int = 1) -> tuple[Simulation, App]:
    nodes = [NodeSpec("src", group="core")] + [
        NodeSpec(f"r{i}", group="edge", down=LinkSpec(delay=0.001 * (i % 7)))
        for i in range(receivers)]
    bn = (BottleneckSpec("b", bottleneck, ("core",), ("edge",)),) if bottleneck else ()
    sc = Scenario("crowd", tuple(nodes), multicast=(GROUP,), bottlenecks=bn, duration=60.0)
    app = App({"src": lambda: Sender(GROUP.addr, datagrams, SIZE, every=every, burst=burst),
               **{f"r{i}": Recorder for i in range(receivers)}})
    sim = Simulation(sc, app)
    for i in range(receivers):
        sim.sched.at(0.0, sim.network.join, f"r{i}", GROUP.addr)
    return sim, app


def test_a_shared_bottleneck_carries_each_multicast_datagram_once() -> None:
    sim, app = _crowd(1000, 20, LinkSpec(rate=100e6, delay=0.002))
    sim.run()
    link = sim.network.bottlenecks[0]
    assert link.sent == 20  # not 20 x 1,000
    assert all(len(app.cores[f"r{i}"].got) == 20 for i in range(1000))


def test_a_1000_receiver_group_costs_o_receivers_events_per_datagram() -> None:
    for bottleneck in (None, LinkSpec(rate=100e6, delay=0.002)):
        executed = []
        for datagrams in (10, 20):
            sim, _app = _crowd(1000, datagrams, bottleneck)
            sim.run()
            assert sim.network.summary()["delivered"] == datagrams * 1000
            executed.append(sim.sched.executed)
        # per datagram (the joins and arrivals cancel out): the sender's timer, the
        # fan-out, one hop per shared link, one downlink and one arrival per member
        per = (executed[1] - executed[0]) / 10
        assert per <= 2 * 1000 + 5, (bottleneck, per)


def test_a_full_shared_queue_drops_the_datagram_for_every_member_behind_it() -> None:
    # a 10-packet burst into a 4-packet queue: each member gets the first 4,
    # as on a real router; one copy per member would fill the queue with the
    # first datagram's copies
    queue = LinkSpec(rate=8e6, queue=4, queue_unit=QueueUnit.PACKETS)
    sim, app = _crowd(50, 10, queue, every=1.0, burst=10)
    sim.run()
    for i in range(50):
        got = [int.from_bytes(d[:4], "big") for _t, d, _s in app.cores[f"r{i}"].got]
        assert got == [0, 1, 2, 3]
    assert sim.network.summary()["queue_drop"] == 6 * 50  # each member's copy counted
