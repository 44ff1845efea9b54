"""``Network.send`` remembers the routes it found to take the one-event path
(``direct_downlinks``) and sends later datagrams over them without deciding again:
the same fates, times and order (trace hash) as deciding every time, and as the
two-event path; queue drops on the sender's uplink are recorded alike."""

from __future__ import annotations

from deliverykit.sim import LinkSpec, NodeSpec, PairDelay, Scenario, Simulation, node_address
from tests.sim.sim_support import App, Recorder, Sender


def _scenario() -> Scenario:
    # two senders with small uplink queues (drops), receivers with plain downlinks
    # (direct) and one with a rate (never direct), pair delays between groups
    nodes = (NodeSpec("s0", group="a", up=LinkSpec(rate=4e6, queue=6_000)),
             NodeSpec("s1", group="a", up=LinkSpec(rate=8e6, queue=20_000)),
             NodeSpec("r0", group="b", down=LinkSpec(delay=0.001)),
             NodeSpec("r1", group="c", down=LinkSpec(delay=0.003)),
             NodeSpec("r2", group="c", down=LinkSpec(rate=2e6, delay=0.002)),
             NodeSpec("s2", group="a", up=LinkSpec(rate=8e6)))
    return Scenario("routes", nodes, (PairDelay("a", "b", 0.01), PairDelay("a", "c", 0.02)),
                    duration=3.0)


def _run(direct: bool, remember: bool) -> tuple[object, ...]:
    sc = _scenario()
    app = App({"s0": lambda: Sender(node_address(2, 7000), 300, 700, every=0.01, burst=12),
               "s1": lambda: Sender(node_address(3, 7000), 300, 900, every=0.007, burst=9),
               "s2": lambda: Sender(node_address(4, 7000), 200, 600, every=0.005, burst=3),
               "r0": Recorder, "r1": Recorder, "r2": Recorder})
    sim = Simulation(sc, app, trace=True)
    sim.network.direct_downlinks = direct
    if not remember:  # a memo that never keeps anything: every send decides again
        sim.network._direct_routes = _Forgetful()
    stats = sim.run()
    net = sim.network
    return (net.trace_hash(), stats.fates, stats.virtual_s,
            [n.down.bytes for n in net.nodes.values()], len(net._direct_routes))


class _Forgetful(dict):
    def __setitem__(self, key, value) -> None:
        pass


def test_remembered_routes_give_the_same_run():
    two_events = _run(direct=False, remember=True)
    decided = _run(direct=True, remember=False)
    remembered = _run(direct=True, remember=True)
    assert remembered[:4] == decided[:4] == two_events[:4]
    assert remembered[1]["queue_drop"] > 0 and remembered[3][4] > 0  # r2 got some
    assert decided[4] == 0 and two_events[4] == 0
    assert remembered[4] == 2  # s0 -> r0 and s1 -> r1; r2's downlink has a rate
