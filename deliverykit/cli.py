"""``deliverykit``: the shared tools (demo, capture analysis, fast-path status, testbed cleanup)."""

from __future__ import annotations

import argparse
import sys

from deliverykit.cliutil import cli_main

# Subcommands with their own argument parsers: everything after the name is theirs,
# so `deliverykit analyse --help` or `deliverykit demo --full m2c` reach them intact.
DELEGATED = {
    "demo": ("deliverykit.demo", "run every system's loopback demo (demo --help for options)"),
    "analyse": (
        "deliverykit.analyse",
        "summarise a pcap per protocol (analyse --help for options)",
    ),
    "sim": ("deliverykit.sim.cli", "simulator: validate against the netns testbed (sim --help)"),
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="deliverykit", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{demo,analyse,sim,info,cleanup}")
    for name, (_, text) in DELEGATED.items():
        sub.add_parser(name, help=text, add_help=False)
    sub.add_parser("info", help="which fast paths are in use")
    cl = sub.add_parser("cleanup", help="remove testbed namespaces left by a killed run (root)")
    cl.add_argument("--prefix", default=None, help="only namespaces with this prefix")
    return ap


def _info() -> int:
    from deliverykit import fastpath

    names = (
        sorted(n for n in dir(fastpath.speedups) if not n.startswith("_"))
        if fastpath.speedups
        else []
    )
    print(f"C fast paths: {'on' if fastpath.have_c() else 'off (pure-Python twins)'}")
    for n in names:
        print(f"  {n}")
    return 0


@cli_main("deliverykit")
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        import importlib

        module = importlib.import_module(DELEGATED[argv[0]][0])
        return int(module.main(argv[1:]) or 0)
    args = _parser().parse_args(argv)
    if args.cmd == "info":
        return _info()
    if args.cmd == "cleanup":
        from deliverykit.testbed import cleanup_stale

        removed = cleanup_stale(args.prefix) if args.prefix else cleanup_stale()
        print(f"removed {len(removed) if removed is not None else 0} stale namespace(s)")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
