"""The linear picker's twist (``PeerConfig.picker_twist``; docs/ledbat.md, "The default
TARGET"): a flash crowd's leechers share even when nothing is lost, which TARGET 25 ms
needs before it can be every channel's default.

Without the twist, at TARGET 25 ms the seeder's queue drops nothing and the linear
picker keeps every leecher asking the seeder for the same next chunks: no leecher
sends a chunk to another."""

from __future__ import annotations

import pytest
from swift_support import full_binmap, pick_state

from swift.core.config import PeerConfig
from swift.core.picker import TWIST_BLOCK, LinearPicker
from swift.sim import FlashCrowdResult, flash_crowd, run


def _crowd(twist: bool) -> FlashCrowdResult:
    """tests/sim/test_swift_sim.py's crowd (6 x 128 KiB, seeder 20 Mbit/s), every
    channel at TARGET 25 ms."""
    return run(flash_crowd(6, 128 * 1024, seed=3),
               seeder_config=PeerConfig(ledbat_target_ms=25, picker_twist=twist),
               leecher_config=PeerConfig(ledbat_target_ms=25, picker_twist=twist,
                                         pex_connect=True))


@pytest.mark.parametrize("twist", [False, True])
def test_a_loss_free_flash_crowd_shares_only_with_the_twist(twist: bool) -> None:
    res = _crowd(twist)
    assert res.all_verified
    assert res.run.fates.get("queue_drop", 0) == 0 and res.run.fates.get("loss", 0) == 0
    shared = sum(r.sent_chunks for r in res.leechers)
    if twist:
        assert shared > 0
    else:  # the lockstep the twist breaks (this test's reference)
        assert shared == 0


def test_peers_start_their_blocks_at_different_offsets() -> None:
    n = 4 * TWIST_BLOCK
    firsts = {LinearPicker(twist=True).pick(pick_state(n, seed), full_binmap(n), 4, True)[0]
              for seed in range(8)}
    assert len(firsts) > 1


def test_the_twist_keeps_blocks_in_order_and_covers_everything() -> None:
    n = 3 * TWIST_BLOCK + 10
    st, peer, pk = pick_state(n, 5), full_binmap(n), LinearPicker(twist=True)
    order: list[int] = []
    while True:
        got = pk.pick(st, peer, 7, True)
        if not got:
            break
        order += got
        for c in got:
            st.inflight.set_range(c, c + 1)
    assert sorted(order) == list(range(n))
    assert [c // TWIST_BLOCK for c in order] == sorted(c // TWIST_BLOCK for c in order)


def test_the_playback_positions_block_is_taken_in_order_from_it() -> None:
    n = 4 * TWIST_BLOCK
    playpos = TWIST_BLOCK + 3
    for seed in range(8):
        got = LinearPicker(twist=True).pick(pick_state(n, seed, playpos), full_binmap(n), 5, True)
        assert got == list(range(playpos, playpos + 5))


def test_nothing_wanted_draws_nothing() -> None:
    n = 2 * TWIST_BLOCK
    st = pick_state(n, 1)
    st.have.set_range(0, n)
    before = st.rng.getstate()
    assert LinearPicker(twist=True).pick(st, full_binmap(n), 4, True) == []
    assert st.rng.getstate() == before


def test_without_the_twist_the_order_is_plain() -> None:
    n = 2 * TWIST_BLOCK
    for seed in range(4):
        st = pick_state(n, seed)
        before = st.rng.getstate()
        assert LinearPicker().pick(st, full_binmap(n), 5, True) == [0, 1, 2, 3, 4]
        assert st.rng.getstate() == before  # the RNG stream as before the twist existed
