"""The (a)/(b) figures at the paper's sizes stay readable: the x axis counts up to 420,000 files
downloaded, and its tick labels must not run into each other (at 359,556 requests they printed
"50000 100000150000..." as one unreadable run)."""

from __future__ import annotations

from typing import Any

import pytest

from vmc.experiments.simtables import draw, figure_series


def _row(n: int) -> dict[str, Any]:
    return {"scenario": "high-low", "incomplete_batches": 0, "bandwidth_saving_%": 0.4,
            "latency_saving_%": 3.0, "normal_origin": [10_000] * n, "vmc_origin": [9_990] * n,
            "normal_latencies": [0.2] * n, "vmc_latencies": [0.19] * n}


@pytest.mark.parametrize("n", [60, 25_000, 359_556])
def test_x_tick_labels_do_not_overlap(n: int) -> None:
    import matplotlib.pyplot as plt

    r = _row(n)
    fig = draw(r, figure_series(r))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            lo, hi = ax.get_xlim()
            labels = [t for t, x in zip(ax.get_xticklabels(), ax.get_xticks())
                      if t.get_text() and lo <= x <= hi]
            assert len(labels) >= 3
            boxes = [t.get_window_extent(renderer) for t in labels]
            for left, right in zip(boxes, boxes[1:]):
                assert left.x1 < right.x0, (n, [t.get_text() for t in labels])
    finally:
        plt.close(fig)
