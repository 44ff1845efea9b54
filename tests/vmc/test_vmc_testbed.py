"""The paper's Fig. 1 in namespaces: unmodified clients, nftables REDIRECT to the proxy, tbf-shaped origin link."""

from __future__ import annotations

import pytest


@pytest.mark.root
@pytest.mark.tool("nginx")
@pytest.mark.tool("nft")
@pytest.mark.tool("curl")
@pytest.mark.slow
def test_transparent_vmc_router_saves_origin_bytes() -> None:
    from vmc.experiments.testbed import run

    res = run(quick=True, scenario="high-vhigh", n=40, link_mbit=40.0)
    normal, vmc = res["normal"], res["vmc"]
    assert normal["failed"] == 0 and vmc["failed"] == 0
    # Every request reached nginx directly in the Normal arm; the VMC arm went through the proxy
    # without the clients knowing (they addressed the origin): the proxy counted joins.
    assert vmc["proxy"] is not None and vmc["proxy"]["joins"] >= 1
    assert vmc["origin_body_MB"] < normal["origin_body_MB"]
    assert vmc["origin_link_MB"] < normal["origin_link_MB"]
    assert res["table2"]["bandwidth %"] > 0
