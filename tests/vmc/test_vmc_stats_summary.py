"""The status log is bounded but summarises every request (issue 19 item 5): counts and
histograms include the requests that left the detail ring."""

from __future__ import annotations

from vmc.core.stats import Histogram, Stats


def test_summary_counts_every_request_past_the_ring() -> None:
    st = Stats(keep=3)
    for i in range(10):
        rec = st.new_request("GET", f"http://a/{i}", now=float(i))
        rec.mode = "origin" if i % 2 else "joined"
        rec.status = 200 if i < 8 else 502
        if i < 8:
            st.client(rec, 100, now=i + 0.01 * (i + 1))
            st.done(rec, now=i + 0.1 * (i + 1))
        else:
            rec.error = "upstream-closed"
    snap = st.snapshot(recent=2)
    assert len(snap["recent"]) == 2 and len(st.records) == 3  # the detail stays bounded
    s = snap["summary"]
    assert s["requests"] == 10
    assert s["modes"] == {"joined": 5, "origin": 5}
    assert s["statuses"] == {"200": 8, "502": 2}
    assert s["errors"] == 2
    assert s["ttfb"]["count"] == 8 and s["completion"]["count"] == 8
    assert sum(s["ttfb"]["counts"]) == 8
    assert abs(snap["mean_completion"] - sum(0.1 * (i + 1) for i in range(8)) / 8) < 1e-9
    assert abs(snap["mean_ttfb"] - sum(0.01 * (i + 1) for i in range(8)) / 8) < 1e-9


def test_histogram_buckets() -> None:
    h = Histogram()
    for x in (0.0005, 0.003, 0.003, 7.0, 1e6):
        h.add(x)
    j = h.to_json()
    # 1e6 s: the overflow bucket
    assert j["count"] == 5 and sum(j["counts"]) == 5 and j["counts"][-1] == 1
    assert j["bounds"][0] == 0.001 and j["counts"][0] == 1
    assert j["max"] == 1e6
