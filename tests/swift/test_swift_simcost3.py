"""A simulated VoD swarm's CPU, third step (docs/sim-fig6.md, session 20).

Two cuts that send the same bytes, each with its reference switch, compared
datagram by datagram on whole simulated swarms (tests/swift/swarm_digest.py):

* ``Peer.QUIET_REPEAT``: the driver's call that confirms a flush is over (the
  pump asks again after every call that returned datagrams) returns nothing at
  once when the flush before it, at the same instant and with no input since,
  left nothing to do; False runs the whole flush again.
* ``UploadScheduler.WFQ_QUEUED``: WFQ's pick looks at the channels with DATA
  queued, not at every channel per DATA.

And one change of behaviour, off by default: ``PeerConfig.have_grid`` puts the
HAVEs that wait for their interval on one grid per peer, so one timer wakes
every channel due instead of one timer each.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from deliverykit.sim import pump
from swift import sim as S
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.core.upload import UploadScheduler
from swift.experiments import swarm, vod_swarm
from tests.swift.swarm_digest import CS, digest, lossy_flash, vod

SWARMS = [
    ("VoD, vod picker", lambda: vod("vod", 6, 3.0, 2)),
    ("VoD, linear picker", lambda: vod("linear", 5, 4.0, 1)),
    ("VoD, std-vod picker", lambda: vod("std-vod", 5, 4.0, 3)),
    ("flash crowd", lambda: S.run(S.flash_crowd(10, 48 * CS, seed=1), seed=1)),
    ("flash crowd, 5 % loss: end game", lambda: lossy_flash(12, 64 * CS, 0.05, 3)),
]


@pytest.mark.parametrize("name,run", SWARMS)
def test_a_quiet_repeat_sends_the_same_bytes(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swarms with deadlines, the fast set, losses and the end game send the
    same datagrams, byte for byte and in order, and end with the same
    results, whether the confirming call answers at once or runs the whole
    flush; and the upload side ran less often."""
    on = digest(run, monkeypatch, (Peer, "QUIET_REPEAT", True), (UploadScheduler, "upload_data"))
    off = digest(run, monkeypatch, (Peer, "QUIET_REPEAT", False),
                 (UploadScheduler, "upload_data"))
    assert on[:2] == off[:2], name
    assert on[2] < 0.9 * off[2], (on[2], off[2])


@pytest.mark.parametrize("name,run", SWARMS[:2] + SWARMS[4:])
def test_wfq_over_the_queued_channels_sends_the_same_bytes(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """WFQ's pick over the channels with DATA queued, in channel order,
    picks what the scan of every channel picks: the same datagrams and
    results, the same number of picks."""
    on = digest(run, monkeypatch, (UploadScheduler, "WFQ_QUEUED", True),
                (UploadScheduler, "_next_upload"))
    off = digest(run, monkeypatch, (UploadScheduler, "WFQ_QUEUED", False),
                 (UploadScheduler, "_next_upload"))
    assert on == off, name


def _pair(queued: int) -> tuple[Peer, float]:
    """A seeder whose leecher's first REQUESTs (up to ``queued`` chunks)
    reached it after the handshake; no DATA sent yet."""
    data = bytes(range(256)) * (CS * 64 // 256)
    cfg = PeerConfig()
    tree = MerkleTree.build([data[i:i + CS] for i in range(0, len(data), CS)],
                            cfg.hash_func, CS)
    seeder = Peer(Content.seeded(tree, MemoryStorage(data)), PeerConfig(seed=1))
    leecher = Peer(Content(MerkleTree.for_root(tree.root_hash, tree.func, CS), MemoryStorage()),
                   PeerConfig(seed=2, max_outstanding=queued))
    s_addr, l_addr = ("10.0.0.1", 1), ("10.0.0.2", 1)
    now = 0.0
    leecher.connect(s_addr, now)
    for _ in range(10):  # handshake, reply, chunk 0 (the size), then a window of REQUESTs
        for d, _a in leecher.datagrams_to_send(now):
            seeder.datagram_received(d, l_addr, now)
        now += 0.01
        ch = next(iter(seeder.channels.values()))
        if len(ch.send.upload) >= 8:
            return seeder, now
        for d, _a in seeder.datagrams_to_send(now):
            leecher.datagram_received(d, s_addr, now)
        now += 0.01
    raise AssertionError("the leecher never asked for a window")


def test_a_repeat_after_a_flush_cut_short_by_the_budget_runs_in_full() -> None:
    """A seeder whose flush stopped at its budget of DATA sends more in the
    next call at the same instant (not quiet); once a call sent what the
    window allows, the next answers at once, without the upload side; an
    input (a datagram, the timer, the player) makes the next run again."""
    seeder, now = _pair(64)
    calls = [0]
    upload = seeder.upload.upload_data

    def counted(now: float, budget: int) -> Any:
        calls[0] += 1
        return upload(now, budget)

    seeder.upload.upload_data = counted  # type: ignore[method-assign]  # count the calls on this one instance
    first = seeder.datagrams_to_send(now, budget=1)
    assert len(first) == 1 and calls[0] == 1
    more = seeder.datagrams_to_send(now, budget=1)
    assert len(more) == 1 and calls[0] == 2  # the budget, not the window, stopped it
    for _ in range(10_000):  # until the window or pacing stops it (bounded)
        if not seeder.datagrams_to_send(now):
            break
    else:
        raise AssertionError("the window or pacing never stopped the seeder's DATA")
    done = calls[0]
    assert seeder.datagrams_to_send(now) == [] and calls[0] == done  # quiet: answered at once
    seeder.handle_timer(now)
    seeder.datagrams_to_send(now)
    assert calls[0] == done + 1  # an input: the whole flush again
    Peer.QUIET_REPEAT = False
    try:
        seeder.datagrams_to_send(now)
        seeder.datagrams_to_send(now)
        assert calls[0] == done + 3  # the reference runs every call
    finally:
        Peer.QUIET_REPEAT = True


def test_the_have_grid_is_off_by_default() -> None:
    """The grid changes when HAVEs go: not the default."""
    assert PeerConfig().have_grid is False
    assert Peer.QUIET_REPEAT is True and UploadScheduler.WFQ_QUEUED is True


_RUN_ONE = vod_swarm.run_one


@pytest.mark.parametrize("name,run", SWARMS[:2])
def test_the_have_grid_wakes_less(name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``PeerConfig.have_grid`` the swarm still verifies every leecher (the
    digest asserts it) with fewer timer runs: the channels waiting for their
    HAVE interval share wake-ups.  Other datagrams: a change of behaviour."""
    on = digest(run, monkeypatch, (vod_swarm, "run_one", partial(_RUN_ONE, have_grid=True)),
                (pump.Host, "_fire"))
    off = digest(run, monkeypatch, (vod_swarm, "run_one", _RUN_ONE), (pump.Host, "_fire"))
    assert on[0] != off[0], name
    assert on[2] < 0.8 * off[2], (on[2], off[2])


def test_the_have_grid_reaches_every_peer_from_the_cli_and_the_sweep_point(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--have-grid`` and a sweep point's ``have_grid`` set it on the seeder's
    and the leechers' configurations (the sweep records the point); without
    either it stays off.  Real simulated swarms, their peers' configurations
    read on the way in."""
    seen: list[tuple[bool, bool]] = []
    real = swarm.run

    def spy(scenario: Any, backend: Any, seeder: PeerConfig, leecher: PeerConfig,
            prefix: str = "swsw") -> Any:
        seen.append((seeder.have_grid, leecher.have_grid))
        return real(scenario, backend, seeder, leecher, prefix)

    monkeypatch.setattr(swarm, "run", spy)
    point = {"leechers": 3, "algorithm": "vod", "video_s": 2.0}
    off = vod_swarm.sweep_task(point, 1)
    on = vod_swarm.sweep_task({**point, "have_grid": True}, 1)
    assert seen == [(False, False), (True, True)]
    assert off["verified"] == on["verified"] == 3
    argv = ["--backend", "sim", "--leechers", "3", "--video-s", "2", "--algorithms", "vod",
            "--out", str(tmp_path)]
    assert vod_swarm.main(argv + ["--have-grid"]) == 0
    assert seen[-1] == (True, True)
    meta = json.loads((tmp_path / "vod_swarm-3-sim.json").read_text())
    assert meta["parameters"]["have_grid"] is True
