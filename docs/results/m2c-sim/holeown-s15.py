"""Run an m2c experiment with ``ReceiverCC.HOLE_OWN`` on (session 15's switch, off by
default; docs/m2c-results.md, session 15).

    python docs/results/m2c-sim/holeown-s15.py many --receivers N --size 4000000 --seed S --out DIR
    python docs/results/m2c-sim/holeown-s15.py sim --receivers 2 --size-kib 4096 \
        --down-bps 4e6 1e6 --seed 0
"""

from __future__ import annotations

import runpy
import sys

from m2c.core.receiver_cc import ReceiverCC

MODULES = {"many": "m2c.experiments.many", "sim": "m2c.sim"}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODULES:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(MODULES)}}} ARGS...")
    ReceiverCC.HOLE_OWN = True
    mod = MODULES[sys.argv[1]]
    sys.argv = [mod] + sys.argv[2:]
    runpy.run_module(mod, run_name="__main__")
