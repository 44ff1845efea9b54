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


@pytest.mark.root
@pytest.mark.slow
def test_fig5_quick_m2c_shares_a_bottleneck_with_a_long_tcp_stream():
    from m2c.experiments.fig5 import run

    rows = run(quick=True)
    by = {r["flow"]: r for r in rows}
    assert by["TCP_ft"]["ok"] and by["M2C_ft"]["ok"]
    for r in rows:
        # what reached the receiver (all flows) never exceeds the 4 Mb/s bottleneck
        assert r["link_rx_kbps_all_flows"] < 4000 * 1.1
    # M2C neither starves behind TCP nor takes the whole link from it
    assert 400 < by["M2C_ft"]["tput"] < 3800
