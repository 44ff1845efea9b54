"""The simulator against the netns testbed (issue 19 item 3): the same requests on both backends,
compared per metric (vmc.experiments.simvalidate)."""

from __future__ import annotations

import pytest


@pytest.mark.root
@pytest.mark.tool("nginx")
@pytest.mark.tool("nft")
@pytest.mark.tool("curl")
@pytest.mark.slow
def test_sim_and_testbed_on_the_same_requests() -> None:
    from vmc.experiments.simvalidate import run, table

    res = run("high-vhigh", n=40, link_mbit=40.0)
    m = {row["name"]: row for row in res["metrics"]}
    # every request completed on both backends
    for arm in ("Normal", "VMC"):
        row = m[f"requests completed, {arm}"]
        assert row["testbed"] == row["sim"] == 40
    # without sharing the origin sends every body once on both: the same bytes (nginx counts
    # bodies as the sim does), so the two backends replayed the same requests
    normal = m["origin body MB, Normal"]
    assert normal["sim"] == pytest.approx(normal["testbed"], rel=1e-3)
    # with sharing both send less (a 1 MB file every fifth request) and both join
    vmc = m["origin body MB, VMC"]
    assert vmc["testbed"] < normal["testbed"] and vmc["sim"] < normal["sim"]
    assert m["VMC joins"]["testbed"] >= 1 and m["VMC joins"]["sim"] >= 1
    assert "| origin body MB, VMC |" in table(res["metrics"])
