"""One receiver of the `many` experiment's crowd replayed alone (session 9's method).

A receiver's random draws (its link's Bernoulli losses) follow its link's name, and
the crowd's sender uplink adds no delay (``m2c.experiments.many``; r001's delay
until session 14), so a receiver named as in the crowd, behind the same sender
uplink, replays its run in the crowd (to the digit for most: sessions 9-14).
"""

from __future__ import annotations

import dataclasses

from deliverykit.sim import LinkSpec
from m2c import sim
from m2c.experiments.many import Links, draw_links, ideal_s

__all__ = ["alone", "link", "ratio", "replay"]


def alone(name: str, rate: float, delay: float, loss: float, size: int, *, seed: int = 0,
          up_delay: float | None = None, duration: float = 300) -> sim.TransferResult:
    """One receiver named ``name`` on a link of ``rate`` b/s, ``delay`` s and Bernoulli
    ``loss``, the `many` experiment's 100 Mb/s backbone; ``up_delay``: the sender's
    uplink delay (the crowd's is 0), ``file_transfer``'s default (the receiver's own
    delay) if None."""
    sc = sim.file_transfer(1, size, down_bps=rate, delay=delay, loss=loss, core_bps=100e6,
                           seed=seed, duration=duration)
    nodes = []
    for n in sc.nodes:
        if n.name == "r001":
            n = dataclasses.replace(n, name=name)
        elif up_delay is not None and n.name == sim.SENDER:
            n = dataclasses.replace(n, up=LinkSpec(delay=up_delay))
        nodes.append(n)
    res = sim.run(sc.replace(nodes=tuple(nodes)))
    assert res.receivers[0].verified, res.receivers[0].end
    return res


def link(name: str, links: Links) -> tuple[float, float, float]:
    """(rate b/s, delay s, loss) of receiver ``name`` ("r001" is the first) in ``links``."""
    i = int(name[1:]) - 1
    return links.rate_bps[i], links.delay_s[i], links.loss[i]


def replay(name: str, size: int, *, receivers: int = 1000, seed: int = 0,
           loss: float | None = None, duration: float = 300,
           before_s14: bool = False) -> sim.TransferResult:
    """Receiver ``name`` of the ``receivers``-receiver draw of ``seed`` alone, as in the
    crowd; ``loss`` replaces its link's loss if given.  ``before_s14``: behind the
    crowd's sender uplink as it was until session 14 (the first receiver's delay on
    every path), where the tests of sessions 9-13 traced their receivers."""
    links = draw_links(receivers, seed)
    rate, delay, own_loss = link(name, links)
    return alone(name, rate, delay, own_loss if loss is None else loss, size, seed=seed,
                 up_delay=links.delay_s[0] if before_s14 else 0.0, duration=duration)


def ratio(res: sim.TransferResult, name: str, size: int, *, receivers: int = 1000,
          seed: int = 0) -> float:
    """The replayed receiver's completion time over its own link-ideal time."""
    t = res.receivers[0].completion_s
    assert t is not None
    rate, delay, loss = link(name, draw_links(receivers, seed))
    return t / ideal_s(size, rate, delay, loss)
