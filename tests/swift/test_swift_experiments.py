"""The shipped experiments run (quick mode) on the namespace testbed."""

import pytest


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_vod_swarm_quick() -> None:
    from swift.experiments.vod_swarm import run
    rows = run(quick=True, leechers=4, video_s=10, algorithms=("linear", "vod"))
    assert [r["what"].rsplit(", ", 1)[1] for r in rows] == ["linear", "vod"]
    for r in rows:
        assert r["completed"] == "4/4", r
        assert r["rejected chunks"] == 0
        assert r["mean start-up s"] is not None


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_flashcrowd_quick_against_libtorrent() -> None:
    from swift.experiments.flashcrowd import run
    rows = run(quick=True, leechers=3, size_mb=2)
    assert [r["system"] for r in rows] == ["swift", "libtorrent"]
    for r in rows:
        assert r["completed"] == "3/3", r
        assert r["start-up s"]["n"] == 3
