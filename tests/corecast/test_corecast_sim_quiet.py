"""corecast's ETR and clients count what they queue (``outputs_queued``), so the
simulator skips the flush after a datagram that queued nothing (deliverykit/sim/pump.py,
``QUIET_COUNTER``): every ETR and client host is quiet, the counters grow exactly when
something is queued, and an event a client queues still reaches the application."""

from __future__ import annotations

from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.events import SenderRejected
from corecast.core.maptrie import parse_prefix
from corecast.core.source import Source
from corecast.sim import CoreCastApp, ItrPlacement, Role, scenario
from deliverykit.sim import Host, Simulation


def test_etr_and_client_hosts_are_quiet_and_the_run_is_complete():
    sc = scenario(sizes=[5, 2, 1], seconds=0.2, seed=3, itr=ItrPlacement.SOURCE)
    app = CoreCastApp(sc)
    sim = Simulation(sc, app)
    sim.network.direct_downlinks = True
    sim.run()
    roles = {n.name: Role(n.role) for n in sc.nodes}
    for name, host in sim.hosts.items():
        assert host.quiet == (roles[name] in (Role.ETR, Role.CLIENT)), name
    assert all(c.received == 8 for c in app.clients.values())
    for name, etr in app.etrs.items():
        n = len(app.members[name])
        assert etr.outputs_queued == etr.counters["unicast_out"] == 8 * n
        assert etr.datagrams_to_send(sim.now) == []


def test_the_counters_grow_exactly_when_something_is_queued():
    etr = Etr([parse_prefix("10.255.0.0/16")], eids=[parse_prefix("10.1.0.0/24")],
              trusted_rlocs=[parse_prefix("192.0.2.1/32")])
    src = Source("10.0.0.1", ("10.0.0.2", 1))
    ch = src.add_channel("10.255.0.1")
    src.join(ch.eid, "10.1.0.5", 6000, True, 0.0)
    src.join(ch.eid, "10.9.0.5", 6000, True, 0.0)  # not this ETR's EID: dropped
    pkts = [p for p, _ in src.emit_chunk(ch, 0.0)]
    lisp = bytes(8)
    etr.datagram_received(lisp + pkts[0], ("192.0.2.1", 4341), 0.0)  # the payload: stored
    assert etr.outputs_queued == 0
    etr.datagram_received(lisp + pkts[1], ("192.0.2.1", 4341), 0.0)
    assert etr.outputs_queued == 1
    etr.datagram_received(lisp + pkts[2], ("192.0.2.1", 4341), 0.0)
    etr.datagram_received(lisp + pkts[1], ("198.51.100.9", 4341), 0.0)  # untrusted
    assert etr.outputs_queued == 1 and len(etr.datagrams_to_send(0.0)) == 1
    chunk = etr.handle_data(lisp + pkts[1], 0.0, bytes([192, 0, 2, 1]))[0][0]
    client = Client(accept={"10.1.0.1"}, keep_digests=False)
    client.datagram_received(chunk, ("10.1.0.1", 4341), 0.0)
    assert client.outputs_queued == 0 and client.received == 1
    client.datagram_received(chunk, ("10.7.0.1", 4341), 0.0)  # a sender it did not join
    assert client.outputs_queued == 1 and isinstance(client.next_event(), SenderRejected)
    client.datagram_received(chunk, ("10.7.0.1", 4341), 0.0)  # reported once per host
    assert client.outputs_queued == 1 and client.rejected == 2


def test_a_rejected_sender_still_reaches_the_application():
    """A quiet client's event is handed on by the flush its counter asks for."""
    sc = scenario(ases=1, clients=2, seconds=0.1, seed=1, itr=ItrPlacement.SOURCE)

    class Watching(CoreCastApp):
        def __init__(self, sc):
            super().__init__(sc)
            self.seen: list[tuple[str, object]] = []

        def on_event(self, host: Host, event: object) -> None:
            self.seen.append((host.name, event))

    app = Watching(sc)
    sim = Simulation(sc, app)
    sim.network.direct_downlinks = True
    sim.run(until=0.03)
    # the source's chunk, sent to a client by a node it did not join through
    sim.network.send("source", b"\x80" + bytes(40), sim.network.address("c0.1"))
    sim.run()
    assert [(h, type(e)) for h, e in app.seen if h == "c0.1"] == [("c0.1", SenderRejected)]
    assert app.clients["c0.1"].rejected == 1
