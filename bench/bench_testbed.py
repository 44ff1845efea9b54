"""Testbed figures: setup cost, what the userspace netem sustains, and how exact shaping is.

Rows (measured in this run, at the receiver):
- setup: seconds to build and tear down a 3-host line;
- flood: UDP datagrams/s delivered over a plain veth (kernel) and through the
  userspace impairer (netem with delay 0 and with 5 ms), from one blocking sender;
- delay: excess of the measured one-way delay over a 20 ms netem (median, p99);
- tbf: measured/configured rate for a 4 Mbit/s tbf under a 2x offered load.
Needs root; without it the result says so and has no rows.
"""

from __future__ import annotations

import socket
import statistics
import struct
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from bench.harness import Figure, interleaved, measured

if TYPE_CHECKING:
    from deliverykit.testbed import Netem

STAMP = struct.Struct("!Id")
PORT = 7300


def _receive(ready, idle: float = 1.0) -> tuple[int, float, list[float]]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind(("0.0.0.0", PORT))
    ready.set()
    s.settimeout(15)
    n, first, last, delays = 0, 0.0, 0.0, []
    try:
        while True:
            data = s.recv(65536)
            last = time.monotonic()
            if n == 0:
                first = last
            n += 1
            delays.append(last - STAMP.unpack_from(data)[1])
            s.settimeout(idle)
    except TimeoutError:
        pass
    return n, last - first, delays


def _send(dst: str, count: int, interval: float, size: int) -> float:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = bytes(size - STAMP.size)
    t0 = time.monotonic()
    for seq in range(count):
        if interval and seq % 10 == 0:
            wait = t0 + seq * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        try:
            s.sendto(STAMP.pack(seq, time.monotonic()) + pad, (dst, PORT))
        except OSError:
            pass
    return time.monotonic() - t0


def _flow(tb, a, b, count, interval, size):
    ready = tb.event()
    rx = tb.spawn(b, _receive, ready)
    ready.wait(10)
    tb.run(a, _send, "10.0.1.2", count, interval, size, timeout=120)
    return rx.result(timeout=60)


#: What the harness test must have before running this benchmark (see tests/test_bench_quick.py).
REQUIRES = {"root": True}


def _setup() -> dict[str, float]:
    from deliverykit.testbed import Testbed

    t0 = time.monotonic()
    with Testbed() as tb:
        a, r, b = tb.host("a"), tb.host("r", forwarding=True), tb.host("b")
        tb.link(a, r, "10.0.1.1/24", "10.0.1.2/24")
        tb.link(r, b, "10.0.2.1/24", "10.0.2.2/24")
    return {"setup+teardown, 3-host line (s)": time.monotonic() - t0}


def _calls(n: int) -> dict[str, float]:
    from deliverykit.testbed import Netem, Testbed

    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        t0 = time.monotonic()
        for _ in range(n):
            tb.run(a, int)
        rt = (time.monotonic() - t0) / n * 1000
        t0 = time.monotonic()
        tb.shape(link.a, netem=Netem(delay_ms=1))
        return {
            "tb.run() round trip, fork+setns+pickle (ms)": rt,
            f"tb.shape() with netem [{tb.netem_backend()}] (ms)": (time.monotonic() - t0) * 1000,
        }


def _flood(netem: Netem | None, count: int) -> float:
    from deliverykit.testbed import Testbed

    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        if netem is not None:
            tb.shape(link.a, netem=netem)
        n, span, _ = _flow(tb, a, b, count, 0.0, 200)
    return n / span if span else 0.0


def _delay(count: int) -> dict[str, float]:
    from deliverykit.testbed import Netem, Testbed

    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        _, _, plain = _flow(tb, a, b, count, 0.002, 200)
        tb.shape(link.a, netem=Netem(delay_ms=20))
        _, _, delays = _flow(tb, a, b, count, 0.002, 200)
    # the first frames wait for ARP, which itself crosses the 20 ms netem: skip them
    excess = sorted(d - 0.020 for d in delays[50:])
    return {"plain veth at 500 pkt/s: one-way delay, median (ms)": statistics.median(plain) * 1000,
            "netem 20 ms at 500 pkt/s: excess delay, median (ms)": statistics.median(excess) * 1000,
            "netem 20 ms at 500 pkt/s: excess delay, p99 (ms)":
                excess[int(len(excess) * 0.99) - 1] * 1000}


def _tbf(seconds: float, rate: int, size: int) -> float:
    from deliverykit.testbed import Tbf, Testbed

    interval = (size + 42) * 8 / (2 * rate)
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        tb.shape(link.a, tbf=Tbf(rate_bps=rate, limit_pkts=25))
        n, span, _ = _flow(tb, a, b, int(seconds / interval), interval, size)
    return (n - 1) * (size + 42) * 8 / span


def run(quick: bool) -> dict:
    from deliverykit.testbed import Netem, have_root

    repeats = 2 if quick else 3
    result: dict = {"title": "testbed: setup, userspace netem throughput, shaping accuracy",
                    "rows": [], "comparisons": [], "ratios": {}, "targets": {}, "notes": [],
                    "repeats": repeats}
    if not have_root():
        result["notes"].append("needs root: nothing measured")
        return result
    flood = 20_000 if quick else 200_000
    rate, size = 4_000_000, 1200
    floods: dict[str, Netem | None] = {
        "plain veth (kernel)": None,
        "userspace netem, delay 0": Netem(),
        "userspace netem, delay 5 ms": Netem(delay_ms=5),
    }
    subjects: dict[str, Callable[[], object]] = {
        "setup": _setup, "calls": partial(_calls, 10 if quick else 50),
        **{f"flood {k}": partial(_flood, v, flood) for k, v in floods.items()},
        "delay": partial(_delay, 200 if quick else 2000),
        "tbf": partial(_tbf, 1.5 if quick else 5.0, rate, size),
    }
    got = interleaved(subjects, repeats)
    rows = result["rows"]
    # ``got`` maps each subject to what it returned: dicts for these three keys,
    # lists of numbers for the floods and tbf
    for key in ("setup", "calls", "delay"):
        runs = cast(list[dict[str, float]], got[key])
        for name in runs[0]:
            what, unit = name.rsplit(" (", 1)
            rows.append({"subject": what, "value": Figure.of(r[name] for r in runs),
                         "unit": unit.rstrip(")")})
    pps: dict[str, list[float]] = {}
    for k in floods:
        pps[k] = [float(x) for x in cast(list[float], got[f"flood {k}"])]
        rows.append({"subject": f"UDP flood 200 B: {k}", "value": Figure.of(pps[k]),
                     "unit": "pkt/s delivered"})
    tbf = [float(x) for x in cast(list[float], got["tbf"])]
    rows.append({"subject": "tbf 4 Mbit/s under 2x load", "value": Figure.of(tbf), "unit": "bit/s"})
    for k in list(floods)[1:]:
        result["comparisons"].append(measured(
            f"{k} / plain veth", pps[k], pps["plain veth (kernel)"],
            anchor="UDP flood 200 B: plain veth (kernel)", unit="pkt/s"))
    result["ratios"]["tbf measured/configured"] = Figure.of(x / rate for x in tbf)
    result["targets"]["tbf measured/configured"] = "within 0.85..1.15 (the test's bound)"
    result["notes"].append("figures swing 2-3x between runs on a shared 2-core VM; "
                           "every measurement repeats interleaved")
    return result
