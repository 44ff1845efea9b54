"""The simulator's network model: serialisation, drop-tail queues, loss, pair delays,
bottlenecks, multicast join/leave latency, determinism, scenarios as JSON."""

from __future__ import annotations

import random

import pytest

from deliverykit.protocol import DatagramCore
from deliverykit.sim import (
    BottleneckSpec,
    Link,
    LinkSpec,
    LossKind,
    LossSpec,
    MulticastGroupSpec,
    NodeSpec,
    PairDelay,
    QueueUnit,
    Scenario,
    Scheduler,
    Simulation,
    StuckCore,
    node_address,
)
from tests.sim.sim_support import App, Recorder, Sender

PORT = 7000
OVERHEAD = 28
SIZE = 1000 - OVERHEAD  # 1000 bytes on the wire


def addr(i: int) -> tuple[str, int]:
    return node_address(i, PORT)


def run(nodes, factories, **kw) -> tuple[Simulation, App]:
    sc = Scenario("t", tuple(nodes), duration=kw.pop("duration", 10.0), **kw)
    app = App(factories)
    sim = Simulation(sc, app, trace=True)
    sim.run()
    return sim, app


def test_test_cores_satisfy_the_core_protocol() -> None:
    assert isinstance(Recorder(), DatagramCore)
    assert isinstance(Sender(addr(1), 1, 10), DatagramCore)


def test_serialisation_delay_is_size_times_8_over_rate() -> None:
    rate = 8_000_000  # 1 MB/s: 1000 bytes take 1 ms
    nodes = [NodeSpec("a", up=LinkSpec(rate=rate, delay=0.010)), NodeSpec("b")]
    _sim, app = run(nodes, {"a": lambda: Sender(addr(1), 3, SIZE), "b": Recorder})
    times = [t for t, _, _ in app.cores["b"].got]
    assert times == pytest.approx([0.011, 0.012, 0.013])
    assert [d[:4] for _, d, _ in app.cores["b"].got] == [b"\0\0\0\0", b"\0\0\0\1", b"\0\0\0\2"]
    assert all(src == addr(0) for _, _, src in app.cores["b"].got)


def test_token_bucket_sends_its_burst_at_once_then_paces_at_the_rate() -> None:
    # tbf at 1 MB/s with a 2,500-byte bucket, full at the start: two 1,000-byte
    # packets leave at once; the third waits for the 500 bytes it lacks (0.5 ms),
    # every later one for a whole packet's tokens (1 ms)
    rate = 8_000_000
    nodes = [NodeSpec("a", up=LinkSpec(rate=rate, delay=0.010, burst=2500)), NodeSpec("b")]
    _sim, app = run(nodes, {"a": lambda: Sender(addr(1), 5, SIZE), "b": Recorder})
    times = [t for t, _, _ in app.cores["b"].got]
    assert times == pytest.approx([0.010, 0.010, 0.0105, 0.0115, 0.0125])


def test_token_bucket_refills_at_the_rate_up_to_its_depth() -> None:
    link = Link("l", LinkSpec(rate=8_000_000, burst=2500), None)
    assert [link.transmit(0.0, 1000) for _ in range(3)] == pytest.approx([0.0, 0.0, 0.0005])
    # 10 ms idle refills far more than the bucket holds: again only 2,500 bytes at once
    assert [link.transmit(0.1, 1000) for _ in range(3)] == pytest.approx([0.1, 0.1, 0.1005])
    # 1.5 ms after that the bucket holds 1,500 bytes: one packet at once, the next 0.5 ms later
    assert [link.transmit(0.102, 1000) for _ in range(2)] == pytest.approx([0.102, 0.1025])


def test_token_bucket_queue_counts_packets_waiting_for_tokens() -> None:
    # a 2-packet queue behind a 1-packet bucket: the 1st leaves, the 2nd and 3rd wait
    # for tokens, the 4th finds the queue full, as tbf's limit counts its backlog
    link = Link("l", LinkSpec(rate=8_000_000, burst=1000, queue=2,
                              queue_unit=QueueUnit.PACKETS), None)
    out = [link.transmit(0.0, 1000) for _ in range(4)]
    assert out[:3] == pytest.approx([0.0, 0.001, 0.002])
    assert out[3] < 0 and link.queue_drops == 1


def test_token_bucket_long_run_rate_is_the_link_rate() -> None:
    link = Link("l", LinkSpec(rate=8_000_000, burst=25_000), None)
    last = max(link.transmit(0.0, 1000) for _ in range(1025))
    assert last == pytest.approx((1025 * 1000 - 25_000) / 1e6)


def test_burst_needs_a_rate_and_a_positive_depth() -> None:
    with pytest.raises(ValueError, match="burst"):
        LinkSpec(burst=3000)
    with pytest.raises(ValueError, match="burst"):
        LinkSpec(rate=1e6, burst=0)


def test_downlink_queues_behind_a_faster_uplink() -> None:
    nodes = [NodeSpec("a"), NodeSpec("b", down=LinkSpec(rate=800_000))]  # 10 ms per packet
    _sim, app = run(nodes, {"a": lambda: Sender(addr(1), 3, SIZE), "b": Recorder})
    assert [t for t, _, _ in app.cores["b"].got] == pytest.approx([0.01, 0.02, 0.03])


@pytest.mark.parametrize("unit,limit,delivered", [
    (QueueUnit.PACKETS, 3, 3),
    (QueueUnit.BYTES, 2500, 2),   # two 1000-byte packets fit, the third would not
    (QueueUnit.BYTES, 3000, 3),   # exactly at the limit fits
])
def test_drop_tail_at_the_configured_limit(unit, limit, delivered) -> None:
    link = LinkSpec(rate=8_000_000, queue=limit, queue_unit=unit)
    nodes = [NodeSpec("a", up=link), NodeSpec("b")]
    sim, app = run(nodes, {"a": lambda: Sender(addr(1), 10, SIZE), "b": Recorder})
    assert len(app.cores["b"].got) == delivered
    assert sim.network.fates[1] == 10 - delivered  # Fate.QUEUE_DROP
    assert sim.network.nodes["a"].up.queue_drops == 10 - delivered


def test_queue_drains_so_paced_traffic_is_not_dropped() -> None:
    link = LinkSpec(rate=8_000_000, queue=2, queue_unit=QueueUnit.PACKETS)
    nodes = [NodeSpec("a", up=link), NodeSpec("b")]
    # two packets every 2 ms on a link that sends one per ms: never more than 2 queued
    sim, app = run(nodes, {"a": lambda: Sender(addr(1), 20, SIZE, every=0.002, burst=2),
                           "b": Recorder})
    assert len(app.cores["b"].got) == 20
    assert sim.network.nodes["a"].up.max_backlog == 2


def _loss_link(spec: LossSpec, seed: int) -> Link:
    return Link("l", LinkSpec(loss=spec), Scheduler(seed).stream("l"))


def test_bernoulli_loss_rate() -> None:
    n = 20_000
    link = _loss_link(LossSpec(LossKind.BERNOULLI, p=0.1), seed=1)
    for i in range(n):
        link.transmit(i * 1e-3, 100)
    assert link.losses == pytest.approx(0.1 * n, rel=0.05)
    again = _loss_link(LossSpec(LossKind.BERNOULLI, p=0.1), seed=1)
    for i in range(n):
        again.transmit(i * 1e-3, 100)
    assert again.losses == link.losses  # same seed, same losses


def test_gilbert_elliott_loss_rate_and_bursts() -> None:
    spec = LossSpec(LossKind.GILBERT_ELLIOTT, p_gb=0.01, p_bg=0.2, loss_good=0.0, loss_bad=1.0)
    link = _loss_link(spec, seed=3)
    n = 100_000
    fates = [link.transmit(i * 1e-3, 100) < 0 for i in range(n)]
    assert spec.mean == pytest.approx(0.01 / 0.21)
    assert link.losses / n == pytest.approx(spec.mean, rel=0.15)
    bursts = []
    run_len = 0
    for lost in fates + [False]:
        if lost:
            run_len += 1
        elif run_len:
            bursts.append(run_len)
            run_len = 0
    # mean burst length 1 / p_bg = 5 (Bernoulli at the same rate would give ~1.05)
    assert sum(bursts) / len(bursts) == pytest.approx(5.0, rel=0.15)


def test_loss_spec_refuses_non_probabilities() -> None:
    with pytest.raises(ValueError, match="probability"):
        LossSpec(LossKind.BERNOULLI, p=1.5)


def test_pair_delay_between_groups_and_nodes() -> None:
    nodes = [NodeSpec("a", group="g1"), NodeSpec("b", group="g2"),
             NodeSpec("c", group="g1"), NodeSpec("d", group="g2")]

    class Multi(Sender):
        def handle_timer(self, now: float) -> None:
            self.out = [(b"x" * 10, addr(i)) for i in (1, 2, 3)]
            self.left = 0

    _sim, app = run(nodes, {"a": lambda: Multi(None, 1, 10), "b": Recorder, "c": Recorder,
                           "d": Recorder},
                   pair_delays=(PairDelay("g1", "g2", 0.050), PairDelay("a", "d", 0.120)))
    assert [t for t, _, _ in app.cores["b"].got] == pytest.approx([0.050])
    assert [t for t, _, _ in app.cores["c"].got] == pytest.approx([0.0])  # same group
    assert [t for t, _, _ in app.cores["d"].got] == pytest.approx([0.120])  # node pair wins


def test_shared_bottleneck_serialises_both_senders() -> None:
    bn = BottleneckSpec("core", LinkSpec(rate=8_000_000), a=("left",), b=("right",))
    nodes = [NodeSpec("a", group="left"), NodeSpec("b", group="left"), NodeSpec("r", group="right")]
    _sim, app = run(nodes, {"a": lambda: Sender(addr(2), 5, SIZE),
                           "b": lambda: Sender(addr(2), 5, SIZE), "r": Recorder},
                   bottlenecks=(bn,))
    times = [t for t, _, _ in app.cores["r"].got]
    assert times == pytest.approx([0.001 * i for i in range(1, 11)])


def test_multicast_join_and_leave_latency() -> None:
    group = MulticastGroupSpec("239.1.2.3", 5000, join_latency=0.100, leave_latency=0.200)
    nodes = [NodeSpec("src"), NodeSpec("r1"), NodeSpec("r2")]
    sc = Scenario("mc", tuple(nodes), multicast=(group,), duration=2.0)
    app = App({"src": lambda: Sender(group.addr, 100, 100, every=0.010, burst=1),
               "r1": Recorder, "r2": Recorder})
    sim = Simulation(sc, app)
    net = sim.network
    sim.sched.at(0.0, net.join, "r1", group.addr)
    sim.sched.at(0.300, net.join, "r2", group.addr)
    sim.sched.at(0.500, net.leave, "r1", group.addr)
    sim.run()
    r1 = [t for t, _, _ in app.cores["r1"].got]
    r2 = [t for t, _, _ in app.cores["r2"].got]
    assert r1[0] == pytest.approx(0.100) and r1[-1] == pytest.approx(0.690)
    assert len(r1) == 60  # 0.10, 0.11, ... 0.69: the leave takes effect at 0.70
    assert r2[0] == pytest.approx(0.400) and r2[-1] == pytest.approx(0.990)
    assert not app.cores["src"].got  # no copy back to the sender


def _lossy_crowd(seed: int) -> str:
    lossy = LinkSpec(rate=4_000_000, delay=0.005, queue=8, queue_unit=QueueUnit.PACKETS,
                     loss=LossSpec(LossKind.GILBERT_ELLIOTT, p_gb=0.05, p_bg=0.3, loss_bad=0.8))
    nodes = [NodeSpec(f"s{i}", up=lossy) for i in range(4)] + [NodeSpec("sink", down=lossy)]
    sc = Scenario("det", tuple(nodes), duration=5.0, seed=seed)
    app = App({**{f"s{i}": (lambda: Sender(addr(4), 200, 500, every=0.003, burst=2))
                  for i in range(4)}, "sink": Recorder})
    sim = Simulation(sc, app, trace=True)
    sim.run()
    return sim.network.trace_hash()


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a, b, c = _lossy_crowd(7), _lossy_crowd(7), _lossy_crowd(8)
    assert a == b
    assert a != c


def test_departed_node_gets_nothing() -> None:
    nodes = [NodeSpec("a"), NodeSpec("b", depart=0.0095)]
    sim, app = run(nodes, {"a": lambda: Sender(addr(1), 5, SIZE, every=0.004, burst=1),
                           "b": Recorder})
    assert len(app.cores["b"].got) == 3  # sent at 0, 4, 8 ms; 12 and 16 ms find it gone
    assert sim.network.fates[4] == 2  # Fate.ABSENT


def test_scenario_json_round_trip_and_errors() -> None:
    sc = Scenario("x", (NodeSpec("a", group="g", up=LinkSpec(
        rate=1e6, queue=10, queue_unit=QueueUnit.PACKETS,
        loss=LossSpec(LossKind.GILBERT_ELLIOTT, p_gb=0.1, p_bg=0.5))),
        NodeSpec("b", group="h", depart=3.0)),
        pair_delays=(PairDelay("g", "h", 0.1),),
        bottlenecks=(BottleneckSpec("bn", LinkSpec(rate=2e6), ("g",), ("h",)),),
        multicast=(MulticastGroupSpec("239.0.0.1", 4000, 0.1, 0.2),), seed=5,
        params={"size": 1024})
    assert Scenario.from_json(sc.to_json()) == sc
    with pytest.raises(ValueError, match="unknown field"):
        Scenario.from_dict({"name": "x", "nodes": [{"name": "a", "speed": 3}]})
    with pytest.raises(ValueError, match="not JSON"):
        Scenario.from_json("{nope")
    with pytest.raises(ValueError):
        Scenario.from_dict({"name": "x", "nodes": [{"name": "a", "up": {"rate": -1}}]})
    with pytest.raises(ValueError, match="unique"):
        Scenario("x", (NodeSpec("a"), NodeSpec("a")))
    with pytest.raises(ValueError, match="'nowhere' is no group or node"):
        Scenario("x", (NodeSpec("a", group="g"),), pair_delays=(PairDelay("g", "nowhere", 0.1),))
    with pytest.raises(ValueError, match=r"no node is in group\(s\) \['h'\]"):
        Scenario("x", (NodeSpec("a", group="g"),),
                 bottlenecks=(BottleneckSpec("bn", LinkSpec(rate=1e6), ("g",), ("h",)),))


def test_random_substreams_are_independent_of_other_links() -> None:
    s = Scheduler(11)
    first = s.stream("link/a.up").random()
    s.stream("link/b.up").random()
    assert Scheduler(11).stream("link/a.up").random() == first
    assert random.Random(0).random() != first


def test_a_timer_that_never_moves_on_stops_the_run_with_a_clear_error() -> None:
    class Stuck(Recorder):
        def get_timer(self, now: float) -> float | None:
            return now  # always "run me now": would spin forever at one instant

    sim = Simulation(Scenario("stuck", (NodeSpec("a"),), duration=1.0), App({"a": Stuck}))
    with pytest.raises(StuckCore, match="a: the timer ran 1000 times at t=0.0"):
        sim.run()
