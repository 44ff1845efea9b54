"""Fig. 2 in network namespaces with raw sockets (CoreCast over IP protocol 253)."""

from __future__ import annotations

import pytest


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
def test_fig2_in_namespaces_raw_sockets_bytes_equal_eq3_eq5():
    from corecast.experiments.fig2_testbed import run

    r = run(quick=True, chunks=20)
    assert r["intact"] and r["received"] == [20] * 7
    assert r["capture"]["dropped"] == 0 and r["capture"]["local_dropped"] == 0
    assert r["transit_bytes"] == r["eq3_bytes"]
    assert r["local_bytes"] == r["eq5_bytes"]
    assert r["itr"]["counters"]["payload_copies"] == 20 * 3
    assert sum(r["itr"]["drops"].values()) == 0
    assert all(e["registered"] for e in r["etrs"]) and r["ms"]["refused_auth"] == 0
