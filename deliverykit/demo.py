"""``make demo``: run every system's end-to-end loopback demo and print a table.

Each protocol package registers ``<pkg>.demo:run`` under the entry-point group
``deliverykit.demos``; ``run(quick=True)`` returns rows such as
``{"system": "m2c", "what": "...", "result": "...", "ok": True}``. Demos run on
loopback as an ordinary user. A package whose demo is not built yet is listed
as such; a demo that fails makes the command exit 1.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from importlib.metadata import entry_points

from rich.console import Console
from rich.table import Table

GROUP = "deliverykit.demos"


def discover() -> list:
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deliverykit demo", description=__doc__.splitlines()[0])
    ap.add_argument("systems", nargs="*", help="only these systems (default: all registered)")
    ap.add_argument("--full", action="store_true", help="longer runs instead of the quick ones")
    args = ap.parse_args(argv)
    known = [ep.name for ep in discover()]
    unknown = [s for s in args.systems if s not in known]
    if unknown:
        ap.error(f"unknown system {unknown[0]!r}; known: {', '.join(known)}")
    console = Console()
    if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
        console = Console(width=140)
    table = Table(title="deliverykit demo: every system end to end on loopback")
    for col in ("system", "what", "result", "ok", "seconds"):
        table.add_column(col)
    failed = 0
    for ep in discover():
        if args.systems and ep.name not in args.systems:
            continue
        try:
            run = ep.load()
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(ep.name):
                table.add_row(ep.name, "(not built yet)", "", "-", "")
                continue
            raise
        console.print(f"[bold]running {ep.name} demo...[/bold]")
        t0 = time.monotonic()
        try:
            rows = run(quick=not args.full)
        except Exception:  # noqa: BLE001 - report every system, then fail
            failed += 1
            console.print(traceback.format_exc())
            table.add_row(ep.name, "demo raised", "see traceback above", "[red]FAIL", "")
            continue
        secs = f"{time.monotonic() - t0:.1f}"
        for row in rows:
            ok = row.get("ok", True)
            failed += not ok
            table.add_row(row.get("system", ep.name), str(row.get("what", "")),
                          str(row.get("result", "")), "[green]yes" if ok else "[red]NO", secs)
            secs = ""
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
