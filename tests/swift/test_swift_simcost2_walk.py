"""A simulated peer's cost per datagram, the same bytes, second step
(docs/sim.md, "The held-chunk mark and the end game's walk (session 16)"):
the end game's walk read across flushes.

The walk over every channel's late requests (``RequestScheduler._walk_late``)
is read again by a later flush at the same instant when nothing it reads
changed (no input to the Peer, no request made or dropped, ``inflight`` and
``have`` the same): the pump's call after a call that returned datagrams.
The reference is ``RequestScheduler.WALK_ACROSS = False``, which walks again
in every flush.  Whole simulated swarms are compared datagram by datagram.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest

from deliverykit.sim import network as simnet
from swift import sim as S
from swift.core.requests import RequestScheduler
from swift.experiments import swarm, vod_swarm
from tests.swift.test_swift_dirty_set import CS, _digest_run


def _swarm_digest(run: Any, across: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int]:
    """(hash of every datagram, hash of the results, end-game walks)."""
    monkeypatch.setattr(RequestScheduler, "WALK_ACROSS", across)
    h = hashlib.sha256()
    send = simnet.Network.send

    def hashed(self: Any, src: str, data: bytes, dst: Any) -> None:
        h.update(f"{src}>{dst}:{len(data)}:".encode() + data)
        send(self, src, data, dst)

    walks = [0]
    walk = RequestScheduler._walk_late

    def counted(self: RequestScheduler, *args: Any) -> Any:
        walks[0] += 1
        return walk(self, *args)

    monkeypatch.setattr(simnet.Network, "send", hashed)
    monkeypatch.setattr(RequestScheduler, "_walk_late", counted)
    res = run()
    monkeypatch.undo()
    per = [(r.name, r.completion_s, r.verified, r.sent_chunks, r.startup_s, r.stalls,
            sorted(r.stats.items())) for r in res.leechers]
    assert all(r.verified for r in res.leechers)
    return h.hexdigest(), hashlib.sha256(repr(per).encode()).hexdigest(), walks[0]


def _vod(algorithm: str, leechers: int, video_s: float, seed: int) -> Any:
    sc = swarm.vod_scenario(leechers, video_s, 1e6, CS,
                            vod_swarm.seeder_rate(leechers, 1e6, None), seed=seed)
    r = vod_swarm.run_one(sc, algorithm, "sim")
    assert r.stats is not None
    return S.FlashCrowdResult(sc.name, seed, tuple(r.leechers), r.stats)


def _lossy_flash(leechers: int, loss: float, seed: int, arrivals: str = "flash") -> Any:
    sc = S.flash_crowd(leechers, 64 * CS, arrivals=arrivals, spread=0.3, seed=seed)
    nodes = tuple(dataclasses.replace(n, up=S.uplink(4e6, loss=loss)) if n.role == S.LEECHER
                  else n for n in sc.nodes)
    return S.run(dataclasses.replace(sc, nodes=nodes), seed=seed)


@pytest.mark.parametrize("name,run", [
    ("VoD, vod picker", lambda: _vod("vod", 4, 6.0, 0)),
    ("VoD, std-vod picker", lambda: _vod("std-vod", 5, 4.0, 3)),
    ("flash crowd, 5 % loss: end game", lambda: _lossy_flash(12, 0.05, 3)),
    ("uniform arrivals, 3 % loss", lambda: _lossy_flash(8, 0.03, 5, "uniform")),
])
def test_the_walk_read_across_flushes_sends_the_same_bytes(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swarms with late requests (VoD deadlines, lossy uplinks and the end
    game) send the same datagrams, byte for byte and in order, and end with
    the same results, whether the end game's walk is read again across
    flushes at one instant or walked in every flush; and it walks less."""
    on = _swarm_digest(run, True, monkeypatch)
    off = _swarm_digest(run, False, monkeypatch)
    assert on[:2] == off[:2], name
    assert on[2] < off[2], (on[2], off[2])


@pytest.mark.parametrize("name,run", [
    ("VoD, vod picker", lambda: _vod("vod", 4, 6.0, 0)),
    ("flash crowd, 5 % loss: end game", lambda: _lossy_flash(12, 0.05, 3)),
])
def test_both_cuts_against_visiting_every_channel(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With both cuts on, the same bytes as the reference that visits every
    channel on every flush (``DIRTY_SET = False``)."""
    on = _digest_run(run, True, monkeypatch)
    off = _digest_run(run, False, monkeypatch)
    assert on[:2] == off[:2], name
