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

from typing import Any

import pytest

from swift.core.requests import RequestScheduler
from tests.swift.swarm_digest import digest, lossy_flash, vod
from tests.swift.test_swift_dirty_set import CS, _digest_run


def _swarm_digest(run: Any, across: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int]:
    """(hash of every datagram, hash of the results, end-game walks)."""
    return digest(run, monkeypatch, (RequestScheduler, "WALK_ACROSS", across),
                  (RequestScheduler, "_walk_late"))


@pytest.mark.parametrize("name,run", [
    ("VoD, vod picker", lambda: vod("vod", 4, 6.0, 0)),
    ("VoD, std-vod picker", lambda: vod("std-vod", 5, 4.0, 3)),
    ("flash crowd, 5 % loss: end game", lambda: lossy_flash(12, 64 * CS, 0.05, 3)),
    ("uniform arrivals, 3 % loss", lambda: lossy_flash(8, 64 * CS, 0.03, 5, "uniform")),
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
    ("VoD, vod picker", lambda: vod("vod", 4, 6.0, 0)),
    ("flash crowd, 5 % loss: end game", lambda: lossy_flash(12, 64 * CS, 0.05, 3)),
])
def test_both_cuts_against_visiting_every_channel(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With both cuts on, the same bytes as the reference that visits every
    channel on every flush (``DIRTY_SET = False``)."""
    on = _digest_run(run, True, monkeypatch)
    off = _digest_run(run, False, monkeypatch)
    assert on[:2] == off[:2], name
