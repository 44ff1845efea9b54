"""``deliverykit``: the shared tools (demo, capture analysis, fast-path status, testbed cleanup)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deliverykit", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="run every system's loopback demo").add_argument("rest", nargs=argparse.REMAINDER)
    sub.add_parser("info", help="which fast paths are in use")
    sub.add_parser("analyse", help="summarise a pcap per protocol", add_help=False).add_argument(
        "rest", nargs=argparse.REMAINDER)
    cl = sub.add_parser("cleanup", help="remove testbed namespaces left by a killed run (root)")
    cl.add_argument("--prefix", default=None, help="only namespaces with this prefix")
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        from deliverykit.demo import main as demo_main

        return demo_main(args.rest)
    if args.cmd == "analyse":
        from deliverykit.analyse import main as analyse_main

        return analyse_main(args.rest)
    if args.cmd == "info":
        from deliverykit import fastpath

        names = sorted(n for n in dir(fastpath.speedups) if not n.startswith("_")) if fastpath.speedups else []
        print(f"C fast paths: {'on' if fastpath.have_c() else 'off (pure-Python twins)'}")
        for n in names:
            print(f"  {n}")
        return 0
    if args.cmd == "cleanup":
        from deliverykit.testbed import cleanup_stale

        removed = cleanup_stale(args.prefix) if args.prefix else cleanup_stale()
        print(f"removed {len(removed) if removed is not None else 0} stale namespace(s)")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
