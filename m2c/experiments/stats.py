"""Confidence intervals for repeated experiment runs (paper section 7: "mean of
20 runs with 95 % confidence intervals").

Student's t quantiles are computed here (no SciPy in the project): the t
density is integrated with Simpson's rule on a change of variable that maps
[0, inf) to [0, pi/2), and the quantile is found by bisection.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

__all__ = ["t_cdf", "t_quantile", "mean_ci", "summarise"]


def _t_pdf(x: float, df: float) -> float:
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(c - (df + 1) / 2 * math.log1p(x * x / df))


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("df must be > 0")
    if x == 0:
        return 0.5
    # integral of the density over [0, |x|] with x = tan(u): dx = du / cos^2 u
    top = math.atan(abs(x))
    n = 400  # even
    h = top / n
    acc = 0.0
    for i in range(n + 1):
        u = i * h
        w = 1 if i in (0, n) else (4 if i % 2 else 2)
        acc += w * _t_pdf(math.tan(u), df) / math.cos(u) ** 2
    half = acc * h / 3
    return 0.5 + half if x > 0 else 0.5 - half


def t_quantile(p: float, df: float) -> float:
    """x with P(T <= x) = p (0 < p < 1)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
        if hi > 1e6:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float | None]:
    """(mean, half-width of the two-sided ``level`` interval); half-width None for one value."""
    if not values:
        raise ValueError("no values")
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, None
    s = statistics.stdev(values)
    return m, t_quantile(0.5 + level / 2, len(values) - 1) * s / math.sqrt(len(values))


def summarise(rows: Iterable[dict], keys: Sequence[str], metrics: Sequence[str],
              level: float = 0.95) -> list[dict]:
    """Group ``rows`` by ``keys`` and give mean and CI per metric.

    Rows of one run that share the keys (several receivers) are first
    averaged, so the interval is over runs (each run one sample), as the
    paper's intervals are over its 20 runs.
    """
    groups: dict[tuple, dict[int, list[dict]]] = {}
    for r in rows:
        key = tuple(r.get(k) for k in keys)
        groups.setdefault(key, {}).setdefault(r.get("run", 0), []).append(r)
    out = []
    for key, runs in groups.items():
        row: dict = dict(zip(keys, key, strict=False))
        row["runs"] = len(runs)
        for m in metrics:
            per_run = []
            for rs in runs.values():
                vals = [r[m] for r in rs if isinstance(r.get(m), (int, float))]
                if vals:
                    per_run.append(statistics.fmean(vals))
            if per_run:
                mean, half = mean_ci(per_run, level)
                row[m] = mean
                row[m + "_ci"] = half
        out.append(row)
    return out
