"""The `many` crowd's paths: each receiver's drawn delay is its whole path's.

Until session 14 ``m2c.sim.file_transfer`` put the first receiver's delay on the
sender's uplink (the testbed pair's shape) in the crowd too, so every path was 47.5
ms (r001's delay at seed 0) longer than the stated distribution and the link-ideal
time said."""

from __future__ import annotations

import dataclasses

import pytest

from deliverykit.sim import LinkSpec
from m2c import sim
from m2c.experiments import many


def test_the_crowd_adds_no_delay_on_the_senders_uplink() -> None:
    sc, links = many.scenario(receivers=20, size=64 << 10, seed=0)
    sender = next(n for n in sc.nodes if n.name == sim.SENDER)
    assert sender.up == LinkSpec(delay=0.0)
    assert [n.down.delay for n in sc.nodes if n.name != sim.SENDER] == list(links.delay_s)


def test_every_crowd_receiver_finishes_sooner_than_behind_the_old_uplink() -> None:
    """The same crowd with r001's delay put back on the sender's uplink (the shape
    before session 14): every receiver is later by about that delay."""
    size = 64 << 10
    sc, links = many.scenario(receivers=3, size=size, seed=0)
    old = sc.replace(nodes=tuple(
        dataclasses.replace(n, up=LinkSpec(delay=links.delay_s[0])) if n.name == sim.SENDER
        else n for n in sc.nodes))
    done = {}
    for label, scen in (("now", sc), ("before", old)):
        res = sim.run(scen)
        assert res.all_verified
        done[label] = [r.completion_s for r in res.receivers]
    for now, before in zip(done["now"], done["before"], strict=True):
        assert now is not None and before is not None
        assert before - now > links.delay_s[0] / 2, (now, before)
    # the earlier shape is still file_transfer's default (the testbed pair)
    pair = sim.file_transfer(2, size, delay=[0.03, 0.01])
    assert next(n for n in pair.nodes if n.name == sim.SENDER).up.delay == 0.03


def test_a_negative_sender_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="sender_delay"):
        sim.file_transfer(1, 1024, sender_delay=-0.01)
