"""Squid log parsing, the synthetic generator and the calculated saving (paper sec. 3.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from vmc.workload.squid import LogEntry, LogError, clean, parse_line, read_log
from vmc.workload.synth import SCENARIOS, Zipf, calculated_saving, generate

LINE = ("1066036250.123    245 10.0.0.1 TCP_MISS/200 4512 GET http://a.example/x - "
        "DIRECT/192.0.2.1 text/html")


def test_parse_native_line() -> None:
    e = parse_line(LINE)
    assert ((e.time, e.elapsed_ms, e.client, e.code, e.status, e.bytes)
            == (1066036250.123, 245, "10.0.0.1", "TCP_MISS", 200, 4512))
    assert ((e.method, e.url, e.hierarchy, e.peer, e.type)
            == ("GET", "http://a.example/x", "DIRECT", "192.0.2.1", "text/html"))
    assert e.start == pytest.approx(1066036250.123 - 0.245)
    assert parse_line(e.format()) == e


def test_clean_keeps_data_bearing_gets() -> None:
    lines = [LINE,
             LINE.replace("GET", "POST"),
             LINE.replace("/200", "/304"),
             LINE.replace(" 4512 ", " 0 "),
             LINE.replace("http://a.example/x", "a.example:443"),
             "garbage"]
    es = clean(read_log(lines))
    assert len(es) == 1 and es[0].url == "http://a.example/x"
    with pytest.raises(LogError):
        list(read_log(["garbage"], strict=True))


@given(st.text(max_size=200))
def test_fuzz_parse_line(text: str) -> None:
    try:
        e = parse_line(text)
    except LogError:
        return
    assert isinstance(e, LogEntry)


def test_object_path_is_stable_per_url_and_size() -> None:
    a = parse_line(LINE)
    b = parse_line(LINE.replace("1066036250.123", "1066036999.000"))
    assert a.object_path() == b.object_path() and a.object_path().endswith("?size=4512")


def test_zipf_prefers_low_ranks() -> None:
    import random

    z = Zipf(100, 1.0, random.Random(3))
    xs = [z.sample() for _ in range(5000)]
    assert all(1 <= x <= 100 for x in xs)
    assert xs.count(1) > xs.count(10) > xs.count(100)


def test_scenarios_order_by_overlap() -> None:
    calc = {n: calculated_saving(generate(sc, 1500, seed=2)) for n, sc in SCENARIOS.items()}
    assert calc["low-none"].overlaps == 0 and calc["low-none"].latency_saving == 0.0
    assert calc["high-high"].overlaps > calc["high-low"].overlaps
    assert calc["high-vhigh"].bandwidth_saving > calc["high-high"].bandwidth_saving
    assert calc["high-high"].files_per_hour > 5 * calc["low-low"].files_per_hour
    ev = generate(SCENARIOS["high-vhigh"], 50, seed=1)
    assert sum(1 for e in ev if e.bytes == 1 << 20) == 10  # every fifth download is the 1 MB file


def test_calculated_saving_by_hand() -> None:
    def e(start: float, url: str, n: int, ms: int) -> LogEntry:
        return LogEntry(start + ms / 1000, ms, "c", "TCP_MISS", 200, n, "GET", url)

    log = [e(0.0, "http://h/a", 1000, 1000), e(0.5, "http://h/a", 1000, 1000),
           e(2.0, "http://h/a", 1000, 1000)]
    c = calculated_saving(log)
    assert c.overlaps == 1 and c.shared_bytes == 1000
    assert c.bandwidth_saving == pytest.approx(100 / 3)
    # joiner at offset 500: 400 bytes of prefix from the origin
    w = calculated_saving(log, window=100)
    assert w.shared_bytes == 600


@pytest.mark.slow
def test_tables_experiment_quick() -> None:
    """Tables 1 and 2 on loopback for one scenario: both arms complete, paper values beside ours."""
    from vmc.experiments.tables import run

    res = run(quick=True, n=40, scenarios=["high-vhigh"])
    (t1,), (t2,) = res["table1"], res["table2"]
    assert t1["paper calc. %"] == 23.05 and t2["paper latency %"] == 71.21
    assert t2["failed"] == 0
    assert t2["VMC MB"] < t2["Normal MB"]  # the 1 MB file every fifth download is shared
    assert len(res["latencies"]["high-vhigh"]["vmc"]) == 40


def test_testbed_helpers() -> None:
    from vmc.experiments.testbed import saved_per_request, summarise

    status = {"recent": [
        {"mode": "origin", "client_bytes": 100, "origin_bytes": 0},
        {"mode": "joined", "client_bytes": 100, "origin_bytes": 30},
        {"mode": "range", "client_bytes": 10, "origin_bytes": 0},
        {"mode": "passthrough", "client_bytes": 50, "origin_bytes": 50},
    ]}
    assert saved_per_request(status) == [0, 70, 10, 0]
    runs = [{"scenario": "x",
             "table2": {"bandwidth %": bw, "latency %": lat, "latency % vs proxy-only": None}}
            for bw, lat in ((1.0, -5.0), (3.0, 15.0))]
    s = summarise(runs)
    assert s["runs"] == 2 and s["bandwidth %"] == {"mean": 2.0, "min": 1.0, "max": 3.0}
    assert s["latency %"]["mean"] == 5.0 and "latency % vs proxy-only" not in s
