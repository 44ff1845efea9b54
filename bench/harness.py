"""Benchmark harness: run named benchmarks, write JSON, print markdown tables.

A benchmark is a module ``bench/bench_<name>.py`` with::

    def run(quick: bool) -> dict:
        return {
            "title": "...",
            "rows": [{"subject": "...", "MB/s": Figure.of([...]), ...}, ...],  # measured here
            "comparisons": [measured(...), referenced(...)],  # ours against an anchor
            "ratios": {"C/pure": Figure.of([...])},            # other figures derived in this run
            "targets": {"C/pure": ">= 2"},                     # targets of entries in "ratios"
            "repeats": 3,                                      # how often each subject ran
            "notes": ["..."],
        }

Two kinds of anchor, never mixed in one column (issue 16 item 10, issue 17):

* **measured**: the anchor (zfec, libtorrent, nginx, the kernel, libswift when
  ``LIBSWIFT_BIN`` names a binary, ...) ran in this benchmark run, interleaved
  with ours; the ratio is computed from the two sets of samples
  (:func:`measured`), shown under "vs anchor (measured)";
* **reference**: a constant figure with where it comes from (:class:`Reference`:
  a paper, an issue, field notes; never a host name), shown under "vs reference
  (source)" with its source (:func:`referenced`).

Repeats are interleaved (A, B, A, B, ...: :func:`interleaved`); a figure whose
repeats differ by more than 20% (max/min > 1.2) is printed as "lo-hi", never
as one number, else as the median (:class:`Figure`).  Every table states the
load average before and after the run.

A module may also declare ``REQUIRES = {"root": True, "tools": [...]}`` for
what it cannot measure without (the quick-mode test skips it otherwise).

``python -m bench.harness [--quick] [name ...]`` runs them (all by default),
writes ``bench/results/<name>.json`` (machine, commit, load, figures) and prints
one markdown table per benchmark.  ``--quick`` shrinks every size so CI can
prove the benchmarks still run; its figures are not meant to be quoted.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

#: repeats whose max/min exceeds this are reported as a range (issue 17)
SWING = 1.2

T = TypeVar("T")
K = TypeVar("K")


# ------------------------------------------------------------------ figures


@dataclass(frozen=True)
class Figure:
    """One quantity measured ``len(samples)`` times in this run."""

    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Iterable[float]) -> Figure:
        s = tuple(float(x) for x in samples)
        if not s:
            raise ValueError("a figure needs at least one sample")
        return cls(s)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def lo(self) -> float:
        return min(self.samples)

    @property
    def hi(self) -> float:
        return max(self.samples)

    @property
    def swings(self) -> bool:
        """More than 20% between the lowest and the highest repeat."""
        if self.lo <= 0:
            return self.hi > self.lo
        return self.hi / self.lo > SWING

    def __str__(self) -> str:
        if self.swings:
            return f"{_num(self.lo)}-{_num(self.hi)}"
        return _num(self.median)

    def to_json(self) -> dict:
        return {"median": self.median, "lo": self.lo, "hi": self.hi, "n": len(self.samples),
                "range": self.swings, "text": str(self), "samples": list(self.samples)}


@dataclass(frozen=True)
class Reference:
    """A figure not measured in this run: a constant and where it comes from."""

    value: float
    unit: str
    #: paper / issue / field notes, with conditions (never a host name)
    source: str

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError("a reference figure must say where it comes from")

    def __str__(self) -> str:
        return f"{_num(self.value)} {self.unit}"


class AnchorKind(enum.Enum):
    MEASURED = "measured"    # the anchor ran in this benchmark run
    REFERENCE = "reference"  # a constant with its source


@dataclass(frozen=True)
class Comparison:
    """Ours against one anchor: ``ratio`` = ours / anchor."""

    name: str
    kind: AnchorKind
    anchor: str
    unit: str
    ours: Figure
    ratio: Figure
    #: the anchor's samples from this run (MEASURED only)
    anchor_figure: Figure | None = None
    #: the constant and its source (REFERENCE only)
    reference: Reference | None = None
    target: str = ""

    def __post_init__(self) -> None:
        if (self.kind is AnchorKind.MEASURED) != (self.anchor_figure is not None) or (
                self.kind is AnchorKind.REFERENCE) != (self.reference is not None):
            raise ValueError(f"{self.name}: a measured comparison has the anchor's samples, "
                             "a reference one its source, never both")

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind.value, "anchor": self.anchor,
                "unit": self.unit, "ours": self.ours.to_json(), "ratio": self.ratio.to_json(),
                "anchor_figure": self.anchor_figure.to_json() if self.anchor_figure else None,
                "reference": dataclasses.asdict(self.reference) if self.reference else None,
                "target": self.target}


def _ratios(ours: Iterable[float], anchor: Iterable[float]) -> Figure:
    """Per-repeat ratios when both ran the same number of interleaved repeats
    (pairs share the machine's state); every combination otherwise."""
    a, b = list(ours), list(anchor)
    if len(a) == len(b):
        return Figure.of(x / y for x, y in zip(a, b))
    return Figure.of(x / y for x in a for y in b)


def measured(name: str, ours: Iterable[float], anchor_samples: Iterable[float], *, anchor: str,
             unit: str, target: str = "") -> Comparison:
    """Ours against an anchor that ran in this run (its samples, same unit)."""
    o, a = Figure.of(ours), Figure.of(anchor_samples)
    return Comparison(name, AnchorKind.MEASURED, anchor, unit, o, _ratios(o.samples, a.samples),
                      anchor_figure=a, target=target)


def referenced(name: str, ours: Iterable[float], ref: Reference, *, anchor: str,
               target: str = "") -> Comparison:
    """Ours against a reference figure (a constant with its source)."""
    o = Figure.of(ours)
    return Comparison(name, AnchorKind.REFERENCE, anchor, ref.unit, o,
                      _ratios(o.samples, [ref.value]), reference=ref, target=target)


def interleaved(subjects: Mapping[K, Callable[[], T]], repeats: int) -> dict[K, list[T]]:
    """Run every subject ``repeats`` times in turn (A, B, A, B, ...), so a change
    of load on the shared machine hits all subjects alike; the results by subject."""
    out: dict[K, list[T]] = {k: [] for k in subjects}
    for _ in range(repeats):
        for k, fn in subjects.items():
            out[k].append(fn())
    return out


def load() -> list[float]:
    """1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


# ------------------------------------------------------------------ run and report


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


def _cell(v: Any) -> str:
    return _fmt(v).replace("|", "/")


def _table(cols: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


COMPARISON_COLUMNS = ["comparison", "ours", "anchor", "vs anchor (measured)",
                      "vs reference (source)", "target"]


def _comparison_row(c: Comparison) -> list[str]:
    ours = f"{c.ours} {c.unit}"
    if c.kind is AnchorKind.MEASURED:
        return [c.name, ours, f"{c.anchor}: {c.anchor_figure} {c.unit} (this run)", str(c.ratio),
                "", c.target]
    assert c.reference is not None
    return [c.name, ours, f"{c.anchor}: {c.reference} (reference)", "",
            f"{c.ratio} (source: {c.reference.source})", c.target]


def markdown(result: dict) -> str:
    rows = result.get("rows", [])
    lines = [f"### {result.get('title', result['name'])}", ""]
    ld = result.get("load")
    if ld:
        lines.append(f"load average (1 min) before -> after: {ld['before'][0]:.2f} -> "
                     f"{ld['after'][0]:.2f} on {ld.get('cores', '?')} cores"
                     + (f"; {result['repeats']} interleaved repeats" if result.get("repeats")
                        else "") + "; a range lo-hi where repeats differ by more than 20%")
        lines.append("")
    if rows:
        cols: list[str] = []
        for r in rows:
            cols.extend(c for c in r if c not in cols)
        lines += _table(cols, [[r.get(c, "") for c in cols] for r in rows])
    comps: list[Comparison] = result.get("comparisons", [])
    if comps:
        lines.append("")
        lines += _table(COMPARISON_COLUMNS, [_comparison_row(c) for c in comps])
    if result.get("ratios"):
        lines.append("")
    for k, v in result.get("ratios", {}).items():
        target = result.get("targets", {}).get(k)
        lines.append(f"- {k} = {_fmt(v)}" + (f" (target {target})" if target else ""))
    for note in result.get("notes", []):
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def _num(v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return _num(v)
    if v is None:
        return ""
    return str(v)


def _json_default(o: Any) -> Any:
    if isinstance(o, (Figure, Comparison)):
        return o.to_json()
    if isinstance(o, Reference):
        return dataclasses.asdict(o)
    if isinstance(o, enum.Enum):
        return o.value
    return str(o)


def _write(path: Path, text: str) -> None:
    """Complete files only under the final name."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run(names: list[str], quick: bool) -> list[dict]:
    RESULTS.mkdir(exist_ok=True)
    out = []
    for name in names:
        mod = importlib.import_module(f"bench.bench_{name}")
        t0 = time.time()
        before = load()
        result = mod.run(quick=quick)
        result.update(
            name=name, quick=quick, seconds=round(time.time() - t0, 2),
            load={"before": before, "after": load(), "cores": os.cpu_count()},
            machine=machine(), commit=commit(),
            when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        _write(RESULTS / f"{name}.json", json.dumps(result, indent=2, default=_json_default))
        print(markdown(result), flush=True)
        out.append(result)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.harness",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default all: {', '.join(available())})"
    )
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
    # run the importable module's main, so benchmarks and the harness share one set of
    # classes (under -m this file is also loaded as __main__, a second copy)
    from bench import harness as _harness

    sys.exit(_harness.main())
