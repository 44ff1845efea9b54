"""The simulator's run with the set-up frozen out of the collector's sight
(``swift.sim.setup_frozen``): the same results, and the collector as it was after."""

from __future__ import annotations

import gc

from swift import sim


def _result(frozen: bool) -> tuple:
    sc = sim.flash_crowd(6, 64 * 1024, seed=5)
    if frozen:
        res = sim.run(sc)
    else:  # the same run, the collector left alone
        orig = sim.setup_frozen
        try:
            import contextlib

            sim.setup_frozen = contextlib.nullcontext  # type: ignore[assignment]  # the reference run
            res = sim.run(sc)
        finally:
            sim.setup_frozen = orig
    assert res.all_verified
    return (res.run.fates, res.run.datagrams, res.run.virtual_s,
            [(x.name, x.completion_s) for x in res.leechers])


def test_frozen_set_up_changes_no_result_and_restores_the_collector() -> None:
    before = (gc.isenabled(), gc.get_freeze_count())
    assert _result(True) == _result(False)
    assert (gc.isenabled(), gc.get_freeze_count()) == before


def test_the_set_up_is_frozen_during_the_block_only() -> None:
    keep = [object() for _ in range(1000)]
    with sim.setup_frozen():
        assert gc.get_freeze_count() >= len(keep)
    assert gc.get_freeze_count() == 0
