"""Heterogeneous receivers: one M2C sender, two receivers behind 4 and 1 Mb/s links.

Paper sections 3.2 and 7: the receivers of one session at once.

Topology (deliverykit.testbed): sender s and receivers r1, r2 on one bridge
with IGMP snooping, a querier and fast leave; the bridge ports toward r1 and
r2 are shaped with tbf (4 and 1 Mb/s, 25-packet queues, as in paper 7.1).
Each receiver runs its own congestion control and joins only what its link
carries; the result is each receiver's time against its link-ideal time
(file bits / link rate), with the issue's measured anchors printed beside.
That ideal is payload-only, as the issue's anchors count it (4 MiB at 4 Mb/s
= 8.39 s); the output also gives the time the same file needs on the wire
with our IP/UDP/ALC headers (``ideal_with_headers_s``), which no transfer
over UDP can beat.

    sudo .venv/bin/python -m m2c.experiments.hetero [--quick] [--controller m2c|webrc|webrc-rfc]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from deliverykit import cliutil
from m2c.aio.driver import ReceiveResult, TraceEntry
from m2c.experiments import roles

# issue 5's anchors for a 4 MiB file (ideal 8.4 s and 33.6 s)
ANCHORS = {"UFTP+TFMCC": (33.8, 38.6), "UFTP fixed rate": (8.8, 35.3), "TCP": (8.75, 35.0)}
LINKS_BPS = (4_000_000, 1_000_000)


def _r(x: float | None, nd: int | None = None) -> float | None:
    """A rounded metric, or None (JSON null) when the receiver did not produce it (it failed)."""
    return None if x is None else round(x, nd)


def symbol_for(fec: str, pkt: int = 1500) -> int:
    """Symbol size that fills ``pkt``-byte IP packets: IP/UDP headers (28 bytes) and
    the ALC header of this FEC scheme (44 bytes for LDPC, 48 for RS) subtracted."""
    from m2c.wire.codec import packet_overhead

    return pkt - packet_overhead(fec)


def compact_trace(trace: Sequence[TraceEntry]) -> list[TraceEntry]:
    """The receiver's per-epoch trace, times from its first entry, rounded:
    (t, level, cumulative rate, target rate, lost, received, ARTT, loss events)."""
    t0 = trace[0][0] if trace else 0.0
    return [(round(t - t0, 2), lvl, round(c, 1), round(min(tr, 1e6), 1), lo, rx, round(artt, 4),
             ev) for t, lvl, c, tr, lo, rx, artt, ev in trace]


def receiver_row(i: int, r: ReceiveResult, bps: int, ide: float, controller: str, pkt: int,
                 symbol: int) -> dict[str, Any]:
    """Receiver ``i``'s row: its time against the link-ideal ``ide`` s of its ``bps`` link,
    the section 7.2 metrics and its trace, from its typed result."""
    m = r.metrics
    return {
        "receiver": f"r{i + 1} behind {bps // 1_000_000} Mb/s", "controller": controller,
        "ok": r.ok, "time_s": _r(m.time, 2), "ideal_s": round(ide, 2),
        "time/ideal": _r(m.time / ide, 3),
        # the ideal (and its anchors) count file bytes only; with our
        # 1500-byte IP packets carrying `symbol`-byte symbols the wire needs this
        # long even with no loss, no extra symbol and no climb
        "ideal_with_headers_s": round(ide * pkt / symbol, 2), "symbol_bytes": symbol,
        "gput_kbps": _r(m.gput), "tput_kbps": _r(m.tput), "loss_pct": _r(m.loss, 2),
        "dup_pct": _r(m.dup, 2),
        # dup's parts: symbols received twice, symbols of already decoded blocks
        "repeats": m.raw["repeats"], "after_done": m.raw["after_done"],
        "eliminations": m.raw["eliminations"], "sym_pct": _r(m.sym, 2),
        "net_pct": _r(m.net, 2), "comp_pct": _r(m.comp, 2),
        "anchors_4MiB_s": {k: v[i] for k, v in ANCHORS.items()},
        "trace": compact_trace(r.trace),
    }


def run(quick: bool = True, controller: str = "m2c", size: int | None = None,
        fec: str = "ldpc") -> list[dict]:
    from deliverykit.testbed import Tbf, Testbed
    from m2c.aio.driver import make_session

    size = size or ((1 << 20) if quick else (4 << 20))
    rows = []
    with tempfile.TemporaryDirectory(prefix="m2c-het-") as d, Testbed(prefix="m2chet") as tb:
        src = os.path.join(d, "file.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        lan = tb.bridge("lan")
        s, r1, r2 = tb.host("s"), tb.host("r1"), tb.host("r2")
        ps = tb.attach(s, lan, "10.0.3.1/24")
        p1 = tb.attach(r1, lan, "10.0.3.11/24")
        p2 = tb.attach(r2, lan, "10.0.3.12/24")
        for h, p in ((s, ps), (r1, p1), (r2, p2)):
            tb.mroute(h, p.a)
        for port, bps in ((p1, LINKS_BPS[0]), (p2, LINKS_BPS[1])):
            tb.shape(port.b, tbf=Tbf(rate_bps=bps, limit_pkts=25))
        tb.settle(lan)
        pkt = 1500  # IP packets of 1500 bytes: the symbol is what the headers leave
        symbol = symbol_for(fec, pkt)
        sd = make_session(src, group="239.195.1.1", port=46000, interface="10.0.3.1",
                          min_rate=256_000 / 8 / pkt, max_rate=8_000_000 / 8 / pkt, tsd=2.0,
                          k=2, fec=fec, symbol_size=symbol)
        sdj = sd.to_json()
        ideal = [size * 8 / bps for bps in LINKS_BPS]
        budget = 3 * ideal[1] + 30
        sender = tb.spawn(s, roles.send, sdj, src, budget + 5)
        time.sleep(0.5)
        t1 = tb.spawn(r1, roles.receive, sdj, os.path.join(d, "out1"), "10.0.3.11", budget,
                      controller)
        t2 = tb.spawn(r2, roles.receive, sdj, os.path.join(d, "out2"), "10.0.3.12", budget,
                      controller)
        res = [t1.result(timeout=budget + 20), t2.result(timeout=budget + 20)]
        sender.kill()
        for i, (r, bps, ide) in enumerate(zip(res, LINKS_BPS, ideal, strict=False)):
            rows.append(receiver_row(i, r, bps, ide, controller, pkt, symbol))
    return rows


@cliutil.cli_main("m2c experiment hetero")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--quick", action="store_true", help="1 MiB instead of 4 MiB")
    from m2c.core.receiver_cc import CONTROLLERS

    ap.add_argument("--controller", default="m2c", choices=sorted(CONTROLLERS),
                    help="the receivers' rate controller (default: %(default)s)")
    ap.add_argument("--fec", default="ldpc", choices=["ldpc", "rs"],
                    help="FEC scheme; the symbol fills 1500-byte IP packets (default: %(default)s)")
    ap.add_argument("--json", metavar="FILE", type=cliutil.output_path,
                    help="also write the rows (with each receiver's trace) here as JSON")
    a = ap.parse_args(argv)
    rows = run(quick=a.quick, controller=a.controller, fec=a.fec)
    for r in rows:
        print(json.dumps({k: v for k, v in r.items() if k != "trace"}))
    if a.json:
        from deliverykit.outputs import replace_when_done

        with replace_when_done(a.json) as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
