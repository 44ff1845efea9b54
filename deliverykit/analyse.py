"""``deliverykit analyse CAPTURE``: per-protocol summaries of a packet capture.

Streams the capture once through :class:`deliverykit.pcap.Reader` and hands
every IP frame to each analyser that accepts it. Analysers are registered by
the protocol packages under the entry-point group ``deliverykit.analysers``
(``name = "pkg.analysis:Analyser"``); a built-in ``flows`` analyser (per
5-tuple packets, bytes, duration, rate) is always there. An analyser is::

    class Analyser:
        name = "ppspp"
        def __init__(self, options: dict): ...       # --opt key=value pairs (e.g. as-table=FILE)
        def accepts(self, frame) -> bool: ...        # cheap: ports / IP protocol
        def feed(self, frame) -> None: ...
        def tables(self) -> dict[str, list[dict]]: ... # table name -> rows
        def plots(self, outdir: Path) -> list[Path]: ...  # optional

Output: rich tables on the terminal; ``--csv DIR`` one CSV per table,
``--json FILE`` everything, ``--plots DIR`` each analyser's figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from deliverykit.pcap import Frame, PcapError, Reader

GROUP = "deliverykit.analysers"


class Options(dict):
    """The ``--opt KEY=VALUE`` pairs, as analysers read them.

    It remembers every key an analyser asked for, so a key no loaded
    analyser knows is an error rather than silently ignored, and it checks
    values by the toolkit's naming convention before an analyser sees them:
    ``interval``, ``chunk-size``, ``max-*`` and ``*-max`` are positive
    numbers, ``*-port`` a comma-separated list of ports 1-65535.
    """

    def __init__(self, pairs: dict[str, str]) -> None:
        super().__init__(pairs)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        if key in self:
            return _checked(key, dict.__getitem__(self, key))
        return default

    def __getitem__(self, key):
        self.asked.add(key)
        return _checked(key, dict.__getitem__(self, key))

    def unknown(self) -> list[str]:
        return sorted(set(self) - self.asked)


def _checked(key: str, value: str) -> str:
    if key in ("interval", "chunk-size") or key.startswith("max-") or key.endswith("-max"):
        try:
            ok = float(value) > 0
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{key}={value!r}: needs a positive number")
    elif key.endswith("-port"):
        for part in str(value).split(","):
            if not (part.isdigit() and 1 <= int(part) <= 65535):
                raise ValueError(f"{key}={value!r}: needs ports 1-65535, comma-separated")
    return value


class FlowAnalyser:
    """Per-flow packets, bytes and rate: the view every capture gets."""

    name = "flows"

    def __init__(self, options: dict | None = None) -> None:
        self.flows: dict[tuple, list] = {}
        self.limit = int((options or {}).get("flows-max", 100_000))
        self.dropped_flows = 0

    def accepts(self, frame: Frame) -> bool:
        return True

    def feed(self, f: Frame) -> None:
        key = (f.src, f.sport, f.dst, f.dport, f.proto)
        st = self.flows.get(key)
        if st is None:
            if len(self.flows) >= self.limit:  # bounded memory on hostile captures
                self.dropped_flows += 1
                return
            st = self.flows[key] = [0, 0, f.ts, f.ts]
        st[0] += 1
        st[1] += f.length
        st[3] = f.ts

    def tables(self) -> dict[str, list[dict]]:
        rows = []
        for (src, sport, dst, dport, proto), (pk, by, t0, t1) in sorted(
                self.flows.items(), key=lambda kv: -kv[1][1]):
            dur = t1 - t0
            rows.append({"src": src, "sport": sport, "dst": dst, "dport": dport, "proto": proto,
                         "packets": pk, "bytes": by, "seconds": round(dur, 6),
                         "bit/s": round(8 * by / dur) if dur > 0 else None})
        return {"flows": rows}


def load_analysers(names: Iterable[str] | None, options: dict) -> list:
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    wanted = list(names) if names else ["flows", *sorted(found)]
    out = []
    for name in wanted:
        if name == "flows":
            out.append(FlowAnalyser(options))
        elif name in found:
            try:
                cls = found[name].load()
            except ImportError as exc:  # registered but not importable: say so, run the rest
                print(f"deliverykit analyse: analyser {name} unavailable ({exc})", file=sys.stderr)
                continue
            out.append(cls(options))
        else:
            raise SystemExit(f"unknown analyser {name!r}; known: flows, {', '.join(sorted(found))}")
    return out


def analyse(path: str | Path, analysers: list, progress=None) -> tuple[dict, dict]:
    """Run the analysers over one capture; returns ({analyser: {table: rows}}, reader stats)."""
    reader = Reader(path, progress=progress)
    for frame in reader:
        for a in analysers:
            if a.accepts(frame):
                a.feed(frame)
    return {a.name: a.tables() for a in analysers}, reader.stats


def _print(results: dict, stats: dict, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped or logged: do not squeeze tables into 80 columns
        console = Console(width=200)
    for aname, tables in results.items():
        for tname, rows in tables.items():
            if not rows:  # an analyser that saw none of its traffic: one line, not an empty table
                console.print(f"{aname}: {tname}: no rows")
                continue
            table = Table(title=f"{aname}: {tname} ({len(rows)} rows)")
            cols: list[str] = []
            for r in rows[:limit]:
                cols.extend(c for c in r if c not in cols)
            for i, c in enumerate(cols):  # the first column names the row: never cut it
                table.add_column(c, no_wrap=i == 0, min_width=None if i else min(24, max(
                    len(c), *(len(str(r.get(c, ""))) for r in rows[:limit]))))
            for r in rows[:limit]:
                table.add_row(*("" if r.get(c) is None else str(r.get(c)) for c in cols))
            console.print(table)
    console.print("capture: " + ", ".join(f"{k} {v}" for k, v in stats.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deliverykit analyse", description=__doc__.splitlines()[0])
    ap.add_argument("capture", help="pcap or pcapng file")
    ap.add_argument("--only", action="append", help="analyser to run (repeatable; default all)")
    ap.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                    help="option for the analysers, e.g. as-table=prefixes.csv")
    ap.add_argument("--csv", metavar="DIR", help="write one CSV per table here")
    ap.add_argument("--json", metavar="FILE", help="write all tables as JSON")
    ap.add_argument("--plots", metavar="DIR", help="write the analysers' plots here")
    ap.add_argument("--rows", type=int, default=20, help="rows per table on the terminal")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    bad = [o for o in args.opt if "=" not in o or not o.split("=", 1)[0]]
    if bad:
        ap.error(f"--opt takes KEY=VALUE, got {bad[0]!r}")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        ap.error(f"--json: no such directory: {Path(args.json).parent}")
    options = Options(dict(o.split("=", 1) for o in args.opt))
    try:
        analysers = load_analysers(args.only, options)
    except (ValueError, OSError) as exc:  # an analyser rejected its --opt values
        ap.error(f"--opt: {exc}")
    if options.unknown():
        known = ", ".join(sorted(options.asked))
        ap.error(f"--opt: no analyser run here takes {', '.join(options.unknown())} (they take: {known})")
    try:
        if args.no_progress or not sys.stderr.isatty():
            results, stats = analyse(args.capture, analysers)
        else:
            from rich.progress import Progress

            with Progress(transient=True) as prog:
                size = Path(args.capture).stat().st_size
                task = prog.add_task("reading", total=size)
                results, stats = analyse(args.capture, analysers,
                                         progress=lambda done: prog.update(task, completed=done))
    except (PcapError, OSError) as exc:
        print(f"deliverykit analyse: {exc}", file=sys.stderr)
        return 2
    _print(results, stats, args.rows)
    if args.csv:
        out = Path(args.csv)
        out.mkdir(parents=True, exist_ok=True)
        for aname, tables in results.items():
            for tname, rows in tables.items():
                cols: list[str] = []
                for r in rows:
                    cols.extend(c for c in r if c not in cols)
                with (out / f"{aname}-{tname}.csv").open("w", newline="") as fh:
                    w = csv.DictWriter(fh, fieldnames=cols)
                    w.writeheader()
                    w.writerows(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"capture": stats, "results": results}, indent=2, default=str))
    if args.plots:
        Path(args.plots).mkdir(parents=True, exist_ok=True)
        for a in analysers:
            if hasattr(a, "plots"):
                for p in a.plots(Path(args.plots)):
                    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
