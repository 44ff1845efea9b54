"""Whole simulated swarms compared datagram by datagram: the harness of the
tests that prove a cost cut sends the same bytes as its reference switch
(test_swift_dirty_set, test_swift_simcost*, docs/sim.md "Hot spots" on).

``digest`` runs a swarm with one class switch set and returns a hash of every
datagram (endpoints, length and bytes, in order), a hash of every leecher's
results, and how often one method ran (channel visits, end-game walks); a
test runs it with the switch on and off and compares."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from deliverykit.sim import network as simnet
from swift import sim as S
from swift.experiments import swarm, vod_swarm

CS = 1024


def digest(run: Callable[[], Any], monkeypatch: pytest.MonkeyPatch,
           switch: tuple[Any, str, Any], counted: tuple[type, str]) -> tuple[str, str, int]:
    """(hash of every datagram, hash of the results, calls of ``counted``)
    with ``switch`` = (owner, attribute, value) set for the run."""
    owner, attr, value = switch
    monkeypatch.setattr(owner, attr, value)
    h = hashlib.sha256()
    send = simnet.Network.send

    def hashed(self: Any, src: str, data: bytes, dst: Any) -> None:
        h.update(f"{src}>{dst}:{len(data)}:".encode() + data)
        send(self, src, data, dst)

    calls = [0]
    cls, name = counted
    method = getattr(cls, name)

    def count(self: Any, *args: Any) -> Any:
        calls[0] += 1
        return method(self, *args)

    monkeypatch.setattr(simnet.Network, "send", hashed)
    monkeypatch.setattr(cls, name, count)
    res = run()
    monkeypatch.undo()
    per = [(r.name, r.completion_s, r.verified, r.sent_chunks, r.startup_s, r.stalls,
            sorted(r.stats.items())) for r in res.leechers]
    assert all(r.verified for r in res.leechers)
    return h.hexdigest(), hashlib.sha256(repr(per).encode()).hexdigest(), calls[0]


def vod(algorithm: str, leechers: int, video_s: float, seed: int) -> Any:
    """A simulated VoD swarm (the Fig. 6 scenario, default supply) run once."""
    sc = swarm.vod_scenario(leechers, video_s, 1e6, CS,
                            vod_swarm.seeder_rate(leechers, 1e6, None), seed=seed)
    r = vod_swarm.run_one(sc, algorithm, "sim")
    assert r.stats is not None
    return S.FlashCrowdResult(sc.name, seed, tuple(r.leechers), r.stats)


def lossy_flash(leechers: int, size: int, loss: float, seed: int,
                arrivals: str = "flash") -> Any:
    """A flash crowd (or other arrivals, spread over 0.3 s) over leecher
    uplinks of 4 Mb/s losing ``loss``: request timeouts and the end game."""
    sc = S.flash_crowd(leechers, size, arrivals=arrivals, spread=0.3, seed=seed)
    nodes = tuple(dataclasses.replace(n, up=S.uplink(4e6, loss=loss)) if n.role == S.LEECHER
                  else n for n in sc.nodes)
    return S.run(dataclasses.replace(sc, nodes=nodes), seed=seed)
