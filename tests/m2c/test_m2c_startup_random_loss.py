"""The m2c controller on links with random loss (issue 18, `m2c experiment many`).

At 100 and 1,000 heterogeneous receivers of a 2 MiB file the worst ratios of
completion time to link-ideal time (1.5-2.2x) were fast links with random loss:
one loss early in start-up, with no queue at all, ended it, and the receiver
climbed the rest of the way in congestion avoidance.  A loss seen while the
packets before it did not queue is now loss on the link, not congestion.  Each
run is one receiver in the simulator, 100 Mb/s backbone as in the experiment.
"""

from __future__ import annotations

from m2c import sim
from m2c.experiments.many import ideal_s

SIZE = 2 << 20


def _one(rate: float, delay: float, loss: float, seed: int = 0) -> sim.ReceiverResult:
    res = sim.run(sim.file_transfer(1, SIZE, down_bps=rate, delay=delay, loss=loss,
                                    core_bps=100e6, seed=seed, duration=200))
    r = res.receivers[0]
    assert r.verified, r.end
    return r


def test_random_loss_early_in_start_up_does_not_end_it():
    """The worst receiver of `m2c experiment many --receivers 100`: 5.15 Mb/s, 48 ms,
    1.85 % Bernoulli loss; with seed 1 a packet is lost 0.26 s in, with no queue at
    all (before: a loss event, start-up over at 60 packets/s, 1.82x)."""
    r = _one(5.149e6, 0.048285, 0.01854, seed=1)
    assert r.random_losses > 0
    assert r.completion_s / ideal_s(SIZE, 5.149e6, 0.048285, 0.01854) < 1.4


def test_overflow_losses_stay_congestion():
    """No random loss on the link: every loss is a drop-tail overflow, seen with a
    full 25-packet queue, and each still ends in a loss event."""
    r = _one(1e6, 0.02, 0.0)
    assert r.loss_events > 0
    assert r.random_losses == 0
