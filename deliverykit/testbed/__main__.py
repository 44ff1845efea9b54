"""``python -m deliverykit.testbed {list,cleanup} [--prefix P]``: leftover namespaces;
``python -m deliverykit.testbed latency [--pings N] [--reps N]``: what the testbed
adds to a path (round trip, IGMP join and leave), beside what the simulator's
validation scenarios model of it (:mod:`deliverykit.testbed.latency`; root).

A testbed removes its namespaces on exit, Ctrl-C and SIGTERM; only a SIGKILL
(or a crash of the interpreter) leaves them behind. ``cleanup`` removes the
namespaces whose owning process is gone, after stopping any process still
running inside them, and never touches a live run's. Without ``--prefix`` both
commands take every testbed run (tests use ``dk``, experiments their own
prefixes such as ``m2chet``, ``m2cf5``, ``swfc``, ``swvod``).
"""

from __future__ import annotations

import argparse
import re
import sys

from pyroute2 import netns

from deliverykit.cliutil import positive_int

from .errors import TestbedError
from .lifecycle import cleanup_stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deliverykit.testbed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("list", "cleanup", "latency"))
    p.add_argument("--prefix", default=None,
                   help="only runs with this run-id prefix (default: every testbed run)")
    p.add_argument("--pings", type=positive_int, default=300,
                   help="latency: UDP ping-pongs (default 300, 10 ms apart)")
    p.add_argument("--reps", type=positive_int, default=12,
                   help="latency: IGMP joins and leaves (default 12)")
    a = p.parse_args(argv)
    try:
        if a.command == "latency":
            from .latency import measure, report

            print(report(measure(a.pings, a.reps)))
        elif a.command == "list":
            who = re.escape(a.prefix) if a.prefix else "[a-z][a-z0-9]{0,7}"
            pattern = re.compile(rf"^{who}-\d+-[0-9a-f]{{4}}-")
            for name in sorted(netns.listnetns()):
                if pattern.match(name):
                    print(name)
        else:
            removed = cleanup_stale(a.prefix)
            for name in removed:
                print(f"removed {name}")
            print(f"removed {len(removed)} stale namespace(s)")
    except (TestbedError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
