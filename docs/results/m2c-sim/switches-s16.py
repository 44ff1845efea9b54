"""Run an m2c experiment with ``ReceiverCC`` class switches on (session 16: ``PAIR_ONE``,
``PAIR_ONE_GUARD`` and ``HOLE_OWN``; docs/m2c-results.md, session 16 and its second step).

    python docs/results/m2c-sim/switches-s16.py PAIR_ONE,HOLE_OWN many --receivers N \\
        --size 4000000 --seed S --out DIR
    python docs/results/m2c-sim/switches-s16.py PAIR_ONE sim --receivers 2 --size-kib 4096 \\
        --down-bps 4e6 1e6 --seed 0

The first argument names the switches to turn on (comma-separated), ``none`` for none;
every other switch keeps its default.  Each named switch is set to True.
"""

from __future__ import annotations

import runpy
import sys

from m2c.core.receiver_cc import ReceiverCC

MODULES = {"many": "m2c.experiments.many", "sim": "m2c.sim"}
SWITCHES = ("PAIR_ONE", "PAIR_ONE_GUARD", "HOLE_OWN")

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] not in MODULES:
        sys.exit(f"usage: {sys.argv[0]} SWITCH[,SWITCH]|none {{{'|'.join(MODULES)}}} ARGS...")
    names = [] if sys.argv[1] == "none" else sys.argv[1].split(",")
    for name in names:
        if name not in SWITCHES:
            sys.exit(f"unknown switch {name!r}: one of {', '.join(SWITCHES)}")
        setattr(ReceiverCC, name, True)
    print("switches on:", ", ".join(names) or "none", file=sys.stderr)
    mod = MODULES[sys.argv[2]]
    sys.argv = [mod] + sys.argv[3:]
    runpy.run_module(mod, run_name="__main__")
