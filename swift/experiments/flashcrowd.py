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

    python -m swift.experiments.flashcrowd --quick [--arrivals poisson] [--out DIR] \
        [--backend netns|sim]
    python -m swift.experiments.flashcrowd --backend sim --sweep leechers=32,64 --seeds 3 \
        [--workers N | --scheduler ADDRESS]

Our peer's swarm is one scenario (:func:`swift.experiments.swarm.crowd_scenario`,
arrival times drawn from ``--seed``) that both backends run; libtorrent runs on
the testbed only, with the scenario's arrival times.  ``--sweep`` (simulator
only) runs every value x seed as a Dask task.

Output (``--out``, default ``swift-results``): ``flashcrowd-<arrivals>-<n>x<MiB>.csv``
(one row per leecher and system: arrival, start-up, completion, bytes
uploaded), the same name ``.json`` (parameters, versions, git commit, date,
host load, summary rows) and ``...-completion.png`` / ``...-startup.png``
(CDFs as in the paper's Figs. 7-11).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from deliverykit import cliutil
from deliverykit.sweep import SweepFailed
from swift.core.config import PeerConfig
from swift.experiments import swarm, sweeps
from swift.experiments.swarm import Backend

PORT = 6778
#: per-leecher counters of our peer in the CSV (None for libtorrent)
DIAG = ("up_losses", "up_timeouts", "dup", "unsolicited", "requests_lost", "request_timeouts",
        "dup_lost", "dup_stale", "dup_timeout", "dup_endgame", "dup_deadline", "dup_other")


def _lt_settings(lt):
    return {"listen_interfaces": f"0.0.0.0:{PORT}", "enable_dht": False, "enable_lsd": False,
            "enable_upnp": False, "enable_natpmp": False, "alert_mask": 0,
            "enable_outgoing_utp": False, "enable_incoming_utp": False,
            "allow_multiple_connections_per_ip": True}


def _lt_seed(torrent: bytes, save: str, ready, duration: float) -> None:
    import libtorrent as lt
    s = lt.session(_lt_settings(lt))
    info = lt.torrent_info(lt.bdecode(torrent))  # type: ignore[arg-type]  # a dict entry
    params = {"ti": info, "save_path": save, "flags": lt.torrent_flags.seed_mode}
    s.add_torrent(params)  # type: ignore[call-overload]  # the stubs lack the dict form
    ready.set()
    time.sleep(duration)


def _lt_leech(torrent: bytes, seed_ip: str, delay: float, startup_bytes: int, limit: float,
              save: str) -> dict:
    import libtorrent as lt
    time.sleep(delay)
    s = lt.session(_lt_settings(lt))
    info = lt.torrent_info(lt.bdecode(torrent))  # type: ignore[arg-type]  # a dict entry
    h = s.add_torrent({"ti": info, "save_path": save})
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
    return {"n": len(v), "mean": round(statistics.mean(v), 2),
            "median": round(statistics.median(v), 2),
            "p90": round(v[min(len(v) - 1, int(0.9 * len(v)))], 2), "cdf": [round(x, 2) for x in v]}


def configs(startup_bytes: int, push: bool = False) -> tuple[PeerConfig, PeerConfig]:
    """(seeder, leecher) peer configurations of the flash crowd; ``push``:
    the paper's push mode (``PeerConfig.push``, docs/swift.md)."""
    return PeerConfig(push=push), PeerConfig(picker="vod", pex_connect=True, push=push,
                                             high_window=max(8, startup_bytes // 1024))


def diag(stats: dict[str, int]) -> dict[str, int]:
    """The DIAG counters from a leecher's stats (``LeecherResult.stats``): where
    uploads go unused (docs/swift.md, flash crowd), over the channels still open:
    our DATA LEDBAT counted lost, its timeouts; chunks got twice or unasked; our
    requests given up (lost, timed out); duplicates by the rule that moved them."""
    return {**{k: stats.get(k, 0) for k in DIAG}, "request_timeouts": stats.get("timeouts", 0)}


def _run_libtorrent(size: int, n: int, delays: list[float], startup_bytes: int, limit: float,
                    leecher_up_bps: int) -> list[dict[str, Any]]:
    """libtorrent on the testbed (the same links and arrival times as the scenario)."""
    import libtorrent as lt

    from deliverykit.testbed import Tbf, Testbed
    with tempfile.TemporaryDirectory(prefix="swift-fc-") as d:
        path = os.path.join(d, "video.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
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
            ct = lt.create_torrent(lt.list_files(path), piece_size=256 * 1024)
            lt.set_piece_hashes(ct, d)
            torrent = lt.bencode(ct.generate())
            st = tb.spawn(sh, _lt_seed, torrent, d, ready, limit + max(delays) + 10)
            if not ready.wait(30):
                raise RuntimeError("the libtorrent seeder did not start within 30 s")
            tasks = []
            for i, h in enumerate(hosts):
                save = os.path.join(d, f"lt-{i}")
                os.makedirs(save, exist_ok=True)
                tasks.append(tb.spawn(h, _lt_leech, torrent, "10.78.0.1", delays[i],
                                      startup_bytes, limit, save))
            res = [t.result(timeout=limit + max(delays) + 60) for t in tasks]
            st.kill()
    return res


def run(quick: bool = True, leechers: int | None = None, arrivals: str = "flash",
        size_mb: float | None = None, startup_s: float = 10.0, bitrate_bps: float = 1e6,
        leecher_up_bps: int = 4_000_000, systems: tuple[str, ...] = ("swift", "libtorrent"),
        seed: int = 1, out: str | None = None, backend: Backend | str = Backend.NETNS,
        push: bool = False, rate: float = 1.0) -> list[dict]:
    """One run per system; summary rows.  With ``out``, also the per-leecher
    CSV, JSON metadata and CDF plots (see the module docstring)."""
    backend = Backend(backend)
    started, load0 = time.time(), os.getloadavg()
    per_leecher: list[dict] = []
    n = leechers or (4 if quick else 10)
    size = int((size_mb or (4 if quick else 24)) * 1024 * 1024)
    startup_bytes = int(startup_s * bitrate_bps / 8)
    limit = 120.0 if quick else 600.0
    sc = swarm.crowd_scenario(n, size, arrivals, leecher_up_bps, startup_bytes, seed, limit,
                              rate=rate)
    leechers_spec = [x for x in sc.nodes if x.role == "leecher"]
    delays = [x.arrive for x in leechers_spec]
    if backend is Backend.SIM and "libtorrent" in systems:
        raise ValueError("libtorrent runs on the testbed only: --systems swift with --backend sim")
    rows = []
    for system in systems:
        if system == "swift":
            sw = swarm.run(sc, backend, *configs(startup_bytes, push), prefix="swfc")
            res: list[dict[str, Any]] = [{"startup_s": x.startup_s, "completion_s": x.completion_s,
                                          "uploaded_bytes": x.sent_chunks * 1024,
                                          "verified": x.verified, "diag": diag(x.stats)}
                                         for x in sw.leechers]
        else:
            res = _run_libtorrent(size, n, delays, startup_bytes, limit, leecher_up_bps)
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
                [x["upload_mbps"] for x in per_leecher[-n:] if x["upload_mbps"] is not None]
                or [0]), 2),
        })
    if out:
        params = {"leechers": n, "size_bytes": size, "arrivals": arrivals, "rate": rate,
                  "startup_s": startup_s,
                  "bitrate_bps": bitrate_bps, "seeder_up_bps": 20_000_000,
                  "leecher_up_bps": leecher_up_bps, "systems": list(systems), "seed": seed,
                  "quick": quick, "chunk_size": 1024, "libtorrent_piece_size": 256 * 1024,
                  "backend": backend.value, "push": push, "scenario": sc.to_dict()}
        suffix = "-sim" if backend is Backend.SIM else ""
        _write(out, f"flashcrowd-{arrivals}-{n}x{size / 2**20:g}MiB{suffix}", params, rows,
               per_leecher, started, load0)
    return rows


def _times(xs: list[float]) -> str:
    """Per-leecher times in one CSV cell (space-separated, ms resolution): the CDFs."""
    return " ".join(f"{x:.3f}" for x in sorted(xs))


def _quantile(xs: list[float], q: float) -> float | None:
    return statistics.quantiles(xs, n=4, method="inclusive")[round(q * 4) - 1] \
        if len(xs) > 1 else (xs[0] if xs else None)


def sweep_task(point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One simulated crowd for :func:`deliverykit.sweep.run_sweep`: ``point`` holds
    ``leechers`` and optionally ``size_mb``, ``arrivals``, ``leecher_up_bps``,
    ``startup_s``, ``bitrate_bps`` (start-up bytes = their product / 8), or
    ``startup_kib`` instead, ``rate`` (Poisson arrivals per s, default 1) and ``push``;
    ``pattern`` (a label of the arrivals and rate) is not read.  Completion, its spread, start-up
    (mean and quartiles, Fig. 8's interquartile range), and every leecher's
    times for the CDFs (Fig. 11)."""
    n = int(point["leechers"])
    size = int(float(point.get("size_mb", 1.0)) * 1024 * 1024)
    if "startup_kib" in point:
        startup_bytes = int(float(point["startup_kib"]) * 1024)
    else:
        startup_bytes = int(float(point.get("startup_s", 10.0))
                            * float(point.get("bitrate_bps", 1e6)) / 8)
    sc = swarm.crowd_scenario(n, size, str(point.get("arrivals", "flash")),
                              float(point.get("leecher_up_bps", 4e6)), startup_bytes, seed,
                              rate=float(point.get("rate", 1.0)))
    r = swarm.run(sc, Backend.SIM, *configs(startup_bytes, bool(point.get("push", False))))
    ls = r.leechers
    if not all(x.verified for x in ls):
        raise ValueError(f"{sum(not x.verified for x in ls)} leecher(s) not verified")
    comps = [x.completion_s for x in ls if x.completion_s is not None]
    starts = [x.startup_s for x in ls if x.startup_s is not None]
    assert r.stats is not None
    return {"mean_completion_s": statistics.fmean(comps) if comps else None,
            "min_completion_s": min(comps) if comps else None,
            "max_completion_s": max(comps) if comps else None,
            "stdev_completion_s": statistics.pstdev(comps) if comps else None,
            "mean_startup_s": statistics.fmean(starts) if starts else None,
            "p25_startup_s": _quantile(starts, 0.25), "p75_startup_s": _quantile(starts, 0.75),
            "max_startup_s": max(starts) if starts else None,
            "completed": len(comps), "completion_times": _times(comps),
            "startup_times": _times(starts), "virtual_s": r.stats.virtual_s,
            "cpu_s": r.stats.cpu_s}


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


def _rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        rates = []
    if not rates or not all(0 < r < float("inf") for r in rates):
        raise argparse.ArgumentTypeError(f"--rate takes positive numbers R[,R2...], not {text!r}")
    return rates


@cliutil.cli_main("ppspp experiment flashcrowd", expected=(SweepFailed,))
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="ppspp experiment flashcrowd", description=__doc__.splitlines()[0],
        epilog="--backend netns needs root (network namespaces) and libtorrent for that system. "
               "Prints one JSON object per system, then a summary beside the paper's numbers.")
    ap.add_argument("--quick", action="store_true",
                    help="4 leechers and a 4 MiB file instead of 10 and 24 MiB (what CI runs)")
    ap.add_argument("--leechers", type=cliutil.positive_int, metavar="N",
                    help="leechers (default 4 with --quick, else 10)")
    ap.add_argument("--arrivals", choices=["flash", "poisson", "both"], default="flash",
                    help="all at once, or one per second on average; both: the two in one "
                         "--sweep (Figs. 7-11) (default: %(default)s)")
    ap.add_argument("--rate", type=_rates, default=[1.0], metavar="R[,R2...]",
                    help="Poisson arrivals per second; with --sweep, a list runs each "
                         "(default: 1, the paper's)")
    ap.add_argument("--startup-kib", type=cliutil.positive_float, metavar="KIB",
                    help="start-up = this much of the file in order (default: 10 s of a "
                         "1 Mb/s video, 1.25 MB, the paper's high-priority window)")
    ap.add_argument("--cdf-leechers", type=cliutil.positive_int, metavar="N",
                    help="with --sweep leechers=...: the swarm size of the CDFs (Fig. 11; "
                         "default 128 if swept, else the largest)")
    ap.add_argument("--size-mb", type=cliutil.positive_float, metavar="MIB",
                    help="file size in MiB (default 4 with --quick, else 24)")
    ap.add_argument("--systems", default="swift,libtorrent", metavar="LIST",
                    help="comma-separated systems to run (default: %(default)s)")
    ap.add_argument("--out", default="swift-results", metavar="DIR",
                    help="directory for the CSV, JSON and PNG files (default: %(default)s)")
    ap.add_argument("--backend", choices=[b.value for b in Backend], default="netns",
                    help="netns: the namespace testbed in real time (root); sim: the same "
                         "scenario in the packet-level simulator, swift only "
                         "(default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the Poisson arrivals and the run")
    ap.add_argument("--push", action="store_true",
                    help="swift as a push protocol, as the paper ran it (PeerConfig.push)")
    sweeps.add_arguments(ap)
    a = ap.parse_args(argv)
    sweeps.check(ap, a, ("leechers", "size_mb", "leecher_up_bps", "startup_s", "startup_kib"))
    systems = tuple(x for x in a.systems.split(",") if x)
    if a.backend == "sim":
        if "libtorrent" in systems:
            print("flashcrowd: libtorrent runs on the testbed only; --backend sim runs swift",
                  file=sys.stderr)
        systems = ("swift",)
    if a.arrivals == "both" and a.sweep is None:
        ap.error("--arrivals both goes with --sweep (one run is one arrival pattern)")
    if a.cdf_leechers and (a.sweep is None or a.sweep[0] != "leechers"):
        ap.error("--cdf-leechers goes with --sweep leechers=...")
    if a.sweep is not None:
        base: dict[str, Any] = {"size_mb": a.size_mb or (4.0 if a.quick else 24.0)}
        if a.startup_kib:
            base["startup_kib"] = a.startup_kib
        if a.push:
            base["push"] = True
        if a.leechers:
            base["leechers"] = a.leechers
        patterns = ["flash", "poisson"] if a.arrivals == "both" else [a.arrivals]
        series = [{"arrivals": "flash", "pattern": "flash"}] if "flash" in patterns else []
        if "poisson" in patterns:
            series += [{"arrivals": "poisson", "rate": r, "pattern": f"poisson {r:g}/s"}
                       for r in a.rate]
        res = sweeps.sweep(sweep_task, base, series, a, a.out,
                           f"flashcrowd-{a.arrivals}",
                           f"flashcrowd {a.arrivals} (paper IV-B, Figs. 7-11)")
        png = sweeps.plot(res, a.sweep[0], "pattern",
                          [("mean_completion_s", "mean completion (s)"),
                           ("stdev_completion_s", "completion spread, stdev (s)"),
                           ("mean_startup_s", "mean start-up (s)")],
                          "Figs. 7-10 in the simulator (mean, 95 % CI over seeds)", PAPER)
        files = [str(res.csv), str(res.summary_csv), png]
        if a.sweep[0] == "leechers":
            from swift.experiments import crowd_report
            files += crowd_report.report(res, a.cdf_leechers)
        print(f"files: {', '.join(files)}", file=sys.stderr)
        return 1 if res.failures else 0
    startup_s = a.startup_kib * 1024 * 8 / 1e6 if a.startup_kib else 10.0
    if len(a.rate) > 1:
        ap.error("several --rate values go with --sweep")
    rows = run(a.quick, a.leechers, a.arrivals, a.size_mb, startup_s=startup_s, systems=systems,
               out=a.out, seed=a.seed, backend=a.backend, push=a.push, rate=a.rate[0])
    for r in rows:
        print(json.dumps(r))
    print("ours vs paper:")
    for r in rows:
        c, s = r["completion s"], r["start-up s"]
        print(f"  {r['system']:<10} completion mean {c.get('mean')} s "
              f"(max {max(c.get('cdf') or [0])}), "
              f"start-up mean {s.get('mean')} s (max {max(s.get('cdf') or [0])})")
    print("  " + PAPER)
    print(f"files in {a.out}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
