"""What makes the 100,000-client CoreCast run affordable (issue 18) changes no result.

The numbers pinned here were recorded with the code of commit 65b0404, before the
simulator side was cut down (docs/corecast-multidomain.md): the same seed must give
the same bytes per AS, the same chunks received, the same datagram fates and the
same virtual end time."""

from __future__ import annotations

import random

import pytest

from corecast.sim import CoreCastApp, ItrPlacement, run, scenario
from corecast.workload import rank_size
from deliverykit.sim import Simulation

#: (AS name, clients, transit bytes, local bytes), 10 ASes of Fig. 4's shape, 60 clients,
#: 0.5 s, seed 0, recorded at 65b0404
ROWS_10x60 = [("etr0", 37, 99920, 908720), ("etr1", 10, 45920, 245600),
              ("etr2", 5, 35920, 122800), ("etr3", 2, 29920, 49120)] + [
              (f"etr{i}", 1, 27920, 24560) for i in range(4, 10)]
#: 3 ASes x 3 clients, 1 s, 5 % Bernoulli loss into each AS, seed 7, recorded at 65b0404
ROWS_3x3_LOSS = [("etr0", 3, 63840, 136308), ("etr1", 3, 63840, 138764),
                 ("etr2", 3, 63840, 131396)]


def _rows(res):
    return [(a.name, a.clients, a.transit_bytes, a.local_bytes) for a in res.per_as]


def test_same_seed_same_bytes_per_as_as_before_the_cuts():
    sizes, _ = rank_size(10, 60)
    res = run(scenario(seconds=0.5, seed=0, sizes=sizes))
    assert _rows(res) == ROWS_10x60
    assert (res.transit_bytes, res.local_bytes) == (379_200, 1_473_600)
    assert res.received == 1200 and res.lost == 0
    assert res.run.datagrams == 3820 and res.run.fates["delivered"] == 3820
    assert abs(res.run.virtual_s - 0.5252223520000013) < 1e-12


def test_source_as_itr_carries_the_same_bytes_into_every_as():
    """Section 3.4's source-as-ITR: the source's core runs Algorithm 1 itself (the same
    Itr object), so the inner packets never cross a simulated link inside the source's
    domain; what enters and what stays inside each AS is the same, byte for byte, and
    so are the losses on the transit links (the same packets in the same order)."""
    sizes, _ = rank_size(10, 60)
    for loss in (0.0, 0.05):
        sep = run(scenario(seconds=0.5, seed=0, sizes=sizes, loss=loss))
        src = run(scenario(seconds=0.5, seed=0, sizes=sizes, loss=loss,
                           itr=ItrPlacement.SOURCE))
        assert _rows(src) == _rows(sep)
        assert (src.received, src.lost) == (sep.received, sep.lost)
        assert src.run.fates["loss"] == sep.run.fates["loss"]
        assert abs(src.run.virtual_s - sep.run.virtual_s) < 1e-9
        if loss == 0:
            # per chunk: j payloads + k headers into the ASes and k chunks inside them;
            # the separate ITR also takes 1 payload + k headers from the source
            k, j, chunks = 60, 10, 20
            assert src.run.datagrams == chunks * (2 * k + j)
            assert sep.run.datagrams == chunks * (3 * k + j + 1)
    assert sep.lost > 0  # the loss case did lose something


def test_source_as_itr_with_loss_keeps_the_recorded_rows():
    res = run(scenario(ases=3, clients=3, seconds=1.0, seed=7, loss=0.05,
                       itr=ItrPlacement.SOURCE))
    assert _rows(res) == ROWS_3x3_LOSS
    assert (res.received, res.lost, res.run.fates["loss"]) == (331, 28, 21)


def test_roles_as_configured_at_scale():
    """Per-client state the run does not need is not kept: the clients keep no SHA-1 per
    chunk, and the ITR's map-cache holds each site's EID prefixes (as an ITR learns
    them from the mapping system), not one /32 per client."""
    sizes = [200, 50, 1]
    sc = scenario(seconds=0.1, seed=1, sizes=sizes)
    app = CoreCastApp(sc)
    Simulation(sc, app).run()
    assert all(c.received == 4 for c in app.clients.values())
    assert all(not c.digests for c in app.clients.values())
    # each AS's clients are consecutive addresses: a handful of prefixes each
    assert len(app.itrs[0].mapcache.trie) <= 3 * 2 * 8



#: trace hashes (every datagram's fate, time, endpoints and size, in order), recorded
#: with the code of ac146d8, before session 10's cuts (the ETR's and the client's fast
#: paths, one event per datagram to a client): (scenario keywords, trace hash)
TRACES_AC146D8 = [
    ({"seconds": 0.5, "seed": 0, "sizes": rank_size(10, 60)[0]},
     "2e3440ed3a5435030b9072977d376778d86841627fffe51febc823ce64794546"),
    ({"seconds": 0.5, "seed": 0, "sizes": rank_size(10, 60)[0], "itr": ItrPlacement.SOURCE},
     "215107b21fbaa55a06c91cbe38eed13f9bbc4487dbf0fb2d3f33773aaaa4d71d"),
    ({"seconds": 0.5, "seed": 0, "sizes": rank_size(10, 60)[0], "loss": 0.05},
     "f5261ee1ac94bab03edd41e7e0892b8f93cace60b3867215ee019e170099bdc5"),
    ({"ases": 3, "clients": 3, "seconds": 1.0, "seed": 7, "loss": 0.05,
      "itr": ItrPlacement.SOURCE},
     "b249b3c8030bff30dd38e37c3dcf708b0a22d29dd8203274559f2e48074d9ed0"),
]


def test_same_seed_same_trace_as_before_session_10():
    """Every datagram's fate, time, endpoints and size, in the order they happened, as
    recorded before the cuts: with the ITR on its own node (where the source's packets
    reach the ITR at the very instant they leave, so any change in the order of equal
    times would show) and inside the source, with and without transit loss."""
    for kw, want in TRACES_AC146D8:
        assert run(scenario(**kw), trace=True).trace == want, kw


def test_one_event_per_datagram_to_a_client_changes_no_trace():
    """``Network.direct_downlinks`` (one event per datagram to a node whose downlink
    has only a delay) gives the trace of the two-event path, in fewer events."""
    sizes, _ = rank_size(10, 60)
    for itr in ItrPlacement:
        sc = scenario(seconds=0.5, seed=0, sizes=sizes, loss=0.05, itr=itr)
        traces, events = [], []
        for direct in (False, True):
            sim = Simulation(sc, CoreCastApp(sc), trace=True)
            sim.network.direct_downlinks = direct
            events.append(sim.run().events)
            traces.append(sim.network.trace_hash())
        assert traces[0] == traces[1]
        assert events[1] < 0.8 * events[0]


def test_direct_downlinks_refuse_a_node_that_leaves():
    """One event per datagram is exact only while nodes stay: a departure is refused
    (a datagram already on its way would be counted as delivered)."""
    sc = scenario(ases=1, clients=2, seconds=0.1, seed=1)
    sim = Simulation(sc, CoreCastApp(sc))
    sim.network.direct_downlinks = True
    sim.depart("c0.1", at=0.05)
    with pytest.raises(ValueError, match="direct_downlinks"):
        sim.run()



def test_only_links_with_loss_derive_a_random_stream():
    """Deriving a link's stream (SHA-256 of seed and name, then seeding a Mersenne
    Twister) was set-up work for every link, thrown away unless the link has loss;
    the streams are derived from the seed and the link's name alone, so the links
    with loss draw the same numbers (the pinned rows with loss above)."""
    from deliverykit.sim import Scheduler
    from deliverykit.sim.network import Network

    class Counting(Scheduler):
        asked: list[str] = []

        def stream(self, name: str) -> random.Random:
            self.asked.append(name)
            return super().stream(name)

    sc = scenario(sizes=[100, 50, 1], seconds=0.1, seed=2, loss=0.05)
    sched = Counting(2)
    net = Network(sched, sc, lambda *a: None)
    assert sorted(sched.asked) == [f"link/etr{a}.down" for a in range(3)]
    assert all(n.down.loss is not None for n in net.nodes.values() if n.name.startswith("etr"))


def test_the_collector_is_paused_for_the_run_and_the_run_leaves_no_cycles(monkeypatch):
    """corecast.sim.run pauses the cyclic garbage collector (~40 % of a 10,000-client
    run's CPU was the collector traversing the live nodes and datagrams in flight):
    safe only because a run makes no reference cycles, which is checked here, with
    transit loss and with either ITR placement."""
    import gc

    import corecast.sim as cs

    seen = []

    class Watching(cs.Simulation):
        def run(self, *a, **kw):
            seen.append(gc.isenabled())
            return super().run(*a, **kw)

    monkeypatch.setattr(cs, "Simulation", Watching)
    sizes, _ = rank_size(10, 60)
    assert gc.isenabled()
    for itr in ItrPlacement:
        gc.collect()
        res = run(scenario(seconds=0.5, seed=0, sizes=sizes, loss=0.05, itr=itr))
        assert res.received > 0 and gc.isenabled()
        assert gc.collect() == 0
    assert seen == [False, False]
