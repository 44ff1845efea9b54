"""Machine-readable experiment output: one CSV per run, a JSON metadata file
(parameters, versions, git commit, date, host load) and PNG plots, all in an
``--out`` directory."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import platform
import socket
import sys
from collections.abc import Iterable
from typing import Any

from deliverykit import provenance


def _version(mod: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(mod)
    except Exception:  # noqa: BLE001 - not installed: recorded as None
        return None


def git_commit() -> str | None:
    """Commit of the source tree the experiment ran from (None outside git)."""
    return provenance.git_commit(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def metadata(name: str, params: dict, load_before: tuple[float, ...], started: float) -> dict:
    """What a reader needs to redo or judge a run."""
    started_utc = dt.datetime.fromtimestamp(started, dt.timezone.utc)
    return {
        "experiment": name,
        "parameters": params,
        "date_utc": started_utc.isoformat(timespec="seconds"),
        "duration_s": round(dt.datetime.now().timestamp() - started, 1),
        "git_commit": git_commit(),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "versions": {"python": platform.python_version(), "kernel": platform.release(),
                     **{m: _version(m) for m in ("libtorrent", "cryptography", "matplotlib")}},
        "argv": sys.argv,
    }


def write_csv(path: str, rows: Iterable[dict]) -> str:
    rows = list(rows)
    keys: list[str] = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})
    return path


def write_json(path: str, obj: Any) -> str:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, default=str)
    return path


def pyplot():
    """matplotlib with a file-only backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def cdf_plot(path: str, series: dict[str, list[float]], xlabel: str, title: str) -> str:
    """Empirical CDFs, one line per series (paper Figs. 7-11 style)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, xs in series.items():
        v = sorted(x for x in xs if x is not None)
        if v:
            ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of peers")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
