"""CoreCast at the paper's scale (issue 18): the Fig. 2 testbed's warm-up datagrams
left out of the measured bytes by what they are; the multi-domain simulator scenario
(Fig. 4's skewed clients per AS) against eqs. 3 and 5 and Fig. 6's per-AS saving; the
ITR's state measured against the memory model; `corecast plan`'s paper column."""

from __future__ import annotations

import ipaddress
import os

from corecast.experiments.fig2_testbed import WARMUP, WARMUP_PORT, is_warmup
from corecast.wire import codec as c
from corecast.wire.ip import build_ip, build_udp

ETH = bytes(14)


def _a(x: str) -> bytes:
    return ipaddress.ip_address(x).packed


def _lisp(outer_src: str, outer_dst: str, inner: bytes) -> bytes:
    return build_ip(_a(outer_src), _a(outer_dst), 17,
                    build_udp(61000, 4341, bytes([0x80]) + bytes(7) + inner))


def test_warmup_datagrams_are_recognised_by_what_they_are_on_every_link():
    for me, eid, r0, r1 in (("10.0.0.1", "10.1.1.2", "100.64.0.1", "100.64.1.1"),
                            ("fd00::1", "fd00:1:1::2", "fd01::1", "fd01:1::1")):
        warm = build_ip(_a(me), _a(eid), 17, build_udp(WARMUP_PORT, 5001, WARMUP))
        assert is_warmup(ETH + warm)                       # local link, decapsulated
        assert is_warmup(ETH + _lisp(r0, r1, warm))        # transit link, LISP
        assert is_warmup(ETH + warm + bytes(20))           # Ethernet padding after it
        # the measured stream is not: a CoreCast header PDU and a plain UDP datagram
        # of the same shape from another port or with another payload
        h = c.encode_cc_header(0, bytes(20), _a(eid), 5001)
        assert not is_warmup(ETH + _lisp(r0, r1, build_ip(_a(me), _a(eid), 253, h)))
        assert not is_warmup(ETH + build_ip(_a(me), _a(eid), 17,
                                            build_udp(WARMUP_PORT + 1, 5001, WARMUP)))
        assert not is_warmup(ETH + build_ip(_a(me), _a(eid), 17,
                                            build_udp(WARMUP_PORT, 5001, b"warm!")))
    assert not is_warmup(ETH + b"\x45")  # truncated: not a warm-up, no exception


# ------------------------------------------------------------ multi-domain, simulated


def test_rank_size_population_has_fig4s_shape():
    from corecast.workload import rank_size

    sizes, s = rank_size(1000, 100_000)
    assert sum(sizes) == 100_000 and len(sizes) == 1000 and min(sizes) == 1
    assert sizes == sorted(sizes, reverse=True)
    # Fig. 4(a): just over half the ASes hold a single client; a long tail of big ones
    assert 0.5 <= sum(1 for n in sizes if n == 1) / 1000 <= 0.51
    assert sizes[0] > 500 and 1.5 < s < 1.7
    # with the RO trace's population per AS, the top three hold about half (Fig. 4(b): 51%)
    ro, _ = rank_size(1000, 25_000)
    assert 0.45 < sum(ro[:3]) / 25_000 < 0.55


def test_rank_size_refuses_what_it_cannot_shape():
    import pytest

    from corecast.workload import rank_size

    with pytest.raises(ValueError, match="at least 15"):
        rank_size(10, 14)  # half single-client ASes need 1.5 clients per AS
    with pytest.raises(ValueError):
        rank_size(0, 10)


def test_skewed_domains_bytes_equal_eqs_3_and_5_in_total_and_per_as():
    """The real cores over 20 ASes of Fig. 4's shape: transit and local bytes equal
    eq. 3 and eq. 5 (computed by hand, as tests/corecast/test_corecast_sim.py does), in
    total and per AS, and each AS's saving is unicast over CoreCast bytes into it."""
    from corecast.sim import run, scenario
    from corecast.workload import rank_size
    from tests.corecast.test_corecast_sim import model

    sizes, _ = rank_size(20, 200)
    res = run(scenario(seconds=0.5, seed=3, sizes=sizes))
    assert res.chunks == 20 and res.received == 20 * 200 and res.lost == 0
    tt, lt = model(20, 10, 1200)  # j = 20 ASes, k = 200 clients
    assert (res.transit_bytes, res.local_bytes) == (20 * tt, 20 * lt)
    assert [a.clients for a in res.per_as] == sizes
    for a in res.per_as:
        tt_a, lt_a = model(1, a.clients, 1200)
        assert (a.transit_bytes, a.local_bytes) == (20 * tt_a, 20 * lt_a)
        assert a.saving == a.local_bytes / a.transit_bytes
        # a one-client AS costs CoreCast a payload and a header: slightly worse (Fig. 6)
        assert (a.saving < 1) == (a.clients == 1)
    assert max(a.saving for a in res.per_as) > 10


def test_multidomain_command_writes_both_csvs_and_the_paper_column(tmp_path):
    import csv
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "corecast.cli", "experiment", "multidomain",
                        "--backend", "sim", "--ases", "10", "--clients", "60", "--seconds",
                        "0.25", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = {r["quantity"]: r for r in csv.DictReader(open(tmp_path / "multidomain.csv"))}
    assert rows["transit_bytes"]["ours"] == rows["transit_bytes"]["model"]
    assert rows["local_bytes"]["ours"] == rows["local_bytes"]["model"]
    assert "Fig. 6" in rows["as_saving_over_10x_fraction"]["paper"]
    per_as = list(csv.DictReader(open(tmp_path / "multidomain-as.csv")))
    assert len(per_as) == 10 and sum(int(r["clients"]) for r in per_as) == 60
    assert sorted(os.listdir(tmp_path)) == ["multidomain-as.csv", "multidomain.csv"]


def test_multidomain_bad_input_is_one_line(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "corecast.cli", "experiment", "multidomain",
                        "--ases", "10", "--clients", "12", "--seconds", "0.25",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "at least 15 clients" in p.stderr.strip().splitlines()[-1]
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------ ITR state, measured


def test_itr_state_measured_against_the_memory_model():
    """The real Itr core populated with N channels x M ASes: the model's count (one
    payload and hash per channel, one RLOC per servedRLOC entry) is what state_size
    reports, and the Python heap it really takes is above the model and grows with
    every servedRLOC entry by more than the model's 4 bytes (dict slots and objects)."""
    from corecast.plan import itr_memory, measure_itr_state, our_sizes

    small = measure_itr_state(10, 40)
    big = measure_itr_state(10, 80)
    p_cc = our_sizes("udp").p_cc(1200)
    for st, ases in ((small, 40), (big, 80)):
        assert st["served_rlocs"] == 10 * ases and st["pending_packets"] == 0
        assert st["total_bytes"] == itr_memory(10, ases, p_cc)["total"]
        assert st["python_heap_bytes"] > st["total_bytes"]
        assert st["rss_bytes"] >= 0
    per_entry = (big["python_heap_bytes"] - small["python_heap_bytes"]) / (10 * 40)
    assert per_entry > 4


# ------------------------------------------------------------ corecast plan, trace


def _plan_out(*args: str) -> str:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "corecast.cli", "plan", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _paper_col(out: str, quantity: str) -> str:
    line = next(x for x in out.splitlines() if x.startswith(quantity))
    return line.split()[-1]


def test_plan_paper_text_only_for_the_papers_parameters():
    out = _plan_out()
    assert _paper_col(out, "eq.1 max clients CC") == "397,135"
    assert _paper_col(out, "eq.2 max clients unicast") == "26,041"
    out = _plan_out("--C", "1e9")
    table = out.split("(paper text:")[0]  # the notes below the table discuss the paper's text
    assert "397,135" not in table and "26,041" not in table
    assert _paper_col(out, "eq.1 max clients CC") == "-"
    assert _paper_col(out, "eq.2 max clients unicast") == "-"
    assert _paper_col(out, "H = H_L + H_CC") == "80"  # sizes do not depend on C
    out = _plan_out("--D", "400")
    assert _paper_col(out, "P_CC (payload packet)") == "-"
    assert _paper_col(out, "eq.1 max clients CC") == "-"
    assert _paper_col(out, "eq.2 max clients unicast") == "26,041"
    out = _plan_out("--channels", "20")
    assert "just over 1 MB" not in out and "16 MB" not in out


def test_synthetic_trace_volume_is_the_stream_over_a_stated_session(tmp_path, capsys):
    from corecast.experiments import trace

    assert trace.main(["--synthetic", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "9900 s x 384000 b/s = 475.2 MB" in out
    peers = trace.synthetic(300)
    assert abs(sum(p.bytes for p in peers) - 9900 * 384_000 / 8) <= 300  # rounding per peer
    assert trace.main(["--synthetic", "--quick", "--session", "600"]) == 0
    assert "600 s x 384000 b/s = 28.8 MB" in capsys.readouterr().out


def test_links_carry_what_the_stream_offers_them():
    """A 100,000-client run once delivered 38% of its local bytes: the largest AS's ETR
    (45,006 clients, ~18 Gb/s of unicast) sat behind a fixed 100 Mb/s uplink and the run
    ended with its queue full.  Links are sized at twice the offered load."""
    from corecast.plan import eq3_transit, our_sizes
    from corecast.sim import scenario

    sc = scenario(seconds=1.0, sizes=[45_006, 1])
    nodes = {n.name: n for n in sc.nodes}
    per_s = 384_000 / (8 * 1200)
    assert nodes["etr0"].up.rate >= 2 * 8 * per_s * 45_006 * 1228
    assert nodes["etr1"].up.rate == 100e6  # a small AS keeps the default
    assert nodes["itr"].up.rate >= 2 * 8 * per_s * eq3_transit(our_sizes("udp"), 1200, 2, 45_007)
