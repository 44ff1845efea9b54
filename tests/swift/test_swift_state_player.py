"""The player's state is an enum (swift/core/player.py), driven through every
transition by ticks with a fake clock: buffering -> playing -> buffering (a
stall) -> playing -> done, and done stays done."""

from __future__ import annotations

from swift.core.binmap import Binmap
from swift.core.player import Player, PlayerState


def test_ticks_walk_every_transition_and_states_are_enum_members() -> None:
    cs = 1000
    p = Player(1000.0, cs, 10 * cs, start=0.0, prebuffer=2.0)
    have = Binmap()
    seen = [p.state]
    have.set_range(0, 2)
    for now, upto in ((1.0, 2), (4.0, 2), (5.0, 10), (30.0, 10), (31.0, 10)):
        have.set_range(0, upto)
        p.tick(now, have)
        seen.append(p.state)
    assert all(isinstance(s, PlayerState) for s in seen)
    assert seen == [PlayerState.BUFFERING, PlayerState.PLAYING, PlayerState.BUFFERING,
                    PlayerState.PLAYING, PlayerState.DONE, PlayerState.DONE]
    assert p.stalls == 1 and p.done


def test_states_compare_equal_to_the_old_strings() -> None:
    # drivers that still compare with "buffering" (swift.sim) keep working
    assert [s.value for s in PlayerState] == ["buffering", "playing", "done"]
    assert PlayerState.BUFFERING == "buffering" and str(PlayerState.DONE) == "done"
