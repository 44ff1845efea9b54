"""The drain rule (``ReceiverCC.DRAIN_OVER``): random loss below the link, with a queue.

After session 9 the tail of the 1,000-receiver run (4 MB) was lossy 4.5-6 Mb/s
links: random losses while the joined rate sat below the link with a queue of
5-40 ms, where neither the no-queue rule nor the hole rule applies.  After Spike
(a loss is congestion while the one-way delay is near the largest seen), such a
loss is now taken for loss on the link when our packets alone fill the link, the
joined groups send at most 0.97 of what it carries (a drop-tail queue fed by us
drains) and both packets around the loss queued clearly less than the fullest
queue seen (an overflow's neighbours queue within a packet or two of a full
queue, which is at least the fullest seen).

Each run is the simulator (m2c.sim, the `many` experiment's 100 Mb/s backbone,
4 MB).  A receiver named as in the crowd, with the crowd's sender uplink delay
(r001's), replays its run in the 1,000-receiver crowd exactly (session 9).
"""

from __future__ import annotations

import crowd
import pytest

from deliverykit.sim import Simulation
from m2c import sim
from m2c.core.receiver_cc import ReceiverCC
from m2c.core.session import ReceiverCore
from m2c.experiments import fairness
from m2c.fec import ldpc

SIZE = 4_000_000


def _crowd(name: str, loss: float | None = None) -> sim.TransferResult:
    """Receiver ``name`` of the 1,000-receiver draw (seed 0) alone, as in the crowd."""
    return crowd.replay(name, SIZE, loss=loss, before_s14=True)


def _ratio(res: sim.TransferResult, name: str) -> float:
    return crowd.ratio(res, name, SIZE)


def test_r113_random_losses_below_the_link_do_not_halve_the_window():
    """r113 (4.59 Mb/s, 45 ms, 1.56 % loss): 1.179x its link-ideal time before, as in
    the crowd; its random losses came while the joined rate was 0.74-0.95x the link
    with a queue of 5-40 ms.  The drain rule finds link losses the other two did not,
    never more than the link lost at random, and the transfer is shorter."""
    res = _crowd("r113")
    r, on_link = res.receivers[0], res.run.fates["loss"]
    assert on_link > 20
    assert r.drain_losses > 0
    assert r.random_losses <= on_link
    assert r.random_losses >= 0.6 * on_link, (r.random_losses, on_link)
    assert _ratio(res, "r113") < 1.15


@pytest.mark.parametrize("name", ["r757", "r390"])
def test_a_full_queue_draining_below_the_link_stays_congestion(name):
    """r757 (0.55 Mb/s) and r390 (0.81 Mb/s), lossless: their 25-packet queues hold
    0.4-0.55 s and were still full, draining, when the joined groups had decayed below
    the link.  Without the queue test (``DRAIN_PKTS`` and ``DRAIN_SHARE`` 0: the joined
    rate alone) they took 11 and 10 overflows for link loss; with it, none."""
    res = _crowd(name)
    r = res.receivers[0]
    assert res.run.fates["loss"] == 0 and res.run.fates["queue_drop"] > 100
    assert r.random_losses == 0 and r.drain_losses == 0 and r.link_losses == 0


def test_the_queue_test_is_what_keeps_a_draining_queue_congestion(monkeypatch):
    """The same r757 with the margin below the fullest queue set to nothing: the rule
    then takes overflows of the draining queue for link loss (the session-9 scratch
    rule's failure), so the test above is the queue test's doing."""
    monkeypatch.setattr(ReceiverCC, "DRAIN_PKTS", 0.0)
    monkeypatch.setattr(ReceiverCC, "DRAIN_SHARE", 0.0)
    res = _crowd("r757")
    assert res.run.fates["loss"] == 0
    assert res.receivers[0].drain_losses > 0


@pytest.mark.parametrize("name", ["r731", "r711"])
def test_lossless_fast_link_finds_nothing(name):
    """Lossless 5.4-5.8 Mb/s links of the crowd: every loss is an overflow and stays
    congestion (with no queue margin they took 1 and 2 for link loss)."""
    res = _crowd(name)
    r = res.receivers[0]
    assert res.run.fates["loss"] == 0 and r.loss_events > 0
    assert r.random_losses == 0 and r.drain_losses == 0


def test_m2c_against_m2c_finds_nothing():
    """Two sessions on a shared 4 Mb/s link (paper 7.3): each queues behind the
    other's packets (``HOLE_SHARE`` fails), and every loss stays congestion."""
    sc = fairness.scenario(4e6, 512 << 10, 0.0, 1)
    app = fairness.FairnessApp(sc, 1)
    s = Simulation(sc, app, seed=1)
    with ldpc.decoding("ml"):
        s.run()
    cores = list(app.cores.values())
    assert len(cores) == 2 and all(isinstance(c, ReceiverCore) for c in cores)
    assert sum(c.cc.loss_events for c in cores) > 0
    assert [c.cc.random_losses for c in cores] == [0, 0]
    assert [c.cc.drain_losses for c in cores] == [0, 0]
