"""Benchmark harness: run named benchmarks, write JSON, print a markdown table.

A benchmark is a module ``bench/bench_<name>.py`` with::

    def run(quick: bool) -> dict:
        return {
            "title": "...",
            "rows": [{"subject": "...", "MB/s": 1.0, ...}, ...],  # one per tool/variant
            "ratios": {"ours/anchor": 0.5, ...},                   # computed in the same run
            "targets": {"ours/anchor": ">= 0.5"},                  # what the issue asks
            "notes": ["..."],
        }

A module may also declare ``REQUIRES = {"root": True, "tools": [...]}`` for
what it cannot measure without (the quick-mode test skips it otherwise).

``python -m bench.harness [--quick] [name ...]`` runs them (all by default),
writes ``bench/results/<name>.json`` (machine, commit, figures) and prints one
markdown table per benchmark. ``--quick`` shrinks every size so CI can prove the
benchmarks still run; its figures are not meant to be quoted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def available() -> list[str]:
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
            text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(result: dict) -> str:
    rows = result.get("rows", [])
    lines = [f"### {result.get('title', result['name'])}", ""]
    if rows:
        cols: list[str] = []
        for r in rows:
            cols.extend(c for c in r if c not in cols)
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for r in rows:
            lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |")
    for k, v in result.get("ratios", {}).items():
        target = result.get("targets", {}).get(k)
        lines.append(f"- {k} = {_fmt(v)}" + (f" (target {target})" if target else ""))
    for note in result.get("notes", []):
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def run(names: list[str], quick: bool) -> list[dict]:
    RESULTS.mkdir(exist_ok=True)
    out = []
    for name in names:
        mod = importlib.import_module(f"bench.bench_{name}")
        t0 = time.time()
        result = mod.run(quick=quick)
        result.update(
            name=name, quick=quick, seconds=round(time.time() - t0, 2),
            machine=machine(), commit=commit(), when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
        print(markdown(result), flush=True)
        out.append(result)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.harness", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default all: {', '.join(available())})")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: proves the benchmarks run")
    ap.add_argument("--list", action="store_true", help="list benchmarks and exit")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(available()))
        return 0
    unknown = set(args.names) - set(available())
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    run(args.names or available(), args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
