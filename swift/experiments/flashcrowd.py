"""Paper section IV-B / Figs. 7-11: our PPSPP peer vs libtorrent under a flash crowd.

Flash crowd and Poisson arrivals, on the same namespace topology and file.

One seeder (20 Mb/s uplink) and N leechers (uplink capped, kernel tbf) on a
bridge.  Leechers arrive all at once (flash crowd) or one per second on
average (Poisson, seeded); each leaves when complete.  Per leecher we record
the completion time and the start-up time: for swift the first
``startup_s`` seconds of video in order (the paper's high-priority window);
for libtorrent, as in the paper, the time until that many bytes are
downloaded from anywhere in the file (rarest first, its default; this
favours libtorrent).  libtorrent runs with DHT, LSD, UPnP and NAT-PMP off,
ut_pex on, TCP only, and learns about other leechers through the seeder's
PEX like our peer.

    python -m swift.experiments.flashcrowd --quick [--arrivals poisson] [--out DIR]

Output (``--out``, default ``swift-results``): ``flashcrowd-<arrivals>-<n>x<MiB>.csv``
(one row per leecher and system: arrival, start-up, completion, bytes
uploaded), the same name ``.json`` (parameters, versions, git commit, date,
host load, summary rows) and ``...-completion.png`` / ``...-startup.png``
(CDFs as in the paper's Figs. 7-11).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time

from deliverykit import cliutil

PORT = 6778
#: per-leecher counters of our peer in the CSV (None for libtorrent)
DIAG = ("up_losses", "up_timeouts", "dup", "unsolicited", "requests_lost", "request_timeouts",
        "dup_lost", "dup_stale", "dup_timeout", "dup_endgame", "dup_deadline", "dup_other")


async def _swift_seed(path: str, ready, duration: float) -> None:
    from swift.aio.node import seeder
    from swift.core.peer import PeerConfig
    async with seeder(path, PeerConfig(), host="0.0.0.0", port=PORT):
        ready.set()
        await asyncio.sleep(duration)


async def _swift_leech(root_hex: str, seed_ip: str, delay: float, startup_bytes: int,
                       limit: float, out: str) -> dict:
    from swift.aio.node import downloader
    from swift.core.peer import PeerConfig
    await asyncio.sleep(delay)
    cfg = PeerConfig(picker="vod", pex_connect=True, high_window=max(8, startup_bytes // 1024))
    node = downloader(bytes.fromhex(root_hex), out, cfg, host="0.0.0.0", port=PORT)
    t0 = time.time()
    startup = done = None
    async with node:
        node.connect((seed_ip, PORT))
        have = node.peer.content.have
        while time.time() - t0 < limit:
            await asyncio.sleep(0.05)
            if startup is None:
                e = have.find_empty(0)
                if e is not None and e * 1024 >= startup_bytes:
                    startup = time.time() - t0
            if node.peer.content.complete:
                done = time.time() - t0
                startup = startup if startup is not None else done
                break
        chans = [(c.addr[0], len(c.requests), c.received, c.lost, round(c.rtt, 3), round(c.rate))
                 for c in node.peer.channels.values()]
        from_seeder = sum(c.received for c in node.peer.channels.values() if c.addr[0] == seed_ip)
        st = node.peer.stats
        ups = [c.ledbat for c in node.peer.channels.values()]
        # where uploads go unused (docs/swift.md, flash crowd), over the
        # channels still open: our DATA that LEDBAT counted lost, its
        # congestion timeouts; chunks we got twice or unasked; our requests
        # given up (lost, timed out)
        diag = {"up_losses": sum(x.losses for x in ups), "up_timeouts": sum(x.timeouts for x in ups),
                "dup": st.get("dup", 0), "unsolicited": st.get("unsolicited", 0),
                "requests_lost": sum(c.lost for c in node.peer.channels.values()),
                "request_timeouts": st.get("timeouts", 0),
                # duplicates by the rule that had moved their request away
                **{k: st.get(k, 0) for k in DIAG if k.startswith("dup_")}}
    return {"startup_s": startup, "completion_s": done, "stats": dict(st),
            "channels": chans, "uploaded_bytes": st["sent_data"] * 1024,
            "from_seeder_bytes": from_seeder * 1024, "diag": diag}


def _lt_settings(lt):
    return {"listen_interfaces": f"0.0.0.0:{PORT}", "enable_dht": False, "enable_lsd": False,
            "enable_upnp": False, "enable_natpmp": False, "alert_mask": 0,
            "enable_outgoing_utp": False, "enable_incoming_utp": False,
            "allow_multiple_connections_per_ip": True}


def _lt_seed(torrent: bytes, save: str, ready, duration: float) -> None:
    import libtorrent as lt
    s = lt.session(_lt_settings(lt))
    s.add_torrent({"ti": lt.torrent_info(lt.bdecode(torrent)), "save_path": save,
                   "flags": lt.torrent_flags.seed_mode})
    ready.set()
    time.sleep(duration)


def _lt_leech(torrent: bytes, seed_ip: str, delay: float, startup_bytes: int, limit: float,
              save: str) -> dict:
    import libtorrent as lt
    time.sleep(delay)
    s = lt.session(_lt_settings(lt))
    h = s.add_torrent({"ti": lt.torrent_info(lt.bdecode(torrent)), "save_path": save})
    t0 = time.time()
    h.connect_peer((seed_ip, PORT))
    startup = done = None
    while time.time() - t0 < limit:
        time.sleep(0.05)
        st = h.status()
        if startup is None and st.total_wanted_done >= startup_bytes:
            startup = time.time() - t0
        if st.is_seeding:
            done = time.time() - t0
            break
        if st.num_peers == 0:
            h.connect_peer((seed_ip, PORT))
    st = h.status()
    return {"startup_s": startup, "completion_s": done, "uploaded_bytes": st.total_payload_upload,
            "from_seeder_bytes": None}


def _summary(xs: list) -> dict:
    v = sorted(x for x in xs if x is not None)
    if not v:
        return {"n": 0}
    return {"n": len(v), "mean": round(statistics.mean(v), 2), "median": round(statistics.median(v), 2),
            "p90": round(v[min(len(v) - 1, int(0.9 * len(v)))], 2), "cdf": [round(x, 2) for x in v]}


def run(quick: bool = True, leechers: int | None = None, arrivals: str = "flash",
        size_mb: float | None = None, startup_s: float = 10.0, bitrate_bps: float = 1e6,
        leecher_up_bps: int = 4_000_000, systems: tuple[str, ...] = ("swift", "libtorrent"),
        seed: int = 1, out: str | None = None) -> list[dict]:
    """One run per system; summary rows.  With ``out``, also the per-leecher
    CSV, JSON metadata and CDF plots (see the module docstring)."""
    from deliverykit.testbed import Tbf, Testbed

    started, load0 = time.time(), os.getloadavg()
    per_leecher: list[dict] = []
    n = leechers or (4 if quick else 10)
    size = int((size_mb or (4 if quick else 24)) * 1024 * 1024)
    startup_bytes = int(startup_s * bitrate_bps / 8)
    rnd = random.Random(seed)
    delays = [0.0] * n
    if arrivals == "poisson":
        t = 0.0
        for i in range(n):
            delays[i] = t
            t += rnd.expovariate(1.0)
    limit = 120.0 if quick else 600.0
    rows = []
    with tempfile.TemporaryDirectory(prefix="swift-fc-") as d:
        path = os.path.join(d, "video.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        for system in systems:
            with Testbed(prefix="swfc") as tb:
                lan = tb.bridge("lan", snooping=False, querier=False)
                sh = tb.host("seed")
                sp = tb.attach(sh, lan, "10.78.0.1/24")
                tb.shape(sp.a, tbf=Tbf(rate_bps=20_000_000))
                hosts = []
                for i in range(n):
                    h = tb.host(f"l{i}")
                    p = tb.attach(h, lan, f"10.78.0.{10 + i}/24")
                    tb.shape(p.a, tbf=Tbf(rate_bps=leecher_up_bps))
                    hosts.append(h)
                ready = tb.event()
                if system == "swift":
                    from swift.aio.node import tree_for_file
                    root = tree_for_file(path).root_hash.hex()
                    st = tb.spawn(sh, _swift_seed, path, ready, limit + max(delays) + 10)
                    assert ready.wait(30)
                    tasks = [tb.spawn(h, _swift_leech, root, "10.78.0.1", delays[i], startup_bytes,
                                      limit, os.path.join(d, f"sw-{i}.bin"))
                             for i, h in enumerate(hosts)]
                else:
                    import libtorrent as lt
                    ct = lt.create_torrent(lt.list_files(path), piece_size=256 * 1024)
                    lt.set_piece_hashes(ct, d)
                    torrent = lt.bencode(ct.generate())
                    st = tb.spawn(sh, _lt_seed, torrent, d, ready, limit + max(delays) + 10)
                    assert ready.wait(30)
                    tasks = []
                    for i, h in enumerate(hosts):
                        save = os.path.join(d, f"lt-{i}")
                        os.makedirs(save, exist_ok=True)
                        tasks.append(tb.spawn(h, _lt_leech, torrent, "10.78.0.1", delays[i],
                                              startup_bytes, limit, save))
                res = [t.result(timeout=limit + max(delays) + 60) for t in tasks]
                st.kill()
            for i, r in enumerate(res):
                c = r["completion_s"]
                per_leecher.append({
                    "system": system, "arrivals": arrivals, "leecher": i,
                    "arrival_s": round(delays[i], 3), "startup_s": r["startup_s"], "completion_s": c,
                    "uploaded_bytes": r.get("uploaded_bytes"),
                    "from_seeder_bytes": r.get("from_seeder_bytes"),
                    "upload_mbps": round(r["uploaded_bytes"] * 8 / c / 1e6, 3)
                    if c and r.get("uploaded_bytes") is not None else None,
                    **{k: (r.get("diag") or {}).get(k) for k in DIAG}})
            rows.append({
                "system": system, "what": f"{arrivals} arrivals, {n} leechers, {size / 2**20:.0f} MiB",
                "completed": f"{sum(r['completion_s'] is not None for r in res)}/{n}",
                "completion s": _summary([r["completion_s"] for r in res]),
                "start-up s": _summary([r["startup_s"] for r in res]),
                "mean leecher upload Mb/s": round(statistics.mean(
                    [x["upload_mbps"] for x in per_leecher[-n:] if x["upload_mbps"] is not None] or [0]), 2),
            })
    if out:
        params = {"leechers": n, "size_bytes": size, "arrivals": arrivals, "startup_s": startup_s,
                  "bitrate_bps": bitrate_bps, "seeder_up_bps": 20_000_000,
                  "leecher_up_bps": leecher_up_bps, "systems": list(systems), "seed": seed,
                  "quick": quick, "chunk_size": 1024, "libtorrent_piece_size": 256 * 1024}
        _write(out, f"flashcrowd-{arrivals}-{n}x{size / 2**20:g}MiB", params, rows, per_leecher,
               started, load0)
    return rows


PAPER = ("paper (Figs. 7-11, 4-208 leechers, 1 GB file): libswift completes between uTorrent "
         "and libtorrent; libswift start-up within 15 s for all peers, a few libtorrent peers "
         "need more than a minute")


def _write(out: str, base: str, params: dict, rows: list, per_leecher: list, started: float,
           load0: tuple) -> None:
    from swift.experiments import output as O
    os.makedirs(out, exist_ok=True)
    O.write_csv(os.path.join(out, base + ".csv"), per_leecher)
    meta = O.metadata("swift.experiments.flashcrowd", params, load0, started)
    meta["summary"] = rows
    meta["paper"] = PAPER
    O.write_json(os.path.join(out, base + ".json"), meta)
    systems = sorted({r["system"] for r in per_leecher})
    for col, label in (("completion_s", "completion time (s)"), ("startup_s", "start-up time (s)")):
        O.cdf_plot(os.path.join(out, f"{base}-{col.split('_')[0]}.png"),
                   {s: [r[col] for r in per_leecher if r["system"] == s] for s in systems},
                   label, f"{params['arrivals']} arrivals, {params['leechers']} leechers, "
                   f"{params['size_bytes'] / 2**20:g} MiB (ours)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="ppspp experiment flashcrowd", description=__doc__.splitlines()[0],
        epilog="Needs root (network namespaces) and libtorrent for that system. Prints one JSON "
               "object per system, then a summary beside the paper's numbers.")
    ap.add_argument("--quick", action="store_true",
                    help="4 leechers and a 4 MiB file instead of 10 and 24 MiB (what CI runs)")
    ap.add_argument("--leechers", type=cliutil.positive_int, metavar="N",
                    help="leechers (default 4 with --quick, else 10)")
    ap.add_argument("--arrivals", choices=["flash", "poisson"], default="flash",
                    help="all at once, or one per second on average (default: %(default)s)")
    ap.add_argument("--size-mb", type=cliutil.positive_float, metavar="MIB",
                    help="file size in MiB (default 4 with --quick, else 24)")
    ap.add_argument("--systems", default="swift,libtorrent", metavar="LIST",
                    help="comma-separated systems to run (default: %(default)s)")
    ap.add_argument("--out", default="swift-results", metavar="DIR",
                    help="directory for the CSV, JSON and PNG files (default: %(default)s)")
    a = ap.parse_args(argv)
    rows = run(a.quick, a.leechers, a.arrivals, a.size_mb, systems=tuple(a.systems.split(",")),
               out=a.out)
    for r in rows:
        print(json.dumps(r))
    print("ours vs paper:")
    for r in rows:
        c, s = r["completion s"], r["start-up s"]
        print(f"  {r['system']:<10} completion mean {c.get('mean')} s (max {max(c.get('cdf') or [0])}), "
              f"start-up mean {s.get('mean')} s (max {max(s.get('cdf') or [0])})")
    print("  " + PAPER)
    print(f"files in {a.out}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
