"""The trace method of Table 1 and Fig. 6 (paper section 5.3).

Input: the peers a monitored P2P client exchanged video with, each with its
AS number and the bytes the monitored client downloaded from it -- from a CSV
(``ip,asn,bytes``), or from a pcap plus a prefix-to-AS table (``prefix asn``
lines), or synthetic (``--synthetic``: the skewed population of
corecast.workload with Pareto-distributed per-peer volumes adding up to the stream
over one session, ``--session`` s at ``--bitrate``, 2:45 h by default -- the paper's
trace length; clearly not the paper's data).

Hypothetical P2P traffic matrix (section 5.3): rows and columns are the k
peers; row c1 is the monitored client's per-peer download vector, rows
c2..ck are seeded random permutations of it ("all peers have a similar
traffic profile").  Element c_ij is what peer i downloaded from peer j: transit
when i and j are in different ASes, local otherwise; the diagonal (a peer from
itself) is left out.  Traffic is attributed to the downloading peer's AS.

CoreCast for the same audience (eqs. 3-6): the stream volume is what the
monitored client downloaded in total, i.e. N = volume / D payloads; per AS a
with k_a clients, transit_a = N [(H_L + P_CC) + (H_L + H_CC) k_a] and
local_a = N (H_I + D) k_a, with the paper's sizes and with ours.

Outputs: per-AS CSV, totals in Table 1's form, and the CDF of per-AS
inter-domain traffic (Fig. 6) as PNG.
"""

from __future__ import annotations

import argparse
import csv
import io
import ipaddress
import json
import os
from dataclasses import dataclass
from typing import Any

from corecast import plan


@dataclass(frozen=True)
class Peer:
    ip: str
    asn: int
    bytes: int


def load_csv(text: str) -> list[Peer]:
    """``ip,asn,bytes`` rows (a header row is skipped)."""
    peers = []
    for row in csv.reader(io.StringIO(text)):
        if not row or row[0].startswith("#") or row[0].strip().lower() == "ip":
            continue
        peers.append(Peer(row[0].strip(), int(row[1]), int(row[2])))
    return peers


def load_pcap(path: str, monitored: str, prefix2as: str) -> list[Peer]:
    """Bytes the monitored client received from each peer (IP packet lengths)."""
    from corecast.core.maptrie import PrefixTrie, parse_prefix
    from deliverykit.pcap import Reader

    table: PrefixTrie[int] = PrefixTrie()
    for line in prefix2as.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pfx, asn = line.split()[:2]
            table.insert(*parse_prefix(pfx), int(asn.upper().removeprefix("AS")))
    got: dict[str, int] = {}
    for f in Reader(path):
        if f.dst == monitored and f.src != monitored:
            got[f.src] = got.get(f.src, 0) + f.length
    peers = []
    for ip, n in got.items():
        hit = table.lookup(ipaddress.ip_address(ip).packed)
        peers.append(Peer(ip, hit[1] if hit else 0, n))
    return peers


#: the paper's Set 1 traces all last 2:45 h (section 5.1)
PAPER_SESSION_S = 2 * 3600 + 45 * 60


def stream_volume(session_s: float = PAPER_SESSION_S, bitrate: float = 384_000.0) -> int:
    """Bytes of the stream over ``session_s`` at ``bitrate``: what a peer that watches
    the whole session downloads (once; P2P redundancy would add to it)."""
    return round(session_s * bitrate / 8)


def synthetic(n: int = 1853, seed: int = 7, volume: int | None = None) -> list[Peer]:
    """A skewed population with heavy-tailed per-peer download volumes.  The monitored
    client's total (``volume``) defaults to :func:`stream_volume` for the paper's session
    length and rate (2:45 h at 384 kb/s: 475.2 MB), split over its peers by Pareto(1.2)
    weights."""
    if volume is None:
        volume = stream_volume()
    import random

    from corecast.workload import skewed

    pop = skewed(n_clients=n, seed=seed)
    rng = random.Random(seed)
    w = [rng.paretovariate(1.2) for _ in pop.clients]
    tot = sum(w)
    return [Peer(eid, 64512 + a, int(volume * x / tot)) for (eid, a), x in zip(pop.clients, w)]


def analyse(peers: list[Peer], d: int = 1200, seed: int = 1, duration: float | None = None,
            bitrate: float = 384_000.0) -> dict:
    """P2P matrix and CoreCast per AS.  N (payloads) comes from ``duration`` x
    ``bitrate`` when given (the paper: payload size, inter-packet time and
    broadcast length), else from the monitored client's total download."""
    import numpy as np

    k = len(peers)
    asns = sorted({p.asn for p in peers})
    idx = {a: i for i, a in enumerate(asns)}
    as_of = np.array([idx[p.asn] for p in peers])
    vec = np.array([p.bytes for p in peers], dtype=np.float64)
    rng = np.random.default_rng(seed)
    p2p_transit = np.zeros(len(asns))
    p2p_local = np.zeros(len(asns))
    for i in range(k):
        row = vec if i == 0 else rng.permutation(vec)
        same = as_of == as_of[i]
        local = row[same].sum() - row[i]
        p2p_local[as_of[i]] += local
        p2p_transit[as_of[i]] += row.sum() - row[same].sum()
    clients = np.bincount(as_of, minlength=len(asns))
    n_payloads = duration * bitrate / (8 * d) if duration else vec.sum() / d
    out: dict[str, Any] = {"peers": k, "ases": len(asns), "volume_bytes": float(vec.sum()),
           "payloads": n_payloads, "per_as": [], "totals": {}}
    sizes = {"paper": plan.PAPER, "ours": plan.our_sizes("udp")}
    per_cc: dict[str, tuple[Any, Any]] = {}
    for name, s in sizes.items():
        tr = n_payloads * ((s.h_l + s.p_cc(d)) + (s.h_l + s.h_cc) * clients)
        lo = n_payloads * (s.h_i + d) * clients
        per_cc[name] = (tr, lo)
        out["totals"][f"corecast_{name}"] = {"TT_GB": tr.sum() / 1e9, "LT_GB": lo.sum() / 1e9}
    out["totals"]["p2p"] = {"TT_GB": p2p_transit.sum() / 1e9, "LT_GB": p2p_local.sum() / 1e9}
    for a, asn in enumerate(asns):
        out["per_as"].append({
            "asn": asn, "clients": int(clients[a]),
            "p2p_transit": float(p2p_transit[a]), "p2p_local": float(p2p_local[a]),
            "cc_transit_paper": float(per_cc["paper"][0][a]),
            "cc_local_paper": float(per_cc["paper"][1][a]),
            "cc_transit_ours": float(per_cc["ours"][0][a]),
            "cc_local_ours": float(per_cc["ours"][1][a])})
    single = [r for r in out["per_as"] if r["clients"] == 1]
    ratio = sorted(r["p2p_transit"] / r["cc_transit_ours"] for r in out["per_as"]
                   if r["cc_transit_ours"] > 0)
    s_ours = sizes["ours"]
    out["summary"] = {
        "per_as_saving_bound_x": d / (s_ours.h_l + s_ours.h_cc) * (
            vec.sum() / (n_payloads * d)),
        "ases_with_one_client_pct": 100.0 * len(single) / len(asns),
        "best_transit_saving_x": ratio[-1] if ratio else None,
        "ases_saving_over_10x_pct": 100.0 * sum(1 for x in ratio if x > 10) / len(asns),
    }
    return out


def write(out: dict, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    rows = out["per_as"]
    with open(os.path.join(out_dir, "per_as.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out_dir, "table1.json"), "w") as f:
        json.dump({k: v for k, v in out.items() if k != "per_as"}, f, indent=2)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for key, label in (("p2p_transit", "P2P (hypothetical)"),
                       ("cc_transit_ours", "CoreCast (our sizes)")):
        xs = sorted(r[key] / 1e6 for r in rows)
        ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("inter-domain video traffic per AS [MB]")
    ax.set_ylabel("CDF of ASes")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "fig6_cdf.png"), dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--clients", help="CSV ip,asn,bytes")
    src.add_argument("--pcap", help="capture at the monitored client")
    src.add_argument(
        "--synthetic", action="store_true", help="generated population (not the paper's)"
    )
    ap.add_argument("--monitored", help="IP of the monitored client (with --pcap)")
    ap.add_argument("--prefix2as", help="file of 'prefix asn' lines (with --pcap)")
    ap.add_argument("--chunk", type=int, default=1200)
    ap.add_argument("--duration", type=float, help="broadcast length in s (N = duration x rate)")
    ap.add_argument("--bitrate", type=float, default=384_000.0)
    ap.add_argument("--quick", action="store_true", help="small synthetic population")
    ap.add_argument("--session", type=float, default=PAPER_SESSION_S,
                    help="with --synthetic: session length in s; the monitored client "
                         "downloads the stream once, session x bitrate (default 2:45 h, the "
                         "paper's trace length)")
    ap.add_argument("--out", help="directory for per_as.csv, table1.json, fig6_cdf.png")
    a = ap.parse_args(argv)
    if a.clients:
        with open(a.clients) as f:
            peers = load_csv(f.read())
    elif a.pcap:
        if not (a.monitored and a.prefix2as):
            ap.error("--pcap needs --monitored and --prefix2as")
        with open(a.prefix2as) as f:
            peers = load_pcap(a.pcap, a.monitored, f.read())
    else:
        if not (a.session > 0 and a.bitrate > 0):
            ap.error("--session and --bitrate must be positive")
        peers = synthetic(300 if a.quick else 1853, volume=stream_volume(a.session, a.bitrate))
    out = analyse(peers, a.chunk, duration=a.duration, bitrate=a.bitrate)
    if a.out:
        write(out, a.out)
    t = out["totals"]
    print(f"{out['peers']} peers in {out['ases']} ASes, {out['volume_bytes'] / 1e9:.2f} GB "
          f"stream volume ({out['payloads']:.0f} payloads of {a.chunk} B)")
    print(f"{'':24} {'TT [GB]':>10} {'LT [GB]':>10}")
    for k in ("p2p", "corecast_paper", "corecast_ours"):
        print(f"{k:24} {t[k]['TT_GB']:>10.3f} {t[k]['LT_GB']:>10.3f}")
    s = out["summary"]
    print(f"ASes with one client: {s['ases_with_one_client_pct']:.0f}% (paper: just over 50%); "
          f"best per-AS transit saving {s['best_transit_saving_x']:.0f}x (paper: 300x); "
          f"ASes saving >10x: {s['ases_saving_over_10x_pct']:.0f}% (paper: 10%)")
    print(f"bound on the per-AS transit saving with these inputs: "
          f"{s['per_as_saving_bound_x']:.1f}x = D/(H_L+H_CC) x (download volume / N D); the "
          "paper's 300x needs peers downloading far more than the stream")
    if a.synthetic:
        mb = stream_volume(a.session, a.bitrate) / 1e6
        print(f"synthetic input: the monitored client downloads the stream once, "
              f"{a.session:g} s x {a.bitrate:g} b/s = {mb:.1f} MB, split over its peers "
              f"(Pareto 1.2); these are not the paper's traces (Table 1 needs the Set 1 data)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
