"""The testbed's heterogeneous pair (m2c.experiments.hetero, 4 MiB, root) with or without
session 14's decoder proposal (``FileReceiver._first_wait`` = 1 and every elimination
values-free first), each elimination's wall and thread CPU time logged by the receivers
(forked children) as JSON lines (docs/m2c-results.md, session 15).

    sudo .venv/bin/python docs/results/m2c-sim/firstwait-testbed-s15.py on|off TAG LOG
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from m2c.core import filetx
from m2c.fec import ldpc


def timed(log: str, tag: str, mode: str, partial: bool | None) -> Any:
    """``FileReceiver._eliminate`` as it is (``partial`` None) or always with it, timed."""
    def _eliminate(self: filetx.FileReceiver, sbn: int, dec: ldpc.LDPCDecoder) -> bool:
        kw = partial if partial is not None else self._ml_deficit.get(sbn, 1 << 30) <= 2
        w0, c0 = time.perf_counter(), time.thread_time()
        ok = dec.solve(partial=kw)
        w1, c1 = time.perf_counter(), time.thread_time()
        with open(log, "a") as f:
            f.write(json.dumps({"tag": tag, "mode": mode, "pid": os.getpid(), "sbn": sbn,
                                "ok": bool(ok), "partial": kw, "deficit": dec.ml_deficit,
                                "wall_ms": (w1 - w0) * 1e3, "cpu_ms": (c1 - c0) * 1e3,
                                "load": os.getloadavg()[0]}) + "\n")
        self.eliminations += 1
        self._ml_deficit[sbn] = dec.ml_deficit
        self._ml_wait[sbn] = max(1, dec.ml_deficit)
        return ok
    return _eliminate


def main(mode: str, tag: str, log: str) -> None:
    from m2c.experiments.hetero import run

    if mode == "on":
        filetx.FileReceiver._first_wait = (  # type: ignore[method-assign]  # the proposal
            lambda self, k: 1)
    filetx.FileReceiver._eliminate = (  # type: ignore[method-assign]  # timed
        timed(log, tag, mode, False if mode == "on" else None))
    load0 = os.getloadavg()
    rows = run(quick=False, controller="m2c")
    print(json.dumps({"tag": tag, "mode": mode, "load_before": load0,
                      "rows": [{k: r[k] for k in ("receiver", "ok", "time_s", "ideal_s",
                                                   "time/ideal", "eliminations", "loss_pct")}
                               for r in rows]}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("on", "off"):
        sys.exit(f"usage: {sys.argv[0]} on|off TAG LOG")
    main(*sys.argv[1:])
