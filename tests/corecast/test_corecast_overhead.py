"""The section 6 overhead experiment's ablations (issue 18): the kernel-forwarding
baseline, the linear EID-to-RLOC search against the trie, the per-client hash check
on and off, and the whole machine's CPU from /proc/stat beside getrusage."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys

import pytest

from corecast.experiments import overhead as ov
from corecast.workload import skewed


def test_subjects_cover_the_ablation_matrix():
    subs = ov.subjects((ov.Lookup.TRIE, ov.Lookup.LINEAR), (True, False), kernel=True)
    assert [s.label for s in subs] == [
        "kernel", "plain/trie", "plain/linear", "corecast/trie/hash on",
        "corecast/trie/hash off", "corecast/linear/hash on", "corecast/linear/hash off"]
    assert [s.label for s in ov.subjects()] == ["plain/trie", "corecast/trie/hash on"]


def test_cpu_sample_reads_proc_stat_as_sar_does():
    a = ov.CpuSample.now()
    sum(range(200_000))
    b = ov.CpuSample.now()
    assert 0 <= a.busy <= a.total and b.total >= a.total
    assert 0.0 <= a.busy_share(b) <= 1.0


def test_padding_mappings_cover_no_client_and_every_lookup_agrees():
    """The padded map-cache makes the linear search longer without changing any answer:
    the same datagrams from the trie and the linear search, C or twin."""
    pad = ov.padding(300)
    assert len(pad.splitlines()) == len(set(pad.splitlines())) == 300
    nets = [ipaddress.ip_network(line.split()[0]) for line in pad.splitlines()]
    pop = skewed(scale=1)
    assert not any(ipaddress.ip_address(e) in n for e, _ in pop.clients[::50] for n in nets)
    pkts = ov._packets(1, 1, True)[:300] + ov._packets(1, 1, False)[:300]

    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix

    outs = []
    for lookup in ("trie", "linear"):
        for fast in (False, None):
            mc = MapCache()
            mc.load_static(pad + pop.map_cache_text())
            itr = Itr(ov.X_OUT, [parse_prefix("10.255.0.0/16")], mc, fast=fast, lookup=lookup)
            outs.append(itr.handle_batch(pkts, 0.0))
    assert len(outs[0]) > 300 and all(o == outs[0] for o in outs)
    with pytest.raises(ValueError):
        ov.padding(8193)


def test_core_cost_is_measured_for_the_itr_subjects_only():
    pkts = ov._packets(1, 1, True)
    mc = skewed(scale=1).map_cache_text()
    assert ov._core_us_per_pkt(ov.Subject(ov.Mode.KERNEL), pkts, mc) is None
    for sub in ov.subjects((ov.Lookup.LINEAR,), (False,)):
        assert ov._core_us_per_pkt(sub, pkts, mc, passes=1) > 0


@pytest.mark.parametrize("args", [["--lookup", "bogus"], ["--hash", "maybe"], ["--pad", "9000"],
                                  ["--rate", "0"], ["--scales", "9"], ["--reps", "-1"],
                                  ["--quiet-below", "0"], ["--resume"]])
def test_bad_options_are_one_line_errors(args):
    r = subprocess.run([sys.executable, "-m", "corecast", "experiment", "overhead", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "error:" in r.stderr.splitlines()[-1]


@pytest.mark.root
@pytest.mark.slow
def test_ablations_and_the_kernel_baseline_in_namespaces(tmp_path):
    subs = ov.subjects((ov.Lookup.TRIE, ov.Lookup.LINEAR), (True, False), kernel=True)
    r = ov.run(quick=True, scales=(1,), reps=1, chunks=1, out_dir=str(tmp_path),
               lookups=(ov.Lookup.TRIE, ov.Lookup.LINEAR), hashes=(True, False), kernel=True,
               idle_s=0.2, pad=100)
    rows = {row["subject"]: row for row in r["rows"]}
    assert list(rows) == [s.label for s in subs]
    kern = rows["kernel"]
    assert kern["sent"] == 1429 and kern["cap_rx"] >= 1429 and kern["itr_in"] is None
    assert kern["core_us_per_pkt"] is None
    for label, row in rows.items():
        assert 0 <= row["idle_busy_pct"] <= 100 and 0 <= row["sys_busy_pct"] <= 100
        assert row["mappings"] == 300
        if label != "kernel":
            assert row["itr_in"] > 0 and row["itr_cpu_s"] > 0 and row["core_us_per_pkt"] > 0
            assert row["cap_rx"] >= row["itr_out"] > 0
    # the CoreCast stream goes out as headers plus one payload per RLOC, either lookup
    assert rows["corecast/linear/hash on"]["itr_out"] == rows["corecast/trie/hash on"]["itr_out"]
    per = r["summary"][0]["subjects"]
    assert per["plain/trie"]["core_over_plain_trie"] == 1.0
    assert (tmp_path / "overhead.json").stat().st_size > 0
    assert (tmp_path / "overhead.png").stat().st_size > 0
    # every run is in the part file too, as measured, with its provenance
    part = [json.loads(ln) for ln in (tmp_path / ov.PART).read_text().splitlines()]
    assert part == r["rows"] and [p["rep"] for p in part] == [0] * len(subs)
    assert part[0]["config"] == {"scales": [1], "rates": [12_000.0], "seconds": None,
                                 "chunks": 1, "pad": 100, "lookups": ["trie", "linear"],
                                 "hashes": ["on", "off"], "kernel": True, "idle_s": 0.2,
                                 "c_path": part[0]["speedups"] is not None}
    assert all(p["commit"] for p in part) and r["sources"]["rows"] == len(subs)
