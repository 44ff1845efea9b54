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


@pytest.mark.root
@pytest.mark.slow
def test_bursty_loss_duplicates_reordering_on_the_wire(tmp_path):
    """netem toward the receiver: Gilbert-Elliott bursty loss (~10 %), 2 %
    duplicates, 5 % reordering; the file arrives intact, the receiver saw the
    loss and never fed a corrupt or foreign packet to the decoder."""
    import os
    import time

    from deliverykit.testbed import Netem, Testbed
    from m2c.aio.driver import make_session
    from m2c.experiments import roles

    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(600_000))
    with Testbed(prefix="m2cimp") as tb:
        lan = tb.bridge("lan")
        s, r = tb.host("s"), tb.host("r")
        ps = tb.attach(s, lan, "10.0.7.1/24")
        pr = tb.attach(r, lan, "10.0.7.2/24")
        for h, p in ((s, ps), (r, pr)):
            tb.mroute(h, p.a)
        # p good->bad 3 %, bad->good 30 %, 100 % loss in bad, none in good: ~9 % bursty loss
        tb.shape(pr.b, netem=Netem(delay_ms=5, gemodel=(3, 30, 100, 0), duplicate_pct=2,
                                   reorder_pct=5, seed=1))
        tb.settle(lan)
        sd = make_session(str(src), group="239.198.1.1", port=44000, interface="10.0.7.1",
                          min_rate=30.0, max_rate=600.0, tsd=1.0, k=2, symbol_size=1000)
        sdj = sd.to_json()
        snd = tb.spawn(s, roles.send, sdj, str(src), 60)
        time.sleep(0.3)
        res = tb.run(r, roles.receive, sdj, str(tmp_path / "out"), "10.0.7.2", 50, "m2c",
                     timeout=70)
        snd.kill()
    assert res.ok and (tmp_path / "out").read_bytes() == src.read_bytes()
    assert 2.0 < res.metrics.loss < 25.0
    assert res.rejected == 0 and res.wrong_group == 0
    assert res.duplicates > 0  # netem duplicates were seen and ignored
