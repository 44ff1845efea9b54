"""Why linear stalls least in our Fig. 6 (docs/sim-fig6.md, session 14): one
simulated VoD swarm with a per-stall trace.

Runs the Fig. 6 scenario (``swarm.vod_scenario``: groups A-D, 1.2 Mb/s leecher
uplinks, all arriving at 0, selfish) with one picker and records, by wrapping
the sans-IO cores' methods (nothing in the package changes):

* every request a leecher sends: chunk, time, to whom (seeder or leecher, in
  its fast set or not), as which priority (``high``/``mid``/``low``/``behind``,
  from the requester's playback position), while buffering or not, and how
  many of its neighbours had announced the chunk (its availability tree);
* every request given back: missed deadline, stale/timed out, skipped (lost);
* every DATA answered: from whom, asked when;
* per stall: the chunk under the playback position, its whole request history
  at that leecher, who held it (present peers, connected or not), what of the
  next 5 s of video was missing or in flight, and when the chunk and the
  stall ended.

    python docs/results/swift-sim/fig6-trace-s14.py LEECHERS VIDEO_S SEEDER_MBPS ALGORITHM \
        [SEED] [OUT.json|-] [VARIANT]

VARIANT (one input changed, to test a reading; default ``base``):
``nodeadline`` (``deadline_margin`` 0: no missed-deadline re-request);
``notwist`` (``picker_twist`` off: the linear picker's first requests, made
before the player's first poll, in plain order too).

One JSON object per stall on stdout as it ends, then the run's summary (one
JSON object); with OUT.json both go to that file too.  The last line, on
stderr, is the run's CPU time.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import sys
import time
from typing import Any

from deliverykit.sim import Simulation
from swift import sim as ssim
from swift.core import channel as CH, player as PL, requests as R
from swift.experiments import swarm, vod_swarm

N, VIDEO, SEEDER_MBPS, ALGO = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
SEED = int(sys.argv[5]) if len(sys.argv) > 5 else 0
OUT = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else None
VARIANT = sys.argv[7] if len(sys.argv) > 7 else "base"

sc = swarm.vod_scenario(N, VIDEO, 1e6, 1024, SEEDER_MBPS * 1e6, seed=SEED)
P = sc.params
seed_cfg, leech_cfg = vod_swarm.configs(int(P["chunk_size"]), float(P["bitrate"]), ALGO)
if VARIANT == "nodeadline":
    leech_cfg = dataclasses.replace(leech_cfg, deadline_margin=0.0)
elif VARIANT == "notwist":
    leech_cfg = dataclasses.replace(leech_cfg, picker_twist=False)
elif VARIANT != "base":
    raise SystemExit(f"unknown variant {VARIANT!r}")
HIGH, MID = leech_cfg.high_window, leech_cfg.mid_window
BUF = int(5.0 * float(P["bitrate"]) / int(P["chunk_size"]))  # chunks of the 5 s buffer
app = ssim.SwiftApp(sc, seed_cfg, leech_cfg)
sim = Simulation(sc, app)
GROUP = {n.name: n.group for n in sc.nodes}
SEEDER = app.seeder_name

owner: dict[int, str] = {}  # id(RequestScheduler) -> host name
side: dict[int, tuple[str, str]] = {}  # id(DownloadSide) -> (host, remote host)
by_addr: dict[Any, str] = {}


def names() -> None:
    for h in sim.hosts.values():
        by_addr[h.addr] = h.name
        core = getattr(h, "core", None)
        if core is not None:
            owner[id(core.download)] = h.name


def remote_of(ch: Any) -> str:
    if ch.addr not in by_addr:
        names()
    return by_addr.get(ch.addr, "?")


def cls(c: int, p: int) -> str:
    if c < p:
        return "behind"
    if c < p + HIGH:
        return "high"
    return "mid" if c < p + HIGH + MID else "low"


#: (host, chunk) -> events at that host about that chunk
hist: dict[tuple[str, int], list[dict[str, Any]]] = collections.defaultdict(list)
#: counters: requests per (priority, seeder|leecher, fast|slow|buffering)
asks: collections.Counter[str] = collections.Counter()
#: DATA received per (priority at request time, seeder|leecher)
got: collections.Counter[str] = collections.Counter()
#: sums for the mean availability of requested chunks per priority
avail_sum: collections.Counter[str] = collections.Counter()
gave_back: collections.Counter[str] = collections.Counter()
ctx: list[str] = []

_request_msgs = R.RequestScheduler.request_msgs


def request_msgs(self: R.RequestScheduler, ch: Any, now: float) -> Any:
    before = dict(ch.down.requests)
    out = _request_msgs(self, ch, now)
    if out:
        me = owner.get(id(self))
        if me is None:
            names()
            me = owner.get(id(self), "?")
        rem = remote_of(ch)
        side[id(ch.down)] = (me, rem)
        kind = "seeder" if rem == SEEDER else "leecher"
        how = "buffering" if self.buffering else (
            "fast" if (ch.local_id in self.fast or not self.fast) else "slow")
        p = self.playpos
        for c, t in ch.down.requests.items():
            if before.get(c) == t:
                continue
            k = cls(c, p)
            a = self.availability.count(c)
            asks[f"{k}/{kind}/{how}"] += 1
            avail_sum[f"{k}/{kind}"] += a
            avail_sum[f"{k}/{kind}/n"] += 1
            hist[(me, c)].append({"ev": "ask", "t": round(now, 3), "to": rem, "prio": k,
                                  "how": how, "playpos": p, "avail": a,
                                  "moved": self.moved.get(c)})
    return out


R.RequestScheduler.request_msgs = request_msgs  # type: ignore[method-assign]


def wrap_ctx(name: str, tag: str) -> None:
    orig = getattr(R.RequestScheduler, name)

    def w(self: Any, *a: Any) -> Any:
        ctx.append(tag)
        try:
            return orig(self, *a)
        finally:
            ctx.pop()

    setattr(R.RequestScheduler, name, w)


wrap_ctx("deadlines", "deadline")
wrap_ctx("request_timeouts", "timeout")
_drop, _clear, _skipped, _answered = (CH.DownloadSide.drop, CH.DownloadSide.clear,
                                      CH.DownloadSide.skipped, CH.DownloadSide.answered)


def note_gone(d: Any, chunks: Any, why: str) -> None:
    who = side.get(id(d))
    if who is None:
        return
    for c in chunks:
        gave_back[why] += 1
        hist[(who[0], c)].append({"ev": why, "t": round(sim.now, 3), "at": who[1],
                                  "asked": round(d.requests.get(c, -1), 3)})


def drop(self: Any, c: int) -> None:
    if ctx:
        note_gone(self, [c], ctx[-1] if ctx[-1] == "deadline" else "stale")
    _drop(self, c)


def clear(self: Any) -> None:
    if ctx and self.requests:
        note_gone(self, list(self.requests), "timeout")
    _clear(self)


def skipped(self: Any, i: int) -> list[int]:
    out = _skipped(self, i)
    if out:
        who = side.get(id(self))
        if who is not None:
            for c in out:
                gave_back["skipped"] += 1
                hist[(who[0], c)].append({"ev": "skipped", "t": round(sim.now, 3), "at": who[1]})
    return out


def answered(self: Any, i: int) -> float | None:
    t = _answered(self, i)
    who = side.get(id(self))
    if t is not None and who is not None:
        ev = hist.get((who[0], i))
        prio = next((e["prio"] for e in reversed(ev or []) if e["ev"] == "ask"
                     and e["to"] == who[1]), "?")
        got[f"{prio}/{'seeder' if who[1] == SEEDER else 'leecher'}"] += 1
        hist[(who[0], i)].append({"ev": "data", "t": round(sim.now, 3), "from": who[1],
                                  "asked": round(t, 3)})
    return t


CH.DownloadSide.drop = drop  # type: ignore[method-assign]
CH.DownloadSide.clear = clear  # type: ignore[method-assign]
CH.DownloadSide.skipped = skipped  # type: ignore[method-assign]
CH.DownloadSide.answered = answered  # type: ignore[method-assign]

player_name: dict[int, str] = {}
open_stalls: dict[str, dict[str, Any]] = {}
stalls: list[dict[str, Any]] = []
_tick = PL.Player.tick


def snapshot(name: str, k: int, now: float) -> dict[str, Any]:
    peer: Any = sim.hosts[name].core
    d = peer.download
    chans = {remote_of(ch): ch for ch in peer.channels.values()}
    holders = [h.name for h in sim.hosts.values() if h.present and h.name != name
               and h.core.content.have.has(k)]
    outstanding = [{"at": r, "since": round(ch.down.requests[k], 3),
                    "seeder": r == SEEDER, "fast": ch.local_id in d.fast,
                    "queued_requests": len(ch.down.requests)}
                   for r, ch in chans.items() if k in ch.down.requests]
    have, infl = peer.content.have, d.inflight
    hi = min(app.chunks, k + BUF)
    missing = [c for c in range(k, hi) if not have.has(c)]
    return {
        "holders": len(holders), "seeder_holds": SEEDER in holders,
        "holders_connected": sum(1 for h in holders if h in chans),
        "holders_announced": sum(1 for h in holders if h in chans and chans[h].remote.have.has(k)),
        "avail_tree": d.availability.count(k), "inflight": infl.has(k),
        "outstanding": outstanding,
        "fast_set": sorted(remote_of(ch) for ch in peer.channels.values() if ch.local_id in d.fast),
        "x": d.fast_factor, "channels": len(chans),
        "next5s_missing": len(missing), "next5s_inflight": sum(1 for c in missing if infl.has(c)),
        "held_beyond_high": sum(1 for lo, hi2 in have.ranges() for c in range(lo, hi2)
                                if c >= k + HIGH),
        "held_total": have.count(),
    }


def tick(self: PL.Player, now: float, have: Any) -> int:
    name = player_name.get(id(self))
    if name is None:
        for nm, pl in app.players.items():
            player_name[id(pl)] = nm
        name = player_name.get(id(self), "?")
    s0, st0 = self.stalls, self.state
    out = _tick(self, now, have)
    o = open_stalls.get(name)
    if o is not None and o.get("chunk_at") is None and have.has(o["chunk"]):
        o["chunk_at"] = round(now, 3)
    if self.stalls > s0:
        k = self.chunk
        o = {"peer": name, "group": GROUP[name], "t": round(now, 3), "chunk": k,
             "video_s": round(k * int(P["chunk_size"]) / float(P["bitrate"]), 2),
             "chunk_at": None, **snapshot(name, k, now)}
        o["history"] = list(hist.get((name, k), []))
        open_stalls[name] = o
    elif st0 is PL.PlayerState.BUFFERING and self.state is PL.PlayerState.PLAYING and o:
        o["ended"] = round(now, 3)
        o["stall_s"] = round(now - o["t"], 3)
        o["history_after"] = [e for e in hist.get((name, o["chunk"]), []) if e["t"] >= o["t"]]
        stalls.append(o)
        del open_stalls[name]
        print(json.dumps(o), flush=True)
    return out


PL.Player.tick = tick  # type: ignore[method-assign]

c0 = time.process_time()
with ssim.setup_frozen():
    sim.run()
cpu = time.process_time() - c0


def mean_avail(k: str) -> float | None:
    n = avail_sum.get(k + "/n", 0)
    return round(avail_sum[k] / n, 2) if n else None


summary = {
    "leechers": N, "video_s": VIDEO, "seeder_mbps": SEEDER_MBPS, "algorithm": ALGO, "seed": SEED,
    "variant": VARIANT,
    "high_window": HIGH, "mid_window": MID,
    "stalls": sum(p.stalls for p in app.players.values()),
    "stalls_per_leecher": round(sum(p.stalls for p in app.players.values()) / N, 3),
    "stall_s_per_leecher": round(sum(p.stall_time for p in app.players.values()) / N, 3),
    "startup_mean": round(sum(app.startup.values()) / max(1, len(app.startup)), 3),
    "completion_mean": round(sum(app.completed.values()) / max(1, len(app.completed)), 3),
    "asks": dict(sorted(asks.items())), "data": dict(sorted(got.items())),
    "mean_avail_at_ask": {k: mean_avail(k) for k in sorted({k.rsplit("/n", 1)[0] for k in avail_sum
                                                            if k.endswith("/n")})},
    "gave_back": dict(gave_back), "cpu_s": round(cpu, 1), "virtual_s": round(sim.now, 2),
    "unfinished_stalls": list(open_stalls.values()),
}
print(json.dumps(summary), flush=True)
if OUT:
    with open(OUT, "w") as f:
        json.dump({"stalls": stalls, "summary": summary}, f, indent=1)
print(f"cpu {cpu:.1f} s", file=sys.stderr)
