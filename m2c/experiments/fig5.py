"""Paper section 7 (Fig. 5): M2C file transfer vs a TCP download through a
tbf bottleneck (1 or 4 Mb/s, 25-packet queue), against one long TCP stream
or Poisson short-TCP background traffic (10 flows/min, exponential sizes
with 85 % under 6 KB), with 1 or more receivers.

Topology (deliverykit.testbed): the sender host s (M2C sender, TCP servers)
on a bridge with IGMP snooping and a querier ("core"), linked to a second
bridge ("edge") holding the receivers r1..rN; the core->edge link is shaped
with tbf and is the shared bottleneck, downstream of snooping as the paper's
router is downstream of PIM pruning (a multicast packet crosses it once for
all receivers, each TCP download pays for itself).  TCP uses Reno (the
paper: NewReno with SACK).

    sudo .venv/bin/python -m m2c.experiments.fig5 [--quick] [--bottleneck 1e6 4e6]
         [--competing stream|background] [--receivers 1 2] [--size BYTES]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict

from m2c.experiments.tcpflows import download, serve

# What the paper prints (text of section 7.3/7.4 and Fig. 5(c), 48 MB, 5 receivers)
PAPER = {
    "5(c) 1 Mb/s": {"TCP_ft": {"time": 2055, "gput": 192, "tput": 199, "loss": 5.86, "net": 3.71},
                    "M2C_ft": {"time": 495, "gput": 801, "tput": 921, "loss": 9.86, "net": 11.64,
                               "dup": 0.51, "sym": 6.49, "comp": 3.04}},
    "5(c) 4 Mb/s": {"TCP_ft": {"time": 512, "gput": 770, "tput": 799, "loss": 4.03, "net": 3.68},
                    "M2C_ft": {"time": 146, "gput": 2733, "tput": 3360, "loss": 8.17,
                               "net": 11.38, "dup": 0.21, "sym": 6.06, "comp": 10.17}},
    "text": "5(a), 99 MB: M2C_ft net ~10 % (sym >= 5.66 %, head 4.6 %); 4 MB: net 13-16 %, "
            "sym ~8 %; TCP net < 5 %.",
}
LONG_PORT, FT_PORT, BG_PORT = 5001, 5002, 5003


def _bg_sizes(rng: random.Random) -> int:
    mean = 6000 / math.log(1 / 0.15)  # P(size < 6 KB) = 0.85
    return max(1, int(rng.expovariate(1 / mean)))


async def _bg_server(host: str, port: int, ready) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            n = int.from_bytes(await reader.readexactly(4), "big")
            writer.write(b"\x5a" * n)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port)
    ready.set()
    async with server:
        await asyncio.sleep(3600)


async def _bg_clients(host: str, port: int, duration: float, seed: int) -> int:
    rng = random.Random(seed)
    t_end = time.monotonic() + duration
    flows = 0
    tasks = []

    async def one(n: int) -> None:
        try:
            r, w = await asyncio.open_connection(host, port)
            w.write(n.to_bytes(4, "big"))
            await w.drain()
            while await r.read(65536):
                pass
            w.close()
        except OSError:
            pass

    while time.monotonic() < t_end:
        await asyncio.sleep(rng.expovariate(10 / 60))
        tasks.append(asyncio.create_task(one(_bg_sizes(rng))))
        flows += 1
    await asyncio.gather(*tasks, return_exceptions=True)
    return flows


def _m2c_receiver(sd_json: str, out: str, iface: str, timeout: float) -> dict:
    from m2c.aio.driver import MulticastReceiver
    from m2c.core.filetx import SessionDescription

    sd = SessionDescription.from_json(sd_json)
    res = asyncio.run(MulticastReceiver(sd, out, interface=iface).run(timeout=timeout))
    res["metrics"] = asdict(res["metrics"])
    res.pop("trace", None)
    return res


def _m2c_sender(sd_json: str, path: str, duration: float) -> dict:
    from m2c.aio.driver import MulticastSender
    from m2c.core.filetx import SessionDescription

    return asyncio.run(MulticastSender(SessionDescription.from_json(sd_json), path)
                       .run(duration=duration))


def one_run(kind: str, bottleneck: float, size: int, receivers: int, competing: str,
            timeout: float) -> list[dict]:
    """kind: 'TCP_ft' or 'M2C_ft'; returns one row per receiver."""
    from deliverykit.testbed import Tbf, Testbed

    from m2c.aio.driver import make_session

    rows = []
    with tempfile.TemporaryDirectory(prefix="m2c-f5-") as d, Testbed(prefix="m2cf5") as tb:
        src = os.path.join(d, "file.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        # the sender's bridge prunes with IGMP snooping; the shaped link toward the
        # receivers' bridge is the shared bottleneck (like the paper's router)
        core = tb.bridge("core")
        edge = tb.bridge("edge", snooping=False, querier=False)
        lk = tb.link(core.host, edge.host, ifname_a="to-edge", ifname_b="to-core")
        tb.exec(core.host, ["ip", "link", "set", "to-edge", "master", core.ifname], check=True)
        tb.exec(edge.host, ["ip", "link", "set", "to-core", "master", edge.ifname], check=True)
        s = tb.host("s")
        ps = tb.attach(s, core, "10.0.5.1/24")
        rs = []
        for i in range(receivers):
            h = tb.host(f"r{i + 1}")
            p = tb.attach(h, edge, f"10.0.5.{11 + i}/24")
            rs.append((h, p))
        for h, p in [(s, ps)] + rs:
            tb.mroute(h, p.a)
            tb.sysctl(h, "net.ipv4.tcp_congestion_control", "reno")
        tb.shape(lk.a, tbf=Tbf(rate_bps=int(bottleneck), limit_pkts=25))
        tb.settle(core)
        # competing traffic toward the first receiver
        comp = []
        ev = tb.event()
        if competing == "stream":
            comp.append(tb.spawn(s, serve, "10.0.5.1", LONG_PORT, None, ev))
            ev.wait(10)
            comp.append(tb.spawn(rs[0][0], download, "10.0.5.1", LONG_PORT, None, timeout + 30))
        else:
            comp.append(tb.spawn(s, _bg_server, "10.0.5.1", BG_PORT, ev))
            ev.wait(10)
            for i, (h, _p) in enumerate(rs):
                comp.append(tb.spawn(h, _bg_clients, "10.0.5.1", BG_PORT, timeout + 30, 7 + i))
        time.sleep(2.0)  # let the competing traffic settle
        before = [tb.counters(h, p.a) for h, p in rs]
        t_before = time.monotonic()
        if kind == "TCP_ft":
            ev2 = tb.event()
            stats: dict = {}
            srv = tb.spawn(s, serve, "10.0.5.1", FT_PORT, size, ev2, stats, receivers)
            ev2.wait(10)
            tasks = [tb.spawn(h, download, "10.0.5.1", FT_PORT, size) for h, _p in rs]
            res = [t.result(timeout=timeout) for t in tasks]
            flows = srv.result(timeout=30).get("flows", [])
            for i, r in enumerate(res):
                fl = flows[i] if i < len(flows) else {}
                mss_pkts = max(1, size // 1448)
                link = size + 52 * mss_pkts  # IPv4 + TCP (timestamps) headers, like M2C's IP level
                rows.append({"flow": "TCP_ft", "receiver": i + 1, "ok": r["bytes"] == size,
                             "bytes": r["bytes"],
                             "time": r["time"], "gput": size * 8 / r["time"] / 1000,
                             "tput": link * 8 / r["time"] / 1000,
                             "loss": 100 * fl.get("total_retrans", 0) / max(1, fl.get("segs_out", 1)),
                             "net": (link / size - 1) * 100})
        else:
            symbol, pkt = 1424, 1424 + 48 + 28
            sd = make_session(src, group="239.196.1.1", port=45000, interface="10.0.5.1",
                              min_rate=256_000 / 8 / pkt, max_rate=8_000_000 / 8 / pkt,
                              tsd=2.0, k=2, symbol_size=symbol)
            sdj = sd.to_json()
            snd = tb.spawn(s, _m2c_sender, sdj, src, timeout + 10)
            time.sleep(0.3)
            tasks = [tb.spawn(h, _m2c_receiver, sdj, os.path.join(d, f"out{i}"), p.a.ip, timeout)
                     for i, (h, p) in enumerate(rs)]
            res = [t.result(timeout=timeout + 20) for t in tasks]
            snd.kill()
            for i, r in enumerate(res):
                m = r["metrics"]
                rows.append({"flow": "M2C_ft", "receiver": i + 1, "ok": r["ok"], **{
                    k: m[k] for k in ("time", "gput", "tput", "loss", "net", "dup", "sym",
                                      "comp")}})
        after = [tb.counters(h, p.a) for h, p in rs]
        # The counters span the whole window (lead-in, joins, competing traffic), which is
        # longer than a receiver's transfer time: divide by the window, not by row["time"].
        window = time.monotonic() - t_before
        for row, b, a in zip(rows, before, after):
            row["link_rx_kbps_all_flows"] = (a["rx_bytes"] - b["rx_bytes"]) * 8 / window / 1000
        for t in comp:
            t.kill()
    for r in rows:
        r.update(bottleneck_mbps=bottleneck / 1e6, size=size, receivers=receivers,
                 competing=competing)
    return rows


def run(quick: bool = True, bottlenecks=(4e6,), competing=("stream",), receivers=(1,),
        size: int | None = None) -> list[dict]:
    size = size or ((1 << 20) if quick else 4_000_000)
    rows = []
    for bn in bottlenecks:
        for comp in competing:
            for n in receivers:
                timeout = 10 * size * 8 / bn + 60
                for kind in ("TCP_ft", "M2C_ft"):
                    rows.extend(one_run(kind, bn, size, n, comp, timeout))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 MiB, 4 Mb/s, one long TCP stream")
    ap.add_argument("--bottleneck", type=float, nargs="+", default=[4e6])
    ap.add_argument("--competing", nargs="+", default=["stream"], choices=["stream", "background"])
    ap.add_argument("--receivers", type=int, nargs="+", default=[1])
    ap.add_argument("--size", type=int)
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    rows = run(a.quick, tuple(a.bottleneck), tuple(a.competing), tuple(a.receivers), a.size)
    cols = ["flow", "bottleneck_mbps", "competing", "receivers", "receiver", "ok", "time", "gput",
            "tput", "loss", "net", "dup", "sym", "comp"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c, ""))
                                for c in cols) + " |")
    print("paper:", json.dumps(PAPER))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "paper": PAPER}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
