"""A simulated peer's cost per datagram, the same bytes, second step
(docs/sim.md, "The held-chunk mark and the end game's walk (session 16)"):
the housekeeping tick.

The 50 ms tick (``Peer.handle_timer``) made the next flush visit every
channel.  Now it does so only when it changed what a visit reads: requests
given back or moved (lost, stale, no progress, past a deadline), the fast
set of eq. 2, a channel closed; after a ranking whose fast set is the same,
only the channels whose request window changed.  What time alone makes due
has its own wake-up or is found by the flush.  The reference is
``Peer.TICK_MARKS = False`` (every tick visits every channel); whole
simulated swarms are compared datagram by datagram.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest

from deliverykit.sim import network as simnet
from swift import sim as S
from swift.core.peer import Peer
from swift.experiments import swarm, vod_swarm
from tests.swift.test_swift_dirty_set import CS, _counting
from tests.swift.test_swift_simcost import ME, _idle_swarm


def test_a_tick_that_changes_nothing_visits_no_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle leecher (three peers, nothing to ask, nothing in flight):
    after a tick its flush visits none of its channels and sends nothing;
    with the reference switch, all three (before session 16: always)."""
    for marks, expected in ((True, 0), (False, 3)):
        monkeypatch.setattr(Peer, "TICK_MARKS", marks)
        _, nodes, now = _idle_swarm()
        leecher = nodes[ME]
        visits = _counting(leecher)
        now += 0.05
        leecher.handle_timer(now)
        assert leecher.datagrams_to_send(now) == []
        assert visits[0] == expected, marks


def _digest(run: Any, marks: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int]:
    """(hash of every datagram, hash of the results, channel visits)."""
    monkeypatch.setattr(Peer, "TICK_MARKS", marks)
    h = hashlib.sha256()
    send = simnet.Network.send

    def hashed(self: Any, src: str, data: bytes, dst: Any) -> None:
        h.update(f"{src}>{dst}:{len(data)}:".encode() + data)
        send(self, src, data, dst)

    visits = [0]
    visit = Peer._flush_channel

    def counted(self: Peer, ch: Any, now: float, out: list[tuple[bytes, Any]]) -> None:
        visits[0] += 1
        visit(self, ch, now, out)

    monkeypatch.setattr(simnet.Network, "send", hashed)
    monkeypatch.setattr(Peer, "_flush_channel", counted)
    res = run()
    monkeypatch.undo()
    per = [(r.name, r.completion_s, r.verified, r.sent_chunks, r.startup_s, r.stalls,
            sorted(r.stats.items())) for r in res.leechers]
    assert all(r.verified for r in res.leechers)
    return h.hexdigest(), hashlib.sha256(repr(per).encode()).hexdigest(), visits[0]


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
    ("VoD, vod picker, 6 leechers", lambda: _vod("vod", 6, 4.0, 2)),
    ("VoD, std-vod picker", lambda: _vod("std-vod", 5, 4.0, 3)),
    ("VoD, linear picker", lambda: _vod("linear", 5, 4.0, 1)),
    ("flash crowd", lambda: S.run(S.flash_crowd(10, 48 * CS, seed=1), seed=1)),
    ("flash crowd, 5 % loss: end game", lambda: _lossy_flash(12, 0.05, 3)),
    ("uniform arrivals, 3 % loss", lambda: _lossy_flash(8, 0.03, 5, "uniform")),
])
def test_ticks_that_mark_less_send_the_same_bytes(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swarms with deadlines, the fast set, request timeouts, losses and
    the end game send the same datagrams, byte for byte and in order, and
    end with the same results, whether a tick visits every channel or only
    what it changed; and fewer channels are visited."""
    on = _digest(run, True, monkeypatch)
    off = _digest(run, False, monkeypatch)
    assert on[:2] == off[:2], name
    assert on[2] < off[2], (on[2], off[2])
