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

from typing import Any

import pytest

from swift import sim as S
from swift.core.peer import Peer
from tests.swift.swarm_digest import digest, lossy_flash, vod
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
    return digest(run, monkeypatch, (Peer, "TICK_MARKS", marks), (Peer, "_flush_channel"))


@pytest.mark.parametrize("name,run", [
    ("VoD, vod picker", lambda: vod("vod", 4, 6.0, 0)),
    ("VoD, vod picker, 6 leechers", lambda: vod("vod", 6, 4.0, 2)),
    ("VoD, std-vod picker", lambda: vod("std-vod", 5, 4.0, 3)),
    ("VoD, linear picker", lambda: vod("linear", 5, 4.0, 1)),
    ("flash crowd", lambda: S.run(S.flash_crowd(10, 48 * CS, seed=1), seed=1)),
    ("flash crowd, 5 % loss: end game", lambda: lossy_flash(12, 64 * CS, 0.05, 3)),
    ("uniform arrivals, 3 % loss", lambda: lossy_flash(8, 64 * CS, 0.03, 5, "uniform")),
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
