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


def run(quick: bool) -> dict:
    from deliverykit.testbed import Netem, Tbf, Testbed, have_root

    result: dict = {"title": "testbed: setup, userspace netem throughput, shaping accuracy",
                    "rows": [], "ratios": {}, "targets": {}, "notes": []}
    if not have_root():
        result["notes"].append("needs root: nothing measured")
        return result
    rows = result["rows"]
    t0 = time.monotonic()
    with Testbed() as tb:
        a, r, b = tb.host("a"), tb.host("r", forwarding=True), tb.host("b")
        tb.link(a, r, "10.0.1.1/24", "10.0.1.2/24")
        tb.link(r, b, "10.0.2.1/24", "10.0.2.2/24")
    rows.append({"subject": "setup+teardown, 3-host line", "value": round(time.monotonic() - t0, 3),
                 "unit": "s"})
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        n = 10 if quick else 50
        t0 = time.monotonic()
        for _ in range(n):
            tb.run(a, int)
        rows.append({"subject": "tb.run() round trip (fork, setns, pickle)",
                     "value": round((time.monotonic() - t0) / n * 1000, 1), "unit": "ms"})
        t0 = time.monotonic()
        tb.shape(link.a, netem=Netem(delay_ms=1))
        rows.append({"subject": f"tb.shape() with netem [{tb.netem_backend()}]",
                     "value": round((time.monotonic() - t0) * 1000), "unit": "ms"})

    flood = 20_000 if quick else 200_000
    for label, netem in (("plain veth (kernel)", None), ("userspace netem, delay 0", Netem()),
                         ("userspace netem, delay 5 ms", Netem(delay_ms=5))):
        with Testbed() as tb:
            a, b = tb.host("a"), tb.host("b")
            link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
            if netem is not None:
                tb.shape(link.a, netem=netem)
            n, span, _ = _flow(tb, a, b, flood, 0.0, 200)
            backend = tb.netem_backend() if netem is not None else "-"
        rows.append({"subject": f"UDP flood 200 B: {label} [{backend}]",
                     "value": round(n / span) if span else 0, "unit": "pkt/s delivered",
                     "delivered": f"{n}/{flood}"})

    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        _, _, plain = _flow(tb, a, b, 200 if quick else 2000, 0.002, 200)
        tb.shape(link.a, netem=Netem(delay_ms=20))
        n, _, delays = _flow(tb, a, b, 200 if quick else 2000, 0.002, 200)
    rows.append({"subject": "plain veth at 500 pkt/s: one-way delay, median (wake-up baseline)",
                 "value": round(statistics.median(plain) * 1000, 3), "unit": "ms"})
    # the first frames wait for ARP, which itself crosses the 20 ms netem: skip them
    excess = sorted(d - 0.020 for d in delays[50:])
    rows.append({"subject": "netem 20 ms at 500 pkt/s: excess delay, median",
                 "value": round(statistics.median(excess) * 1000, 3), "unit": "ms"})
    rows.append({"subject": "netem 20 ms at 500 pkt/s: excess delay, p99",
                 "value": round(excess[int(len(excess) * 0.99) - 1] * 1000, 3), "unit": "ms"})

    rate, size = 4_000_000, 1200
    interval = (size + 42) * 8 / (2 * rate)
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        tb.shape(link.a, tbf=Tbf(rate_bps=rate, limit_pkts=25))
        n, span, _ = _flow(tb, a, b, int((1.5 if quick else 5.0) / interval), interval, size)
    measured = (n - 1) * (size + 42) * 8 / span
    rows.append({"subject": "tbf 4 Mbit/s under 2x load", "value": round(measured),
                 "unit": "bit/s"})
    result["ratios"]["tbf measured/configured"] = round(measured / rate, 4)
    result["targets"]["tbf measured/configured"] = "within 0.85..1.15 (the test's bound)"
    result["notes"].append("figures swing 2-3x between runs on a shared 2-core VM")
    return result
