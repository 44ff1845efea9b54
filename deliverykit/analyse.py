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
``--json FILE`` everything (``-``: to stdout, instead of the tables),
``--plots DIR`` each analyser's figures. Every file appears under its final
name only when complete: it is written beside it under a temporary name and
renamed over it, so an existing file is replaced atomically and an
interrupted run leaves the old one. A directory given for ``--json``, or a
file for ``--csv``/``--plots``, is one error line and exit 1.

Integrity (issue 13): frames the capture kept shorter than they were on the
wire (``Frame.truncated``; tcpdump's ``-s 65535`` on loopback) are counted
per analyser, reported, and every figure they affect carries a non-empty
``unreliable`` column (text, CSV, JSON). An analyser that knows which of its
figures a cut frame touches says so (``handles_truncation = True``, and
marks those rows itself); for any other analyser that saw cut frames, every
row is marked. Analysers must be strict (:func:`foreign_port`): one
protocol's packets never count as another's.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from deliverykit import cliutil
from deliverykit.outputs import replace_when_done
from deliverykit.pcap import Frame, PcapError, Reader

GROUP = "deliverykit.analysers"

#: the column in which an analyser marks a row whose figures are incomplete (a reason)
UNRELIABLE = "unreliable"

#: (IP protocol, port) -> the protocol that owns it. An analyser refuses traffic on a port
#: another protocol owns (unless its own options name that port): LISP data and control
#: (RFC 9300/9301, IANA), PPSPP's customary port (RFC 7574 assigns none; swift, libswift's
#: examples and our CLI use 6778), CoreCast's UDP port and the ITR inside port of
#: ``corecast deploy``, HTTP and the proxy ports VMC uses. ALC/FLUTE has no fixed port.
WELL_KNOWN_PORTS: dict[tuple[int, int], str] = {
    (17, 4341): "corecast", (17, 4342): "corecast", (17, 54341): "corecast",
    (17, 9341): "corecast", (17, 6778): "ppspp",
    (6, 80): "vmc", (6, 8080): "vmc", (6, 3128): "vmc",
}


def foreign_port(frame: Frame, mine: str, own: Iterable[int] = ()) -> bool:
    """True if the frame uses a port that belongs to a protocol other than ``mine``
    (ports in ``own``, the analyser's configured ones, never count as foreign)."""
    own = set(own)
    for port in (frame.sport, frame.dport):
        if port is not None and port not in own:
            owner = WELL_KNOWN_PORTS.get((frame.proto, port))
            if owner is not None and owner != mine:
                return True
    return False


#: most time-slot rows (rates per interval) one series gets with its empty slots filled in
MAX_DENSE_SLOTS = 100_000


def time_slots(slots: Iterable[int], limit: int = MAX_DENSE_SLOTS) -> list[int]:
    """The slots of a rate series to show: every slot from the first to the last (empty
    ones as zero rows) when that span is at most ``limit``, else only those with data
    (a capture whose clock jumps must not make an analyser emit billions of rows)."""
    present = sorted(slots)
    if not present:
        return []
    if present[-1] - present[0] < limit:
        return list(range(present[0], present[-1] + 1))
    return present


def cut_reason(n: int) -> str:
    """The ``unreliable`` text for figures fed by ``n`` frames cut by the snap length."""
    return f"{n} frame(s) captured shorter than on the wire"


class Options(dict):
    """The ``--opt KEY=VALUE`` pairs, as analysers read them.

    It remembers every key an analyser asked for, so a key no loaded
    analyser knows is an error rather than silently ignored, and it checks
    values by the toolkit's naming convention before an analyser sees them:
    ``interval`` is a positive number, ``chunk-size``, ``max-*`` and
    ``*-max`` positive whole numbers, ``*-port`` a comma-separated list of
    ports 1-65535.
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
    if key == "interval":
        try:
            ok = 0 < float(value) < float("inf")  # not nan, not inf
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{key}={value!r}: needs a positive number")
    elif key == "chunk-size" or key.startswith("max-") or key.endswith("-max"):
        if not (value.isdigit() and int(value) > 0):
            raise ValueError(f"{key}={value!r}: needs a positive number (whole)")
    elif key.endswith("-port"):
        for part in str(value).split(","):
            if not (part.isdigit() and 1 <= int(part) <= 65535):
                raise ValueError(f"{key}={value!r}: needs ports 1-65535, comma-separated")
    return value


class FlowAnalyser:
    """Per-flow packets, bytes and rate: the view every capture gets.

    Packets and bytes come from the IP headers (lengths as on the wire), so
    frames cut by the snap length do not change them; each flow says how many
    of its packets were cut."""

    name = "flows"
    handles_truncation = True

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
            st = self.flows[key] = [0, 0, f.ts, f.ts, 0]
        st[0] += 1
        st[1] += f.length
        st[3] = f.ts
        if f.truncated:
            st[4] += 1

    def tables(self) -> dict[str, list[dict]]:
        rows = []
        for (src, sport, dst, dport, proto), (pk, by, t0, t1, cut) in sorted(
                self.flows.items(), key=lambda kv: -kv[1][1]):
            dur = t1 - t0
            rows.append({"src": src, "sport": sport, "dst": dst, "dport": dport, "proto": proto,
                         "packets": pk, "bytes": by, "seconds": round(dur, 6),
                         "bit/s": round(8 * by / dur) if dur > 0 else None,
                         "truncated_packets": cut})
        if self.dropped_flows:  # packets of flows over flows-max: not in any row
            rows.append({"src": "(flows over flows-max)", "packets": self.dropped_flows,
                         UNRELIABLE: "flows-max reached: these packets are in no flow row"})
        return {"flows": rows}


class UnknownAnalyser(LookupError):
    """``--only NAME`` names no analyser."""


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
            raise UnknownAnalyser(
                f"unknown analyser {name!r}; known: flows, {', '.join(sorted(found))}"
            )
    return out


@dataclass(slots=True)
class Seen:
    """What one analyser was handed."""

    frames: int = 0     #: frames it accepted
    truncated: int = 0  #: of those, captured shorter than on the wire


@dataclass(slots=True)
class Report:
    """One run over one capture."""

    results: dict[str, dict[str, list[dict]]]  #: analyser -> table -> rows
    stats: dict[str, int]                      #: the reader's counters
    seen: dict[str, Seen] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"capture": self.stats,
                "analysers": {n: {"frames": s.frames, "truncated_frames": s.truncated}
                              for n, s in self.seen.items()},
                "warnings": self.warnings, "results": self.results}


def run(path: str | Path, analysers: list, progress=None) -> Report:
    """Run the analysers over one capture, count what each saw, mark what cut frames affect."""
    reader = Reader(path, progress=progress)
    seen = {a.name: Seen() for a in analysers}
    pairs = [(a, seen[a.name]) for a in analysers]
    for frame in reader:
        for a, s in pairs:
            if a.accepts(frame):
                s.frames += 1
                if frame.truncated:
                    s.truncated += 1
                a.feed(frame)
    report = Report({a.name: a.tables() for a in analysers}, reader.stats, seen)
    _mark(report, analysers)
    return report


def analyse(path: str | Path, analysers: list, progress=None) -> tuple[dict, dict]:
    """Run the analysers over one capture; returns ({analyser: {table: rows}}, reader stats)."""
    report = run(path, analysers, progress)
    return report.results, report.stats


def _mark(report: Report, analysers: list) -> None:
    """Mark rows of analysers that cannot say which figures cut frames touch; warn."""
    st = report.stats
    if st.get("truncated"):
        report.warnings.append(
            f"{st['truncated']} of {st['records']} frames were captured shorter than they were "
            "on the wire (snap length: capture with tcpdump -s 0); figures with a non-empty "
            f"'{UNRELIABLE}' column are incomplete")
        if st.get("truncated_headers"):
            report.warnings.append(f"{st['truncated_headers']} frames were cut inside their IP/UDP "
                                   "header: no analyser could see them")
    if st.get("file_truncated"):
        report.warnings.append("the capture file ends inside a record (the capture was cut short)")
    if st.get("malformed"):
        report.warnings.append(
            f"{st['malformed']} records are malformed (not counted by any analyser)"
        )
    dropped = st.get("dropped_by_capture") or 0
    if dropped:
        report.warnings.append(f"{dropped} packets were dropped by the capturing system and are "
                               "not in the file: every figure may be incomplete")
    for a in analysers:
        s = report.seen[a.name]
        tables = report.results[a.name]
        if dropped:  # which figures the lost packets fed is unknowable: all of them
            for rows in tables.values():
                for r in rows:
                    r[UNRELIABLE] = r.get(UNRELIABLE) or f"{dropped} packets dropped by the capture"
        if s.truncated:
            if not getattr(a, "handles_truncation", False):
                reason = cut_reason(s.truncated) + " (this analyser cannot tell which figures)"
                for rows in tables.values():
                    for r in rows:
                        r[UNRELIABLE] = r.get(UNRELIABLE) or reason
            report.warnings.append(
                f"{a.name}: {s.truncated} of the {s.frames} frames it read were cut"
            )
        for rows in tables.values():  # one column set per table: every row has the column
            if any(r.get(UNRELIABLE) for r in rows):
                for r in rows:
                    r.setdefault(UNRELIABLE, None)


def _print(report: Report, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1 itself: let cli_main end quietly
            raise BrokenPipeError

    console = _Console()
    if not console.is_terminal:  # piped or logged: do not squeeze tables into 80 columns
        console = _Console(width=200)
    for aname, tables in report.results.items():
        for tname, rows in tables.items():
            if not rows:  # an analyser that saw none of its traffic: one line, not an empty table
                console.print(f"{aname}: {tname}: no rows")
                continue
            bad = sum(1 for r in rows if r.get(UNRELIABLE))
            title = f"{aname}: {tname} ({len(rows)} rows" + (f", {bad} UNRELIABLE)" if bad else ")")
            table = Table(title=title)
            cols: list[str] = []
            for r in rows[:limit]:
                cols.extend(c for c in r if c not in cols)
            for i, c in enumerate(cols):  # the first column names the row: never cut it
                table.add_column(c, no_wrap=i == 0, min_width=None if i else min(24, max(
                    len(c), *(len(str(r.get(c, ""))) for r in rows[:limit]))))
            for r in rows[:limit]:
                table.add_row(*("" if r.get(c) is None else str(r.get(c)) for c in cols),
                              style="yellow" if r.get(UNRELIABLE) else None)
            console.print(table)
    console.print(
        "capture: " + ", ".join(f"{k} {v}" for k, v in report.stats.items()), markup=False
    )
    for w in report.warnings:
        console.print(f"WARNING: {w}", markup=False)


# --- outputs: checked before the capture is read, written under a temporary name --------

class OutputError(ValueError):
    """An output path that cannot be used (one line, exit 1)."""


def _check_file(opt: str, text: str) -> None:
    if text == "-":
        return
    path = Path(text)
    if path.is_dir():
        raise OutputError(f"{opt} {text}: is a directory, not a file")
    if path.exists() and not path.is_file():
        raise OutputError(f"{opt} {text}: exists and is not a regular file")
    if not os.access(path.resolve().parent, os.W_OK):
        raise OutputError(f"{opt} {text}: directory {path.resolve().parent} is not writable")


def _check_dir(opt: str, text: str) -> None:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{opt} {text}: is a file, not a directory")
    probe = path
    while not probe.exists():  # the nearest existing ancestor must be a writable directory
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{opt} {text}: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK):
        raise OutputError(f"{opt} {text}: directory {probe} is not writable")


def _write_csv(report: Report, outdir: Path) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    tables = dict(report.results)
    capture = [{"what": k, "value": v} for k, v in report.stats.items()]
    capture += [{"what": f"{n}_frames", "value": s.frames} for n, s in report.seen.items()]
    capture += [
        {"what": f"{n}_truncated_frames", "value": s.truncated} for n, s in report.seen.items()
    ]
    capture += [{"what": "warning", "value": w} for w in report.warnings]
    tables["capture"] = {"stats": capture}
    for aname, ts in tables.items():
        for tname, rows in ts.items():
            cols: list[str] = []
            for r in rows:
                cols.extend(c for c in r if c not in cols)
            p = outdir / f"{aname}-{tname}.csv"
            with replace_when_done(p, newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=cols)
                w.writeheader()
                w.writerows(rows)
            written.append(p)
    return written


def _write_plots(analysers: list, outdir: Path) -> list[Path]:
    """Each analyser draws into a private directory inside ``outdir``; each finished
    figure is then renamed into place (an existing one replaced atomically)."""
    outdir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".plots.", dir=outdir))
    written = []
    try:
        for a in analysers:
            if hasattr(a, "plots"):
                for p in a.plots(staging):
                    final = outdir / Path(p).name
                    os.replace(p, final)
                    written.append(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


@cliutil.cli_main("deliverykit analyse", expected=(OutputError,))
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deliverykit analyse", description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=cliutil.existing_file, help="pcap or pcapng file")
    ap.add_argument("--only", action="append", help="analyser to run (repeatable; default all)")
    ap.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                    help="option for the analysers, e.g. as-table=prefixes.csv")
    ap.add_argument("--csv", metavar="DIR",
                    help="write one CSV per table here (existing files replaced atomically)")
    ap.add_argument("--json", metavar="FILE",
                    help="write everything as JSON (- = stdout, instead of the tables; "
                         "an existing file is replaced atomically)")
    ap.add_argument("--plots", metavar="DIR", help="write the analysers' plots here")
    ap.add_argument("--rows", type=cliutil.nonnegative_int, default=20,
                    help="rows per table on the terminal")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    bad = [o for o in args.opt if "=" not in o or not o.split("=", 1)[0]]
    if bad:
        ap.error(f"--opt takes KEY=VALUE, got {bad[0]!r}")
    if args.json and args.json != "-" and not Path(args.json).resolve().parent.is_dir():
        ap.error(f"--json: no such directory: {Path(args.json).parent}")
    options = Options(dict(o.split("=", 1) for o in args.opt))
    try:
        analysers = load_analysers(args.only, options)
    except UnknownAnalyser as exc:
        ap.error(f"--only: {exc.args[0]}")
    except (ValueError, OSError) as exc:  # an analyser rejected its --opt values
        ap.error(f"--opt: {exc}")
    if options.unknown():
        known = ", ".join(sorted(options.asked))
        ap.error(
            f"--opt: no analyser run here takes {', '.join(options.unknown())} (they take: {known})"
        )
    if args.json:  # before reading a capture that may take minutes
        _check_file("--json", args.json)
        if args.json != "-" and Path(args.json).resolve() == Path(args.capture).resolve():
            raise OutputError(f"--json {args.json}: is the capture itself")
    for opt, value in (("--csv", args.csv), ("--plots", args.plots)):
        if value:
            _check_dir(opt, value)
    try:
        if args.no_progress or not sys.stderr.isatty():
            report = run(args.capture, analysers)
        else:
            from rich.progress import Progress

            with Progress(transient=True) as prog:
                size = Path(args.capture).stat().st_size
                task = prog.add_task("reading", total=size)
                report = run(args.capture, analysers,
                             progress=lambda done: prog.update(task, completed=done))
    except (PcapError, OSError) as exc:
        print(f"deliverykit analyse: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(report.as_json(), indent=2, default=str) if args.json else ""
    if args.json == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    else:
        _print(report, args.rows)
    if args.csv:
        _write_csv(report, Path(args.csv))
    if args.json and args.json != "-":
        with replace_when_done(args.json) as fh:
            fh.write(text)
    if args.plots:
        for p in _write_plots(analysers, Path(args.plots)):
            print(f"wrote {p}", file=sys.stderr if args.json == "-" else sys.stdout)
    for w in report.warnings if args.json == "-" else ():
        print(f"deliverykit analyse: warning: {w}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
