"""The shipped experiments run (quick mode) on the namespace testbed and write
their machine-readable output (CSV, JSON metadata, PNG plots)."""

import csv
import json

import pytest


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_vod_swarm_quick(tmp_path) -> None:
    from swift.experiments.vod_swarm import SUPPLY, run
    rows = run(quick=True, leechers=4, video_s=10, algorithms=("linear", "vod"), out=str(tmp_path))
    assert [r["what"].rsplit(", ", 1)[1] for r in rows] == ["linear", "vod"]
    for r in rows:
        assert r["completed"] == "4/4", r
        assert r["rejected chunks"] == 0
        assert r["mean start-up s"] is not None
        assert r["seeder Mb/s"] == round(max(2, SUPPLY * 4), 2)  # scaled to the swarm
    with open(tmp_path / "vod_swarm-4.csv") as f:
        per = list(csv.DictReader(f))
    assert len(per) == 8 and {p["algorithm"] for p in per} == {"linear", "vod"}
    assert {p["group"] for p in per} == {"A", "B", "C", "D"}
    meta = json.loads((tmp_path / "vod_swarm-4.json").read_text())
    assert meta["parameters"]["leechers"] == 4 and meta["git_commit"] and meta["load_avg_before"]
    assert meta["summary"] == json.loads(json.dumps(rows)) and "Fig. 6" in meta["paper"]
    assert (tmp_path / "vod_swarm-4-fig6.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_flashcrowd_quick_against_libtorrent(tmp_path) -> None:
    from swift.experiments.flashcrowd import run
    rows = run(quick=True, leechers=3, size_mb=2, out=str(tmp_path))
    assert [r["system"] for r in rows] == ["swift", "libtorrent"]
    for r in rows:
        assert r["completed"] == "3/3", r
        assert r["start-up s"]["n"] == 3
    base = tmp_path / "flashcrowd-flash-3x2MiB"
    with open(f"{base}.csv") as f:
        per = list(csv.DictReader(f))
    assert [p["system"] for p in per] == ["swift"] * 3 + ["libtorrent"] * 3
    assert all(float(p["completion_s"]) > 0 for p in per)
    from swift.experiments.flashcrowd import DIAG
    assert all(int(p[k]) >= 0 for p in per[:3] for k in DIAG)  # our peer's counters
    assert all(p[k] == "" for p in per[3:] for k in DIAG)
    meta = json.loads(open(f"{base}.json").read())
    assert meta["versions"]["libtorrent"] and meta["parameters"]["leechers"] == 3
    for kind in ("completion", "startup"):
        assert open(f"{base}-{kind}.png", "rb").read(4) == b"\x89PNG"
