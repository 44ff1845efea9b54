"""Fig. 2 in network namespaces with raw sockets (CoreCast over IP protocol 253)."""

from __future__ import annotations

import pytest


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
def test_fig2_in_namespaces_raw_sockets_bytes_equal_eq3_eq5(tmp_path, monkeypatch):
    import tempfile

    from corecast.experiments.fig2_testbed import run

    # the run's temporary files in a folder of this test's own, to see that it cleans up
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    r = run(quick=True, chunks=20)
    assert not list(tmp_path.glob("corecast-fig2-*")), "the run left its captures behind"
    assert r["intact"] and r["received"] == [20] * 7
    assert r["capture"]["dropped"] == 0 and r["capture"]["local_dropped"] == 0
    assert r["transit_bytes"] == r["eq3_bytes"]
    assert r["local_bytes"] == r["eq5_bytes"]
    assert r["itr"]["counters"]["payload_copies"] == 20 * 3
    # from the capture: every inter-domain link carried each payload exactly once
    assert r["transit_per_link"] == {"100.64.1.1": {"payloads": 20, "headers": 40},
                                     "100.64.2.1": {"payloads": 20, "headers": 60},
                                     "100.64.3.1": {"payloads": 20, "headers": 40}}
    assert sum(r["itr"]["drops"].values()) == 0
    assert all(e["registered"] for e in r["etrs"]) and r["ms"]["refused_auth"] == 0


@pytest.mark.root
@pytest.mark.slow
def test_overhead_experiment_measures_both_modes(tmp_path):
    from corecast.experiments.overhead import run

    r = run(quick=True, scales=(1,), reps=1, chunks=1, out_dir=str(tmp_path))
    modes = {row["mode"]: row for row in r["rows"]}
    assert set(modes) == {"plain", "corecast"}
    assert modes["corecast"]["sent"] == 1 + 1429 and modes["plain"]["sent"] == 1429
    for row in modes.values():
        assert row["itr_in"] > 0 and row["itr_cpu_s"] > 0 and row["cap_rx"] >= row["itr_out"] > 0
    assert (tmp_path / "overhead.png").stat().st_size > 0
    assert r["summary"][0]["corecast_over_plain"] > 0


def test_workload_is_skewed_like_the_paper():
    import ipaddress

    from corecast.workload import skewed

    p = skewed()
    sizes = p.sizes()
    assert sum(sizes) == 1429 and 150 <= len(sizes) <= 250
    assert 0.4 <= sum(1 for s in sizes if s == 1) / len(sizes) <= 0.6 and max(sizes) > 300
    p7 = skewed(scale=7)
    assert len(p7.clients) == 10003 and len({e for e, _ in p7.clients}) == 10003
    assert p7.sizes() == [7 * s for s in sizes]
    for eid, a in p7.clients[::97]:
        net = ipaddress.ip_network(p7.prefixes[a])
        assert ipaddress.ip_address(eid) in net and ipaddress.ip_address(eid) != net[0]


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
def test_fig2_with_intra_domain_multicast_one_copy_per_as():
    """Section 3.5's option: ETRs deliver on an IGMP-snooped group, so local traffic
    falls from (H_I + D) k to (H_I + D) j per payload; every client still gets everything."""
    from corecast.experiments.fig2_testbed import run

    r = run(quick=True, chunks=10, multicast=True)
    assert r["intact"] and r["received"] == [10] * 7
    assert r["transit_bytes"] == r["eq3_bytes"]
    assert r["local_bytes"] == r["eq5_bytes"] == 10 * 3 * (28 + 1200)
    assert all(e["counters"]["multicast_out"] == 10 for e in r["etrs"])


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
@pytest.mark.parametrize("eid6,rloc6", [(True, False), (False, True), (True, True)],
                         ids=["v6-in-v4", "v4-in-v6", "v6-in-v6"])
def test_fig2_every_eid_rloc_family_combination(eid6, rloc6):
    """RFC 9300 section 5: all four EID/RLOC family combinations (v4-in-v4 is the test
    above).  CoreCast rides IPv6 next header 253 for IPv6 EIDs; bytes equal eqs. 3 and 5
    with the matching sizes (IPv6 EIDs: H_CC = 40 + 48, H_I = 48; IPv6 RLOCs: H_L = 56)."""
    from corecast.experiments.fig2_testbed import run

    r = run(quick=True, chunks=10, ipv6=eid6, rloc6=rloc6)
    assert r["intact"] and r["received"] == [10] * 7
    assert r["sizes"]["h_cc"] == (88 if eid6 else 56) and r["sizes"]["h_l"] == (56 if rloc6 else 36)
    assert r["transit_bytes"] == r["eq3_bytes"] and r["local_bytes"] == r["eq5_bytes"]
    assert all(v["payloads"] == 10 for v in r["transit_per_link"].values())
