"""Loss differentiation on a full link for the m2c controller (issue 18, `m2c experiment many`).

At 1,000 heterogeneous receivers the tail was fast links with random loss:
r095 of the draw (4.04 Mb/s, 32 ms, 0.72 % Bernoulli loss) took 1.364x its
link-ideal time.  Once its joined rate reached the link, the queue was never
empty, so session 7's rule (a loss seen with no queue is loss on the link) did
not apply and each random loss halved the window.  The receiver now also reads
the arrival spacing around a loss (after Biaz's inter-arrival rule): random loss
strikes after the queue, so the lost packet used the link and left a hole in
the busy link's back-to-back departures; a drop-tail overflow leaves none.

Each run is the simulator (m2c.sim, the `many` experiment's 100 Mb/s backbone).
A receiver's Bernoulli draws come from its link's name, so naming the one
receiver "r095" replays the crowd's loss draws for it.
"""

from __future__ import annotations

import crowd

from deliverykit.sim import Simulation
from m2c import sim
from m2c.core.session import ReceiverCore
from m2c.experiments import fairness
from m2c.experiments.many import draw_links, ideal_s
from m2c.fec import ldpc

SIZE = 2 << 20


def _named(name: str, rate: float, delay: float, loss: float, size: int = SIZE,
           seed: int = 0, up_delay: float | None = None) -> sim.TransferResult:
    """One receiver, named as in the crowd (its link's random draws follow the name);
    ``up_delay``: the sender's uplink delay (the crowd's was its first receiver's until
    session 14; these traces keep that shape)."""
    return crowd.alone(name, rate, delay, loss, size, seed=seed, up_delay=up_delay,
                       duration=200)


def test_r095_random_losses_on_its_full_link_do_not_halve_the_window():
    """The crowd's r095 alone, as in the 100-receiver run (its loss draws, the sender's
    uplink delay of r001): 1.364x before, as in the crowd, with 7 loss events and no
    queue drop at all: 9 of its 14 random losses were seen while the queue held
    packets and halved the window (ARTT 0.12 s: each took seconds to win back)."""
    links = draw_links(100, 0)
    rate, delay, loss = links.rate_bps[94], links.delay_s[94], links.loss[94]
    assert round(rate / 1e6, 2) == 4.04 and round(loss * 100, 2) == 0.72
    res = _named("r095", rate, delay, loss, up_delay=links.delay_s[0])
    r = res.receivers[0]
    assert r.link_losses > 0
    assert r.random_losses <= res.run.fates["loss"]
    assert r.completion_s is not None
    assert r.completion_s / ideal_s(SIZE, rate, delay, loss) < 1.2


def test_random_losses_are_told_from_overflow_as_the_network_saw_them():
    """A 5 Mb/s link with 1.5 % random loss: the receiver's count of random losses
    never exceeds what the link lost at random (no overflow taken for link loss), and
    finds most of them (before: only those seen with an empty queue)."""
    res = _named("r001", 5e6, 0.03, 0.015)
    r, fates = res.receivers[0], res.run.fates
    on_link = fates["loss"]
    assert on_link > 10
    assert r.random_losses <= on_link
    assert r.random_losses >= 0.75 * on_link, (r.random_losses, on_link, r.link_losses)


def test_lossless_fast_link_overflow_stays_congestion():
    """No random loss: a 6 Mb/s link's drop-tail losses leave no hole in its
    departures and all stay congestion."""
    res = _named("r001", 6e6, 0.02, 0.0)
    r = res.receivers[0]
    assert res.run.fates["queue_drop"] > 0 and r.loss_events > 0
    assert r.random_losses == 0 and r.link_losses == 0


def test_another_session_on_the_bottleneck_keeps_losses_congestion():
    """M2C against M2C (paper 7.3): each session's packets queue behind the other's on
    the shared 4 Mb/s link, so spacings show the other's packets, not losses on the
    link; the share rule (``HOLE_SHARE``) keeps every overflow a congestion signal."""
    sc = fairness.scenario(4e6, 512 << 10, 0.0, 1)
    app = fairness.FairnessApp(sc, 1)
    s = Simulation(sc, app, seed=1)
    with ldpc.decoding("ml"):
        s.run()
    cores = list(app.cores.values())
    assert len(cores) == 2 and all(isinstance(c, ReceiverCore) for c in cores)
    assert sum(c.cc.loss_events for c in cores) > 0
    assert [c.cc.link_losses for c in cores] == [0, 0]


def test_packets_of_a_left_group_still_queued_are_no_hole():
    """r757 of the 1,000-receiver draw (0.55 Mb/s, lossless, a 25-packet queue holds
    0.55 s): a group left by waiting still had a packet in the queue, which the session
    core drops as unjoined and congestion control never sees; the gap it filled looked
    like a packet lost on the link (one overflow taken for random loss)."""
    links = draw_links(1000, 0)
    i = 756
    assert links.loss[i] == 0.0 and links.rate_bps[i] < 0.6e6
    res = _named("r757", links.rate_bps[i], links.delay_s[i], 0.0, up_delay=links.delay_s[0])
    r = res.receivers[0]
    assert res.run.fates["queue_drop"] > 0
    assert r.random_losses == 0 and r.link_losses == 0
