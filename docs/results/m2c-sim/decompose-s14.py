"""Where an M2C receiver's time above its link-ideal time goes (docs/m2c-results.md, session 14).

Replays receivers of the `many` crowd alone (tests/m2c/crowd.py: the crowd's draw,
the first receiver's delay on the sender's uplink) with read-only hooks on the
receiver's downlink (``Link.transmit``: every packet serialised and delivered,
serialised and lost at random, or dropped at the full queue), on its
``ReceiverCore`` (what each arrival was: a new symbol, a repeat, a packet of a group
already left, ...; its joined set over time), and afterwards finds the file's true
decodable point: the least prefix of the new symbols, in arrival order, whose
structure determines every source symbol (values-free elimination, binary search).
``tau`` is one packet's time on the link, ``p`` its Bernoulli loss, ``S`` the file:

    T - ideal = pre + startup + backoff + gran + over      (link time before/unused)
              + headers + pad + fec + dup + other          (link time of packets)
              + lossluck + end

- pre: until the first packet's serialisation starts on the downlink;
- startup: the link idle until the first packet of the groups joined when the joined
  rate first reached the best layer set at or below the link (or the first loss
  event) is serialised;
- backoff / gran / over: the link idle after that, the joined rate below the best
  layer set at or below the link (after loss events) / at it (the layers' step) /
  above the link (join latency, bursts);
- headers, pad, fec, dup, other: arrivals up to the decodable point, times
  ``tau / (1 - p)`` (each with its share of the random loss the ideal allows):
  S / symbol - S / packet (72 of 1,500 bytes), the last symbol's padding, new
  symbols beyond k, repeats (and symbols of decoded or inactive blocks), packets of
  groups already left;
- lossluck: packets lost at random less the ideal's share ``p / (1 - p)``;
- end: completion after the decodable point (the decoder's first elimination waits
  for about k + 1.2 %, m2c/core/filetx.py ``_first_wait``).

Every part is measured in seconds; they add up to T - ideal (to float rounding).
Also: the ratio were the file decoded at its decodable point, and how many
values-free eliminations chasing the rank deficiency from k would take.

    python docs/results/m2c-sim/decompose-s14.py [--seed S] [--receivers N] [--csv OUT] rNNN...

One JSON line per receiver on stdout; ``--csv`` writes the parts as a table too.
"""

from __future__ import annotations

import bisect
import csv
import json
import math
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "m2c"))

import crowd  # type: ignore[import-not-found]  # noqa: E402  # tests/m2c/, on sys.path above

from deliverykit.sim import network  # noqa: E402
from m2c.core import session  # noqa: E402
from m2c.experiments.many import draw_links, ideal_s  # noqa: E402
from m2c.fec import ldpc  # noqa: E402
from m2c.wire import codec  # noqa: E402

SIZE = 4_000_000
PARTS = ("pre", "startup", "backoff", "gran", "over", "headers", "pad", "fec", "dup",
         "other", "lossluck", "end")


def _kind(d: list[int], done: bool) -> str:
    """What an arrival was, from the receiver's counters before and after it."""
    names = ("unjoined", "implausible", "repeat", "after_done", "inactive", "ignored")
    for name, n in zip(names, d):
        if n:
            return name
    if d[7]:
        return "ignored"
    if d[6]:
        return "new"
    return "after_end" if done and not d[8] else "other"


def run_one(name: str, receivers: int = 1000, seed: int = 0) -> dict[str, Any]:
    links = draw_links(receivers, seed)
    rate, delay, loss = crowd.link(name, links)
    tx: list[tuple[float, int, str]] = []  # (serialisation done, size, fate)
    arr: list[tuple[float, str, int]] = []  # (arrival, kind, channel)
    newsyms: list[tuple[float, int, int]] = []  # (arrival, SBN, ESI)
    joined_log: list[tuple[float, frozenset[int]]] = []
    lossev: list[float] = []
    cores: list[session.ReceiverCore] = []

    orig_tx = network.Link.transmit
    orig_rx = session.ReceiverCore.datagram_received
    orig_timer = session.ReceiverCore.handle_timer

    def transmit(self: network.Link, now: float, size: int) -> float:
        r = orig_tx(self, now, size)
        if self.name == f"{name}.down":
            fate = "ok" if r >= 0 else "loss" if r == -float(network.Fate.LOSS) else "drop"
            tx.append((self.busy_until if fate != "drop" else math.nan, size, fate))
        return r

    def note(core: session.ReceiverCore, now: float) -> None:
        j = frozenset(core.cc.joined)
        if not joined_log or joined_log[-1][1] != j:
            joined_log.append((now, j))
        if len(lossev) < core.cc.loss_events:
            lossev.append(now)

    def counters(c: session.ReceiverCore) -> tuple[int, ...]:
        f = c.file
        return (c.unjoined, c.implausible, f.repeats, f.after_done, f.dropped_inactive,
                f.ignored, f.symbols, c.rejected, c.packets)

    def datagram_received(self: session.ReceiverCore, data: bytes, addr: Any, now: float,
                          channel: int | None = None) -> None:
        if not cores:
            cores.append(self)
        before = counters(self)
        orig_rx(self, data, addr, now, channel)
        d = [a - b for a, b in zip(counters(self), before)]
        kind = _kind(d, self.done)
        pkt = codec.decode(data, session=self.sd.session)
        if kind == "new":
            newsyms.append((now, pkt.sbn, pkt.esi))
        arr.append((now, kind, pkt.group if channel is None else channel))
        note(self, now)

    def handle_timer(self: session.ReceiverCore, now: float) -> None:
        orig_timer(self, now)
        note(self, now)

    network.Link.transmit = transmit  # type: ignore[method-assign]  # read-only hook
    session.ReceiverCore.datagram_received = (  # type: ignore[method-assign]  # read-only hook
        datagram_received)
    session.ReceiverCore.handle_timer = handle_timer  # type: ignore[method-assign]  # hook
    try:
        t0 = time.process_time()
        res = crowd.replay(name, SIZE, receivers=receivers, seed=seed)
        cpu = time.process_time() - t0
    finally:
        network.Link.transmit = orig_tx  # type: ignore[method-assign]  # restored
        session.ReceiverCore.datagram_received = orig_rx  # type: ignore[method-assign]  # restored
        session.ReceiverCore.handle_timer = orig_timer  # type: ignore[method-assign]  # restored
    r = res.receivers[0]
    core = cores[0]
    T = r.completion_s
    assert T is not None and r.verified
    ideal = ideal_s(SIZE, rate, delay, loss)
    sched, pt, sd = core.schedule, core.file.pt, core.sd
    K, E = pt.total_symbols, sd.fec.symbol_size
    wire = tx[0][1]
    tau = wire * 8 / rate

    # --- the decodable point, and the deficiency chase from k
    by_block: dict[int, list[int]] = {}
    for i, (_, sbn, _) in enumerate(newsyms):
        by_block.setdefault(sbn, []).append(i)
    dp_index, code_extra = 0, 0
    chase: list[tuple[int, int, int]] = []  # (SBN, symbols beyond k, eliminations)
    zero = bytes(E)
    for sbn, idx in sorted(by_block.items()):
        k = pt.block_length(sbn)
        params = ldpc.LDPCParams(k, sd.block_n(k), E, sd.fec.n1, sd.fec.seed)

        def decodable(m: int, idx: list[int] = idx, params: ldpc.LDPCParams = params) -> bool:
            dec = ldpc.LDPCDecoder(params, ldpc.Decoding.ML)
            done = False
            for j in idx[:m]:
                done = dec.add(newsyms[j][2], zero)
            return done or dec._eliminate(values=False)

        lo, hi = k, len(idx)
        assert decodable(hi), (sbn, hi)
        while lo < hi:
            mid = (lo + hi) // 2
            if decodable(mid):
                hi = mid
            else:
                lo = mid + 1
        code_extra += lo - k
        dp_index = max(dp_index, idx[lo - 1])
        dec = ldpc.LDPCDecoder(params, ldpc.Decoding.ML)
        m = checks = 0
        nxt = k
        while m < len(idx):
            done = dec.add(newsyms[idx[m]][2], zero)
            m += 1
            if done:
                break
            if m >= nxt:
                checks += 1
                if dec._eliminate(values=False):
                    break
                nxt = m + max(1, dec.ml_deficit)
        chase.append((sbn, m - k, checks))
    t_dp = newsyms[dp_index][0]

    # --- the link up to the decodable point's serialisation
    serial = sorted((d - s * 8 / rate, d, f) for d, s, f in tx if f != "drop")
    first_start = serial[0][0]
    t_dp_done = t_dp - delay
    ser = [x for x in serial if x[1] <= t_dp_done + 1e-9]
    n_lost = sum(1 for x in ser if x[2] == "loss")
    kinds: dict[str, int] = {}
    for a, kd, _ in arr:
        if a <= t_dp + 1e-9:
            kinds[kd] = kinds.get(kd, 0) + 1
    n_arr = sum(kinds.values())
    assert n_arr == len(ser) - n_lost, (n_arr, len(ser), n_lost)
    times = [t for t, _ in joined_log]
    off = core.cc.offset or 0.0
    R = rate / (wire * 8)

    def offered(t: float) -> tuple[float, float]:
        """(joined rate, best layer set at or below the link), packets/s, at arrival t."""
        i = bisect.bisect_right(times, t) - 1
        j = joined_log[i][1] if i >= 0 else frozenset()
        ts = t - off
        return (sum(sched.rate(ch, ts) for ch in j),
                sched.cum_rate(sched.max_level_within(R, ts), ts))

    first_loss = lossev[0] if lossev else math.inf
    t_full = first_loss
    for t, _ in joined_log:
        have, best = offered(t)
        if have >= best * 0.999 or t >= first_loss:
            t_full = min(t, first_loss)
            break
    t_eff = t_full
    at = [i for i, (t, _) in enumerate(joined_log) if t == t_full]
    if at and at[0] > 0:
        new = joined_log[at[0]][1] - joined_log[at[0] - 1][1]
        firsts = [a for a, _, c in arr if a > t_full and c in new]
        if firsts:
            t_eff = min(firsts)
    startup_end = t_eff - delay - tau
    idle = dict.fromkeys(("startup", "backoff", "gran", "over"), 0.0)
    prev_end = first_start
    for s, d, _ in ser:
        gap = s - prev_end
        if gap > 1e-9:
            g0 = prev_end
            if g0 < startup_end:
                a = min(gap, startup_end - g0)
                idle["startup"] += a
                gap -= a
                g0 += a
            if gap > 1e-9:
                have, best = offered(g0 + delay)
                idle["backoff" if have < best * 0.999 else "gran" if have <= R
                     else "over"] += gap
        prev_end = max(prev_end, d)

    q = 1 / (1 - loss)
    dup_n = kinds.get("repeat", 0) + kinds.get("after_done", 0) + kinds.get("inactive", 0)
    parts = {
        "pre": first_start, **idle,
        "headers": (SIZE / E - SIZE / wire) * tau * q,
        "pad": (K - SIZE / E) * tau * q,
        "fec": (kinds.get("new", 0) - K) * tau * q,
        "dup": dup_n * tau * q,
        "other": (n_arr - kinds.get("new", 0) - dup_n) * tau * q,
        "lossluck": (n_lost - loss * n_arr * q) * tau,
        "end": T - t_dp,
    }
    return {
        "name": name, "seed": seed, "receivers": receivers, "rate_mbps": rate / 1e6,
        "delay_ms": delay * 1e3, "loss_pct": loss * 100, "T": T, "ideal": ideal,
        "ratio": T / ideal, "ratio_at_decodable": t_dp / ideal, "excess": T - ideal,
        "sum_parts": sum(parts.values()), "parts": parts, "kinds": kinds, "K": K,
        "needed": core.file.needed, "decodable": K + code_extra, "chase": chase,
        "eliminations": core.file.eliminations, "first_arrival": arr[0][0],
        "t_full": t_full, "t_eff": t_eff, "first_loss": first_loss,
        "loss_events": r.loss_events, "random_losses": r.random_losses, "lost": n_lost,
        "drops": sum(1 for x in tx if x[2] == "drop"), "up_delay_ms": links.delay_s[0] * 1e3,
        "tau_ms": tau * 1e3, "cpu_s": cpu}


def main(argv: list[str]) -> int:
    seed, receivers, out, names = 0, 1000, None, []
    it = iter(argv)
    for a in it:
        if a == "--seed":
            seed = int(next(it))
        elif a == "--receivers":
            receivers = int(next(it))
        elif a == "--csv":
            out = next(it)
        else:
            names.append(a)
    rows = []
    for nm in names:
        o = run_one(nm, receivers, seed)
        print(json.dumps(o), flush=True)
        rows.append({"receiver": nm, **{k: o[k] for k in (
            "rate_mbps", "delay_ms", "loss_pct", "T", "ideal", "ratio", "ratio_at_decodable",
            "excess", "K", "needed", "decodable", "loss_events", "lost", "drops")},
            "chase_eliminations": sum(c[2] for c in o["chase"]),
            **{f"{p}_s": o["parts"][p] for p in PARTS}})
    if out is not None and rows:
        with open(out + ".part", "w", newline="") as f:
            w = csv.DictWriter(f, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        os.replace(out + ".part", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
