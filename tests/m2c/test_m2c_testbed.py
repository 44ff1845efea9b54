"""Heterogeneous receivers on the testbed (root): one sender, 4 and 1 Mb/s ports
behind an IGMP-snooping bridge; each receiver adapts to its own link."""

from __future__ import annotations

import pytest


@pytest.mark.root
@pytest.mark.slow
def test_heterogeneous_receivers_each_get_their_own_rate():
    from m2c.experiments.hetero import run

    rows = run(quick=True, controller="m2c")
    assert [r["ok"] for r in rows] == [True, True]
    fast, slow = rows
    # the 4 Mb/s receiver is not held back by the 1 Mb/s one (and vice versa)
    assert fast["tput_kbps"] > 1.5 * slow["tput_kbps"]
    assert slow["tput_kbps"] < 1000  # its link: it cannot get more than 1 Mb/s
    assert fast["loss_pct"] < 50 and slow["loss_pct"] < 50
