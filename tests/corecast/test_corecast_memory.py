"""Section 3.5 memory model (corecast.plan.itr_memory / etr_memory) beside the running
ITR core's measured state, for N channels x M ASes."""

from __future__ import annotations

import pytest

from corecast import plan as model


@pytest.mark.parametrize("channels,ases", [(1, 1), (3, 50), (20, 100)])
def test_itr_state_equals_the_model(channels, ases):
    """The ITR core driven by a source (one payload then one header per AS per
    channel) holds exactly the model's bytes: payloadBuffer (payload packet + hash
    per channel) plus one RLOC per AS per channel in servedRLOC."""
    st = model.measure_itr_state(channels, ases)
    ours = model.plan(channels=channels, ases=ases)["rows"][1]
    m = model.itr_memory(channels, ases, ours["P_CC"], 4)
    assert st["channels"] == channels and st["served_rlocs"] == channels * ases
    assert st["payload_buffer_bytes"] == m["payload_buffer"]
    assert st["served_rloc_bytes"] == m["served_rloc"]
    assert st["total_bytes"] == m["total"]
    assert st["python_heap_bytes"] > 0  # what the Python objects really took (reported)


def test_model_figures_of_the_paper_scale():
    """1,000 channels x 1,000 ASes (section 3.5): ETR ~1.2 MB; ITR servedRLOC 16 MB with
    IPv6 RLOCs, 4 MB with IPv4."""
    assert model.etr_memory(1000, 1200) == 1_220_000
    assert model.itr_memory(1000, 1000, 1200, 16)["served_rloc"] == 16_000_000
    assert model.itr_memory(1000, 1000, 1200, 4)["served_rloc"] == 4_000_000


def test_state_is_bounded_by_max_served_and_max_channels():
    """servedRLOC and payloadBuffer never grow past their bounds; the excess is counted."""
    import ipaddress

    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix
    from corecast.core.source import Source

    mc = MapCache()
    for a in range(10):
        mc.add(ipaddress.ip_address(f"10.{a}.0.0").packed, 16,
               [(ipaddress.ip_address(f"192.0.2.{a + 1}").packed, 1, 1)], float("inf"))
    itr = Itr("192.0.2.254", [parse_prefix("10.255.0.0/16")], mc, max_channels=2, max_served=4,
              fast=False)
    src = Source("10.254.0.1", itr=itr)
    for ch in range(3):
        c = src.add_channel(f"10.255.0.{ch + 1}")
        for a in range(10):
            src.join(c.eid, f"10.{a}.0.1", 5000, True, 0)
        src.emit_chunk(c, 0.0)
    st = itr.state_size()
    assert st["channels"] == 2 and st["served_rlocs"] == 2 * 4
    assert itr.drops()["served_limit"] == 2 * 6
    assert itr.drops()["unknown_channel"] >= 1
