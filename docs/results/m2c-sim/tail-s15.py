"""The lossy fast tail: each loss event of a crowd receiver and the link idle after it
(docs/m2c-results.md, session 15).

Runs ``decompose-s14.py``'s ``run_one`` (the receiver replayed alone, its parts of
T - ideal) with more read-only hooks: every packet offered to the receiver's downlink
with its group, PSN and fate (delivered, lost at random, dropped at the full queue),
the controller's window at each loss event (a reduction, or one ignored as part of
the episode already answered), and the receiver's state at every epoch (joined rate,
target, whether a loss event or a pending join was holding joins).  Per loss event:

- what the lost packets were (queue drops or random losses the rules missed);
- the window before and after, the target after against the link's packet rate R and
  against the best layer set at or below R at that moment (``below_best``: the
  halving took the target under what the link could carry in whole layers);
- the link idle from this loss event to the next, by the joined rate at the time
  (decompose-s14's back-off / gran / over), and the back-off idle split by the
  receiver's state at the epoch before: ``win`` (the target itself below the best
  layer set: the window's halving), ``held`` (target at or above the next level but
  no join: a loss event still running, a pending join, a hold), ``step`` (the target
  between the joined set and the next level: the join rule's whole-layer step); and
  how long the joined levels stayed below the best layer set (``below_best_s``).

    python docs/results/m2c-sim/tail-s15.py [--seed S] [--receivers N] rNNN...

One JSON line per receiver on stdout.
"""

from __future__ import annotations

import bisect
import importlib.util
import json
import math
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("decompose_s14",
                                               os.path.join(HERE, "decompose-s14.py"))
assert _spec is not None and _spec.loader is not None
dec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dec)

from deliverykit.sim import network  # noqa: E402
from m2c.core import controllers, receiver_cc  # noqa: E402
from m2c.wire import codec  # noqa: E402


def run_one(name: str, receivers: int = 1000, seed: int = 0) -> dict[str, Any]:
    pkts: list[tuple[float, float, int, int, str]] = []  # (offered, done, ch, psn, fate)
    cur: list[tuple[int, int]] = []
    events: list[dict[str, Any]] = []
    epochs: list[tuple[float, float, float, int, bool, bool, int]] = []
    ccs: list[receiver_cc.ReceiverCC] = []
    link_name = f"{name}.down"

    orig_down = network.Network._downlink
    orig_tx = network.Link.transmit
    orig_ev = controllers.M2CWindowController.on_loss_event
    orig_timer = receiver_cc.ReceiverCC.on_timer
    orig_accept = receiver_cc.ReceiverCC._accept

    def downlink(self: Any, src: Any, dst: Any, data: bytes, size: int) -> None:
        if dst.name == name:
            p = codec.decode(data)
            cur.append((p.group, p.psn))
        orig_down(self, src, dst, data, size)
        if dst.name == name and cur:
            cur.pop()

    def transmit(self: network.Link, now: float, size: int) -> float:
        r = orig_tx(self, now, size)
        if self.name == link_name and cur:
            fate = "ok" if r >= 0 else "loss" if r == -float(network.Fate.LOSS) else "drop"
            pkts.append((now, self.busy_until if fate != "drop" else math.nan, *cur[-1], fate))
        return r

    def accept(self: receiver_cc.ReceiverCC, now: float, channel: int,
               psn: int) -> list[Any]:
        if not ccs:
            ccs.append(self)
        n = self.loss_events
        out = orig_accept(self, now, channel, psn)
        if self.loss_events != n and events and events[-1].get("t") is None:
            events[-1].update(t=now, ch=channel, psn=psn, lost=list(self.loss.last_lost),
                              lost_ch=channel)
        return out

    def on_loss_event(self: controllers.M2CWindowController, now: float,
                      artt: float) -> None:
        before = (self.cwnd, self.reductions)
        orig_ev(self, now, artt)
        events.append({"t": None, "cwnd_before": before[0], "cwnd_after": self.cwnd,
                       "reduced": self.reductions != before[1], "artt": artt,
                       "joined_pps": self.joined_rate, "target_after": self.target(artt)})

    def on_timer(self: receiver_cc.ReceiverCC, now: float) -> list[Any]:
        hold = now < self.loss_event_until
        pend = any(c for c in self.pending)
        out = orig_timer(self, now)
        ts = self.sender_time(now)
        if ts is not None:
            lvl = self.level(ts)
            epochs.append((now, self.schedule.cum_rate(lvl, ts), self.target_rate(), lvl,
                           hold, pend, self.lag_holds))
        return out

    network.Network._downlink = downlink  # type: ignore[method-assign]  # read-only hook
    network.Link.transmit = transmit  # type: ignore[method-assign]  # read-only hook
    controllers.M2CWindowController.on_loss_event = (  # type: ignore[method-assign]  # hook
        on_loss_event)
    receiver_cc.ReceiverCC.on_timer = on_timer  # type: ignore[method-assign]  # hook
    receiver_cc.ReceiverCC._accept = accept  # type: ignore[method-assign]  # hook
    try:
        o = dec.run_one(name, receivers, seed)
    finally:
        network.Network._downlink = orig_down  # type: ignore[method-assign]  # restored
        network.Link.transmit = orig_tx  # type: ignore[method-assign]  # restored
        controllers.M2CWindowController.on_loss_event = (  # type: ignore[method-assign]
            orig_ev)  # restored
        receiver_cc.ReceiverCC.on_timer = orig_timer  # type: ignore[method-assign]  # restored
        receiver_cc.ReceiverCC._accept = orig_accept  # type: ignore[method-assign]  # restored
    cc = ccs[0]
    sched = cc.schedule
    off = cc.offset or 0.0
    rate, delay = o["rate_mbps"] * 1e6, o["delay_ms"] / 1e3
    wire = 1500
    tau = wire * 8 / rate
    R = 1 / tau
    fate = {(c, p): f for _, _, c, p, f in pkts}
    ev_t = [e["t"] for e in events]
    ep_t = [e[0] for e in epochs]
    # link idle gaps after the start-up, attributed to the loss event before them
    ser = sorted((d - tau, d) for _, d, _, _, f in pkts if f != "drop" and d == d)
    t_dp = o["T"] - o["parts"]["end"]
    ser = [x for x in ser if x[1] <= t_dp - delay + 1e-9]
    startup_end = o["t_eff"] - delay - tau
    per: list[dict[str, float]] = [dict.fromkeys(("win", "step", "held", "gran", "over"), 0.0)
                                   for _ in range(len(events) + 1)]
    prev = ser[0][0]
    for s, d in ser:
        g0, gap = max(prev, startup_end), s - max(prev, startup_end)
        if gap > 1e-9:
            tl = g0 + delay  # at the receiver
            i = bisect.bisect_right(ev_t, tl)
            j = bisect.bisect_right(ep_t, tl) - 1
            ts = tl - off
            best = sched.cum_rate(sched.max_level_within(R, ts), ts)
            if j >= 0:
                _, _, target, lvl, _, _, _ = epochs[j]
                joined = sched.cum_rate(lvl, ts)
                nxt = sched.cum_rate(min(lvl + 1, sched.levels), ts)
            else:
                joined, target, nxt = 0.0, 0.0, 0.0
            if joined >= best * 0.999:
                per[i]["gran" if joined <= R else "over"] += gap
            elif target < best * 0.999:
                per[i]["win"] += gap
            elif target >= nxt:
                per[i]["held"] += gap
            else:
                per[i]["step"] += gap
        prev = max(prev, d)
    rows = []
    for i, e in enumerate(events):
        t = e["t"]
        ts = t - off
        best = sched.cum_rate(sched.max_level_within(R, ts), ts)
        lost = e.get("lost") or []
        fates = [fate.get((e["lost_ch"], p), "?") for p in lost]
        t_next = events[i + 1]["t"] if i + 1 < len(events) else o["T"]
        # how long, until the next loss event, the joined levels were below the best
        # layer set (epoch by epoch)
        below = 0.0
        k0 = bisect.bisect_right(ep_t, t)
        for k in range(k0, len(epochs)):
            te, lvl = epochs[k][0], epochs[k][3]
            if te >= t_next:
                break
            tse = te - off
            if sched.cum_rate(lvl, tse) < sched.cum_rate(
                    sched.max_level_within(R, tse), tse) * 0.999:
                below += min(t_next, epochs[k + 1][0] if k + 1 < len(epochs) else t_next) - te
        rows.append({
            "t": round(t, 4), "reduced": e["reduced"],
            "lost": len(lost), "drops": fates.count("drop"), "random": fates.count("loss"),
            "cwnd": [round(e["cwnd_before"] or 0, 1), round(e["cwnd_after"] or 0, 1)],
            "artt_ms": round(e["artt"] * 1e3, 1),
            "joined_R": round(e["joined_pps"] / R, 3),
            "target_R": round(e["target_after"] / R, 3), "best_R": round(best / R, 3),
            "below_best": e["target_after"] < best * 0.999,
            "below_best_s": round(below, 3),
            "to_next_s": round(t_next - t, 3),
            **{f"{k}_ms": round(v * 1e3, 1) for k, v in per[i + 1].items()}})
    return {"name": name, "ratio": o["ratio"], "T": o["T"], "ideal": o["ideal"],
            "rate_mbps": o["rate_mbps"], "loss_pct": o["loss_pct"], "R_pps": R,
            "parts_pct": {k: 100 * v / o["ideal"] for k, v in o["parts"].items()},
            "before_first_ms": {k: round(v * 1e3, 1) for k, v in per[0].items()},
            "events": rows}


def main(argv: list[str]) -> int:
    seed, receivers, names = 0, 1000, []
    it = iter(argv)
    for a in it:
        if a == "--seed":
            seed = int(next(it))
        elif a == "--receivers":
            receivers = int(next(it))
        else:
            names.append(a)
    for nm in names:
        print(json.dumps(run_one(nm, receivers, seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
