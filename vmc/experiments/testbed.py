"""The paper's setup (Fig. 1) in network namespaces: clients -> VMC router -> origin (needs root).

::

    c (clients) --- r (router: forwarding; VMC proxy + nftables REDIRECT) ---tbf--- o (nginx)

The origin's link (o -> r) is shaped with tc tbf, the paper's "link
approximating the speed of the university's link". nginx serves the generated
files of a workload. The clients replay the workload straight at the origin's
address; in the VMC arm an nftables ``redirect`` rule on r (prerouting, from
the client side, tcp/80) hands those connections to the proxy, as the paper's
router did with netfilter's ``IP_REDIRECT`` (sec. 3.2): the clients are
unmodified and unaware. In the Normal arm r only routes.

Measured per arm: bytes sent by the origin (its link's tx counter and nginx's
$body_bytes_sent), summed and mean request latency. Table 2's bandwidth and
latency saving are computed from those. A third arm runs the same proxy with
sharing off: proxying alone changes latency (split TCP connections, upstream
keep-alive), so "latency % vs proxy-only" is the part due to sharing.

Run: ``sudo python -m vmc.experiments.testbed --quick [--scenario high-high]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deliverykit import cliutil
from deliverykit.outputs import replacing, write_when_done
from vmc.nginx import Nginx, write_object
from vmc.workload.squid import LogEntry
from vmc.workload.synth import PAPER_TABLE2, SCENARIOS, calculated_saving, generate

if TYPE_CHECKING:  # the testbed (pyroute2) is imported by run() alone
    from deliverykit.testbed import Host, Testbed

C_IP, R_C_IP, R_O_IP, O_IP = "10.61.1.1", "10.61.1.2", "10.61.2.1", "10.61.2.2"
PROXY_PORT = 3128
#: normal: routing only; proxy: the same proxy with sharing off (isolates the split-TCP effect of
#: proxying from the effect of sharing); vmc: sharing on.
ARMS = ("normal", "proxy", "vmc")
NFT_RULES = f"""
table ip vmc {{
  chain pre {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname "to-c" tcp dport 80 redirect to :{PROXY_PORT}
  }}
}}
"""


def _replay_in_host(entries: list[LogEntry], origin: str, speed: float,
                    ) -> list[tuple[float | None, float | None, str | None]]:
    """Runs inside host c (forked): replay straight at the origin's address."""
    import asyncio

    from vmc.workload.replay import replay

    res = asyncio.run(replay(entries, origin, None, speed=speed, vmc=False))
    return [(r.latency, r.ttfb, r.error) for r in res]


#: TCP counters that explain latency noise: a lost SYN or SYN-ACK costs a 1 s timeout.
TCP_KEYS = ("Tcp.RetransSegs", "TcpExt.TCPSynRetrans", "TcpExt.TCPTimeouts")


def _tcp_counters() -> dict[str, int]:
    """Runs inside a host (forked): its namespace's TCP counters from /proc/net/{snmp,netstat}."""
    got: dict[str, int] = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        with open(path) as fh:
            lines = fh.read().splitlines()
        for head, vals in zip(lines[0::2], lines[1::2], strict=False):
            proto = head.split(":", 1)[0]
            for name, v in zip(head.split()[1:], vals.split()[1:], strict=False):
                if v.lstrip("-").isdigit():
                    got[f"{proto}.{name}"] = int(v)
    return {k: got.get(k, 0) for k in TCP_KEYS}


def _tbf_drops(tb: Testbed, host: Host, ifname: str) -> int:
    """Packets the tbf queue on ``ifname`` dropped so far (``tc -s qdisc``)."""
    cp = tb.exec(host, ["tc", "-s", "qdisc", "show", "dev", ifname], timeout=10)
    total = 0
    for part in cp.stdout.split("dropped ")[1:]:
        num = part.split(",", 1)[0].strip()
        if num.isdigit():
            total += int(num)
    return total


def saved_per_request(status: dict[str, Any]) -> list[int]:
    """Origin bytes each request did not cost, in arrival order, from the proxy's request log.

    A request that started a session or was passed through cost its own bytes; a
    joiner cost only what was fetched from the origin on its behalf (patches).
    """
    out = []
    for r in status.get("recent", []):
        if r["mode"] in ("origin", "passthrough", "error", "pending"):
            out.append(0)
        else:
            out.append(max(0, r["client_bytes"] - r["origin_bytes"]))
    return out


def _probe(tb: Testbed, host: Host, url: str) -> bool:
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1", url]
    cp = tb.exec(host, argv, timeout=5)
    return cp.stdout.strip() not in ("", "000")


def run(quick: bool = True, scenario: str = "high-high", n: int | None = None,
        link_mbit: float = 20.0, window: int = 8 << 20, seed: int = 1,
        queue_ms: float | None = None) -> dict[str, Any]:
    """One Normal arm and one VMC arm on a fresh testbed; ``queue_ms`` is the tbf queue (default
    50 ms)."""
    from deliverykit.testbed import Tbf, Testbed

    n = n or (120 if quick else 1000)
    sc = SCENARIOS[scenario]
    entries = generate(sc, n, seed=seed)
    span = max(entries[-1].start - entries[0].start, 1e-3)
    link_bps = link_mbit * 1e6
    offered = sum(e.bytes for e in entries) / span  # bytes/s at the logged pace
    speed = max(0.05, sc.utilisation * link_bps / 8 / offered)
    # the origin's objects; removed when nginx has stopped (or, on an early error, when
    # the TemporaryDirectory is collected)
    www = tempfile.TemporaryDirectory(prefix="vmc-www-")
    root = Path(www.name)
    seen = set()
    for e in entries:
        name = e.object_path().split("?", 1)[0].lstrip("/")
        if name not in seen:
            seen.add(name)
            write_object(root, name, e.bytes)
    out: dict[str, Any] = {"scenario": scenario, "requests": n, "link_mbit": link_mbit,
                 "speed": round(speed, 3), "seed": seed, "queue_ms": queue_ms,
                 "replay_s": round(span / speed, 1)}
    with Testbed(prefix="vmc") as tb:
        c, r, o = tb.host("c"), tb.host("r", forwarding=True), tb.host("o")
        tb.link(c, r, f"{C_IP}/24", f"{R_C_IP}/24")
        l2 = tb.link(r, o, f"{R_O_IP}/24", f"{O_IP}/24")
        tb.route(c, "default", via=R_C_IP)
        tb.route(o, "default", via=R_O_IP)
        # origin -> router: the shared upstream link
        tb.shape(l2.b, tbf=Tbf(rate_bps=int(link_bps), latency_ms=queue_ms))
        ng = Nginx.origin(root, listen=f"{O_IP}:80")
        ng.start(popen=lambda argv, **kw: tb.popen(o, argv, **kw),
                 probe=lambda: _probe(tb, c, f"http://{O_IP}/"))
        running: list[subprocess.Popen[str]] = []  # proxies still to stop, whatever happens
        try:
            for arm in ARMS:
                proxy = None
                if arm != "normal":
                    argv = [sys.executable, "-m", "vmc", "proxy",
                            "--listen", f"0.0.0.0:{PROXY_PORT}",
                            "--upstream", f"{O_IP}:80", "--window", str(window),
                            "--disk-budget", "0",  # the paper's router: a buffer, no disk
                            "--transparent", "--status-allow", "10.61.0.0/16"]
                    if arm == "proxy":
                        argv.append("--no-share")
                    proxy = tb.popen(r, argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
                    running.append(proxy)
                    assert proxy.stdout is not None
                    proxy.stdout.readline()  # listening
                    cp = tb.exec(r, ["nft", "-f", "-"], input=NFT_RULES)
                    if cp.returncode != 0:
                        raise RuntimeError(f"nft failed: {cp.stderr}")
                tx0 = tb.counters(o, l2.b)["tx_bytes"]
                body0 = ng.body_bytes()
                tcp0 = {h.name: tb.run(h, _tcp_counters) for h in (c, r, o)}
                drops0 = _tbf_drops(tb, o, l2.b.ifname)
                t0 = time.monotonic()
                res = tb.run(c, _replay_in_host, entries, f"{O_IP}:80", speed, timeout=600)
                wall = time.monotonic() - t0
                time.sleep(0.3)
                tcp1 = {h.name: tb.run(h, _tcp_counters) for h in (c, r, o)}
                tcp = {h: {k: tcp1[h][k] - tcp0[h][k] for k in TCP_KEYS} for h in tcp1}
                drops = _tbf_drops(tb, o, l2.b.ifname) - drops0
                lat = [x[0] for x in res if x[0] is not None]
                status = None
                if arm != "normal":
                    url = f"http://{R_C_IP}:{PROXY_PORT}/_vmc/status?recent=2000"
                    cp = tb.exec(c, ["curl", "-s", url], timeout=10)
                    try:
                        status = json.loads(cp.stdout)
                    except ValueError:
                        status = None
                    tb.exec(r, ["nft", "delete", "table", "ip", "vmc"])
                    assert proxy is not None
                    proxy.terminate()
                    proxy.wait(5)
                out[arm] = {
                    "origin_link_MB": (tb.counters(o, l2.b)["tx_bytes"] - tx0) / 1e6,
                    "origin_body_MB": (ng.body_bytes() - body0) / 1e6,
                    "latency_sum_s": sum(lat),
                    "mean_latency_s": sum(lat) / len(lat) if lat else None,
                    "failed": sum(1 for x in res if x[0] is None),
                    "wall_s": wall,
                    "latencies": [x[0] for x in res],
                    "saved_bytes": saved_per_request(status) if status else [],
                    # SYNs retransmitted by the clients (c) and the proxy's upstream side (r); data
                    # segments the origin (o) retransmitted; packets the tbf queue dropped.
                    "syn_retrans": (tcp["c"]["TcpExt.TCPSynRetrans"]
                                    + tcp["r"]["TcpExt.TCPSynRetrans"]),
                    "origin_retrans_segs": tcp["o"]["Tcp.RetransSegs"],
                    "rto_timeouts": sum(t["TcpExt.TCPTimeouts"] for t in tcp.values()),
                    "tbf_drops": drops,
                    "proxy": {k: status[k] for k in ("joins", "sharing_ratio", "detached",
                                                       "not_shared", "transparent")}
                    if status else None,
                }
        finally:
            for proc in running:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
            ng.stop()
            www.cleanup()
    nm, pm, vm = out["normal"], out["proxy"], out["vmc"]
    calc = calculated_saving(entries, window)
    p = PAPER_TABLE2[scenario]
    out["table2"] = {
        "load": sc.load, "overlap": sc.overlap,
        "Normal MB": round(nm["origin_body_MB"], 2), "VMC MB": round(vm["origin_body_MB"], 2),
        "bandwidth %": round(100 * (1 - vm["origin_link_MB"] / nm["origin_link_MB"]), 2)
        if nm["origin_link_MB"] else None,
        "latency %": round(100 * (1 - vm["latency_sum_s"] / nm["latency_sum_s"]), 2)
        if nm["latency_sum_s"] else None,
        "latency % vs proxy-only": round(100 * (1 - vm["latency_sum_s"] / pm["latency_sum_s"]), 2)
        if pm["latency_sum_s"] else None,
        "calc. latency %": round(calc.latency_saving, 2),
        "paper bandwidth %": p[2], "paper latency %": p[3],
    }
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vmc experiment testbed", description=__doc__.split("\n")[0],
        epilog="Prints one JSON object per line on stdout (the Table 2 row, then one per arm); "
               "progress goes to stderr.")
    ap.add_argument("--quick", action="store_true",
                    help="a short workload per scenario (CI runs this)")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS),
                    help="scenario to run (repeatable; default high-high)")
    ap.add_argument("-n", type=cliutil.positive_int, default=None, help="requests per scenario")
    ap.add_argument("--link-mbit", type=cliutil.positive_float, default=20.0, metavar="MBIT",
                    help="rate of the origin's tbf-shaped link in Mbit/s (default 20)")
    ap.add_argument("--queue-ms", type=cliutil.positive_float, default=None, metavar="MS",
                    help="tbf queue in ms (default 50)")
    ap.add_argument("--repeat", type=cliutil.positive_int, default=1, metavar="N",
                    help="runs per scenario (seeds 1..N): mean and spread")
    ap.add_argument("--out", type=Path, metavar="DIR", help="write testbed.json and the PNGs here")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    results = []
    for sc in a.scenario or ["high-high"]:
        runs = []
        for seed in range(1, a.repeat + 1):
            res = run(a.quick, sc, a.n, a.link_mbit, seed=seed, queue_ms=a.queue_ms)
            results.append(res)
            runs.append(res)
            print(json.dumps({"scenario": sc, "seed": seed} | res["table2"]), flush=True)
            for arm in ARMS:
                figures = {k: v for k, v in res[arm].items()
                           if k not in ("latencies", "saved_bytes")}
                print(json.dumps({"scenario": sc, "seed": seed, "arm": arm} | figures), flush=True)
            print(f"vmc experiment testbed: {sc} seed {seed} done", file=sys.stderr, flush=True)
        if a.repeat > 1:
            print(json.dumps(summarise(runs)), flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        write_when_done(a.out / "testbed.json", json.dumps(results, indent=1) + "\n")
        for p in plot(results, a.out):
            print("wrote", p, file=sys.stderr)
    return 0


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and min..max of the savings over repeated runs of one scenario."""
    out: dict[str, Any] = {"scenario": runs[0]["scenario"], "runs": len(runs)}
    for key in ("bandwidth %", "latency %", "latency % vs proxy-only"):
        xs = [r["table2"][key] for r in runs if r["table2"][key] is not None]
        if xs:
            out[key] = {"mean": round(sum(xs) / len(xs), 2), "min": min(xs), "max": max(xs)}
    return out


def plot(results: list[dict[str, Any]], out: Path) -> list[Path]:
    """Per scenario, Figs. 2-6 style: (a) cumulative bandwidth saved, (b) cumulative latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def cum(xs: Iterable[float | None]) -> list[float]:
        acc, ys = 0.0, []
        for x in xs:
            acc += x or 0.0
            ys.append(acc)
        return ys

    paths = []
    for res in results:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
        saved = cum(b / 1e6 for b in res["vmc"].get("saved_bytes", []))
        ax1.plot(range(1, len(saved) + 1), saved)
        ax1.set_xlabel("files downloaded")
        ax1.set_ylabel("bandwidth saved (MB)")
        ax1.set_title("(a) saving")
        for label, arm in (("normal", "normal"), ("proxy, no sharing", "proxy"), ("VMC", "vmc")):
            ys = cum(res[arm]["latencies"])
            ax2.plot(range(1, len(ys) + 1), ys, label=label)
        ax2.set_xlabel("files downloaded")
        ax2.set_ylabel("cumulative latency (s)")
        ax2.set_title("(b) latency")
        ax2.legend()
        fig.suptitle(f"{res['scenario']}: testbed, tbf {res['link_mbit']:g} Mbit/s")
        fig.tight_layout()
        p = out / f"vmc_testbed_{res['scenario']}_s{res['seed']}.png"
        with replacing(p) as tmp:  # never a half-written PNG under the final name
            fig.savefig(tmp, dpi=100, format="png")
        plt.close(fig)
        paths.append(p)
    return paths


if __name__ == "__main__":
    sys.exit(main())
